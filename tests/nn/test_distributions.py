"""ember.distributions against torch.distributions: log_prob / entropy / moments / kl values and
their gradients w.r.t. the parameters (float32 and float64, broadcasting batch shapes), sample
statistics (ember's own generator, so only distributions are compared), argument validation,
and a compiled log_prob."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch

TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}


# ---------------------------------------------------------------- parameter generators
def _gen(kind, shape, rng):
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "pos":
        return rng.uniform(0.5, 1.5, shape)
    if kind == "neg":
        return -rng.uniform(0.5, 1.5, shape)
    if kind == "neg2":
        return -rng.uniform(1.6, 2.5, shape)
    if kind == "pos2":
        return rng.uniform(1.6, 2.5, shape)
    if kind == "prob":
        return rng.uniform(0.1, 0.9, shape)
    if kind == "tril":
        a = np.tril(rng.standard_normal(shape)) * 0.3
        n = shape[-1]
        a[..., np.arange(n), np.arange(n)] = rng.uniform(0.5, 1.5, shape[:-1])
        return a
    if kind == "spd":
        a = rng.standard_normal(shape)
        return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    raise AssertionError(kind)


def _value(kind, shape, rng):
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "pos":
        return rng.uniform(0.1, 3.0, shape)
    if kind == "inner":                      # inside every Uniform(neg, pos) of the cases
        return rng.uniform(-0.5, 0.5, shape)
    if kind == "binary":
        return (rng.uniform(size=shape) < 0.5).astype(np.float64)
    if kind.startswith("int"):
        return rng.integers(0, int(kind[3:]), shape)
    if kind.startswith("onehot"):
        k = int(kind[6:])
        return np.eye(k)[rng.integers(0, k, shape[:-1])]
    raise AssertionError(kind)


def _build(lib, spec, arrays, dtype):
    ps = {}
    for name, arr in arrays.items():
        t = lib.tensor(arr.astype(dtype))
        ps[name] = t.requires_grad_()
    return ps


def _compare(e, t, dtype, what):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), err_msg=what, **TOL[dtype])


# (name, {param: (kind, shape)}, build(D, **params) -> dist, value kind or None, quantities)
CASES = [
    ("Normal", {"loc": ("real", (3, 1)), "scale": ("pos", (4,))},
     lambda D, loc, scale: D.Normal(loc, scale), "real",
     ["log_prob", "entropy", "mean", "variance", "stddev", "mode", "cdf"]),
    ("Normal_number_scale", {"loc": ("real", (3,))},
     lambda D, loc: D.Normal(loc, 2.0), "real", ["log_prob", "entropy", "variance"]),
    ("Uniform", {"low": ("neg", (3, 1)), "high": ("pos", (4,))},
     lambda D, low, high: D.Uniform(low, high), "inner",
     ["log_prob", "entropy", "mean", "variance", "stddev", "cdf"]),
    ("Bernoulli_probs", {"probs": ("prob", (3, 4))},
     lambda D, probs: D.Bernoulli(probs=probs), "binary", ["log_prob", "entropy", "mean", "variance"]),
    ("Bernoulli_logits", {"logits": ("real", (3, 4))},
     lambda D, logits: D.Bernoulli(logits=logits), "binary", ["log_prob", "entropy", "mean", "variance"]),
    ("Categorical_probs", {"probs": ("pos", (3, 5))},
     lambda D, probs: D.Categorical(probs=probs), "int5", ["log_prob", "entropy"]),
    ("Categorical_logits", {"logits": ("real", (3, 5))},
     lambda D, logits: D.Categorical(logits=logits), "int5", ["log_prob", "entropy", "mode"]),
    ("OneHotCategorical", {"logits": ("real", (3, 5))},
     lambda D, logits: D.OneHotCategorical(logits=logits), "onehot5",
     ["log_prob", "entropy", "mean", "variance", "mode"]),
    ("Exponential", {"rate": ("pos", (3, 4))},
     lambda D, rate: D.Exponential(rate), "pos", ["log_prob", "entropy", "mean", "variance", "stddev", "cdf"]),
    ("Laplace", {"loc": ("real", (3, 1)), "scale": ("pos", (4,))},
     lambda D, loc, scale: D.Laplace(loc, scale), "real",
     ["log_prob", "entropy", "mean", "variance", "stddev", "cdf"]),
    ("Gamma", {"concentration": ("pos2", (3, 1)), "rate": ("pos", (4,))},
     lambda D, concentration, rate: D.Gamma(concentration, rate), "pos",
     ["log_prob", "entropy", "mean", "variance", "mode"]),
    ("MVN_scale_tril", {"loc": ("real", (2, 3)), "scale_tril": ("tril", (3, 3))},
     lambda D, loc, scale_tril: D.MultivariateNormal(loc, scale_tril=scale_tril), "real",
     ["log_prob", "entropy", "mean", "variance", "covariance_matrix", "precision_matrix"]),
    ("MVN_covariance", {"loc": ("real", (3,)), "covariance_matrix": ("spd", (2, 3, 3))},
     lambda D, loc, covariance_matrix: D.MultivariateNormal(loc, covariance_matrix=covariance_matrix), "real",
     ["log_prob", "entropy", "variance", "scale_tril"]),
    ("MVN_precision", {"loc": ("real", (2, 3)), "precision_matrix": ("spd", (3, 3))},
     lambda D, loc, precision_matrix: D.MultivariateNormal(loc, precision_matrix=precision_matrix), "real",
     ["log_prob", "entropy", "variance"]),
    ("Independent_Normal", {"loc": ("real", (3, 4)), "scale": ("pos", (3, 4))},
     lambda D, loc, scale: D.Independent(D.Normal(loc, scale), 1), "real", ["log_prob", "entropy", "mean"]),
]


def _eval(lib, case, dtype, seed, quantity):
    name, spec, build, vkind, _ = case
    rng = np.random.default_rng(seed)
    arrays = {p: _gen(kind, shape, rng) for p, (kind, shape) in spec.items()}
    ps = _build(lib, spec, arrays, dtype)
    dist = build(lib.distributions, **ps)
    if quantity in ("log_prob", "cdf"):
        shape = (2,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
        v = _value(vkind, shape, rng)
        v = lib.tensor(v) if vkind.startswith("int") else lib.tensor(v.astype(dtype))
        out = getattr(dist, quantity)(v)
    elif quantity == "entropy":
        out = dist.entropy()
    else:
        out = getattr(dist, quantity)
    grads = {}
    if out.requires_grad:
        w = lib.tensor(rng.uniform(0.5, 1.5, tuple(out.shape)).astype(dtype))
        (out * w).sum().backward()
        grads = {p: t.grad for p, t in ps.items()}
    return out, grads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(case, dtype):
    for i, quantity in enumerate(case[4]):
        oe, ge = _eval(ember, case, dtype, seed=10 + i, quantity=quantity)
        ot, gt = _eval(torch, case, dtype, seed=10 + i, quantity=quantity)
        assert tuple(oe.shape) == tuple(ot.shape), quantity
        assert str(oe.dtype).split(".")[-1] == str(ot.dtype).split(".")[-1], quantity
        _compare(oe, ot, dtype, f"{case[0]}.{quantity}")
        assert set(ge) == set(gt)
        for p in gt:
            assert (ge[p] is None) == (gt[p] is None), f"{case[0]}.{quantity} grad {p}"
            if gt[p] is not None:
                _compare(ge[p], gt[p], dtype, f"{case[0]}.{quantity} d/d{p}")


# -------------------------------------------------------------------------- KL divergence
KL_CASES = [
    ("Normal", {"pl": ("real", (3, 1)), "ps": ("pos", (4,)), "ql": ("real", (4,)), "qs": ("pos", (3, 1))},
     lambda D, pl, ps, ql, qs: (D.Normal(pl, ps), D.Normal(ql, qs))),
    ("Categorical", {"p": ("real", (3, 5)), "q": ("pos", (5,))},
     lambda D, p, q: (D.Categorical(logits=p), D.Categorical(probs=q))),
    ("OneHotCategorical", {"p": ("pos", (3, 5)), "q": ("real", (3, 5))},
     lambda D, p, q: (D.OneHotCategorical(probs=p), D.OneHotCategorical(logits=q))),
    # (torch's Bernoulli-Bernoulli KL masks with q's unbroadcast shape, so the shapes agree here)
    ("Bernoulli", {"p": ("prob", (3, 4)), "q": ("real", (3, 4))},
     lambda D, p, q: (D.Bernoulli(probs=p), D.Bernoulli(logits=q))),
    ("Uniform", {"pl": ("neg", (3, 4)), "ph": ("pos", (3, 4)), "ql": ("neg2", (4,)), "qh": ("pos2", (3, 1))},
     lambda D, pl, ph, ql, qh: (D.Uniform(pl, ph), D.Uniform(ql, qh))),
    ("Exponential", {"p": ("pos", (3, 4)), "q": ("pos", (4,))},
     lambda D, p, q: (D.Exponential(p), D.Exponential(q))),
    ("Laplace", {"pl": ("real", (3, 4)), "ps": ("pos", (4,)), "ql": ("real", (4,)), "qs": ("pos", (3, 4))},
     lambda D, pl, ps, ql, qs: (D.Laplace(pl, ps), D.Laplace(ql, qs))),
    ("Gamma", {"pc": ("pos2", (3, 4)), "pr": ("pos", (4,)), "qc": ("pos", (4,)), "qr": ("pos2", (3, 4))},
     lambda D, pc, pr, qc, qr: (D.Gamma(pc, pr), D.Gamma(qc, qr))),
    ("MVN", {"pl": ("real", (2, 3)), "pt": ("tril", (3, 3)), "ql": ("real", (3,)), "qt": ("tril", (2, 3, 3))},
     lambda D, pl, pt, ql, qt: (D.MultivariateNormal(pl, scale_tril=pt), D.MultivariateNormal(ql, scale_tril=qt))),
    ("MVN_cov", {"pl": ("real", (3,)), "pc": ("spd", (3, 3)), "ql": ("real", (2, 3)), "qc": ("spd", (2, 3, 3))},
     lambda D, pl, pc, ql, qc: (D.MultivariateNormal(pl, covariance_matrix=pc),
                                D.MultivariateNormal(ql, covariance_matrix=qc))),
    ("Independent_Normal", {"pl": ("real", (3, 4)), "ps": ("pos", (3, 4)), "ql": ("real", (4,)), "qs": ("pos", (4,))},
     lambda D, pl, ps, ql, qs: (D.Independent(D.Normal(pl, ps), 1), D.Independent(D.Normal(ql, qs.expand(3, 4)), 1))),
]


def _kl(lib, case, dtype, seed=3):
    _, spec, build = case
    rng = np.random.default_rng(seed)
    arrays = {p: _gen(kind, shape, rng) for p, (kind, shape) in spec.items()}
    ps = _build(lib, spec, arrays, dtype)
    p, q = build(lib.distributions, **ps)
    out = lib.distributions.kl_divergence(p, q)
    w = lib.tensor(rng.uniform(0.5, 1.5, tuple(out.shape)).astype(dtype))
    (out * w).sum().backward()
    return out, {k: t.grad for k, t in ps.items()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", KL_CASES, ids=[c[0] for c in KL_CASES])
def test_kl_divergence_values_and_gradients_match_torch(case, dtype):
    oe, ge = _kl(ember, case, dtype)
    ot, gt = _kl(torch, case, dtype)
    assert tuple(oe.shape) == tuple(ot.shape)
    _compare(oe, ot, dtype, f"kl {case[0]}")
    for k in gt:
        assert (ge[k] is None) == (gt[k] is None), k
        if gt[k] is not None:
            _compare(ge[k], gt[k], dtype, f"kl {case[0]} d/d{k}")


def test_kl_infinite_and_zero_mass_cases_match_torch():
    for lib in (ember, torch):
        D = lib.distributions
        # q narrower than p: inf where the support is not covered
        kl_u = D.kl_divergence(D.Uniform(lib.tensor([0.0, 0.0]), lib.tensor([1.0, 1.0])),
                               D.Uniform(lib.tensor([0.5, -1.0]), lib.tensor([2.0, 2.0])))
        kl_b = D.kl_divergence(D.Bernoulli(probs=lib.tensor([0.0, 1.0, 0.3])),
                               D.Bernoulli(probs=lib.tensor([0.5, 0.5, 0.0])))
        kl_c = D.kl_divergence(D.Categorical(probs=lib.tensor([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]])),
                               D.Categorical(probs=lib.tensor([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]])))
        if lib is ember:
            res = [kl_u, kl_b, kl_c]
        else:
            for e, t in zip(res, [kl_u, kl_b, kl_c]):
                np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5)
    assert np.isinf(res[0].numpy()[0]) and np.isinf(res[2].numpy()[0])


def test_register_kl_dispatch_and_missing_pair():
    D = ember.distributions

    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(ember.zeros(2), ember.ones(2)), D.Normal(ember.ones(2), ember.ones(2))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), [0.5, 0.5], rtol=1e-6)   # falls back to Normal-Normal

    @D.register_kl(MyNormal, D.Normal)
    def _kl_my(p, q):
        return ember.zeros(p.batch_shape)
    try:
        assert D.kl_divergence(p, q).sum().item() == 0.0
    finally:
        del D.kl._KL_REGISTRY[MyNormal, D.Normal]
        D.kl._KL_MEMOIZE.clear()
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.VonMises(0.0, 1.0))


# ------------------------------------------------------------------------------ sampling
SAMPLE_CASES = [
    ("Normal", lambda D: D.Normal(ember.tensor([0.5, -2.0]), ember.tensor([1.5, 0.3]))),
    ("Uniform", lambda D: D.Uniform(ember.tensor([0.0, -3.0]), ember.tensor([1.0, 5.0]))),
    ("Bernoulli", lambda D: D.Bernoulli(probs=ember.tensor([0.2, 0.7]))),
    ("Exponential", lambda D: D.Exponential(ember.tensor([0.5, 3.0]))),
    ("Laplace", lambda D: D.Laplace(ember.tensor([1.0, -1.0]), ember.tensor([0.5, 2.0]))),
    ("Gamma", lambda D: D.Gamma(ember.tensor([0.5, 4.0]), ember.tensor([2.0, 0.5]))),
    ("OneHotCategorical", lambda D: D.OneHotCategorical(probs=ember.tensor([0.1, 0.3, 0.6]))),
    ("MVN", lambda D: D.MultivariateNormal(ember.tensor([1.0, -1.0, 0.0]),
                                           scale_tril=ember.tensor([[1.0, 0, 0], [0.5, 0.8, 0], [-0.3, 0.2, 0.5]]))),
]


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c[0] for c in SAMPLE_CASES])
def test_sample_moments_and_seeding(case):
    dist = case[1](ember.distributions)
    n = 40000
    ember.manual_seed(123)
    x = dist.sample((n,))
    ember.manual_seed(123)
    assert np.array_equal(dist.sample((n,)).numpy(), x.numpy())   # ember.manual_seed reproduces
    assert tuple(x.shape) == (n,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    assert not x.requires_grad
    xs = x.double().numpy()
    mean, var = dist.mean.double().numpy(), dist.variance.double().numpy()
    np.testing.assert_allclose(xs.mean(0), mean, atol=4 * np.sqrt(var.max() / n) + 1e-3)
    np.testing.assert_allclose(xs.var(0), var, rtol=0.06, atol=1e-3)
    assert bool(dist.support.check(x).all())
    if case[0] == "MVN":
        np.testing.assert_allclose(np.cov(xs.T), dist.covariance_matrix.numpy(), atol=0.03)


def test_categorical_sample_frequencies():
    ember.manual_seed(0)
    probs = ember.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    s = ember.distributions.Categorical(probs=probs).sample((20000,))
    assert tuple(s.shape) == (20000, 2) and s.dtype is ember.int64
    freq = np.stack([(s.numpy()[:, b, None] == np.arange(3)).mean(0) for b in range(2)])
    np.testing.assert_allclose(freq, probs.numpy(), atol=0.015)


def test_rsample_is_reparameterized():
    D = ember.distributions
    loc = ember.tensor([0.5, -1.0], requires_grad=True)
    scale = ember.tensor([2.0, 0.5], requires_grad=True)
    ember.manual_seed(5)
    x = D.Normal(loc, scale).rsample((7,))
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [7.0, 7.0])
    np.testing.assert_allclose(scale.grad.numpy(), ((x - loc) / scale).sum(0).detach().numpy(), rtol=1e-5)
    for make, params in [
        (lambda a, b: D.Uniform(a, a + b), 2), (lambda a, b: D.Laplace(a, b), 2),
        (lambda a, b: D.Exponential(b), 1), (lambda a, b: D.Gamma(ember.tensor([2.0, 3.0]), b), 1),
        (lambda a, b: D.MultivariateNormal(a, scale_tril=ember.diag(b)), 2),
        (lambda a, b: D.Independent(D.Normal(a, b), 1), 2),
    ]:
        a = ember.tensor([0.5, -1.0], requires_grad=True)
        b = ember.tensor([2.0, 0.5], requires_grad=True)
        d = make(a, b)
        assert d.has_rsample
        d.rsample((3,)).sum().backward()
        assert b.grad is not None and np.all(np.isfinite(b.grad.numpy()))
        if params == 2:
            assert a.grad is not None
    # Normal.sample draws no graph
    assert not D.Normal(loc, scale).sample((2,)).requires_grad


def test_shapes_expand_and_enumerate_support():
    D = ember.distributions
    n = D.Normal(ember.zeros(3, 1), ember.ones(4))
    assert n.batch_shape == ember.Size([3, 4]) and n.event_shape == ember.Size([])
    assert tuple(n.sample().shape) == (3, 4) and tuple(n.sample((5, 2)).shape) == (5, 2, 3, 4)
    e = n.expand((2, 3, 4))
    assert e.batch_shape == ember.Size([2, 3, 4]) and tuple(e.log_prob(ember.zeros(3, 4)).shape) == (2, 3, 4)
    assert D.Normal(0.0, 1.0).batch_shape == ember.Size([])
    m = D.MultivariateNormal(ember.zeros(2, 3), covariance_matrix=ember.eye(3))
    assert m.batch_shape == ember.Size([2]) and m.event_shape == ember.Size([3])
    assert m.expand((4, 2)).batch_shape == ember.Size([4, 2])
    ind = D.Independent(D.Normal(ember.zeros(2, 3), ember.ones(2, 3)), 1)
    assert ind.batch_shape == ember.Size([2]) and ind.event_shape == ember.Size([3])
    c = D.Categorical(logits=ember.zeros(2, 4))
    assert tuple(c.enumerate_support().shape) == (4, 2)
    np.testing.assert_array_equal(c.enumerate_support(expand=False).numpy().ravel(), np.arange(4))
    assert np.isnan(c.mean.numpy()).all() and tuple(c.variance.shape) == (2,)
    b = D.Bernoulli(probs=ember.tensor([0.2, 0.5, 0.9]))
    assert tuple(b.enumerate_support().shape) == (2, 3)
    np.testing.assert_array_equal(b.mode.numpy(), [0.0, np.nan, 1.0])
    np.testing.assert_allclose(D.Normal(0.0, 1.0).icdf(ember.tensor([0.5, 0.975])).numpy(), [0.0, 1.959964], atol=1e-5)
    np.testing.assert_allclose(D.Normal(0.0, 2.0).perplexity().item(), np.exp(0.5 + 0.5 * np.log(2 * np.pi) + np.log(2)), rtol=1e-6)
    assert "Normal(loc:" in repr(D.Normal(0.0, 1.0))


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("make", [
    lambda D, m: D.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, -1.0])),
    lambda D, m: D.Normal(m.tensor([float("nan")]), m.tensor([1.0])),
    lambda D, m: D.Exponential(m.tensor([0.0])),
    lambda D, m: D.Gamma(m.tensor([1.0]), m.tensor([-2.0])),
    lambda D, m: D.Bernoulli(probs=m.tensor([1.5])),
    lambda D, m: D.Categorical(probs=m.tensor([0.5, -0.2, 0.7])),
    lambda D, m: D.Uniform(m.tensor([1.0]), m.tensor([0.0])),
    lambda D, m: D.MultivariateNormal(m.zeros(2), scale_tril=m.tensor([[1.0, 0.0], [0.3, -1.0]])),
    lambda D, m: D.MultivariateNormal(m.zeros(2), scale_tril=m.tensor([[1.0, 0.5], [0.3, 1.0]])),
    lambda D, m: D.MultivariateNormal(m.zeros(2), covariance_matrix=m.tensor([[1.0, 2.0], [2.0, 1.0]])),
    lambda D, m: D.Bernoulli(probs=m.tensor([0.5]), logits=m.tensor([0.0])),
])
def test_invalid_parameters_raise_value_error_like_torch(make):
    with pytest.raises(ValueError):
        make(torch.distributions, torch)
    with pytest.raises(ValueError):
        make(ember.distributions, ember)


@pytest.mark.parametrize("make, value", [
    (lambda D, m: D.Exponential(m.tensor([1.0])), [-1.0]),
    (lambda D, m: D.Bernoulli(probs=m.tensor([0.3])), [0.5]),
    (lambda D, m: D.Categorical(probs=m.tensor([0.3, 0.7])), [2.0]),
    (lambda D, m: D.Uniform(m.tensor([0.0]), m.tensor([1.0])), [1.5]),
    (lambda D, m: D.Gamma(m.tensor([1.0]), m.tensor([1.0])), [-0.5]),
    (lambda D, m: D.Normal(m.zeros(3), m.ones(3)), [0.0, 0.0]),    # not broadcastable
])
def test_out_of_support_values_raise_and_validation_switches(make, value):
    for lib in (torch, ember):
        D = lib.distributions
        with pytest.raises(ValueError):
            make(D, lib).log_prob(lib.tensor(value))
    d = make(ember.distributions, ember)
    # validate_args=False / set_default_validate_args(False) switch the checks off
    if len(value) == 1 and not isinstance(d, ember.distributions.Categorical):  # (gather would fail)
        assert ember.distributions.Exponential(ember.tensor([-1.0]), validate_args=False) is not None
        d._validate_args = False
        d.log_prob(ember.tensor(value))
    ember.distributions.Distribution.set_default_validate_args(False)
    try:
        ember.distributions.Normal(ember.tensor([0.0]), ember.tensor([-1.0]))
    finally:
        ember.distributions.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ember.distributions.Distribution.set_default_validate_args("yes")


def test_unvalidated_out_of_support_log_prob_matches_torch():
    outs = []
    for lib in (ember, torch):
        D = lib.distributions
        u = D.Uniform(lib.tensor([0.0, 0.0]), lib.tensor([1.0, 1.0]), validate_args=False)
        b = D.Bernoulli(logits=lib.tensor([0.3]), validate_args=False)
        outs.append([u.log_prob(lib.tensor([1.5, 0.5])).numpy(), b.log_prob(lib.tensor([0.5])).numpy()])
    for e, t in zip(*outs):
        np.testing.assert_allclose(e, t, rtol=1e-6)


# ------------------------------------------------------------------------------- compile
def _normal_log_prob(loc, scale, x):
    return ember.distributions.Normal(loc, scale).log_prob(x)


def test_compiled_normal_log_prob_matches_eager():
    rng = np.random.default_rng(0)
    loc, scale, x = (ember.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
                     ember.tensor(rng.uniform(0.5, 1.5, (4,)).astype(np.float32)),
                     ember.tensor(rng.standard_normal((5, 3, 4)).astype(np.float32)))
    ember.dynamo.reset()
    compiled = ember.compile(_normal_log_prob)
    for _ in range(2):
        np.testing.assert_allclose(compiled(loc, scale, x).numpy(), _normal_log_prob(loc, scale, x).numpy(),
                                   rtol=1e-6, atol=1e-6)
    # ... and agrees with torch
    t = torch.distributions.Normal(torch.tensor(loc.numpy()), torch.tensor(scale.numpy())).log_prob(
        torch.tensor(x.numpy()))
    np.testing.assert_allclose(compiled(loc, scale, x).numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_compiled_normal_log_prob_gradients_match_eager():
    _check_compiled_grads(_normal_log_prob)


def _normal_log_prob_unvalidated(loc, scale, x):
    return ember.distributions.Normal(loc, scale, validate_args=False).log_prob(x)



# (compiled, n.log_prob(x) was once recorded as one graph node calling the traced object: no gradient
# to loc/scale, and stale values once the frame built a new Normal; distributions are now traced)
def test_compiled_unvalidated_normal_log_prob_gradients_match_eager():
    _check_compiled_grads(_normal_log_prob_unvalidated)


def _check_compiled_grads(fn):
    rng = np.random.default_rng(1)
    loc0 = rng.standard_normal((3, 4)).astype(np.float32)
    x = ember.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    grads, outs = [], []
    ember.dynamo.reset()
    for f in (fn, ember.compile(fn)):
        loc = ember.tensor(loc0, requires_grad=True)
        scale = ember.tensor(np.full((4,), 1.3, np.float32), requires_grad=True)
        out = f(loc, scale, x)
        outs.append(out.detach().numpy())
        out.sum().backward()
        grads.append((loc.grad.numpy(), scale.grad.numpy()))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5)


def test_compiled_distribution_made_per_call_follows_its_parameters():
    def f(loc, x):
        return ember.distributions.Normal(loc, 1.0, validate_args=False).log_prob(x)
    cf = ember.compile(f)
    x = ember.randn(3)
    for _ in range(3):
        loc = ember.randn(3, requires_grad=True)
        got, want = cf(loc, x), f(loc, x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        g1, = ember.autograd.grad(got.sum(), loc)
        g2, = ember.autograd.grad(want.sum(), loc)
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-6)
