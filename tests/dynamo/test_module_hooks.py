"""Module hooks under ember.compile: a compiled call runs them as eager does.

Calling a module inlined its ``forward`` and guarded that it had no hooks; a module that had
them when traced was first compiled without them (a silent wrong answer), then broke the graph
at every hooked module (``Module.__call__`` ran the hooks eagerly). Forward pre-hooks and forward
hooks are now inlined around the forward, as torch.compile does: one graph, no break. The hook
dicts' ids and hook objects are guarded, so registering or removing a hook recompiles. Backward
hooks still break the graph (they wrap the call in autograd functions); a hook that cannot be
traced breaks it the way any inlined function does."""
import functools

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend


def _data(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _times_ten(mod, inp, out):
    return out * 10


def _zero_input(mod, inp):
    return (inp[0] * 0 + 1,)


def _model():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))


def _same(a, b):
    # atol follows the magnitude: a compiled sum of terms near 200 may round one ulp (1.5e-5) apart
    # from eager's, which shows in an output near 0 that cancels them
    ref = b.detach().numpy()
    np.testing.assert_allclose(a.detach().numpy(), ref, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("where", ["top", "submodule"])
@pytest.mark.parametrize("when", ["before compile", "after compile"])
@pytest.mark.parametrize("kind", ["forward", "pre"])
def test_hooks_run_like_eager(where, when, kind):
    dynamo.reset()
    m = _model()
    target = m if where == "top" else m[0]

    def add():
        if kind == "forward":
            return target.register_forward_hook(_times_ten)
        return target.register_forward_pre_hook(_zero_input)

    handle = add() if when == "before compile" else None
    cm = ember.compile(m)
    x = _data(3, 4)
    _same(cm(x), m(x))
    if handle is None:
        handle = add()
    for seed in (1, 2):
        x = _data(3, 4, seed=seed)
        _same(cm(x), m(x))
    handle.remove()
    _same(cm(x), m(x))                    # and without it again


def test_hook_gradients_match_eager():
    m = _model()
    m[0].register_forward_hook(_times_ten)
    cm = ember.compile(m)
    x, xe = _data(3, 4, seed=5).requires_grad_(), _data(3, 4, seed=5).requires_grad_()
    cm(x).pow(2).sum().backward()
    grads = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    m(xe).pow(2).sum().backward()
    for g, p in zip(grads, m.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)


def _times_two_plus_one():
    return [lambda m, i, o: o * 2, lambda m, i, o: o + 1]


@pytest.mark.parametrize("where", ["top", "submodule"])
@pytest.mark.parametrize("kind", ["forward", "pre"])
def test_plain_hooks_are_one_graph(where, kind):
    m = _model()
    target = m if where == "top" else m[0]
    if kind == "forward":
        target.register_forward_hook(_times_ten)
    else:
        target.register_forward_pre_hook(_zero_input)
    x = _data(3, 4, seed=3)
    dynamo.reset()
    r = dynamo.explain(m)(x)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons
    _same(r.result, m(x))


def test_single_linear_with_forward_hook_is_one_graph():
    lin = ember.nn.Linear(4, 4)
    lin.register_forward_hook(lambda m, i, o: o * 2)
    x = _data(3, 4, seed=4)
    dynamo.reset()
    r = dynamo.explain(lin)(x)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons
    _same(r.result, lin(x))


def test_register_and_remove_recompile():
    """Registering a hook after the first compiled call recompiles (the hook ids are guarded);
    removing it finds the first compiled code again."""
    dynamo.reset()
    m = _model()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    x = _data(3, 4, seed=6)
    plain = m(x)
    _same(cm(x), plain)
    assert cnt.frame_count == 1
    h = m[2].register_forward_hook(_times_ten)
    _same(cm(x), m(x))
    _same(cm(x), plain * 10)
    assert cnt.frame_count == 2
    h2 = m[2].register_forward_hook(_times_ten)          # a second hook: recompiles again
    _same(cm(x), plain * 100)
    h2.remove()
    h.remove()
    _same(cm(x), plain)
    assert cnt.frame_count == 3                           # the hook-less code is reused


def test_replacing_a_hook_object_recompiles():
    """The hook objects are guarded by identity: a different function under the same id."""
    dynamo.reset()
    m = _model()
    cm = ember.compile(m)
    h = m[0].register_forward_hook(_times_ten)
    x = _data(3, 4, seed=7)
    _same(cm(x), m(x))
    m[0]._forward_hooks[h.id] = lambda mod, inp, out: out - 1
    _same(cm(x), m(x))


def test_hooks_run_in_eager_order():
    dynamo.reset()
    m = _model()
    first, second = _times_two_plus_one()
    m[0].register_forward_hook(first)
    m[0].register_forward_hook(second)
    m[0].register_forward_hook(lambda mod, i, o: o * -3, prepend=True)
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_pre_hook(lambda mod, args: (args[0] - 5,), prepend=True)
    cm = ember.compile(m)
    for seed in (8, 9):
        x = _data(3, 4, seed=seed)
        _same(cm(x), m(x))


def test_return_value_rules():
    """A pre-hook returning a non-tuple replaces the arguments with ``(value,)``; one returning
    None keeps them; a forward hook returning None keeps the output."""
    dynamo.reset()
    m = _model()
    m[0].register_forward_pre_hook(lambda mod, args: args[0] * 3)        # a bare tensor
    m[0].register_forward_pre_hook(lambda mod, args: None)
    m[1].register_forward_hook(lambda mod, args, out: None)
    m[2].register_forward_hook(lambda mod, args, out: out + args[0].sum())   # reads the input
    cm = ember.compile(m)
    x = _data(3, 4, seed=10)
    _same(cm(x), m(x))


class _Scaled(ember.nn.Module):
    def __init__(self):
        super().__init__()
        ember.manual_seed(1)
        self.lin = ember.nn.Linear(4, 3)

    def forward(self, x, scale=1.0, shift=None):
        y = self.lin(x) * scale
        return y if shift is None else y + shift


def test_with_kwargs_hooks():
    dynamo.reset()
    m = _Scaled()

    def pre(mod, args, kwargs):
        return (args[0] + 1,), {"scale": kwargs["scale"] * 2, "shift": args[0].sum()}

    def pre_in_place(mod, args, kwargs):
        kwargs["scale"] = kwargs["scale"] + 0.5              # changes the dict the forward gets

    def post(mod, args, kwargs, out):
        return out * kwargs["scale"] + args[0].mean()

    m.register_forward_pre_hook(pre, with_kwargs=True)
    m.register_forward_pre_hook(pre_in_place, with_kwargs=True)
    m.register_forward_hook(post, with_kwargs=True)
    m.register_forward_hook(_times_ten)
    x = _data(2, 4, seed=11)
    r = dynamo.explain(m)(x, scale=3.0)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons
    cm = ember.compile(m)
    for seed in (11, 12):
        x = _data(2, 4, seed=seed)
        _same(cm(x, scale=3.0), m(x, scale=3.0))


def test_with_kwargs_pre_hook_bad_return_raises_like_eager():
    dynamo.reset()
    m = _Scaled()
    m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)   # not (args, kwargs)
    x = _data(2, 4, seed=13)
    with pytest.raises(RuntimeError, match="forward pre-hook must return"):
        m(x, scale=2.0)
    with pytest.raises(RuntimeError, match="forward pre-hook must return"):
        ember.compile(m)(x, scale=2.0)


def test_always_call_hook():
    dynamo.reset()
    m = _model()
    m[2].register_forward_hook(lambda mod, i, o: o - 2, always_call=True)
    x = _data(3, 4, seed=14)
    r = dynamo.explain(m)(x)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons
    _same(ember.compile(m)(x), m(x))


def test_hook_modifies_input_and_output():
    dynamo.reset()
    m = _model()
    m[0].register_forward_pre_hook(lambda mod, args: (args[0].tanh() * 2,))
    m[0].register_forward_hook(lambda mod, args, out: out + args[0][:, :1])
    cm = ember.compile(m)
    for seed in (15, 16):
        x = _data(3, 4, seed=seed)
        _same(cm(x), m(x))


def test_closure_counter_hooks():
    """Counting calls from a hook: through a list (a traced mutation) and through ``nonlocal``
    (a side effect on an outside cell: the call breaks and runs eagerly) -- both count every
    compiled call, like eager."""
    dynamo.reset()
    m = _model()
    calls = [0]
    n = 0

    def count_list(mod, inp, out):
        calls[0] += 1
        return out * 2

    def count_nonlocal(mod, inp):
        nonlocal n
        n += 1

    m[0].register_forward_hook(count_list)
    m[2].register_forward_pre_hook(count_nonlocal)
    cm = ember.compile(m)
    for seed in range(3):
        x = _data(3, 4, seed=20 + seed)
        _same(cm(x), m(x))
    assert calls[0] == 6 and n == 6


def test_untraceable_hooks_break_and_match_eager(capsys):
    dynamo.reset()
    m = _model()
    m[0].register_forward_hook(lambda mod, i, o: print("hook ran") or o * 2)
    m[2].register_forward_hook(lambda mod, i, o: o * o.sum().item())
    x = _data(3, 4, seed=30)
    expected = m(x)
    r = dynamo.explain(m)(x)
    assert r.graph_break_count >= 1
    _same(r.result, expected)
    capsys.readouterr()
    cm = ember.compile(m)
    _same(cm(x), expected)
    assert capsys.readouterr().out == "hook ran\n"


class _CallableHook:
    def __init__(self, k):
        self.k = k

    def __call__(self, mod, inp, out):
        return out * self.k


class _Owner:
    def __init__(self):
        self.offset = 0.25

    def hook(self, mod, inp, out):
        return out + self.offset


def _scale_hook(mod, inp, out, *, k):
    return out * k


@pytest.mark.parametrize("kind", ["partial", "callable object", "bound method", "module method"])
def test_non_function_hooks(kind):
    dynamo.reset()
    m = _model()
    if kind == "partial":
        hook = functools.partial(_scale_hook, k=3.0)
    elif kind == "callable object":
        hook = _CallableHook(-2.0)
    elif kind == "bound method":
        hook = _Owner().hook
    else:
        m[0].alpha = 1.5
        hook = type("Hooked", (), {"h": lambda self, mod, inp, out: out * mod.alpha})().h
    m[0].register_forward_hook(hook)
    cm = ember.compile(m)
    for seed in (31, 32):
        x = _data(3, 4, seed=seed)
        _same(cm(x), m(x))
    r = dynamo.explain(m)(x)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons


def test_builtin_hook_breaks_with_a_reason():
    dynamo.reset()
    m = _model()
    m[0].register_forward_pre_hook(max)             # max(mod, args): raises in eager too
    x = _data(3, 4, seed=33)
    with pytest.raises(TypeError):
        m(x)
    with pytest.raises(TypeError):
        ember.compile(m)(x)


def test_backward_hooks_still_break():
    dynamo.reset()
    m = _model()
    grads = []
    m[0].register_full_backward_hook(lambda mod, gi, go: grads.append(go[0].shape))
    m[0].register_forward_hook(_times_ten)
    x = _data(3, 4, seed=34)
    r = dynamo.explain(m)(x)
    assert r.graph_break_count >= 1
    assert any("has module hooks" in reason for _, reason, _ in r.break_reasons)
    cm = ember.compile(m)
    xc, xe = _data(3, 4, seed=35).requires_grad_(), _data(3, 4, seed=35).requires_grad_()
    out = cm(xc)
    _same(out, m(xe))
    out.sum().backward()
    assert len(grads) == 1


@pytest.mark.parametrize("where", ["top", "submodule"])
def test_training_gradients_with_scaling_hook(where):
    """loss.backward through a graph with an inlined hook: the same gradients as eager."""
    dynamo.reset()
    m = _model()
    (m if where == "top" else m[2]).register_forward_hook(lambda mod, i, o: o * 0.5)
    m[0].register_forward_pre_hook(lambda mod, args: (args[0] * 1.5,))
    cm = ember.compile(m)
    x = _data(5, 4, seed=36)
    y = _data(5, 2, seed=37)
    loss = ((cm(x) - y) ** 2).mean()
    loss.backward()
    grads = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    loss_e = ((m(x) - y) ** 2).mean()
    loss_e.backward()
    _same(loss, loss_e)
    for g, p in zip(grads, m.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    r = dynamo.explain(m)(x)
    assert (r.graph_count, r.graph_break_count) == (1, 0), r.break_reasons
