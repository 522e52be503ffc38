"""ember.distributions.Wishart against torch.distributions.Wishart: the three parameterisations,
moments, log_prob / entropy values and gradients, expand, the exponential-family KL, errors and
warnings; Bartlett rsample checked by its moments and its pathwise gradients (the random streams
differ from PyTorch's)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch
EW = ember.distributions.Wishart


def _spd(rng, batch, p, jitter=1.0):
    A = rng.normal(size=batch + (p, p))
    return A @ np.swapaxes(A, -1, -2) / p + jitter * np.eye(p)


def _param(kind, S):
    if kind == "covariance_matrix":
        return S
    if kind == "precision_matrix":
        return np.linalg.inv(S)
    return np.linalg.cholesky(S)


def _pair(kind, df, S, dtype="float64", grad=False):
    M = _param(kind, S).astype(dtype)
    de = ember.tensor(df.astype(dtype), requires_grad=grad) if isinstance(df, np.ndarray) else df
    dt = torch.tensor(df.astype(dtype), requires_grad=grad) if isinstance(df, np.ndarray) else df
    Me, Mt = ember.tensor(M, requires_grad=grad), torch.tensor(M, requires_grad=grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (EW(de, **{kind: Me}), torch.distributions.Wishart(dt, **{kind: Mt}), (de, Me), (dt, Mt))


def _close(e, t, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


KINDS = ["covariance_matrix", "precision_matrix", "scale_tril"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_values_match_torch(kind, dtype):
    rng = np.random.default_rng(1)
    p = 4
    S = _spd(rng, (3,), p)
    df = rng.uniform(3.2, 9.0, (2, 1))            # broadcasts with the (3,) matrix batch
    e, t, _, _ = _pair(kind, df, S, dtype)
    assert tuple(e.batch_shape) == tuple(t.batch_shape) == (2, 3)
    assert tuple(e.event_shape) == tuple(t.event_shape) == (p, p)
    tol = (1e-10, 1e-10) if dtype == "float64" else (2e-4, 1e-4)
    for q in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril", "df"):
        _close(getattr(e, q), getattr(t, q), *tol)
    X = _spd(rng, (5, 2, 3), p).astype(dtype)
    _close(e.log_prob(ember.tensor(X)), t.log_prob(torch.tensor(X)), *tol)
    _close(e.entropy(), t.entropy(), *tol)


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_match_torch(kind):
    rng = np.random.default_rng(2)
    S = _spd(rng, (2,), 3)
    df = rng.uniform(2.5, 7.0, (2,))
    e, t, (dfe, Me), (dft, Mt) = _pair(kind, df, S, grad=True)
    X = _spd(rng, (4, 2), 3)
    for f in (lambda d, X: d.log_prob(X).sum(), lambda d, X: d.entropy().sum(),
              lambda d, X: (d.mean * d.variance).sum()):
        ge = ember.autograd.grad(f(e, ember.tensor(X)), [dfe, Me], allow_unused=True, retain_graph=True)
        gt = torch.autograd.grad(f(t, torch.tensor(X)), [dft, Mt], allow_unused=True, retain_graph=True)
        for a, b in zip(ge, gt):
            if b is None:
                assert a is None or not np.any(a.numpy())
            else:
                _close(a, b, 1e-8, 1e-10)


def test_number_df_and_expand():
    rng = np.random.default_rng(3)
    S = _spd(rng, (), 3)
    e, t, _, _ = _pair("covariance_matrix", 4.5, S)
    assert tuple(e.batch_shape) == () and e.df.dtype == ember.float64
    _close(e.mean, t.mean)
    _close(e.entropy(), t.entropy())
    ex, tx = e.expand((2, 5)), t.expand((2, 5))
    assert type(ex) is EW and tuple(ex.batch_shape) == (2, 5)
    X = _spd(rng, (2, 5), 3)
    _close(ex.log_prob(ember.tensor(X)), tx.log_prob(torch.tensor(X)))
    assert ex.covariance_matrix.shape == (2, 5, 3, 3) and ex._validate_args == e._validate_args
    assert ex.rsample((7,)).shape == (7, 2, 5, 3, 3)
    # a number df with batched matrices: mean/mode/variance work (PyTorch's view of the 0-d df fails)
    eb = EW(6.0, covariance_matrix=ember.tensor(_spd(rng, (4,), 3)))
    np.testing.assert_allclose(eb.mean.numpy(), 6.0 * eb.covariance_matrix.numpy())
    assert eb.variance.shape == eb.mode.shape == (4, 3, 3)


def test_exponential_family_kl_matches_torch():
    rng = np.random.default_rng(4)
    e1, t1, _, _ = _pair("scale_tril", rng.uniform(3, 6, (2,)), _spd(rng, (2,), 3))
    e2, t2, _, _ = _pair("covariance_matrix", rng.uniform(3, 6, (2,)), _spd(rng, (2,), 3))
    _close(ember.distributions.kl_divergence(e1, e2), torch.distributions.kl_divergence(t1, t2), 1e-8)


def test_constraints_and_support_repr():
    rng = np.random.default_rng(5)
    e, t, _, _ = _pair("covariance_matrix", 4.0, _spd(rng, (), 3))
    assert {k: repr(v) for k, v in e.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
    assert repr(e.support) == repr(t.support) and e.has_rsample


def test_errors_and_warnings():
    eye = np.eye(3)
    cases = [
        (dict(df=4.0, covariance_matrix=eye, scale_tril=eye), AssertionError),
        (dict(df=4.0), AssertionError),
        (dict(df=4.0, covariance_matrix=np.ones(3)), ValueError),
        (dict(df=1.5, covariance_matrix=eye), ValueError),
        (dict(df=np.array([3.0, 1.0]), covariance_matrix=eye), ValueError),
        (dict(df=4.0, covariance_matrix=-eye, validate_args=True), ValueError),
        (dict(df=4.0, scale_tril=np.triu(np.ones((3, 3))), validate_args=True), ValueError),
    ]
    for kw, exc in cases:
        ke = {k: (ember.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        kt = {k: (torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        with pytest.raises(exc) as ti:
            torch.distributions.Wishart(**kt)
        with pytest.raises(exc) as ei:
            EW(**ke)
        if exc is AssertionError or "df" in str(ti.value) or "two-dimensional" in str(ti.value):
            if "tensor(" not in str(ti.value):
                assert str(ei.value) == str(ti.value)
        else:
            assert str(ei.value).split(" of distribution")[0] == str(ti.value).split(" of distribution")[0]
    # outside the support
    d = EW(4.0, covariance_matrix=ember.tensor(eye), validate_args=True)
    with pytest.raises(ValueError, match="within the support"):
        d.log_prob(ember.tensor(-eye))
    # low df: PyTorch's warning
    with pytest.warns(UserWarning, match="Low df values detected"):
        EW(2.5, covariance_matrix=ember.tensor(eye))


def test_rsample_moments_and_no_spurious_warning():
    ember.manual_seed(0)
    rng = np.random.default_rng(6)
    S = _spd(rng, (2,), 3)
    df = np.array([3.5, 7.0])
    d = EW(ember.tensor(df), covariance_matrix=ember.tensor(S))
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # PyTorch warns "Singular sample detected." here
        X = d.rsample((20000,)).numpy()
    assert X.shape == (20000, 2, 3, 3)
    np.testing.assert_allclose(X, np.swapaxes(X, -1, -2), atol=1e-12)
    assert (np.linalg.eigvalsh(X) > 0).all()
    mean, var = d.mean.numpy(), d.variance.numpy()
    se = np.sqrt(var / X.shape[0])
    assert (np.abs(X.mean(0) - mean) < 5 * se).all()
    np.testing.assert_allclose(X.var(0), var, rtol=0.08)
    # sample() is rsample without the graph
    assert not d.sample((3,)).requires_grad


def test_rsample_pathwise_gradients():
    """E[d trace(X) / dL] = 2 df L and E[d trace(X) / d df] = trace(L L^T) (pathwise, Bartlett)."""
    ember.manual_seed(1)
    rng = np.random.default_rng(7)
    L = np.linalg.cholesky(_spd(rng, (), 3))
    Le = ember.tensor(L, requires_grad=True)
    dfe = ember.tensor(5.0, dtype=ember.float64, requires_grad=True)
    X = EW(dfe, scale_tril=Le).rsample((40000,))
    n = X.shape[0]
    tr = X.diagonal(dim1=-2, dim2=-1).sum(-1).sum() / n
    gL, gdf = ember.autograd.grad(tr, [Le, dfe])
    np.testing.assert_allclose(np.tril(gL.numpy()), np.tril(2 * 5.0 * L), rtol=0.05, atol=0.05)
    np.testing.assert_allclose(gdf.numpy(), np.trace(L @ L.T), rtol=0.05)


def test_log_prob_integrates_like_chi2_in_one_dimension():
    """p = 1: Wishart(df, s^2) is s^2 chi2(df); its log density is chi2's shifted by the scale."""
    x = np.linspace(0.1, 9.0, 25)
    d = EW(ember.tensor(3.3, dtype=ember.float64), covariance_matrix=ember.tensor([[2.0]], dtype=ember.float64))
    lp = d.log_prob(ember.tensor(x[:, None, None])).numpy()
    chi = ember.distributions.Chi2(ember.tensor(3.3, dtype=ember.float64)).log_prob(ember.tensor(x / 2.0)).numpy()
    np.testing.assert_allclose(lp, chi - np.log(2.0), rtol=1e-12)


def test_singular_samples_are_redrawn():
    """p - 1 < df < p in float32: Bartlett draws are often singular; rsample warns and redraws
    them (up to max_try_correction times), and with no corrections they stay."""
    ember.manual_seed(2)
    with pytest.warns(UserWarning, match="Low df"):
        d = EW(ember.tensor([2.001, 2.5]), covariance_matrix=ember.eye(3))
    with pytest.warns(UserWarning, match="Singular sample detected"):
        raw = d.rsample((500,), max_try_correction=0)
    n_raw = int((~d.support.check(raw)).any(-1).sum())
    with pytest.warns(UserWarning, match="Singular sample detected"):
        fixed = d.rsample((500,))
    n_fixed = int((~d.support.check(fixed)).any(-1).sum())
    assert n_raw > 50 and n_fixed < n_raw / 20
