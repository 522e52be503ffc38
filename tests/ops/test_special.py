"""ember.special against torch.special: values, float64 gradients, and compiled against eager."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.special
from oracle import needs_torch, torch

pytestmark = needs_torch

R = np.random.default_rng(11)
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30])

UNARY = {
    "expit": R.standard_normal(20) * 5, "gammaln": R.uniform(0.1, 8, 20), "psi": R.uniform(0.1, 8, 20),
    "digamma": R.uniform(0.1, 8, 20), "exp2": R.standard_normal(20), "expm1": R.standard_normal(20),
    "log1p": R.uniform(-0.9, 3, 20), "erf": R.standard_normal(20), "erfc": R.standard_normal(20),
    "erfinv": R.uniform(-0.99, 0.99, 20), "logit": R.uniform(0.01, 0.99, 20), "i0": R.standard_normal(20) * 3,
    "sinc": R.standard_normal(20) * 3, "round": R.standard_normal(20) * 3,
    "entr": np.concatenate([R.uniform(0, 3, 16), [0.0, -1.0, np.nan, np.inf]]),
    "ndtr": np.concatenate([R.standard_normal(16) * 3, [0.0, np.inf, -np.inf, np.nan]]),
    "ndtri": np.concatenate([R.uniform(0.001, 0.999, 16), [0.0, 1.0, 0.5, 1.5]]),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_values_and_gradients(name, dtype):
    a = UNARY[name].astype(dtype)
    fe, ft = getattr(ember.special, name), getattr(torch.special, name)
    want = ft(torch.tensor(a)).numpy()
    got = fe(ember.tensor(a)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-10, atol=1e-6, equal_nan=True)
    if dtype == "float64" and name != "round":
        finite = np.isfinite(want) & np.isfinite(a) & (a != 0)
        xe = ember.tensor(a[finite], requires_grad=True)
        xt = torch.tensor(a[finite], requires_grad=True)
        fe(xe).sum().backward()
        ft(xt).sum().backward()
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_xlog1py_and_multigammaln():
    x = np.array([0.0, 1.5, -2.0, 0.0, 3.0])
    y = np.array([np.nan, 0.5, 2.0, 1.0, -0.5])
    np.testing.assert_allclose(ember.special.xlog1py(ember.tensor(x), ember.tensor(y)).numpy(),
                               torch.special.xlog1py(torch.tensor(x), torch.tensor(y)).numpy(), equal_nan=True)
    np.testing.assert_allclose(ember.special.xlog1py(2.0, ember.tensor(y[1:])).numpy(),
                               torch.special.xlog1py(2.0, torch.tensor(y[1:])).numpy())
    a = R.uniform(2.0, 6.0, 7)
    for p in (1, 2, 3):
        np.testing.assert_allclose(ember.special.multigammaln(ember.tensor(a), p).numpy(),
                                   torch.special.multigammaln(torch.tensor(a), p).numpy(), rtol=1e-10)
    with pytest.raises(RuntimeError):
        ember.special.multigammaln(ember.tensor([0.2]), 3)


def test_softmaxes_and_compiled():
    a = R.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(ember.special.log_softmax(ember.tensor(a), 1).numpy(),
                               torch.special.log_softmax(torch.tensor(a), 1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ember.special.softmax(ember.tensor(a), 0, dtype=ember.float64).numpy(),
                               torch.special.softmax(torch.tensor(a), 0, dtype=torch.float64).numpy(), rtol=1e-6)
    f = lambda x: ember.special.entr(x.abs()) + ember.special.ndtr(x) + ember.special.expit(x)  # noqa: E731
    x = ember.tensor(a)
    np.testing.assert_allclose(ember.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)
