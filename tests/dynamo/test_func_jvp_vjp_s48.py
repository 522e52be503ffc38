"""``ember.func.jvp`` / ``ember.func.vjp`` called inside a compiled frame (session 48): captured
as subgraphs of the frame's graph (no break, as torch.compile traces torch.func.jvp/vjp), the
results differentiable again; a ``vjp_fn`` that leaves the frame, or an ``f`` drawing random
numbers, runs eagerly with the reason named."""
import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(b.detach().numpy()), np.asarray(a.detach().numpy()), rtol=tol, atol=tol)


_W = _rand(4, 4, seed=7)


def _g(x):
    return (x @ _W).sin() * x


def _jvp_frame(x, t):
    out, tang = ember.func.jvp(_g, (x,), (t,))
    return out + 1, tang * 2


def _vjp_frame(x, ct):
    out, fn = ember.func.vjp(_g, x)
    (gx,) = fn(ct)
    return out.cos(), gx + fn(ct * 2)[0]


def _vjp_aux_frame(x, ct):
    out, fn, aux = ember.func.vjp(lambda y: (_g(y), y.sum()), x, has_aux=True)
    return fn(ct)[0] * aux, out


def _jvp_aux_frame(x, t):
    out, tang, aux = ember.func.jvp(lambda y: (_g(y), y.mean()), (x,), (t,), has_aux=True)
    return tang * aux + out


@pytest.mark.parametrize("fn", [_jvp_frame, _vjp_frame, _vjp_aux_frame, _jvp_aux_frame],
                         ids=lambda f: f.__name__)
def test_one_graph_and_eager_values(fn):
    x, t = _rand(3, 4, seed=1), _rand(3, 4, seed=2)
    want = fn(x, t)
    dynamo.reset()
    cnt = CountingBackend()
    got = ember.compile(fn, backend=cnt)(x, t)
    for a, b in zip(want, got):
        _close(a, b)
    assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons


def test_values_match_torch_func():
    torch = pytest.importorskip("torch")
    x, t = _rand(3, 4, seed=3), _rand(3, 4, seed=4)
    dynamo.reset()
    o1, j1 = ember.compile(_jvp_frame, backend=CountingBackend())(x, t)
    o2, g2 = ember.compile(_vjp_frame, backend=CountingBackend())(x, t)
    W = torch.tensor(_W.numpy())

    def g(y):
        return (y @ W).sin() * y
    tx, tt = torch.tensor(x.numpy()), torch.tensor(t.numpy())
    ro, rj = torch.func.jvp(g, (tx,), (tt,))
    ro2, rfn = torch.func.vjp(g, tx)
    np.testing.assert_allclose(o1.numpy(), (ro + 1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(j1.numpy(), (rj * 2).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2.numpy(), ro2.cos().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g2.numpy(), (rfn(tt)[0] + rfn(tt * 2)[0]).numpy(), rtol=1e-5, atol=1e-6)


def _through_module(lin, x, ct):
    o, fn = ember.func.vjp(lin, x)
    (gx,) = fn(ct)
    o2, j = ember.func.jvp(lambda y: lin(y).tanh(), (x,), (ct,))
    return (gx * o).sum() + (j * o2).sum()


def test_gradients_through_captured_jvp_vjp_equal_eager():
    """The module's parameters are lifted operands: gradients of the result w.r.t. them and x."""
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 4)
    x = _rand(3, 4, seed=5).requires_grad_()
    ct = _rand(3, 4, seed=6)
    params = [x] + list(lin.parameters())
    want = ember.autograd.grad(_through_module(lin, x, ct), params)
    dynamo.reset()
    cnt = CountingBackend()
    got = ember.autograd.grad(ember.compile(_through_module, backend=cnt)(lin, x, ct), params)
    for a, b in zip(want, got):
        _close(a, b)
    assert cnt.frame_count == 1, dynamo.fallback_reasons


def _returns_vjp_fn(x):
    out, fn = ember.func.vjp(_g, x)
    return out, fn


def _random_f(x, ct):
    out, fn = ember.func.vjp(lambda y: ember.nn.functional.dropout(y, 0.5), x)
    return fn(ct)[0]


def test_vjp_fn_leaving_the_frame_runs_eagerly():
    x, ct = _rand(3, 4, seed=8), _rand(3, 4, seed=9)
    dynamo.reset()
    out, fn = ember.compile(_returns_vjp_fn, backend=CountingBackend())(x)
    _close(_g(x), out)
    _close(ember.func.vjp(_g, x)[1](ct)[0], fn(ct)[0])
    assert any("vjp_fn" in r for _, r in dynamo.fallback_reasons), dynamo.fallback_reasons


def test_random_function_breaks_with_reason():
    x, ct = _rand(3, 4, seed=10), _rand(3, 4, seed=11)
    ember.manual_seed(3)
    want = _random_f(x, ct)
    dynamo.reset()
    ember.manual_seed(3)
    got = ember.compile(_random_f, backend=CountingBackend())(x, ct)
    _close(want, got)
    assert any("ember.func.vjp" in r and "random" in r for _, r in dynamo.fallback_reasons), dynamo.fallback_reasons
