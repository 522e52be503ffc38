"""ember.special's Bessel J0/J1/Y0/Y1, K0/K1 (plain and scaled) and Airy Ai (ember.ops.special_bessel).

Three kinds of check:

* against an independent 100-digit reference (the ascending / asymptotic series of
  ``ember.ops._bessel_gen`` evaluated pointwise in ``decimal``, not the Chebyshev tables): ember is
  accurate to a few ulps (relative; absolute ~1e-16 next to the zeros of the oscillating ones);
* against PyTorch 2.13: the K functions agree to ~1e-15 everywhere; PyTorch's J/Y/Ai are only
  ~1e-6 accurate near x = 5 (J/Y) and x = -2.2 (Ai) in float64 (checked against the reference and
  a spectrally accurate quadrature below), so those compare at 2e-6 absolute there and tightly past
  |x| = 20 (where the phase ``x - pi/4`` is rounded as PyTorch rounds it);
* identities (Wronskians) and PyTorch's edge values / dtype errors / no derivative.
"""
from __future__ import annotations

import math
from decimal import Decimal as D

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.special as es
from oracle import needs_torch, torch

NAMES = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai"]
EDGE = [0.0, -0.0, -1.0, -2.5, 1e-300, 1e-10, 0.5, 1.0, 2.0, 8.0, 30.0, 103.8, 103.95, 1e10, 1e300,
        -1e10, math.inf, -math.inf, math.nan]


def _rng(seed):
    return np.random.default_rng(seed)


def _e(name, x):
    return getattr(es, name)(ember.tensor(x)).numpy()


def _reference(name, x):
    import decimal

    from ember.ops import _bessel_gen as G
    with decimal.localcontext(G.CTX):
        return _reference_100(G, name, x)


def _reference_100(G, name, x):
    X = D(abs(x))
    if name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"):
        nu = int(name[-1])
        j, y = G.bessel_jy_series(X, nu)
        v = float(j if name[7] == "j" else y)
        return -v if (name == "bessel_j1" and x < 0) else v
    if "k" in name:
        _, k = G.bessel_ik_series(X, int(name[-1]))
        return float(k * X.exp()) if name.startswith("scaled") else float(k)
    return float(G.airy_series(D(x))[0])


@pytest.mark.parametrize("name", NAMES)
def test_against_high_precision_reference(name):
    rng = _rng(1)
    if name == "airy_ai":
        x = rng.uniform(-10, 12, 30)
    elif "y" in name or "k" in name:
        x = np.concatenate([np.exp(rng.uniform(-6, 0, 8)), rng.uniform(0.5, 18, 24)])
    else:
        x = rng.uniform(-18, 18, 30)
    ref = np.array([_reference(name, v) for v in x])
    got = _e(name, x)
    # relative to the local envelope of the function (absolute next to the zeros)
    env = np.abs(ref)
    if "bessel_j" in name or "bessel_y" in name:
        env = np.maximum(np.abs(ref), np.minimum(1.0, np.sqrt(2 / (math.pi * np.abs(x)))))
    if name == "airy_ai":
        # (past 0, exp(-zeta) carries zeta's rounding: relative error ~eps zeta, as in PyTorch)
        env = np.where(x > 0, np.abs(ref) * (1 + np.abs(x) ** 1.5), np.minimum(np.abs(x) ** -0.25, 1.0))
    np.testing.assert_array_less(np.abs(got - ref), 2e-15 * env + 1e-300)


def test_quadrature_cross_check():
    """J0, J1 by the trapezoid rule on Bessel's integral (exponentially accurate for a periodic
    integrand): independent of both ember's tables and the series."""
    x = _rng(2).uniform(0, 12, 50)
    t = (np.arange(400) + 0.5) * math.pi / 400
    j0 = np.cos(x[:, None] * np.sin(t)).mean(1)
    j1 = np.cos(t - x[:, None] * np.sin(t)).mean(1)
    np.testing.assert_allclose(_e("bessel_j0", x), j0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(_e("bessel_j1", x), j1, rtol=0, atol=1e-15)


def test_wronskians():
    x = np.exp(_rng(3).uniform(-3, 5, 200))
    w = _e("bessel_j1", x) * _e("bessel_y0", x) - _e("bessel_j0", x) * _e("bessel_y1", x)
    np.testing.assert_allclose(w, 2 / (math.pi * x), rtol=1e-13)
    i0, i1 = es.i0e(ember.tensor(x)).numpy(), es.i1e(ember.tensor(x)).numpy()
    w = i0 * _e("scaled_modified_bessel_k1", x) + i1 * _e("scaled_modified_bessel_k0", x)
    np.testing.assert_allclose(w, 1 / x, rtol=1e-14)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_against_torch_float64(name):
    rng = _rng(4)
    x = np.concatenate([rng.uniform(-12, 12, 400), np.exp(rng.uniform(-20, 20, 200)),
                        -np.exp(rng.uniform(-20, 20, 200))])
    e = _e(name, x)
    t = getattr(torch.special, name)(torch.tensor(x)).numpy()
    assert e.dtype == t.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(e), np.isnan(t))
    ok = ~np.isnan(t)
    if "k" in name:
        np.testing.assert_allclose(e[ok], t[ok], rtol=1e-14, atol=1e-300)
        return
    # PyTorch's own float64 error near x = 5 / x = -2.2 is ~1e-6
    np.testing.assert_allclose(e[ok], t[ok], rtol=0, atol=2e-6)
    big = ok & (np.abs(x) > 20)
    env = np.abs(x[big]) ** (-0.25 if name == "airy_ai" else -0.5)
    np.testing.assert_array_less(np.abs(e[big] - t[big]), 1e-13 * env + 1e-300)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_edges_and_float32(name):
    e = _e(name, np.array(EDGE))
    t = getattr(torch.special, name)(torch.tensor(EDGE, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-6 if name == "airy_ai" else 1e-300, equal_nan=True)
    ok = ~np.isnan(t)
    assert np.array_equal(np.signbit(e[ok]), np.signbit(t[ok]))
    # float32: PyTorch computes in float32, ember in float64 and rounds
    x = _rng(5).uniform(-15, 15, 300).astype(np.float32)
    e = getattr(es, name)(ember.tensor(x))
    t = getattr(torch.special, name)(torch.tensor(x))
    assert e.dtype == ember.float32 and t.dtype == torch.float32
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2e-5, atol=2e-5, equal_nan=True)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_dtypes_shapes_and_no_grad(name):
    fe, ft = getattr(es, name), getattr(torch.special, name)
    for dt, tdt in ((ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16), (ember.complex64, torch.complex64)):
        with pytest.raises(NotImplementedError) as ei:
            fe(ember.tensor([1.0]).to(dt))
        with pytest.raises(NotImplementedError) as ti:
            ft(torch.tensor([1.0]).to(tdt))
        assert str(ei.value) == str(ti.value)
    ints = [[1, 2, 3], [4, 5, 6]]
    e, t = fe(ember.tensor(ints)), ft(torch.tensor(ints))
    assert e.dtype == ember.float32 and e.shape == (2, 3)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2e-5, atol=2e-6)
    assert fe(ember.tensor(1.5, dtype=ember.float64)).shape == ()
    xe = ember.tensor([0.5, 3.0], requires_grad=True)
    xt = torch.tensor([0.5, 3.0], requires_grad=True)
    assert fe(xe).requires_grad is ft(xt).requires_grad is False
    assert fe(xe).grad_fn is None


def test_compiled_matches_eager():
    x = ember.tensor(_rng(6).uniform(0.1, 20, 32))

    def f(v):
        return (es.bessel_j0(v) + es.bessel_y1(v) + es.modified_bessel_k0(v) + es.scaled_modified_bessel_k1(v)
                + es.airy_ai(-v) + es.bessel_j1(v) * es.bessel_y0(v) + es.modified_bessel_k1(v))

    cf = ember.compile(f)
    np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-15)


@needs_torch
@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(NAMES), shape=st.lists(st.integers(0, 4), max_size=3),
       dtype=st.sampled_from(["float32", "float64", "int64"]), seed=st.integers(0, 2 ** 16))
def test_shapes_and_dtypes_hypothesis(name, shape, dtype, seed):
    x = _rng(seed).uniform(-30, 30, tuple(shape))
    x = x.astype(dtype) if dtype != "int64" else np.round(x).astype(np.int64)
    e = getattr(es, name)(ember.tensor(x))
    t = getattr(torch.special, name)(torch.tensor(x))
    assert tuple(e.shape) == tuple(t.shape) and str(t.dtype) == "torch." + str(e.dtype).split(".")[-1]
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2e-5, atol=2e-5, equal_nan=True)
