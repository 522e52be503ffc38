"""Gamma/Chi2/InverseGamma ``cdf`` through ``special.gammainc``, the ContinuousBernoulli <->
Exponential/Normal/Uniform KL pairs, the KL registry against PyTorch's, and the shared
probs-or-logits scaffolding of Binomial / NegativeBinomial / Geometric -- all against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ed
from oracle import needs_torch, torch

pytestmark = needs_torch
td = torch.distributions if torch is not None else None


def _rng(seed):
    return np.random.default_rng(seed)


def _close(e, t, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def _both(arrays, dtype="float64", grad=()):
    e = [ember.tensor(a.astype(dtype), requires_grad=i in grad) for i, a in enumerate(arrays)]
    t = [torch.tensor(a.astype(dtype), requires_grad=i in grad) for i, a in enumerate(arrays)]
    return e, t


# ------------------------------------------------------------------------------------------ cdf
CDF = {
    "Gamma": (lambda m, a, b: m.distributions.Gamma(a, b), 2),
    "Chi2": (lambda m, a: m.distributions.Chi2(a), 1),
    "InverseGamma": (lambda m, a, b: m.distributions.InverseGamma(a, b), 2),
}


@pytest.mark.parametrize("name", sorted(CDF))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cdf_values_and_value_gradient(name, dtype):
    make, n = CDF[name]
    rng = _rng(1)
    params = [rng.uniform(0.2, 8.0, (3, 5)) for _ in range(n)]
    value = rng.uniform(0.01, 12.0, (4, 1, 5))       # broadcasts against the batch shape
    (pe, pt) = _both(params, dtype)
    ve, vt = _both([value], dtype, grad=(0,))
    ce = make(ember, *pe).cdf(ve[0])
    ct = make(torch, *pt).cdf(vt[0])
    assert tuple(ce.shape) == tuple(ct.shape) == (4, 3, 5)
    tol = (1e-8, 1e-12) if dtype == "float64" else (1e-4, 1e-6)   # (PyTorch's igamma is ~1e-9)
    _close(ce, ct, *tol)
    ge, = ember.autograd.grad(ce.sum(), ve[0])
    gt, = torch.autograd.grad(ct.sum(), vt[0])
    _close(ge, gt, *tol)


def test_gamma_cdf_rate_gradient_and_concentration_error():
    rng = _rng(2)
    a, b, v = rng.uniform(0.5, 4, 6), rng.uniform(0.5, 3, 6), rng.uniform(0.1, 5, 6)
    (ae, be), (at, bt) = _both([a, b], grad=(1,))
    ge, = ember.autograd.grad(ed.Gamma(ae, be).cdf(ember.tensor(v)).sum(), be)
    gt, = torch.autograd.grad(td.Gamma(at, bt).cdf(torch.tensor(v)).sum(), bt)
    _close(ge, gt, 1e-8)
    # no derivative w.r.t. the concentration, as PyTorch
    ac = ember.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for 'igamma"):
        ember.autograd.grad(ed.Gamma(ac, ember.tensor(b)).cdf(ember.tensor(v)).sum(), ac)
    at = torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for 'igamma"):
        torch.autograd.grad(td.Gamma(at, torch.tensor(b)).cdf(torch.tensor(v)).sum(), at)


def test_cdf_edges_and_validation():
    g = ed.Gamma(ember.tensor([2.0, 0.5]), ember.tensor([1.0, 3.0]))
    gt = td.Gamma(torch.tensor([2.0, 0.5]), torch.tensor([1.0, 3.0]))
    for v in (0.0, 1e-30, 1e3, float("inf")):
        _close(g.cdf(ember.tensor([v, v])), gt.cdf(torch.tensor([v, v])), 1e-6)
    with pytest.raises(ValueError):
        gt.cdf(torch.tensor([-1.0, 1.0]))
    with pytest.raises(ValueError):
        g.cdf(ember.tensor([-1.0, 1.0]))
    # a Python number value
    _close(ed.Chi2(ember.tensor(3.0)).cdf(2.5), td.Chi2(torch.tensor(3.0)).cdf(torch.tensor(2.5)), 1e-6)


def test_families_with_cdf_match_torch():
    """Every family for which PyTorch defines cdf/icdf (directly or inherited) has it in ember."""
    def defines(cls, m):
        return any(m in b.__dict__ for b in cls.__mro__ if b.__name__ not in ("Distribution", "object"))
    for name in td.__all__:
        c = getattr(td, name)
        if not isinstance(c, type) or not hasattr(ed, name):
            continue
        for m in ("cdf", "icdf"):
            assert defines(c, m) == defines(getattr(ed, name), m), (name, m)


# ------------------------------------------------------------------------------------------ KL
def test_kl_registry_matches_torch():
    from ember.distributions import kl as ekl
    tk = {(a.__name__, b.__name__) for a, b in td.kl._KL_REGISTRY}
    ek = {(a.__name__, b.__name__) for a, b in ekl._KL_REGISTRY}
    assert tk == ek


def _cb_params(rng, n):
    p = rng.uniform(0.02, 0.98, n)
    p[:3] = [0.5, 0.4995, 0.5004]     # inside the Taylor region around 1/2
    return p


KL_PAIRS = {
    "cb_exponential": (lambda m, a, b: (m.distributions.ContinuousBernoulli(a), m.distributions.Exponential(b)),
                       lambda r, n: [_cb_params(r, n), r.uniform(0.1, 4, n)]),
    "cb_normal": (lambda m, a, b, c: (m.distributions.ContinuousBernoulli(a), m.distributions.Normal(b, c)),
                  lambda r, n: [_cb_params(r, n), r.normal(size=n), r.uniform(0.1, 3, n)]),
    "cb_uniform": (lambda m, a, b, c: (m.distributions.ContinuousBernoulli(a), m.distributions.Uniform(b, c)),
                   lambda r, n: [_cb_params(r, n), r.uniform(-2, 0.4, n), r.uniform(0.6, 3, n)]),
    "uniform_cb": (lambda m, a, b, c: (m.distributions.Uniform(b, c), m.distributions.ContinuousBernoulli(a)),
                   lambda r, n: [_cb_params(r, n), r.uniform(-0.3, 0.45, n), r.uniform(0.55, 1.3, n)]),
}


@pytest.mark.parametrize("pair", sorted(KL_PAIRS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_kl_pairs_values_and_gradients(pair, dtype):
    make, gen = KL_PAIRS[pair]
    arrays = gen(_rng(3), 40)
    grad = tuple(range(len(arrays)))
    e, t = _both(arrays, dtype, grad=grad)
    ke = ed.kl_divergence(*make(ember, *e))
    kt = td.kl_divergence(*make(torch, *t))
    tol = (1e-10, 1e-12) if dtype == "float64" else (1e-4, 1e-5)   # (float32: cancellation in -H + ...)
    _close(ke, kt, *tol)
    assert np.isinf(kt.detach().numpy()).any() or pair in ("cb_exponential", "cb_normal")
    fin = ~np.isinf(kt.detach().numpy())
    ge = ember.autograd.grad((ke[ember.tensor(fin)]).sum(), e)
    gt = torch.autograd.grad((kt[torch.tensor(fin)]).sum(), t)
    for a, b in zip(ge, gt):
        # (float32: the CB moments' gradients cancel near probs = 1/2; both libraries are only
        # ~1e-2 accurate there, e.g. 0.072 / 0.081 against 0.078 in float64)
        _close(a, b, *(tol if dtype == "float64" else (1e-3, 2e-2)))


def test_kl_uniform_boundary_is_finite():
    """KL(CB || U(0, 1)) and KL(U(0, 1) || CB) are finite (-H(CB) and the cross-entropy): ember
    keeps them finite where PyTorch's ContinuousBernoulli/Uniform pairs answer inf at the edges."""
    cb = ed.ContinuousBernoulli(ember.tensor([0.3, 0.8], dtype=ember.float64))
    u = ed.Uniform(ember.tensor([0.0, 0.0], dtype=ember.float64), ember.tensor([1.0, 1.0], dtype=ember.float64))
    np.testing.assert_allclose(ed.kl_divergence(cb, u).numpy(), -cb.entropy().numpy(), rtol=1e-14)
    # numerical check of the cross-entropy: KL(U || CB) = -E_U[log q] - H(U), H(U(0,1)) = 0
    x = (np.arange(20000) + 0.5) / 20000
    lq = cb.log_prob(ember.tensor(np.stack([x, x], 1))).numpy()
    np.testing.assert_allclose(ed.kl_divergence(u, cb).numpy(), -lq.mean(0), rtol=1e-8)


# ------------------------------------------------------------------- probs-or-logits families
FAMILIES = {
    "Binomial": (lambda m, p=None, l=None, **k: m.distributions.Binomial(7, probs=p, logits=l, **k)),
    "NegativeBinomial": (lambda m, p=None, l=None, **k: m.distributions.NegativeBinomial(3.5, probs=p, logits=l, **k)),
    "Geometric": (lambda m, p=None, l=None, **k: m.distributions.Geometric(probs=p, logits=l, **k)),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("by", ["probs", "logits"])
def test_probs_or_logits_scaffolding(name, by):
    make = FAMILIES[name]
    rng = _rng(4)
    raw = rng.uniform(0.1, 0.9, (3, 1)) if by == "probs" else rng.normal(size=(3, 1))
    kw_e = {"p" if by == "probs" else "l": ember.tensor(raw)}
    kw_t = {"p" if by == "probs" else "l": torch.tensor(raw)}
    de, dt = make(ember, **kw_e), make(torch, **kw_t)
    assert tuple(de.batch_shape) == tuple(dt.batch_shape) == (3, 1)
    assert by in de.__dict__ and ({"probs", "logits"} - {by}).pop() not in de.__dict__
    _close(de.probs, dt.probs)
    _close(de.logits, dt.logits)
    xe, xt = de.expand((2, 3, 4)), dt.expand((2, 3, 4))
    assert type(xe) is type(de) and tuple(xe.batch_shape) == (2, 3, 4)
    assert set(k for k in ("probs", "logits") if k in xe.__dict__) == set(
        k for k in ("probs", "logits") if k in xt.__dict__)
    v = rng.integers(0, 6, (2, 3, 4)).astype(np.float64)
    _close(xe.log_prob(ember.tensor(v)), xt.log_prob(torch.tensor(v)), 1e-10)
    _close(xe.mean, xt.mean)
    if hasattr(de, "total_count"):
        assert xe.total_count.shape == (2, 3, 4) and xe.total_count.dtype == ember.float64
    assert xe._validate_args == de._validate_args
    # a Python number parameter
    num = 0.3 if by == "probs" else -0.4
    de = make(ember, **{"p" if by == "probs" else "l": num})
    dt = make(torch, **{"p" if by == "probs" else "l": num})
    assert tuple(de.batch_shape) == tuple(dt.batch_shape) == ()
    _close(de.mean, dt.mean, 1e-6)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_probs_or_logits_errors(name):
    make = FAMILIES[name]
    for kw_e, kw_t in (({}, {}), ({"p": ember.tensor([0.5]), "l": ember.tensor([0.0])},
                                  {"p": torch.tensor([0.5]), "l": torch.tensor([0.0])})):
        with pytest.raises(ValueError) as te:
            make(torch, **kw_t)
        with pytest.raises(ValueError) as ee:
            make(ember, **kw_e)
        assert str(ee.value) == str(te.value)
    with pytest.raises(ValueError):
        make(torch, p=torch.tensor([1.5]), validate_args=True)
    with pytest.raises(ValueError):
        make(ember, p=ember.tensor([1.5]), validate_args=True)
