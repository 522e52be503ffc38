"""Eager ``ember.erfinv``: the vectorised native series (ember/ops/_erfinv_cpp.py through
_native_small) and the numpy fallback (no C++ compiler) against torch -- random values across
(-1, 1), values a few ulp from +-1 and from 0 (subnormals included), the special values, strided
and threaded inputs, gradients, and the compiled C++ path (same series, same bits)."""
import numpy as np
import pytest

import ember
from ember.ops import _native_small

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
# max ulp from torch's values: the native float32 result is a correctly rounded double
# (0 ulp on every value tried), float64 within 3 ulp of exact (torch ~1)
MAXULP = {np.float32: 1, np.float64: 4}


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(_native_small, "lib", lambda: None)
    elif _native_small.lib() is None:
        pytest.skip("no C++ compiler: the native erfinv loop is unavailable")
    return request.param


def _inputs(rng, dtype):
    eps = np.finfo(dtype)
    near_one = 1 - np.logspace(np.log10(eps.epsneg), -0.5, 120)
    tiny = np.logspace(np.log10(eps.smallest_subnormal) + 1, -1, 80)
    y = np.concatenate([rng.uniform(-1, 1, 2000), near_one, -near_one, tiny, -tiny,
                        rng.uniform(0.99, 1, 200), -rng.uniform(0.9999, 1, 200)]).astype(dtype)
    # the float32 cast can round 1 - tiny up to exactly 1; keep the open interval
    return y[np.abs(y) < 1]


def _assert_ulp(got, want, maxulp):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_max_ulp(got, want, maxulp=maxulp)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_values_match_torch(dtype, seed, path):
    y = _inputs(np.random.default_rng(seed), dtype)
    got = ember.erfinv(ember.tensor(y)).numpy()
    _assert_ulp(got, torch.erfinv(torch.tensor(y)).numpy(), MAXULP[dtype])
    # and erf inverts it (float64: to the problem's conditioning around the result)
    if dtype == np.float64:
        inner = np.abs(y) < 0.99
        np.testing.assert_allclose(torch.erf(torch.tensor(got[inner])).numpy(), y[inner], rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values(dtype, path):
    y = np.array([0.0, -0.0, 1.0, -1.0, 1.0 + 1e-6, -1.5, np.inf, -np.inf, np.nan, 0.5, -0.5], dtype)
    got = ember.erfinv(ember.tensor(y)).numpy()
    want = torch.erfinv(torch.tensor(y)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = ~np.isnan(want)
    np.testing.assert_array_max_ulp(got[fin], want[fin], maxulp=MAXULP[dtype])
    assert np.array_equal(np.signbit(got[fin]), np.signbit(want[fin]))      # erfinv(-0.0) is -0.0
    assert np.isposinf(got[2]) and np.isneginf(got[3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_and_empty_inputs(dtype, path):
    a = np.random.default_rng(5).uniform(-1, 1, (6, 8, 10)).astype(dtype)
    base, tb = ember.tensor(a), torch.tensor(a)
    views = [lambda t: t.transpose(0, 2), lambda t: t[:, ::3, 1:], lambda t: t.permute(1, 2, 0)[::2],
             lambda t: t[2, 3, 4], lambda t: t[:, :0], lambda t: t.transpose(0, 1)[1:5]]
    for v in views:
        ev, tv = v(base), v(tb)
        got = ember.erfinv(ev)
        want = torch.erfinv(tv)
        assert tuple(got.shape) == tuple(want.shape)
        _assert_ulp(got.numpy(), want.numpy(), MAXULP[dtype])
        # the same bits as the op on a contiguous copy
        np.testing.assert_array_equal(got.numpy(), ember.erfinv(ev.contiguous()).numpy())
    # Fortran-ordered input (a permuted contiguous one)
    f = np.asfortranarray(a[0])
    np.testing.assert_array_equal(ember.erfinv(ember.tensor(f)).numpy(), ember.erfinv(ember.tensor(a[0])).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_threaded_input(dtype, path):
    # above the native loops' thread threshold; results independent of the split
    n = _native_small._PARALLEL_MIN + 1000
    y = np.random.default_rng(7).uniform(-1, 1, n).astype(dtype)
    got = ember.erfinv(ember.tensor(y)).numpy()
    _assert_ulp(got, torch.erfinv(torch.tensor(y)).numpy(), MAXULP[dtype])
    np.testing.assert_array_equal(got[:1000], ember.erfinv(ember.tensor(y[:1000])).numpy())


@pytest.mark.parametrize("dtype", [np.float16])
def test_half_input(dtype, path):
    y = np.random.default_rng(9).uniform(-0.999, 0.999, 500).astype(dtype)
    got = ember.erfinv(ember.tensor(y)).numpy()
    want = torch.erfinv(torch.tensor(y)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_max_ulp(got, want, maxulp=1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_matches_torch(dtype, path):
    rng = np.random.default_rng(11)
    a = rng.uniform(-0.999, 0.999, (5, 7)).astype(dtype)
    e = ember.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    g = rng.standard_normal((7, 5)).astype(dtype)
    ember.erfinv(e.t()).backward(ember.tensor(g))
    torch.erfinv(t.t()).backward(torch.tensor(g))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gradient_finite_differences(path):
    x = ember.tensor(np.random.default_rng(12).uniform(-0.95, 0.95, 6)).requires_grad_()
    assert ember.autograd.gradcheck(ember.erfinv, (x,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_matches_eager(dtype):
    if _native_small.lib() is None:
        pytest.skip("no C++ compiler")

    def f(x):
        return ember.erfinv(x) * 2.0

    y = _inputs(np.random.default_rng(13), dtype)[:1500]
    y[:6] = [0.0, -0.0, 1.0, -1.0, 1.25, np.nan]
    e = ember.tensor(y)
    got, eager = ember.compile(f)(e).numpy(), f(e).numpy()
    # the inductor's C++ code runs the same series: the same bits, NaNs and signed zeros
    np.testing.assert_array_equal(got, eager)
    assert np.array_equal(np.signbit(got), np.signbit(eager))
