"""ember.utils.checkpoint beyond the basics: selective activation checkpointing (SAC), the
determinism check and its errors, debug logs, early stop, nested checkpoints, RNG preservation,
the reentrant Function and torch's helper functions -- each compared with PyTorch 2.13."""
from __future__ import annotations

import contextlib
import functools
import importlib
import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng()
LIBS = ["ember", "torch"]


def _lib(name):
    mod = importlib.import_module(name)
    return mod, importlib.import_module(name + ".utils.checkpoint")


def _dispatch_mode_cls(name):
    if name == "torch":
        from torch.utils._python_dispatch import TorchDispatchMode
    else:
        from ember.utils._python_dispatch import TorchDispatchMode
    return TorchDispatchMode


def _counter(name):
    """A dispatch mode counting the ops that run below autograd, by name."""
    base = _dispatch_mode_cls(name)

    class Count(base):
        def __init__(self):
            super().__init__()
            self.n = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            key = str(func)
            self.n[key] = self.n.get(key, 0) + 1
            return func(*args, **(kwargs or {}))
    return Count()


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _leaf(T, a):
    return T.tensor(a, requires_grad=True)


def _norm(msg):
    """torch's and ember's texts made comparable (module names, reprs, the tip's paths)."""
    msg = msg.split("\nTip:")[0]
    return msg.replace("torch.", "ember.").replace("torch._ops.", "")


# ---------------------------------------------------------------------- selective checkpointing
def _sac_run(name, policy_kind, xa, wa):
    T, ck = _lib(name)
    x, w = _leaf(T, xa), _leaf(T, wa)

    def fn(x, w):
        return T.sigmoid(T.matmul(T.matmul(x, w), w)) * w

    if policy_kind == "none":
        out = fn(x, w)
    elif policy_kind == "plain":
        out = ck.checkpoint(fn, x, w, use_reentrant=False)
    elif policy_kind == "list":
        ctx = functools.partial(ck.create_selective_checkpoint_contexts, [T.ops.aten.mm.default])
        out = ck.checkpoint(fn, x, w, use_reentrant=False, context_fn=ctx)
    else:
        def policy(ctx, op, *args, **kwargs):
            if op == T.ops.aten.mm.default:
                return ck.CheckpointPolicy.MUST_SAVE if policy_kind == "fn" else True
            return ck.CheckpointPolicy.PREFER_RECOMPUTE if policy_kind == "fn" else False
        out = ck.checkpoint(fn, x, w, use_reentrant=False,
                            context_fn=functools.partial(ck.create_selective_checkpoint_contexts, policy))
    with _counter(name) as c:
        out.sum().backward()
    mm = sum(v for k, v in c.n.items() if k.startswith("aten.mm"))
    sig = sum(v for k, v in c.n.items() if k == "aten.sigmoid.default")
    return mm, sig, out.detach().numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("policy_kind", ["list", "fn", "bool"])
def test_sac_saved_ops_are_not_recomputed_and_grads_match(policy_kind):
    xa, wa = _arr(5, 5), _arr(5, 5)
    base = _sac_run("ember", "none", xa, wa)
    plain = _sac_run("ember", "plain", xa, wa)
    got = _sac_run("ember", policy_kind, xa, wa)
    want = _sac_run("torch", policy_kind, xa, wa)
    # backward alone runs 4 mm (2 per matmul); plain checkpointing recomputes the 2 forward ones,
    # SAC keeps them: the backward runs exactly as many mm as without checkpointing
    assert base[0] == 4 and plain[0] == 6
    assert got[0] == base[0] == want[0]
    assert got[1] == want[1] == 1          # sigmoid is recomputed
    for g, b, t in zip(got[2:], base[2:], want[2:]):
        np.testing.assert_allclose(g, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5)


def test_sac_policy_sees_forward_context_and_output():
    seen = []

    def policy(ctx, op, *args, **kwargs):
        seen.append((ctx.is_recompute, isinstance(ctx.op_output, ember.Tensor), str(op)))
        return ember.utils.checkpoint.CheckpointPolicy.PREFER_SAVE

    x = ember.tensor(_arr(3, 3), requires_grad=True)
    ck = ember.utils.checkpoint
    out = ck.checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False,
                        context_fn=functools.partial(ck.create_selective_checkpoint_contexts, policy))
    n_forward = len(seen)
    with _counter("ember") as c:
        out.sum().backward()
    assert len(seen) == n_forward            # asked during the forward only
    assert all(not r and is_t for r, is_t, _ in seen)
    assert [s for _, _, s in seen] == ["aten.sin.default", "aten.exp.default"]
    assert "aten.sin.default" not in c.n and "aten.exp.default" not in c.n   # all kept: nothing recomputed
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()) * np.exp(np.sin(x.detach().numpy())),
                               rtol=1e-5)


@pytest.mark.parametrize("name", LIBS)
def test_sac_bad_policy_arguments(name):
    T, ck = _lib(name)
    with pytest.raises(ValueError, match=r"Expected op in `op_list` to be an OpOverload but got: aten\.mm of type "
                                         r".*OpOverloadPacket.*Please update the OpOverloadPacket"):
        ck.create_selective_checkpoint_contexts([T.ops.aten.mm])
    with pytest.raises(TypeError, match="policy_fn_or_list must be either a function or a list of ops."):
        ck.create_selective_checkpoint_contexts(3)
    assert [p.name for p in ck.CheckpointPolicy] == ["MUST_SAVE", "PREFER_SAVE", "MUST_RECOMPUTE",
                                                      "PREFER_RECOMPUTE", "MUST_CPU_OFFLOAD", "PREFER_CPU_OFFLOAD"]


def _sac_mutation(name, allow):
    T, ck = _lib(name)
    x, w = _leaf(T, _arr(3, 3)), _leaf(T, _arr(3, 3))

    def fn(x, w):
        y = T.mm(x, w)
        return y.sin(), y

    ctx = functools.partial(ck.create_selective_checkpoint_contexts, [T.ops.aten.mm.default],
                            allow_cache_entry_mutation=allow)
    z, y = ck.checkpoint(fn, x, w, use_reentrant=False, context_fn=ctx)
    with T.no_grad():
        y.add_(1.0)
    try:
        z.sum().backward()
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("allow", [False, True])
def test_sac_mutated_cache_entry(allow):
    got, want = _sac_mutation("ember", allow), _sac_mutation("torch", allow)
    assert got == want
    if not allow:
        assert got == "Tensor cached during selective activation checkpoint has been mutated"


def _sac_twice(name):
    T, ck = _lib(name)
    x, w = _leaf(T, _arr(3, 3)), _leaf(T, _arr(3, 3))
    ctx = functools.partial(ck.create_selective_checkpoint_contexts, [T.ops.aten.mm.default])
    out = ck.checkpoint(lambda a, b: T.mm(a, b).sin(), x, w, use_reentrant=False, context_fn=ctx)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError) as e:
        out.sum().backward()
    return str(e.value)


def test_sac_second_backward_is_an_error_as_in_torch():
    assert _sac_twice("ember") == _sac_twice("torch") == (
        "Trying to backward an extra time. You are only allowed to backward once on any region computed under "
        "selective activation checkpoint.")


# ---------------------------------------------------------------------- determinism check, errors, debug
def _metadata_error(name):
    T, ck = _lib(name)
    x = _leaf(T, _arr(3, 4))
    n = [2]
    out = ck.checkpoint(lambda t: t.repeat(n[0], 1).sin(), x, use_reentrant=False)
    n[0] = 3
    with pytest.raises(ck.CheckpointError) as e:
        out.sum().backward()
    assert isinstance(e.value, RuntimeError)
    return _norm(str(e.value))


def test_determinism_check_message_matches_torch():
    got = _metadata_error("ember")
    assert got.startswith("ember.utils.checkpoint: Recomputed values") or got.startswith("torch.utils")
    assert got.replace("torch.utils.checkpoint", "ember.utils.checkpoint") == _metadata_error("torch").replace(
        "torch.utils.checkpoint", "ember.utils.checkpoint")


def _count_error(name, early_stop):
    T, ck = _lib(name)
    x = _leaf(T, _arr(3, 4))
    flag = [early_stop]

    def fn(t):
        y = t.sin()
        return y.cos() if flag[0] else y

    with ck.set_checkpoint_early_stop(early_stop):
        out = ck.checkpoint(fn, x, use_reentrant=False)
    flag[0] = not flag[0]
    with pytest.raises(ck.CheckpointError) as e:
        out.sum().backward()
    return str(e.value).split("\nTip:")[0]


@pytest.mark.parametrize("early_stop", [True, False])
def test_count_mismatch_messages_match_torch(early_stop):
    # early stop on: fewer tensors recomputed; off: more ("trying to save more tensors")
    got, want = _count_error("ember", early_stop), _count_error("torch", early_stop)
    assert got == want
    assert got.startswith("torch.utils.checkpoint: ")


@pytest.mark.parametrize("name", LIBS)
def test_argument_errors_match(name):
    T, ck = _lib(name)
    x = _leaf(T, _arr(2))
    with pytest.raises(ValueError, match=re.escape("determinism_check should be one of ['default', 'none'], but "
                                                   "got bogus")):
        ck.checkpoint(T.sin, x, use_reentrant=False, determinism_check="bogus")
    with pytest.raises(ValueError, match=re.escape("Passing `context_fn` or `debug` is only supported when "
                                                   "use_reentrant=False.")):
        ck.checkpoint(T.sin, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: alpha"):
        ck.checkpoint(T.sin, x, use_reentrant=True, alpha=2)
    with pytest.raises(ValueError, match="debug=True is incompatible with non-default context_fn"):
        ck.checkpoint(T.sin, x, use_reentrant=False, debug=True,
                      context_fn=functools.partial(ck.create_selective_checkpoint_contexts, []))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
        ck.checkpoint_sequential([T.nn.Identity()], 1, x, use_reentrant=False, foo=1)


@pytest.mark.parametrize("use_global", [False, True])
def test_debug_mode_logs_both_runs(use_global):
    ck = ember.utils.checkpoint
    x = ember.tensor(_arr(3, 4), requires_grad=True)
    flag = [False]

    def fn(t):
        y = t.sin()
        return y.cos() if flag[0] else y

    cm = ck.set_checkpoint_debug_enabled(True) if use_global else contextlib.nullcontext()
    with cm, ck.set_checkpoint_early_stop(False):
        out = ck.checkpoint(fn, x, use_reentrant=False, debug=not use_global)
    flag[0] = True
    with pytest.raises(ck.CheckpointError) as e:
        out.sum().backward()
    msg = str(e.value)
    fwd, rec = msg.split("Operations executed during the original forward:")[1].split(
        "Operations executed during recomputation:")
    assert "aten.sin.default" in fwd and "aten.cos.default" not in fwd
    assert "aten.sin.default" in rec and "aten.cos.default" in rec
    assert "test_checkpoint_selective.py" in msg          # the user frames of each op
    assert "trying to save more tensors" in str(e.value.__cause__)


# ---------------------------------------------------------------------- recomputation semantics
def _call_counts(name, nested, retain):
    T, ck = _lib(name)
    calls = {"outer": 0, "inner": 0}
    lin_w = _leaf(T, _arr(4, 4))

    def inner(t):
        calls["inner"] += 1
        return (t @ lin_w).tanh()

    def outer(t):
        calls["outer"] += 1
        h = t.sin()
        h = ck.checkpoint(inner, h, use_reentrant=False) if nested else inner(h)
        return h.exp()

    x = _leaf(T, _arr(3, 4))
    out = ck.checkpoint(outer, x, use_reentrant=False)
    out.sum().backward(retain_graph=retain)
    if retain:
        out.sum().backward()
    return calls, x.grad.numpy(), lin_w.grad.numpy()


@pytest.mark.parametrize("nested,retain", [(True, False), (False, True), (True, True)])
def test_nested_and_repeated_recomputation_counts_match_torch(nested, retain):
    np.random.seed(0)
    state = RNG.bit_generator.state
    got = _call_counts("ember", nested, retain)
    RNG.bit_generator.state = state
    want = _call_counts("torch", nested, retain)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)


def _dropout_grads(use_reentrant, preserve, ck_on, seed):
    ck = ember.utils.checkpoint
    ember.manual_seed(1)
    mlp = ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.ReLU(), ember.nn.Dropout(0.5),
                              ember.nn.Linear(16, 16), ember.nn.Dropout(0.5))
    x = ember.tensor(_X6, requires_grad=True)
    ember.manual_seed(seed)
    out = ck.checkpoint(mlp, x, use_reentrant=use_reentrant, preserve_rng_state=preserve) if ck_on else mlp(x)
    ember.randn(100)        # RNG moves on between forward and backward
    (out ** 2).sum().backward()
    return [x.grad.numpy()] + [p.grad.numpy() for p in mlp.parameters()]


_X6 = _arr(8, 6)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_preserve_rng_state_with_dropout_gives_identical_grads(use_reentrant):
    want = _dropout_grads(use_reentrant, True, False, 5)
    got = _dropout_grads(use_reentrant, True, True, 5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    off = _dropout_grads(use_reentrant, False, True, 5)
    assert not all(np.array_equal(g, w) for g, w in zip(off, want))


def test_checkpoint_sequential_matches_torch():
    # weights at 0.4 (about 1/sqrt(fan_in)) keep the tanh layers out of saturation: there tanh'
    # = 1 - tanh^2 cancels to a few ulps of 1, and ember's and torch's tanh (an ulp apart) gave
    # gradients differing by ~1e-5 absolute once in ~150 draws at unit-scale weights
    ws = [(_arr(8, 6) * 0.4, _arr(8) * 0.4), (_arr(8, 8) * 0.4, _arr(8) * 0.4), (_arr(3, 8) * 0.4, _arr(3) * 0.4)]
    xa = _arr(5, 6)
    results = []
    for name in LIBS:
        T, ck = _lib(name)
        layers = []
        for i, (w, b) in enumerate(ws):
            lin = T.nn.Linear(w.shape[1], w.shape[0])
            with T.no_grad():
                lin.weight.copy_(T.tensor(w))
                lin.bias.copy_(T.tensor(b))
            layers += [lin, T.nn.Tanh()] if i < 2 else [lin]
        model = T.nn.Sequential(*layers)
        x = _leaf(T, xa)
        ck.checkpoint_sequential(model, 3, x, use_reentrant=False).pow(2).sum().backward()
        results.append([x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()])
    for g, w in zip(*results):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _exec_group_calls(name):
    T, ck = _lib(name)
    calls = [0]
    a, b = _leaf(T, _arr(3)), _leaf(T, _arr(3))

    def fn(a, b):
        calls[0] += 1
        return a.sin(), b.cos()

    ya, yb = ck.checkpoint(fn, a, b, use_reentrant=False)
    with ck.GraphExecGroup():
        ya.sum().backward()
        yb.sum().backward()
    return calls[0]


def test_graph_exec_group_recomputes_once():
    assert _exec_group_calls("ember") == _exec_group_calls("torch") == 2


# ---------------------------------------------------------------------- reentrant and helpers
@pytest.mark.parametrize("name", LIBS)
def test_reentrant_under_autograd_grad_is_an_error(name):
    T, ck = _lib(name)
    x = _leaf(T, _arr(3))
    out = ck.checkpoint(lambda t: t.sin(), x, use_reentrant=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
            "parameter to .backward().")):
        T.autograd.grad(out.sum(), x)
    out = ck.checkpoint(lambda t: t.sin(), x, use_reentrant=True)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()), rtol=1e-6)


def test_checkpoint_function_and_helpers_match_torch():
    xa = _arr(4)
    for name in LIBS:
        T, ck = _lib(name)
        x = _leaf(T, xa)
        y = ck.CheckpointFunction.apply(lambda t, k: (t * k).exp(), True, x, 3.0)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(3 * xa), rtol=1e-5)
        d = ck.detach_variable((x, 2))
        assert d[1] == 2 and d[0].requires_grad and d[0].grad_fn is None and d[0] is not x
        with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got Unsupported input type: "
                                               "list"):
            ck.detach_variable([x])
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. Gradients will be None"):
            ck.check_backward_validity([T.tensor(xa), 1])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ck.check_backward_validity([x])
        assert ck.get_device_states(T.tensor(xa), [x]) == ([], [])
        ck.set_device_states([], [])
        prev = ck.DefaultDeviceType.get_device_type()
        acc = T.accelerator.current_accelerator(True)
        assert prev == (acc.type if acc is not None else "cpu")
        ck.DefaultDeviceType.set_device_type("xpu")
        try:
            assert ck.DefaultDeviceType.get_device_type() == "xpu"
        finally:
            ck.DefaultDeviceType.set_device_type(prev)
        a, b = ck.noop_context_fn()
        with a, b:
            pass
        assert set(ck.__all__) >= {"CheckpointPolicy", "create_selective_checkpoint_contexts", "CheckpointError",
                                   "SelectiveCheckpointContext", "set_checkpoint_early_stop", "noop_context_fn"}


@pytest.mark.parametrize("name", LIBS)
def test_context_fn_that_swallows_the_error_is_refused(name):
    T, ck = _lib(name)

    class Swallow:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return True

    def boom(t):
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="the forward context provided by context_fn suppressed an exception"):
        ck.checkpoint(boom, _leaf(T, _arr(2)), use_reentrant=False,
                      context_fn=lambda: (Swallow(), contextlib.nullcontext()))


def test_kwargs_and_inputs_without_grad_and_no_grad():
    ck = ember.utils.checkpoint
    w = ember.tensor(_arr(3, 3), requires_grad=True)
    x = ember.tensor(_arr(2, 3))
    out = ck.checkpoint(lambda t, scale=1.0: (t @ w).sin() * scale, x, use_reentrant=False, scale=2.0)
    out.sum().backward()
    xa, wa = x.numpy(), w.detach().numpy()
    np.testing.assert_allclose(w.grad.numpy(), xa.T @ (2 * np.cos(xa @ wa)), rtol=1e-4, atol=1e-5)
    with ember.no_grad():
        assert not ck.checkpoint(lambda t: t @ w, x, use_reentrant=False).requires_grad


def test_debug_mode_without_error_and_autocast_replay_and_custom_function():
    ck = ember.utils.checkpoint

    class Sq(ember.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return 2 * t * g

    a, wa = _arr(3, 4), _arr(4, 4)

    def fn(t, w):
        return Sq.apply((t @ w).tanh()).sum(dim=-1)

    grads = []
    for mode in ("plain", "debug", "autocast_plain", "autocast"):
        x, w = ember.tensor(a, requires_grad=True), ember.tensor(wa, requires_grad=True)
        cast = ember.autocast("cpu", dtype=ember.bfloat16) if mode.startswith("autocast") else \
            contextlib.nullcontext()
        with cast:
            out = fn(x, w) if mode.endswith("plain") else ck.checkpoint(fn, x, w, use_reentrant=False,
                                                                         debug=(mode == "debug"))
        out.float().sum().backward()          # backward outside autocast: the recomputation replays it
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for g, want in ((grads[1], grads[0]), (grads[3], grads[2])):
        np.testing.assert_array_equal(g[0], want[0])
        np.testing.assert_array_equal(g[1], want[1])
    assert not np.array_equal(grads[0][0], grads[2][0])       # autocast did change the numbers
