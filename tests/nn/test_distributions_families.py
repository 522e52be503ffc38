"""The families added on top of the core set (Beta, Dirichlet, Poisson, Binomial, StudentT, ...)
against torch.distributions: log_prob / cdf / icdf / entropy / moments / KL values and their
gradients w.r.t. the parameters (float64, random parameters, broadcasting batch shapes); sample
moments against the analytic ones (ember's own generator, fixed seed); the implicit
reparameterisation gradients of Gamma/Beta/Dirichlet against torch's ``_standard_gamma_grad`` /
``_dirichlet_grad`` on the same draws; shapes, expand, enumerate_support and validation."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch

TOL = dict(rtol=1e-8, atol=1e-10)


def _gen(kind, shape, rng):
    lo, hi = {"pos": (0.5, 1.5), "pos2": (2.5, 4.0), "pos5": (4.5, 7.0), "prob": (0.1, 0.9), "small": (-0.3, 0.3),
              "conc": (0.4, 3.0)}.get(kind, (None, None))
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "simplex":
        p = rng.uniform(0.2, 1.0, shape)
        return p / p.sum(-1, keepdims=True)
    if kind == "count":
        return np.full(shape, 6.0)
    return rng.uniform(lo, hi, shape)


def _value(kind, shape, rng):
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "pos":
        return rng.uniform(0.1, 3.0, shape)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "big":
        return rng.uniform(4.0, 9.0, shape)
    if kind == "simplex":
        p = rng.uniform(0.1, 1.0, shape)
        return p / p.sum(-1, keepdims=True)
    if kind.startswith("int"):
        return rng.integers(0, int(kind[3:]) + 1, shape).astype(np.float64)
    if kind.startswith("counts"):              # a multinomial count vector summing to n
        n, k = (int(v) for v in kind[6:].split("_"))
        flat = rng.multinomial(n, np.ones(k) / k, size=int(np.prod(shape[:-1])))
        return flat.reshape(shape).astype(np.float64)
    if kind == "circle":
        return rng.uniform(-math.pi, math.pi, shape)
    if kind == "corr3":
        x = ember.tensor(rng.standard_normal(shape[:-2] + (3,)))
        return ember.distributions.transforms.CorrCholeskyTransform()(x).numpy()
    if kind == "gp":                           # inside every support of the GeneralizedPareto case
        return rng.uniform(0.35, 1.5, shape)
    raise AssertionError(kind)


ALL = ["log_prob", "entropy", "mean", "variance", "mode"]

# (name, {param: (kind, shape)}, build(D, **params) -> dist, value kind, quantities)
CASES = [
    ("LogNormal", {"loc": ("real", (3, 1)), "scale": ("pos", (4,))}, lambda D, loc, scale: D.LogNormal(loc, scale),
     "pos", ALL + ["cdf", "icdf"]),
    ("HalfNormal", {"scale": ("pos", (3, 4))}, lambda D, scale: D.HalfNormal(scale), "pos", ALL + ["cdf", "icdf"]),
    ("Cauchy", {"loc": ("real", (3, 1)), "scale": ("pos", (4,))}, lambda D, loc, scale: D.Cauchy(loc, scale),
     "real", ["log_prob", "entropy", "mode", "cdf", "icdf"]),
    ("HalfCauchy", {"scale": ("pos", (3, 4))}, lambda D, scale: D.HalfCauchy(scale), "pos",
     ["log_prob", "entropy", "cdf", "icdf", "mode"]),
    ("Gumbel", {"loc": ("real", (3, 1)), "scale": ("pos", (4,))}, lambda D, loc, scale: D.Gumbel(loc, scale),
     "real", ALL + ["cdf", "icdf"]),
    ("StudentT", {"df": ("conc", (3, 1)), "loc": ("real", (4,)), "scale": ("pos", (4,))},
     lambda D, df, loc, scale: D.StudentT(df, loc, scale), "real", ALL),
    ("Chi2", {"df": ("pos2", (3, 4))}, lambda D, df: D.Chi2(df), "pos", ALL),
    ("Beta", {"a": ("conc", (3, 1)), "b": ("conc", (4,))}, lambda D, a, b: D.Beta(a, b), "unit",
     ["log_prob", "entropy", "mean", "variance"]),
    ("Beta_mode", {"a": ("pos2", (3, 1)), "b": ("pos2", (4,))}, lambda D, a, b: D.Beta(a, b), "unit", ["mode"]),
    ("Dirichlet", {"c": ("conc", (3, 4))}, lambda D, c: D.Dirichlet(c), "simplex", ALL),
    # (torch's Poisson has no entropy: its ExponentialFamily entropy lacks the carrier measure)
    ("Poisson", {"rate": ("pos2", (3, 4))}, lambda D, rate: D.Poisson(rate), "int8",
     ["log_prob", "mean", "variance", "mode"]),
    ("Binomial_probs", {"n": ("count", (3, 4)), "p": ("prob", (3, 4))},
     lambda D, n, p: D.Binomial(n, probs=p), "int6", ALL),
    ("Binomial_logits", {"p": ("real", (3, 4))}, lambda D, p: D.Binomial(6, logits=p), "int6", ALL),
    ("Multinomial", {"p": ("simplex", (3, 4))}, lambda D, p: D.Multinomial(5, probs=p), "counts5_4",
     ["log_prob", "entropy", "mean", "variance"]),
    ("Multinomial_logits", {"p": ("real", (2, 3))}, lambda D, p: D.Multinomial(4, logits=p), "counts4_3",
     ["log_prob", "entropy"]),
    ("Geometric", {"p": ("prob", (3, 4))}, lambda D, p: D.Geometric(probs=p), "int7", ALL),
    ("Geometric_logits", {"p": ("real", (3, 4))}, lambda D, p: D.Geometric(logits=p), "int7", ALL),
    ("NegativeBinomial", {"n": ("pos2", (3, 1)), "p": ("prob", (4,))},
     lambda D, n, p: D.NegativeBinomial(n, probs=p), "int9", ["log_prob", "mean", "variance", "mode"]),
    ("Weibull", {"scale": ("pos", (3, 1)), "c": ("pos2", (4,))}, lambda D, scale, c: D.Weibull(scale, c),
     "pos", ALL + ["cdf", "icdf"]),
    ("Pareto", {"scale": ("pos", (3, 1)), "alpha": ("pos2", (4,))}, lambda D, scale, alpha: D.Pareto(scale, alpha),
     "big", ALL + ["cdf", "icdf"]),
    ("Kumaraswamy", {"a": ("conc", (3, 1)), "b": ("conc", (4,))}, lambda D, a, b: D.Kumaraswamy(a, b), "unit",
     ["log_prob", "entropy", "mean", "variance", "cdf", "icdf"]),
    ("ContinuousBernoulli", {"p": ("prob", (3, 4))}, lambda D, p: D.ContinuousBernoulli(probs=p), "unit",
     ["log_prob", "entropy", "mean", "variance", "cdf", "icdf"]),
    ("ContinuousBernoulli_logits", {"p": ("small", (3, 4))}, lambda D, p: D.ContinuousBernoulli(logits=p), "unit",
     ["log_prob", "entropy", "mean", "variance", "cdf"]),
    ("VonMises", {"loc": ("real", (3, 1)), "k": ("conc", (4,))}, lambda D, loc, k: D.VonMises(loc, k), "circle",
     ["log_prob", "mean", "variance", "mode"]),
    ("VonMises_large_k", {"loc": ("real", (3, 1)), "k": ("pos5", (4,))}, lambda D, loc, k: D.VonMises(loc, k),
     "circle", ["log_prob", "variance"]),
    ("FisherSnedecor", {"d1": ("pos5", (3, 1)), "d2": ("pos5", (4,))}, lambda D, d1, d2: D.FisherSnedecor(d1, d2),
     "pos", ["log_prob", "mean", "variance", "mode"]),
    ("InverseGamma", {"c": ("pos2", (3, 1)), "r": ("pos", (4,))}, lambda D, c, r: D.InverseGamma(c, r), "pos",
     ALL),
    ("LogisticNormal", {"loc": ("real", (3, 4)), "scale": ("pos", (4,))},
     lambda D, loc, scale: D.LogisticNormal(loc, scale), "simplex5", ["log_prob"]),
    ("LKJCholesky", {"c": ("conc", (2,))}, lambda D, c: D.LKJCholesky(3, c), "corr3", ["log_prob"]),
    ("LowRankMVN", {"loc": ("real", (2, 3)), "W": ("real", (3, 2)), "d": ("pos", (2, 3))},
     lambda D, loc, W, d: D.LowRankMultivariateNormal(loc, W, d), "real",
     ["log_prob", "entropy", "mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"]),
    ("RelaxedBernoulli", {"p": ("prob", (3, 4))},
     lambda D, p: D.RelaxedBernoulli(p.new_tensor(0.7) if hasattr(p, "new_tensor") else None, probs=p), "unit",
     ["log_prob"]),
    ("RelaxedOneHotCategorical", {"p": ("real", (3, 4))},
     lambda D, p: D.RelaxedOneHotCategorical(p.new_tensor(0.5), logits=p), "simplex", ["log_prob"]),
    ("MixtureSameFamily", {"w": ("real", (3, 2)), "loc": ("real", (3, 2)), "s": ("pos", (3, 2))},
     lambda D, w, loc, s: D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(loc, s)), "real",
     ["log_prob", "mean", "variance", "cdf"]),
    ("MixtureSameFamily_MVN", {"w": ("real", (2,)), "loc": ("real", (2, 3))},
     lambda D, w, loc: D.MixtureSameFamily(D.Categorical(logits=w), D.Independent(D.Normal(loc, 1.5), 1)), "real",
     ["log_prob", "mean", "variance"]),
    ("OneHotCategoricalStraightThrough", {"p": ("real", (3, 4))},
     lambda D, p: D.OneHotCategoricalStraightThrough(logits=p), "onehot", ["log_prob", "entropy", "mean"]),
]


def _eval(lib, case, seed, quantity):
    name, spec, build, vkind, _ = case
    rng = np.random.default_rng(seed)
    arrays = {p: _gen(kind, shape, rng) for p, (kind, shape) in spec.items()}
    ps = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
    dist = build(lib.distributions, **ps)
    if quantity in ("log_prob", "cdf"):
        shape = (2,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
        if vkind == "simplex5":
            v = _value("simplex", shape, rng)
        elif vkind == "onehot":
            v = np.eye(shape[-1])[rng.integers(0, shape[-1], shape[:-1])]
        else:
            v = _value(vkind, shape, rng)
        out = getattr(dist, quantity)(lib.tensor(v))
    elif quantity == "icdf":
        out = dist.icdf(lib.tensor(rng.uniform(0.05, 0.95, (2,) + tuple(dist.batch_shape))))
    elif quantity == "entropy":
        out = dist.entropy()
    else:
        out = getattr(dist, quantity)
    grads = {}
    if out.requires_grad:
        w = lib.tensor(rng.uniform(0.5, 1.5, tuple(out.shape)))
        finite = lib.isfinite(out.detach())
        loss = lib.where(finite, out * w, lib.zeros_like(out)).sum()
        gs = lib.autograd.grad(loss, list(ps.values()), allow_unused=True)
        grads = dict(zip(ps, gs))
    return out, grads


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(case):
    for i, quantity in enumerate(case[4]):
        oe, ge = _eval(ember, case, 20 + i, quantity)
        ot, gt = _eval(torch, case, 20 + i, quantity)
        what = f"{case[0]}.{quantity}"
        assert tuple(oe.shape) == tuple(ot.shape), what
        # (torch's Multinomial.entropy takes lgamma of an int64 total count: float32 precision)
        tol = dict(rtol=1e-6) if what.startswith("Multinomial") and quantity == "entropy" else TOL
        np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), err_msg=what, **tol)
        for p in gt:
            if gt[p] is None:
                assert ge[p] is None or not np.any(ge[p].numpy()), f"{what} d/d{p}"
            else:
                assert ge[p] is not None, f"{what} d/d{p}"
                np.testing.assert_allclose(ge[p].numpy(), gt[p].numpy(), err_msg=f"{what} d/d{p}", rtol=1e-7,
                                           atol=1e-9)
    with pytest.raises(NotImplementedError):
        ember.distributions.Poisson(ember.tensor([2.0])).entropy()


def test_generalized_pareto_matches_torch_in_float32():
    # (torch's GeneralizedPareto compares with a float32 zero: it only runs in float32)
    rng = np.random.default_rng(4)
    loc, scale, conc = rng.uniform(-0.3, 0.3, (3, 1)), rng.uniform(0.5, 1.5, (4,)), rng.uniform(-0.2, 0.4, (3, 4))
    v = rng.uniform(0.35, 1.5, (2, 3, 4))
    u = rng.uniform(0.05, 0.95, (2, 3, 4))
    res = []
    for lib in (ember, torch):
        ps = [lib.tensor(a.astype(np.float32), requires_grad=True) for a in (loc, scale, conc)]
        d = lib.distributions.GeneralizedPareto(*ps)
        outs = [d.log_prob(lib.tensor(v.astype(np.float32))), d.cdf(lib.tensor(v.astype(np.float32))),
                d.icdf(lib.tensor(u.astype(np.float32))), d.entropy(), d.mean, d.variance, d.mode]
        g = lib.autograd.grad(sum(o.sum() for o in outs[:4]), ps)
        res.append((outs, g))
    for a, b in zip(res[0][0] + list(res[0][1]), res[1][0] + list(res[1][1])):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5, atol=2e-5)


def test_kumaraswamy_mode_is_the_true_mode():
    # torch 2.x's Kumaraswamy.mode is NaN for every a, b > 1 (log of a negative number); ember
    # returns the maximiser of the density
    a, b = ember.tensor([2.0, 3.0, 0.5], dtype=ember.float64), ember.tensor([4.0, 1.5, 2.0], dtype=ember.float64)
    d = ember.distributions.Kumaraswamy(a, b)
    m = d.mode.numpy()
    np.testing.assert_allclose(m[:2], ((a.numpy() - 1) / (a.numpy() * b.numpy() - 1))[:2] ** (1 / a.numpy()[:2]))
    assert np.isnan(m[2])
    for i in range(2):   # the density is maximal there
        xs = ember.tensor(np.linspace(0.01, 0.99, 981))
        lp = ember.distributions.Kumaraswamy(a[i], b[i]).log_prob(xs).numpy()
        assert abs(xs.numpy()[lp.argmax()] - m[i]) < 2e-3


# -------------------------------------------------------------------------- KL divergence
KL_CASES = [
    ("Beta", {"a": ("conc", (3, 4)), "b": ("conc", (4,)), "c": ("conc", (4,)), "d": ("conc", (3, 1))},
     lambda D, a, b, c, d: (D.Beta(a, b), D.Beta(c, d))),
    ("Binomial", {"p": ("prob", (3, 4)), "q": ("prob", (4,))},
     lambda D, p, q: (D.Binomial(5, probs=p), D.Binomial(5, probs=q))),
    ("ContinuousBernoulli", {"p": ("prob", (3, 4)), "q": ("prob", (4,))},
     lambda D, p, q: (D.ContinuousBernoulli(p), D.ContinuousBernoulli(q))),
    ("Dirichlet", {"p": ("conc", (3, 4)), "q": ("conc", (4,))}, lambda D, p, q: (D.Dirichlet(p), D.Dirichlet(q))),
    ("Geometric", {"p": ("prob", (3, 4)), "q": ("prob", (4,))}, lambda D, p, q: (D.Geometric(p), D.Geometric(q))),
    ("Gumbel", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "c": ("real", (4,)), "d": ("pos", (3, 4))},
     lambda D, a, b, c, d: (D.Gumbel(a, b), D.Gumbel(c, d))),
    ("HalfNormal", {"p": ("pos", (3, 4)), "q": ("pos", (4,))}, lambda D, p, q: (D.HalfNormal(p), D.HalfNormal(q))),
    ("Pareto", {"a": ("pos", (3, 4)), "b": ("pos2", (4,)), "c": ("pos", (4,)), "d": ("pos2", (3, 4))},
     lambda D, a, b, c, d: (D.Pareto(a, b), D.Pareto(c, d))),
    ("Poisson", {"p": ("pos2", (3, 4)), "q": ("pos", (4,))}, lambda D, p, q: (D.Poisson(p), D.Poisson(q))),
    ("Cauchy", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "c": ("real", (4,)), "d": ("pos", (3, 4))},
     lambda D, a, b, c, d: (D.Cauchy(a, b), D.Cauchy(c, d))),
    ("Chi2_Gamma", {"p": ("pos2", (3, 4)), "q": ("pos2", (4,))}, lambda D, p, q: (D.Chi2(p), D.Chi2(q))),
    ("LogNormal", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "c": ("real", (4,)), "d": ("pos", (3, 4))},
     lambda D, a, b, c, d: (D.LogNormal(a, b), D.LogNormal(c, d))),
    ("LowRankMVN", {"a": ("real", (2, 3)), "W": ("real", (3, 2)), "d": ("pos", (3,)), "b": ("real", (3,)),
                    "V": ("real", (2, 3, 1)), "e": ("pos", (2, 3))},
     lambda D, a, W, d, b, V, e: (D.LowRankMultivariateNormal(a, W, d), D.LowRankMultivariateNormal(b, V, e))),
    ("LowRankMVN_MVN", {"a": ("real", (2, 3)), "W": ("real", (3, 2)), "d": ("pos", (3,)), "b": ("real", (3,))},
     lambda D, a, W, d, b: (D.LowRankMultivariateNormal(a, W, d),
                            D.MultivariateNormal(b, covariance_matrix=W @ W.mT + 2 * (W.new_ones(3)).diag()))),
    ("MVN_LowRankMVN", {"a": ("real", (2, 3)), "W": ("real", (3, 2)), "d": ("pos", (3,)), "b": ("real", (3,))},
     lambda D, a, W, d, b: (D.MultivariateNormal(b, scale_tril=(W @ W.mT + d.diag()).tril()),
                            D.LowRankMultivariateNormal(a, W, d))),
    ("Bernoulli_Poisson", {"p": ("prob", (3, 4)), "q": ("pos", (4,))},
     lambda D, p, q: (D.Bernoulli(p), D.Poisson(q))),
    ("Beta_ContinuousBernoulli", {"a": ("conc", (3, 4)), "b": ("conc", (4,)), "q": ("prob", (4,))},
     lambda D, a, b, q: (D.Beta(a, b), D.ContinuousBernoulli(q))),
    ("Beta_Exponential", {"a": ("conc", (3, 4)), "b": ("conc", (4,)), "q": ("pos", (4,))},
     lambda D, a, b, q: (D.Beta(a, b), D.Exponential(q))),
    ("Beta_Gamma", {"a": ("conc", (3, 4)), "b": ("conc", (4,)), "c": ("pos2", (4,)), "r": ("pos", (4,))},
     lambda D, a, b, c, r: (D.Beta(a, b), D.Gamma(c, r))),
    ("Beta_Normal", {"a": ("conc", (3, 4)), "b": ("conc", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Beta(a, b), D.Normal(l, s))),
    ("Exponential_Gamma", {"p": ("pos", (3, 4)), "c": ("pos2", (4,)), "r": ("pos", (4,))},
     lambda D, p, c, r: (D.Exponential(p), D.Gamma(c, r))),
    ("Exponential_Gumbel", {"p": ("pos", (3, 4)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, p, l, s: (D.Exponential(p), D.Gumbel(l, s))),
    ("Exponential_Normal", {"p": ("pos", (3, 4)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, p, l, s: (D.Exponential(p), D.Normal(l, s))),
    ("Gamma_Exponential", {"c": ("pos2", (3, 4)), "r": ("pos", (4,)), "q": ("pos", (4,))},
     lambda D, c, r, q: (D.Gamma(c, r), D.Exponential(q))),
    ("Gamma_Gumbel", {"c": ("pos2", (3, 4)), "r": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, c, r, l, s: (D.Gamma(c, r), D.Gumbel(l, s))),
    ("Gamma_Normal", {"c": ("pos2", (3, 4)), "r": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, c, r, l, s: (D.Gamma(c, r), D.Normal(l, s))),
    ("Gumbel_Normal", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Gumbel(a, b), D.Normal(l, s))),
    ("Laplace_Normal", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Laplace(a, b), D.Normal(l, s))),
    ("Normal_Gumbel", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Normal(a, b), D.Gumbel(l, s))),
    ("Normal_Laplace", {"a": ("real", (3, 4)), "b": ("pos", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Normal(a, b), D.Laplace(l, s))),
    ("Pareto_Exponential", {"a": ("pos", (3, 4)), "b": ("pos2", (4,)), "q": ("pos", (4,))},
     lambda D, a, b, q: (D.Pareto(a, b), D.Exponential(q))),
    ("Pareto_Gamma", {"a": ("pos", (3, 4)), "b": ("pos2", (4,)), "c": ("pos2", (4,)), "r": ("pos", (4,))},
     lambda D, a, b, c, r: (D.Pareto(a, b), D.Gamma(c, r))),
    ("Pareto_Normal", {"a": ("pos", (3, 4)), "b": ("pos2", (4,)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, a, b, l, s: (D.Pareto(a, b), D.Normal(l, s))),
    ("Uniform_Beta", {"lo": ("prob", (3, 4)), "c": ("conc", (4,)), "d": ("conc", (4,))},
     lambda D, lo, c, d: (D.Uniform(lo * 0.5, lo * 0.5 + 0.4), D.Beta(c, d))),
    ("Uniform_Exponential", {"lo": ("pos", (3, 4)), "q": ("pos", (4,))},
     lambda D, lo, q: (D.Uniform(lo, lo + 1.0), D.Exponential(q))),
    ("Uniform_Gamma", {"lo": ("pos", (3, 4)), "c": ("pos2", (4,)), "r": ("pos", (4,))},
     lambda D, lo, c, r: (D.Uniform(lo, lo + 1.0), D.Gamma(c, r))),
    ("Uniform_Gumbel", {"lo": ("real", (3, 4)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, lo, l, s: (D.Uniform(lo, lo + 1.0), D.Gumbel(l, s))),
    ("Uniform_Normal", {"lo": ("real", (3, 4)), "l": ("real", (4,)), "s": ("pos", (4,))},
     lambda D, lo, l, s: (D.Uniform(lo, lo + 1.0), D.Normal(l, s))),
    ("Uniform_Pareto", {"lo": ("pos2", (3, 4)), "s": ("pos", (4,)), "a": ("pos2", (4,))},
     lambda D, lo, s, a: (D.Uniform(lo, lo + 1.0), D.Pareto(s, a))),
]


def _kl(lib, case, seed=3):
    _, spec, build = case
    rng = np.random.default_rng(seed)
    arrays = {p: _gen(kind, shape, rng) for p, (kind, shape) in spec.items()}
    ps = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
    p, q = build(lib.distributions, **ps)
    out = lib.distributions.kl_divergence(p, q)
    w = lib.tensor(rng.uniform(0.5, 1.5, tuple(out.shape)))
    finite = lib.isfinite(out.detach())
    gs = lib.autograd.grad(lib.where(finite, out * w, lib.zeros_like(out)).sum(), list(ps.values()),
                           allow_unused=True)
    return out, dict(zip(ps, gs))


@pytest.mark.parametrize("case", KL_CASES, ids=[c[0] for c in KL_CASES])
def test_kl_divergence_values_and_gradients_match_torch(case):
    oe, ge = _kl(ember, case)
    ot, gt = _kl(torch, case)
    assert tuple(oe.shape) == tuple(ot.shape)
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), err_msg=f"kl {case[0]}", rtol=1e-8,
                               atol=1e-9)
    for k in gt:
        if gt[k] is not None:
            np.testing.assert_allclose(ge[k].numpy(), gt[k].numpy(), err_msg=f"kl {case[0]} d/d{k}", rtol=1e-7,
                                       atol=1e-9)


def test_kl_infinities_and_unsupported_pairs():
    D = ember.distributions
    kl = D.kl_divergence(D.Pareto(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 3.0])),
                         D.Pareto(ember.tensor([1.5, 1.5]), ember.tensor([3.0, 3.0])))
    assert np.isinf(kl.numpy()[0]) and np.isfinite(kl.numpy()[1])
    kl = D.kl_divergence(D.Binomial(6, probs=ember.tensor([0.3])), D.Binomial(5, probs=ember.tensor([0.3])))
    assert np.isinf(kl.numpy()).all()
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(D.Binomial(4, probs=ember.tensor([0.3])), D.Binomial(5, probs=ember.tensor([0.3])))
    with pytest.raises(NotImplementedError):   # different exponential families
        D.kl_divergence(D.Poisson(ember.tensor([1.0])), D.Dirichlet(ember.tensor([[1.0, 2.0]])))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.VonMises(0.0, 1.0), D.VonMises(0.0, 2.0))
    # supports that do not nest: +inf, as torch
    for lib in (ember, torch):
        E = lib.distributions
        for p, q in [(E.Normal(lib.zeros(2), lib.ones(2)), E.Exponential(lib.ones(2))),
                     (E.Gamma(lib.ones(3), lib.ones(3)), E.Beta(lib.ones(3), lib.ones(3))),
                     (E.Poisson(lib.ones(2)), E.Bernoulli(lib.ones(2) / 2))]:
            kl = E.kl_divergence(p, q)
            assert tuple(kl.shape) == tuple(p.batch_shape) and bool(lib.isinf(kl).all())


# ------------------------------------------------------------------------------ sampling
SAMPLE_CASES = [
    ("LogNormal", lambda D: D.LogNormal(ember.tensor([0.2, -0.5]), ember.tensor([0.3, 0.6]))),
    ("HalfNormal", lambda D: D.HalfNormal(ember.tensor([0.5, 2.0]))),
    ("Gumbel", lambda D: D.Gumbel(ember.tensor([1.0, -1.0]), ember.tensor([0.5, 2.0]))),
    ("StudentT", lambda D: D.StudentT(ember.tensor([6.0, 9.0]), ember.tensor([1.0, -1.0]), ember.tensor([0.5, 2.0]))),
    ("Chi2", lambda D: D.Chi2(ember.tensor([0.7, 5.0]))),
    ("Beta", lambda D: D.Beta(ember.tensor([0.3, 4.0]), ember.tensor([2.0, 0.8]))),
    ("Dirichlet", lambda D: D.Dirichlet(ember.tensor([0.3, 2.0, 5.0]))),
    ("Poisson", lambda D: D.Poisson(ember.tensor([0.4, 7.0]))),
    ("Binomial", lambda D: D.Binomial(ember.tensor([10.0, 3.0]), probs=ember.tensor([0.3, 0.8]))),
    ("Multinomial", lambda D: D.Multinomial(7, probs=ember.tensor([0.2, 0.5, 0.3]))),
    ("Geometric", lambda D: D.Geometric(probs=ember.tensor([0.3, 0.8]))),
    ("NegativeBinomial", lambda D: D.NegativeBinomial(ember.tensor([2.5, 6.0]), probs=ember.tensor([0.3, 0.6]))),
    ("Weibull", lambda D: D.Weibull(ember.tensor([1.0, 2.0]), ember.tensor([1.5, 3.0]))),
    ("Pareto", lambda D: D.Pareto(ember.tensor([1.0, 2.0]), ember.tensor([5.0, 6.0]))),
    ("Kumaraswamy", lambda D: D.Kumaraswamy(ember.tensor([0.7, 3.0]), ember.tensor([2.0, 1.5]))),
    ("ContinuousBernoulli", lambda D: D.ContinuousBernoulli(probs=ember.tensor([0.2, 0.5, 0.9]))),
    ("FisherSnedecor", lambda D: D.FisherSnedecor(ember.tensor([8.0, 12.0]), ember.tensor([15.0, 20.0]))),
    ("InverseGamma", lambda D: D.InverseGamma(ember.tensor([6.0, 9.0]), ember.tensor([2.0, 1.0]))),
    ("GeneralizedPareto", lambda D: D.GeneralizedPareto(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 0.5]),
                                                        ember.tensor([0.1, -0.3]))),
    ("LowRankMVN", lambda D: D.LowRankMultivariateNormal(ember.tensor([1.0, -1.0, 0.0]),
                                                         ember.tensor([[1.0], [0.5], [-0.3]]),
                                                         ember.tensor([0.5, 1.0, 0.2]))),
    ("MixtureSameFamily", lambda D: D.MixtureSameFamily(D.Categorical(probs=ember.tensor([0.3, 0.7])),
                                                        D.Normal(ember.tensor([-2.0, 1.0]), ember.tensor([0.5, 1.0])))),
    ("VonMises", lambda D: D.VonMises(ember.tensor([0.5, -2.0]), ember.tensor([4.0, 10.0]))),
    ("OneHotCategoricalStraightThrough",
     lambda D: D.OneHotCategoricalStraightThrough(probs=ember.tensor([0.1, 0.3, 0.6]))),
]


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c[0] for c in SAMPLE_CASES])
def test_sample_moments_support_and_seeding(case):
    dist = case[1](ember.distributions)
    n = 20000
    ember.manual_seed(123)
    x = dist.sample((n,))
    ember.manual_seed(123)
    assert np.array_equal(dist.sample((n,)).numpy(), x.numpy())
    assert tuple(x.shape) == (n,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    assert not x.requires_grad
    assert bool(dist.support.check(x).all()), case[0]
    xs = x.double().numpy()
    mean, var = dist.mean.double().numpy(), dist.variance.double().numpy()
    if case[0] == "VonMises":      # circular mean and variance
        z = np.exp(1j * xs).mean(0)
        np.testing.assert_allclose(np.angle(z), mean, atol=0.02)
        np.testing.assert_allclose(1 - np.abs(z), var, rtol=0.06, atol=3e-3)
        return
    np.testing.assert_allclose(xs.mean(0), mean, atol=5 * np.sqrt(var.max() / n) + 1e-3)
    np.testing.assert_allclose(xs.var(0), var, rtol=0.08, atol=2e-3)


def test_lkj_and_relaxed_samples_lie_in_their_support():
    D = ember.distributions
    ember.manual_seed(0)
    L = D.LKJCholesky(4, ember.tensor([0.5, 3.0])).sample((500,))
    assert tuple(L.shape) == (500, 2, 4, 4) and bool(D.constraints.corr_cholesky.check(L).all())
    # larger concentration: correlations concentrate near 0
    C = (L @ L.mT).numpy()
    off = np.abs(C[..., 0, 1])
    assert off[:, 1].mean() < off[:, 0].mean()
    rb = D.RelaxedBernoulli(ember.tensor(0.3), probs=ember.tensor([0.2, 0.8])).rsample((4000,))
    assert bool(((rb > 0) & (rb < 1)).all())
    np.testing.assert_allclose((rb.numpy() > 0.5).mean(0), [0.2, 0.8], atol=0.03)
    ro = D.RelaxedOneHotCategorical(ember.tensor(0.2, dtype=ember.float64),
                                    probs=ember.tensor([0.1, 0.3, 0.6], dtype=ember.float64)).rsample((4000,))
    assert bool(D.constraints.simplex.check(ro).all())
    np.testing.assert_allclose(np.bincount(ro.numpy().argmax(-1), minlength=3) / 4000, [0.1, 0.3, 0.6], atol=0.03)
    ln = D.LogisticNormal(ember.tensor([0.3, -0.5]), ember.tensor([0.5, 1.0])).sample((10,))
    assert tuple(ln.shape) == (10, 3) and bool(D.constraints.simplex.check(ln).all())


# ------------------------------------------------------------------- reparameterisation
def test_implicit_gamma_and_dirichlet_gradients_match_torch_on_the_same_draws():
    from ember.ops.sampling_extra import dirichlet_grad, standard_gamma_grad
    rng = np.random.default_rng(0)
    for a in (0.05, 0.7, 1.0, 3.3, 9.0, 40.0):
        x = np.maximum(rng.standard_gamma(a, 400), 1e-300)
        alpha = np.full_like(x, a)
        got = standard_gamma_grad(ember.tensor(alpha), ember.tensor(x)).numpy()
        want = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
        # torch's fitted approximation is good to ~1e-3 relative; ember's is exact to float64
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-12)
    for a, b in ((0.2, 0.3), (0.8, 3.0), (2.0, 5.0), (7.0, 9.0), (30.0, 0.4)):
        x = np.clip(rng.beta(a, b, 400), 1e-12, 1 - 1e-12)
        al, tot = np.full_like(x, a), np.full_like(x, a + b)
        got = dirichlet_grad(ember.tensor(x), ember.tensor(al), ember.tensor(tot)).numpy()
        want = torch._dirichlet_grad(torch.tensor(x), torch.tensor(al), torch.tensor(tot)).numpy()
        np.testing.assert_allclose(got, want, rtol=3e-3, atol=1e-12)


def test_implicit_gradient_is_the_quantile_derivative():
    # d x / d alpha at a fixed CDF value, by central differences of the (independent) numpy
    # quantile of the incomplete gamma function: P(alpha, x(alpha)) = u
    from ember.ops.sampling_extra import np_standard_gamma_grad
    mpmath = pytest.importorskip("mpmath")
    for a, x in ((0.3, 0.05), (2.5, 1.7), (2.5, 6.0), (50.0, 47.0)):
        u = mpmath.gammainc(a, 0, x, regularized=True)
        h = 1e-6
        xp = mpmath.findroot(lambda t: mpmath.gammainc(a + h, 0, t, regularized=True) - u, x)
        xm = mpmath.findroot(lambda t: mpmath.gammainc(a - h, 0, t, regularized=True) - u, x)
        np.testing.assert_allclose(np_standard_gamma_grad(a, x), float((xp - xm) / (2 * h)), rtol=1e-7)


def test_rsample_gradients_are_unbiased():
    """E[d rsample / d theta] = d E[X] / d theta, statistically, for the implicit ones."""
    D = ember.distributions
    ember.manual_seed(7)
    n = 20000
    conc = ember.tensor([0.4, 2.0, 6.0], requires_grad=True)
    rate = ember.tensor([1.5, 0.7, 2.0], requires_grad=True)
    x = D.Gamma(conc, rate).rsample((n,))
    x.mean(0).sum().backward()
    # d(c/r)/dc = 1/r, d(c/r)/dr = -c/r^2
    np.testing.assert_allclose(conc.grad.numpy(), 1 / rate.detach().numpy(), rtol=0.03)
    np.testing.assert_allclose(rate.grad.numpy(), -(conc / rate ** 2).detach().numpy(), rtol=0.03)
    c1 = ember.tensor([0.5, 3.0], requires_grad=True)
    c0 = ember.tensor([2.0, 1.5], requires_grad=True)
    D.Beta(c1, c0).rsample((n,)).mean(0).sum().backward()
    s = (c1 + c0).detach().numpy()
    np.testing.assert_allclose(c1.grad.numpy(), c0.detach().numpy() / s ** 2, rtol=0.05)
    np.testing.assert_allclose(c0.grad.numpy(), -c1.detach().numpy() / s ** 2, rtol=0.05)
    cd = ember.tensor([0.5, 2.0, 4.0], requires_grad=True)
    w = ember.tensor([1.0, -2.0, 0.5])
    (D.Dirichlet(cd).rsample((n,)) * w).sum(-1).mean().backward()
    c = cd.detach().numpy()
    want = (w.numpy() - (w.numpy() * c).sum() / c.sum()) / c.sum()     # d/dc of <w, c / sum c>
    np.testing.assert_allclose(cd.grad.numpy(), want, rtol=0.05, atol=0.01)
    # Chi2 / StudentT / FisherSnedecor / InverseGamma rsample through the Gamma one
    df = ember.tensor([3.0, 8.0], requires_grad=True)
    D.Chi2(df).rsample((n,)).mean(0).sum().backward()
    np.testing.assert_allclose(df.grad.numpy(), [1.0, 1.0], rtol=0.03)
    for make in (lambda t: D.StudentT(t), lambda t: D.FisherSnedecor(t, t + 1.0), lambda t: D.InverseGamma(t, t),
                 lambda t: D.Kumaraswamy(t, t), lambda t: D.Weibull(t, t), lambda t: D.LogNormal(t, t),
                 lambda t: D.LowRankMultivariateNormal(t, t.unsqueeze(-1), t),
                 lambda t: D.ContinuousBernoulli(t / 10), lambda t: D.GeneralizedPareto(t, t, t / 10),
                 lambda t: D.RelaxedBernoulli(t[0], probs=t / 10), lambda t: D.Cauchy(t, t)):
        t = ember.tensor([3.0, 8.0], requires_grad=True)
        d = make(t)
        assert d.has_rsample
        d.rsample((5,)).sum().backward()
        assert t.grad is not None and np.all(np.isfinite(t.grad.numpy()))


def test_straight_through_gradient_is_that_of_probs():
    p = ember.tensor([0.2, 0.3, 0.5], requires_grad=True)
    d = ember.distributions.OneHotCategoricalStraightThrough(probs=p)
    ember.manual_seed(0)
    s = d.rsample((3,))
    assert set(np.unique(s.detach().numpy())) <= {0.0, 1.0}
    (s * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), 3 * (np.array([1.0, 2.0, 3.0]) - (np.array([1, 2, 3]) * p.detach().numpy()).sum()) / 1.0, rtol=1e-6)


# ------------------------------------------------------------------------ shapes & checks
def test_shapes_expand_and_enumerate_support():
    D = ember.distributions
    b = D.Binomial(ember.tensor([3.0, 3.0]), probs=ember.tensor([0.2, 0.7]))
    e = b.enumerate_support()
    assert tuple(e.shape) == (4, 2) and np.array_equal(e[:, 0].numpy(), [0, 1, 2, 3])
    np.testing.assert_allclose(b.log_prob(e).exp().sum(0).numpy(), [1.0, 1.0], rtol=1e-6)
    with pytest.raises(NotImplementedError, match="Inhomogeneous"):
        D.Binomial(ember.tensor([3.0, 4.0]), probs=ember.tensor([0.2, 0.7])).enumerate_support()
    for d in [D.Beta(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 1.0])), D.Poisson(ember.tensor([1.0, 2.0])),
              D.StudentT(ember.tensor([1.0, 2.0])), D.LogNormal(ember.zeros(2), ember.ones(2)),
              D.Gumbel(ember.zeros(2), ember.ones(2)), D.Weibull(ember.ones(2), ember.ones(2)),
              D.Pareto(ember.ones(2), ember.ones(2)), D.Kumaraswamy(ember.ones(2), ember.ones(2)),
              D.VonMises(ember.zeros(2), ember.ones(2)), D.Geometric(ember.tensor([0.2, 0.5])),
              D.NegativeBinomial(ember.tensor([2.0, 3.0]), ember.tensor([0.2, 0.5])),
              D.ContinuousBernoulli(ember.tensor([0.2, 0.5])), D.FisherSnedecor(ember.ones(2), ember.ones(2)),
              D.InverseGamma(ember.ones(2), ember.ones(2)), D.HalfNormal(ember.ones(2)),
              D.HalfCauchy(ember.ones(2)), D.Cauchy(ember.zeros(2), ember.ones(2)), D.Chi2(ember.ones(2)),
              D.GeneralizedPareto(ember.zeros(2), ember.ones(2), ember.zeros(2))]:
        ex = d.expand((3, 2))
        assert ex.batch_shape == ember.Size([3, 2]) and type(ex) is type(d), type(d).__name__
        assert tuple(ex.sample().shape) == (3, 2)
    for d in [D.Dirichlet(ember.ones(2, 3)), D.Multinomial(4, probs=ember.ones(2, 3) / 3),
              D.LowRankMultivariateNormal(ember.zeros(2, 3), ember.ones(3, 1), ember.ones(3)),
              D.RelaxedOneHotCategorical(ember.tensor(0.5), probs=ember.ones(2, 3) / 3),
              D.MixtureSameFamily(D.Categorical(probs=ember.ones(2, 4) / 4),
                                  D.Independent(D.Normal(ember.zeros(2, 4, 3), 1.0), 1)),
              D.LKJCholesky(3, ember.ones(2))]:
        ex = d.expand((5, 2))
        assert ex.batch_shape == ember.Size([5, 2]) and ex.event_shape == d.event_shape, type(d).__name__
        assert tuple(ex.sample().shape) == (5, 2) + tuple(d.event_shape)
    assert D.Beta(2.0, 3.0).batch_shape == ember.Size([])
    assert D.Poisson(2.0).batch_shape == ember.Size([])
    assert isinstance(D.Gamma(1.0, 1.0), D.ExponentialFamily) and isinstance(D.Beta(1.0, 1.0), D.ExponentialFamily)
    assert repr(D.MixtureSameFamily(D.Categorical(probs=ember.ones(2) / 2), D.Normal(ember.zeros(2), 1.0))
                ).startswith("MixtureSameFamily(")


@pytest.mark.parametrize("make", [
    lambda D, m: D.Beta(m.tensor([1.0, -1.0]), m.tensor([1.0, 1.0])),
    lambda D, m: D.Dirichlet(m.tensor([[1.0, 0.0]])),
    lambda D, m: D.Poisson(m.tensor([-0.5])),
    lambda D, m: D.Binomial(m.tensor([2.5]), probs=m.tensor([0.5])),
    lambda D, m: D.Binomial(m.tensor([2.0]), probs=m.tensor([1.5])),
    lambda D, m: D.StudentT(m.tensor([0.0])),
    lambda D, m: D.Cauchy(m.tensor([0.0]), m.tensor([-1.0])),
    lambda D, m: D.Geometric(m.tensor([0.0])),
    lambda D, m: D.NegativeBinomial(m.tensor([-1.0]), m.tensor([0.5])),
    lambda D, m: D.NegativeBinomial(m.tensor([1.0]), m.tensor([1.0])),
    lambda D, m: D.Multinomial(3, m.tensor([0.5, -0.1, 0.6])),
    lambda D, m: D.LowRankMultivariateNormal(m.zeros(2), m.ones(2, 1), m.tensor([1.0, -1.0])),
    lambda D, m: D.LKJCholesky(3, m.tensor([-1.0])),
    lambda D, m: D.LKJCholesky(1, m.tensor([1.0])),
    lambda D, m: D.Dirichlet(m.tensor(1.0)),
    lambda D, m: D.ContinuousBernoulli(m.tensor([1.5]), validate_args=True),
    lambda D, m: D.MixtureSameFamily(D.Categorical(m.ones(3) / 3), D.Normal(m.zeros(2), m.ones(2))),
    lambda D, m: D.MixtureSameFamily(D.Normal(m.zeros(2), m.ones(2)), D.Normal(m.zeros(2), m.ones(2))),
])
def test_invalid_parameters_raise_value_error_like_torch(make):
    with pytest.raises(ValueError):
        make(torch.distributions, torch)
    with pytest.raises(ValueError):
        make(ember.distributions, ember)


@pytest.mark.parametrize("make, value", [
    (lambda D, m: D.Beta(m.tensor([1.0]), m.tensor([2.0])), [1.5]),
    (lambda D, m: D.Poisson(m.tensor([1.0])), [0.5]),
    (lambda D, m: D.Binomial(5, probs=m.tensor([0.3])), [6.0]),
    (lambda D, m: D.Dirichlet(m.tensor([1.0, 2.0])), [0.3, 0.3]),
    (lambda D, m: D.LogNormal(m.tensor([0.0]), m.tensor([1.0])), [-1.0]),
    (lambda D, m: D.Pareto(m.tensor([2.0]), m.tensor([1.0])), [1.5]),
    (lambda D, m: D.Multinomial(3, probs=m.tensor([0.5, 0.5])), [2.0, 2.0]),
    (lambda D, m: D.LKJCholesky(2, m.tensor(1.0)), [[1.0, 0.0], [0.5, 0.5]]),
])
def test_out_of_support_values_raise_like_torch(make, value):
    for lib in (torch, ember):
        with pytest.raises(ValueError):
            make(lib.distributions, lib).log_prob(lib.tensor(value))


def _beta_log_prob(a, b, x):
    return ember.distributions.Beta(a, b, validate_args=False).log_prob(x)


def test_compiled_beta_log_prob_and_gamma_rsample():
    rng = np.random.default_rng(0)
    a = ember.tensor(rng.uniform(0.5, 3, (4,)), requires_grad=True)
    b = ember.tensor(rng.uniform(0.5, 3, (4,)), requires_grad=True)
    x = ember.tensor(rng.uniform(0.1, 0.9, (3, 4)))
    ember.dynamo.reset()
    cf = ember.compile(_beta_log_prob)
    got, want = cf(a, b, x), _beta_log_prob(a, b, x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    for g1, g2 in zip(ember.autograd.grad(got.sum(), [a, b]), ember.autograd.grad(want.sum(), [a, b])):
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-10)

    def draw(c):
        return ember.distributions.Gamma(c, 1.0, validate_args=False).rsample((3,))
    cd = ember.compile(draw)
    c = ember.tensor([0.5, 2.0], dtype=ember.float64, requires_grad=True)
    ember.manual_seed(3)
    s1 = cd(c)
    ember.manual_seed(3)
    s2 = draw(c)
    np.testing.assert_array_equal(s1.detach().numpy(), s2.detach().numpy())   # drawn at run time, not frozen
    assert not np.array_equal(cd(c).detach().numpy(), s1.detach().numpy())
    g1, = ember.autograd.grad(s1.sum(), c)
    g2, = ember.autograd.grad(s2.sum(), c)
    np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-10)


@pytest.mark.parametrize("make", [
    lambda D, m: (D.Normal(m.tensor([0.3, -1.0]), m.tensor([1.2, 0.4])), D.Normal(m.tensor([0.1]), m.tensor([0.7]))),
    lambda D, m: (D.Bernoulli(m.tensor([0.3, 0.8])), D.Bernoulli(m.tensor([0.6, 0.1]))),
    lambda D, m: (D.Exponential(m.tensor([0.3, 2.0])), D.Exponential(m.tensor([0.6]))),
    lambda D, m: (D.Poisson(m.tensor([0.3, 2.0])), D.Poisson(m.tensor([1.6]))),
    lambda D, m: (D.Gamma(m.tensor([0.3, 2.0]), m.tensor([1.5])), D.Gamma(m.tensor([1.6]), m.tensor([0.5, 2.0]))),
    lambda D, m: (D.Beta(m.tensor([0.3, 2.0]), m.tensor([1.5])), D.Beta(m.tensor([1.6]), m.tensor([0.5, 2.0]))),
    lambda D, m: (D.Dirichlet(m.tensor([[0.3, 2.0, 1.0]])), D.Dirichlet(m.tensor([1.6, 0.5, 2.0]))),
    lambda D, m: (D.ContinuousBernoulli(m.tensor([0.3, 0.7])), D.ContinuousBernoulli(m.tensor([0.45]))),
], ids=["Normal", "Bernoulli", "Exponential", "Poisson", "Gamma", "Beta", "Dirichlet", "ContinuousBernoulli"])
def test_exponential_family_bregman_kl_matches_torch_and_the_closed_form(make):
    res = []
    for lib in (ember, torch):
        p, q = make(lib.distributions, lib)
        assert isinstance(p, lib.distributions.ExponentialFamily)
        res.append((lib.distributions.kl._kl_expfamily_expfamily(p, q), lib.distributions.kl_divergence(p, q)))
    np.testing.assert_allclose(res[0][0].detach().numpy(), res[1][0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][0].detach().numpy(), res[0][1].detach().numpy(), rtol=1e-4, atol=1e-5)
