"""Session 47: ``i0`` is an op with PyTorch's derivative (``grad * i1(x)``) instead of autograd through
its Chebyshev composite; ``special.i0e``'s derivative (``i1e(x) - sign(x) i0e(x)``); eager and
compiled, values and gradients against PyTorch at ordinary and edge points."""
import numpy as np
import pytest

import ember

_EDGES = [0.0, -0.0, 1e-300, -1e-8, 1e-3, 7.999, 8.0, 8.001, -30.0, 700.0, 709.9, 710.0, -713.0, 800.0,
          1e4, np.inf, -np.inf, np.nan]


def _points(dtype):
    rng = np.random.RandomState(7)
    x = np.concatenate([rng.randn(40) * 3, rng.uniform(-750, 750, 40), _EDGES])
    if dtype == "float32":   # PyTorch's float32 I0 is inf once exp(|x|) overflows (88.72); both sides
        x = np.concatenate([rng.randn(40) * 3, rng.uniform(-95, 95, 40), _EDGES[:9],
                            [88.0, 88.7228, 88.7229, -90.0, np.inf, -np.inf, np.nan]])
    return x.astype(dtype)


def _value_and_grad(lib, fn, x, up):
    t = lib.tensor(x, requires_grad=True)
    y = fn(lib)(t)
    y.backward(lib.tensor(up))
    return y.detach().numpy(), t.grad.numpy(), y.grad_fn.name()


_FNS = {"i0": lambda lib: lib.i0, "special.i0": lambda lib: lib.special.i0,
        "i0e": lambda lib: lib.special.i0e}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(_FNS))
def test_i0_i0e_values_and_gradients_match_torch(name, dtype):
    torch = pytest.importorskip("torch")
    x = _points(dtype)
    up = np.random.RandomState(8).uniform(0.5, 2.0, x.shape).astype(dtype)
    tv, tg, tname = _value_and_grad(torch, _FNS[name], x, up)
    ev, eg, ename = _value_and_grad(ember, _FNS[name], x, up)
    assert ename == tname
    rtol = 1e-13 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(ev, tv, rtol=rtol, atol=0)       # NaN / inf positions must coincide
    # float32 i0e' = i1e - sign(x) i0e cancels for large |x|: a float32 ulp of i0e (<= 1), absolutely
    np.testing.assert_allclose(eg, tg, rtol=rtol, atol=1e-6 if (name, dtype) == ("i0e", "float32") else 0)
    if name != "i0e":   # the slope is I1: odd, with the sign of x (the composite's was not near 0)
        fin = np.isfinite(x) & (x != 0)
        assert (np.sign(eg[fin]) == np.sign(x[fin])).all()


def test_i0_second_derivative_matches_torch():
    """I0'' = I1' = I0 - I1 / x: the derivative rule is itself differentiable."""
    torch = pytest.importorskip("torch")
    x = np.random.RandomState(9).uniform(-20, 20, 30)
    out = []
    for lib in (torch, ember):
        t = lib.tensor(x, requires_grad=True)
        g, = lib.autograd.grad(lib.i0(t).sum(), t, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), t)
        out.append(gg.numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12)


@pytest.mark.parametrize("name", ["i0", "i0e"])
def test_i0_compiled_matches_eager(name):
    x = _points("float64")
    up = np.random.RandomState(10).uniform(0.5, 2.0, x.shape)
    fn = _FNS[name](ember)

    def f(t):
        return fn(t) * 2.0

    res = []
    for run in (f, ember.compile(f)):
        t = ember.tensor(x, requires_grad=True)
        y = run(t)
        y.backward(ember.tensor(up))
        res.append((y.detach().numpy(), t.grad.numpy()))
    for e, c in zip(res[0], res[1]):
        np.testing.assert_array_equal(c, e)


def test_i0_dtypes_inplace_and_errors_match_torch():
    torch = pytest.importorskip("torch")
    xi = np.random.RandomState(11).randint(-5, 5, 6)
    assert ember.i0(ember.tensor(xi)).dtype == ember.float32 and torch.i0(torch.tensor(xi)).dtype == torch.float32
    np.testing.assert_allclose(ember.i0(ember.tensor(xi)).numpy(), torch.i0(torch.tensor(xi)).numpy(), rtol=1e-6)
    xh = np.random.RandomState(12).randn(6).astype(np.float16)
    assert ember.i0(ember.tensor(xh)).dtype == ember.float16
    xf = np.random.RandomState(13).randn(6)
    a = ember.tensor(xf)
    assert a.i0_() is a
    np.testing.assert_allclose(a.numpy(), torch.tensor(xf).i0_().numpy(), rtol=1e-14)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        ember.tensor(xi).i0_()
    with pytest.raises(NotImplementedError, match='"i0_vml_cpu" not implemented for \'ComplexFloat\''):
        ember.i0(ember.tensor(xf.astype(np.complex64)))
