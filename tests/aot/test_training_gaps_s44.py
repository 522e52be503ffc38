"""Compiled training vs eager: gaps found by the s44 probes (custom autograd.Function and
detached aliases of inputs/outputs), pinned against eager ember and the number of graphs."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _close(a, b):
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)


def _graphs(fn, *args):
    e = dynamo.explain(fn)(*args)
    return e.graph_count, e.graph_break_count


class _Id(ember.autograd.Function):
    """Returns its input as is, with its own backward (x3)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


class _IdOf(ember.autograd.Function):
    """Returns ``x`` (no grad) as is; its gradient goes to ``w``."""

    @staticmethod
    def forward(ctx, x, w):
        return x

    @staticmethod
    def backward(ctx, g):
        return None, g.sum(0) * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_function_returning_its_input_keeps_its_backward(backend):
    # the output aliases the input: it was regenerated as a view of it (AsStridedBackward0),
    # skipping the Function's backward (x.grad was 1, not 3)
    def f(x):
        return _Id.apply(x)

    x = ember.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    dynamo.reset()
    out, out2 = f(x), ember.compile(f, backend=backend)(x2)
    _close(out, out2)
    assert out2.requires_grad
    (out * out).sum().backward()
    (out2 * out2).sum().backward()
    _close(x.grad, x2.grad)
    assert _graphs(f, x) == (1, 0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_function_returning_plain_input_requires_grad(backend):
    def f(x, w):
        return _IdOf.apply(x, w)

    x = ember.randn(3, 4)
    w = ember.randn(4, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    dynamo.reset()
    out, out2 = f(x, w), ember.compile(f, backend=backend)(x, w2)
    assert out.requires_grad and out2.requires_grad
    (out * out).sum().backward()
    (out2 * out2).sum().backward()
    _close(w.grad, w2.grad)


def test_function_identity_inside_model_training():
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 4)

    def f(x):
        return _Id.apply(lin(x)).sin(), _Id.apply(x)

    def run(fn, x):
        a, b = fn(x)
        (a.sum() + b.pow(2).sum()).backward()
        g = (x.grad.clone(), lin.weight.grad.clone(), lin.bias.grad.clone())
        lin.zero_grad(set_to_none=True)
        return g

    x = ember.randn(3, 4)
    dynamo.reset()
    ge = run(f, x.clone().requires_grad_())
    cf = ember.compile(f)
    for _ in range(2):
        gc = run(cf, x.clone().requires_grad_())
        for a, b in zip(ge, gc):
            _close(a, b)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", ["input", "input_view", "output", "output_view", "no_grad_view"])
def test_detached_alias_outputs_do_not_require_grad(backend, case):
    # ``x.detach()`` returned by a compiled function shares x's memory: it was regenerated as
    # as_strided(x) with grad on, so it required grad and passed gradients into x
    def f(x, w):
        y = (x @ w).exp()
        if case == "input":
            d = x.detach()
        elif case == "input_view":
            d = x[1:].detach()
        elif case == "output":
            d = y.detach()
        elif case == "output_view":
            d = y[0].detach()
        else:
            with ember.no_grad():
                d = y.view(-1)
        return y, d

    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 4, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    dynamo.reset()
    cf = ember.compile(f, backend=backend)
    (y, d), (y2, d2) = f(x, w), cf(x2, w2)
    _close(d, d2)
    assert not d.requires_grad and not d2.requires_grad and d2.grad_fn is None
    (y.sum() * d.sum()).backward()
    (y2.sum() * d2.sum()).backward()
    _close(x.grad, x2.grad)
    _close(w.grad, w2.grad)
    assert _graphs(f, x, w) == (1, 0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_detached_input_alias_alone_keeps_aliasing(backend):
    # no output requires grad: the inference graph, called with grad mode on
    def f(x):
        return x[1:].detach()

    x = ember.randn(3, 4, requires_grad=True)
    dynamo.reset()
    d = ember.compile(f, backend=backend)(x)
    assert not d.requires_grad
    _close(x[1:], d)
    with ember.no_grad():
        d.zero_()       # still a view of x, as eagerly
    assert bool((x[1:] == 0).all())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_plain_view_outputs_still_alias_with_grad(backend):
    def f(x):
        return x.t(), x[1]

    x = ember.randn(3, 4, requires_grad=True)
    dynamo.reset()
    a, b = ember.compile(f, backend=backend)(x)
    assert a.requires_grad and "Backward" in type(a.grad_fn).__name__
    (a.sum() * 2 + b.sum()).backward()
    expect = np.full((3, 4), 2.0, dtype=np.float32)
    expect[1] += 1
    np.testing.assert_allclose(x.grad.numpy(), expect)


class _Flat(ember.autograd.Function):
    """A view of its input, with its own backward (x2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return (g * 2).view(ctx.shape)


def _flat_of_input(x):
    return _Flat.apply(x)


def _id_of_output(x):
    y = x.exp()
    return y, _Id.apply(y)


def _flat_of_output(x):
    y = x.exp()
    return y, _Flat.apply(y)


def _view_of_id(x):
    return _Id.apply(x)[1:]


def _id_of_view(x):
    return _Id.apply(x[1:])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("f", [_flat_of_input, _id_of_output, _flat_of_output, _view_of_id, _id_of_view])
def test_aliases_through_custom_function_use_its_backward(backend, f):
    x = ember.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    dynamo.reset()
    oe, oc = f(x), ember.compile(f, backend=backend)(x2)
    oe = oe if isinstance(oe, tuple) else (oe,)
    oc = oc if isinstance(oc, tuple) else (oc,)
    for a, b in zip(oe, oc):
        _close(a, b)
    sum((o * o).sum() * (k + 1) for k, o in enumerate(oe)).backward()
    sum((o * o).sum() * (k + 1) for k, o in enumerate(oc)).backward()
    _close(x.grad, x2.grad)
    assert _graphs(f, x) == (1, 0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_detached_output_returned_before_its_source(backend):
    def f(x):
        y = x.exp()
        return y.detach(), y, y.argmax(-1)

    x = ember.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    dynamo.reset()
    (d, y, i), (d2, y2, i2) = f(x), ember.compile(f, backend=backend)(x2)
    assert [t.requires_grad for t in (d2, y2, i2)] == [False, True, False]
    (y * d).sum().backward()
    (y2 * d2).sum().backward()
    _close(x.grad, x2.grad)
