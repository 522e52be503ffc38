"""ember.distributions.transforms / constraint_registry / TransformedDistribution against torch:
forward, inverse and log|det J| values and their gradients on the same (random, float64) inputs,
shapes, caching, equality, sign, domains; biject_to/transform_to; TransformedDistribution
(the SAC tanh-squashed Normal with cache_size=1), compiled and eager."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch

TOL = dict(rtol=1e-9, atol=1e-10)


def _np(t):
    return t.detach().numpy()


def _x(kind, shape, rng):
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "pos":
        return rng.uniform(0.3, 2.5, shape)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "corr":     # unconstrained vector for a 3x3 correlation factor
        return rng.standard_normal(shape) * 0.7
    raise AssertionError(kind)


# (name, build(T, lib) -> transform, input kind, input shape)
TRANSFORMS = [
    ("Exp", lambda T, m: T.ExpTransform(), "real", (3, 4)),
    ("Exp_inv", lambda T, m: T.ExpTransform().inv, "pos", (3, 4)),
    ("Affine_number", lambda T, m: T.AffineTransform(0.5, -2.0), "real", (3, 4)),
    ("Affine_tensor", lambda T, m: T.AffineTransform(m.tensor([0.5, -1.0, 2.0, 0.1], dtype=m.float64),
                                                     m.tensor([1.5, -0.3, 2.0, 0.7], dtype=m.float64)), "real", (3, 4)),
    ("Affine_event2", lambda T, m: T.AffineTransform(m.tensor([0.5, -1.0, 2.0, 0.1], dtype=m.float64),
                                                     m.tensor([1.5, -0.3, 2.0, 0.7], dtype=m.float64),
                                                     event_dim=2), "real", (2, 3, 4)),
    ("Sigmoid", lambda T, m: T.SigmoidTransform(), "real", (3, 4)),
    ("Tanh", lambda T, m: T.TanhTransform(), "real", (3, 4)),
    ("Softplus", lambda T, m: T.SoftplusTransform(), "real", (3, 4)),
    ("Power", lambda T, m: T.PowerTransform(m.tensor([0.5, 2.0, -1.5, 3.0], dtype=m.float64)), "pos", (3, 4)),
    ("StickBreaking", lambda T, m: T.StickBreakingTransform(), "real", (3, 4)),
    ("CorrCholesky", lambda T, m: T.CorrCholeskyTransform(), "corr", (2, 3)),
    ("Reshape", lambda T, m: T.ReshapeTransform((2, 3), (3, 2)), "real", (4, 2, 3)),
    ("Independent_Sigmoid", lambda T, m: T.IndependentTransform(T.SigmoidTransform(), 1), "real", (3, 4)),
    ("Compose", lambda T, m: T.ComposeTransform([T.SigmoidTransform(), T.AffineTransform(1.0, 3.0),
                                                 T.ExpTransform().inv]), "real", (3, 4)),
    ("Compose_stick", lambda T, m: T.ComposeTransform([T.AffineTransform(0.3, 2.0), T.StickBreakingTransform()]),
     "real", (3, 4)),
    ("Cat", lambda T, m: T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], dim=-1, lengths=[1, 3]),
     "real", (3, 4)),
    ("Stack", lambda T, m: T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.AffineTransform(1.0, 2.0)],
                                            dim=0), "real", (3, 4)),
    ("CDF_Normal", lambda T, m: T.CumulativeDistributionTransform(
        m.distributions.Normal(m.tensor([0.3, -0.2, 0.0, 1.0], dtype=m.float64),
                               m.tensor([1.0, 0.5, 2.0, 1.5], dtype=m.float64))), "real", (3, 4)),
]


def _run(lib, case, seed=0, ladj=True):
    name, build, kind, shape = case
    rng = np.random.default_rng(seed)
    t = build(lib.distributions.transforms, lib)
    x0 = _x(kind, shape, rng)
    x = lib.tensor(x0, requires_grad=True)
    y = t(x)
    out = {"y": y}
    if ladj and name != "Reshape" or name == "Reshape":
        out["ladj"] = t.log_abs_det_jacobian(x, y)
    xi = t.inv(y.detach())
    out["inv"] = xi
    w = {k: lib.tensor(rng.uniform(0.5, 1.5, tuple(v.shape))) for k, v in out.items()}
    loss = sum((out[k] * w[k]).sum() for k in ("y", "ladj") if out.get(k) is not None and out[k].requires_grad)
    grad = lib.autograd.grad(loss, x)[0] if not isinstance(loss, int) else None
    return t, out, grad


@pytest.mark.parametrize("case", TRANSFORMS, ids=[c[0] for c in TRANSFORMS])
def test_transform_values_and_gradients_match_torch(case):
    te, oe, ge = _run(ember, case)
    tt, ot, gt = _run(torch, case)
    for k in ot:
        assert tuple(oe[k].shape) == tuple(ot[k].shape), k
        np.testing.assert_allclose(_np(oe[k]), _np(ot[k]), err_msg=f"{case[0]} {k}", **TOL)
    if gt is not None:
        np.testing.assert_allclose(_np(ge), _np(gt), err_msg=f"{case[0]} grad", **TOL)
    # round trip (bijective transforms)
    if te.bijective:
        x = ember.tensor(_x(case[2], case[3], np.random.default_rng(0)))
        np.testing.assert_allclose(_np(te.inv(te(x))), _np(x), rtol=1e-7, atol=1e-9)
    # static attributes agree
    assert te.bijective == tt.bijective
    assert te.domain.event_dim == tt.domain.event_dim and te.codomain.event_dim == tt.codomain.event_dim
    assert type(te.domain).__name__ == type(tt.domain).__name__
    assert type(te.codomain).__name__ == type(tt.codomain).__name__
    assert repr(te).replace("ember", "torch") == repr(tt) or case[0].startswith("CDF")
    shape = tuple(oe["inv"].shape)
    assert tuple(te.forward_shape(shape)) == tuple(tt.forward_shape(torch.Size(shape)))
    assert tuple(te.inverse_shape(tuple(oe["y"].shape))) == tuple(tt.inverse_shape(torch.Size(oe["y"].shape)))


def test_non_bijective_transforms_match_torch():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((2, 3, 3))
    for name in ("AbsTransform", "SoftmaxTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"):
        outs = []
        for lib in (ember, torch):
            T = lib.distributions.transforms
            t = getattr(T, name)()
            x = lib.tensor(x0, requires_grad=True)
            y = t(x)
            inv = t.inv(y.detach())
            g = lib.autograd.grad((y * lib.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))).sum(), x)[0]
            outs.append((y, inv, g, t.bijective, t.codomain.event_dim))
        (ye, ie, ge, be, ce), (yt, it, gt, bt, ct) = outs
        np.testing.assert_allclose(_np(ye), _np(yt), err_msg=name, **TOL)
        np.testing.assert_allclose(_np(ie), _np(it), err_msg=name, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(_np(ge), _np(gt), err_msg=name, **TOL)
        assert (be, ce) == (bt, ct)


def test_caching_returns_the_cached_pair():
    T = ember.distributions.transforms
    x = ember.randn(5, requires_grad=True)
    t = T.TanhTransform(cache_size=1)
    y = t(x)
    assert t(x) is y and t.inv(y) is x          # cached: the very objects
    # without the cache the inverse is recomputed
    t0 = T.TanhTransform()
    y0 = t0(x)
    assert t0.inv(y0) is not x
    np.testing.assert_allclose(_np(t0.inv(y0)), _np(x), rtol=1e-5)
    # a composed cached transform caches its parts
    c = T.ComposeTransform([T.AffineTransform(1.0, 2.0), T.TanhTransform()], cache_size=1)
    yc = c(x)
    assert c.inv(yc) is x
    # with_cache
    assert T.ExpTransform().with_cache(1)._cache_size == 1
    assert T.AffineTransform(0.0, 1.0).with_cache(1)._cache_size == 1
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)
    for lib in (ember, torch):
        with pytest.raises(NotImplementedError, match="with_cache"):
            lib.distributions.transforms.CumulativeDistributionTransform.__bases__[0].with_cache(
                _NoCache(lib), 1)


def _NoCache(lib):
    class NoCache(lib.distributions.transforms.Transform):
        def __init__(self, extra):
            super().__init__()
    return NoCache(0)


def test_equality_sign_and_inverse_identity():
    T = ember.distributions.transforms
    assert T.ExpTransform() == T.ExpTransform() and T.ExpTransform() != T.SigmoidTransform()
    assert T.ExpTransform().inv == T.ExpTransform().inv
    assert T.AffineTransform(1.0, 2.0) == T.AffineTransform(1.0, 2.0)
    assert T.AffineTransform(1.0, 2.0) != T.AffineTransform(1.0, 3.0)
    assert T.AffineTransform(ember.tensor([1.0]), 2.0) == T.AffineTransform(ember.tensor([1.0]), 2.0)
    assert T.PowerTransform(ember.tensor(2.0)) == T.PowerTransform(ember.tensor(2.0))
    assert T.ComposeTransform([T.ExpTransform()]) == T.ComposeTransform([T.ExpTransform()])
    t = T.ExpTransform()
    assert t.inv.inv is t
    assert T.AffineTransform(0.0, -2.0).sign == -1 and T.ExpTransform().sign == 1
    assert T.ComposeTransform([T.AffineTransform(0.0, -2.0), T.ExpTransform(), T.AffineTransform(0.0, -1.0)]).sign == 1
    np.testing.assert_array_equal(_np(T.AffineTransform(0.0, ember.tensor([-2.0, 3.0])).sign), [-1.0, 1.0])
    with pytest.raises(NotImplementedError):
        T.AbsTransform().sign
    assert T.identity_transform(ember.tensor([1.5])).item() == 1.5
    assert T.ExpTransform().event_dim == 0
    with pytest.raises(ValueError, match="event_dim"):
        T.CorrCholeskyTransform().event_dim
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((2, 3), (4,))
    with pytest.raises(ValueError, match="Shape mismatch"):
        T.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3, 2))
    with pytest.raises(ValueError):
        T.CorrCholeskyTransform().forward_shape((4,))


@pytest.mark.parametrize("name, args", [
    ("real", ()), ("positive", ()), ("nonnegative", ()), ("greater_than", (1.5,)), ("less_than", (2.0,)),
    ("unit_interval", ()), ("interval", (-1.0, 3.0)), ("half_open_interval", (0.0, 2.0)), ("simplex", ()),
    ("real_vector", ()), ("lower_cholesky", ()), ("positive_definite", ()), ("corr_cholesky", ()),
])
def test_biject_to_and_transform_to_match_torch(name, args):
    rng = np.random.default_rng(7)
    for reg in ("biject_to", "transform_to"):
        res = []
        for lib in (ember, torch):
            D = lib.distributions
            c = getattr(D.constraints, name)
            c = c(*args) if args else c
            try:
                t = getattr(D, reg)(c)
            except NotImplementedError:
                res.append(None)
                continue
            shape = {"corr_cholesky": (2, 3), "lower_cholesky": (2, 3, 3), "positive_definite": (2, 3, 3)}.get(
                name, (2, 4))
            x = lib.tensor(rng.standard_normal(shape) if lib is ember else res[0][2])
            y = t(x)
            res.append((repr(t), y, x.numpy() if lib is ember else None, bool(c.check(y).all())))
        e, t_ = res
        assert (e is None) == (t_ is None), (reg, name)
        if e is None:
            continue
        assert e[0] == t_[0], (reg, name)
        np.testing.assert_allclose(_np(e[1]), _np(t_[1]), **TOL)
        assert e[3] and t_[3]


def test_registry_register_and_errors():
    D = ember.distributions

    class MyPositive(D.constraints.Constraint):
        def check(self, value):
            return value > 0
    my = MyPositive()
    with pytest.raises(NotImplementedError, match="Cannot transform MyPositive"):
        D.biject_to(my)
    D.biject_to.register(MyPositive, lambda c: D.transforms.ExpTransform())
    try:
        assert isinstance(D.biject_to(my), D.transforms.ExpTransform)
    finally:
        del D.biject_to._registry[MyPositive]
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        D.biject_to.register(int, lambda c: None)


# ------------------------------------------------------------------ TransformedDistribution
def _sac(lib, loc, scale, eps):
    """SAC's squashed Gaussian on a fixed base noise: action, log_prob, grads w.r.t. loc/scale."""
    D = lib.distributions
    mu = lib.tensor(loc, requires_grad=True)
    sd = lib.tensor(scale, requires_grad=True)
    dist = D.TransformedDistribution(D.Normal(mu, sd), [D.transforms.TanhTransform(cache_size=1)])
    x = mu + sd * lib.tensor(eps)                 # the base rsample on a shared noise
    a = dist.transforms[0](x)
    lp = dist.log_prob(a).sum(-1)
    loss = (lp + (a * a).sum(-1)).sum()
    g = lib.autograd.grad(loss, [mu, sd])
    return a, lp, g, dist


def test_sac_tanh_normal_matches_torch_and_uses_the_cache():
    rng = np.random.default_rng(11)
    loc, scale = rng.standard_normal((5, 3)), rng.uniform(0.3, 2.0, (5, 3))
    eps = rng.standard_normal((5, 3)) * 3.0       # large |x|: tanh saturates, atanh would not recover x
    ae, lpe, ge, de = _sac(ember, loc, scale, eps)
    at, lpt, gt, dt = _sac(torch, loc, scale, eps)
    np.testing.assert_allclose(_np(ae), _np(at), **TOL)
    np.testing.assert_allclose(_np(lpe), _np(lpt), **TOL)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-8, atol=1e-9)
    assert np.all(np.isfinite(_np(lpe)))
    assert de.batch_shape == ember.Size([5, 3]) and de.event_shape == ember.Size([])
    assert de.has_rsample and type(de.support).__name__ == "_Interval"
    # rsample is reparameterized; sample is not
    ember.manual_seed(0)
    r = de.rsample((2,))
    assert r.requires_grad and tuple(r.shape) == (2, 5, 3) and bool(((r > -1) & (r < 1)).all())
    assert not de.sample((2,)).requires_grad


@pytest.mark.parametrize("build", [
    lambda D, m: D.TransformedDistribution(D.Normal(m.tensor([0.3, -0.5, 1.0]), m.tensor([1.0, 0.5, 2.0])),
                                           [D.transforms.AffineTransform(1.0, -2.0), D.transforms.ExpTransform()]),
    lambda D, m: D.TransformedDistribution(D.Normal(m.tensor([[0.3, -0.5, 1.0]]), m.tensor([1.0, 0.5, 2.0])),
                                           D.transforms.StickBreakingTransform()),
    lambda D, m: D.TransformedDistribution(D.Uniform(m.tensor([0.1, 0.2]), m.tensor([0.9, 0.7])),
                                           [D.transforms.SigmoidTransform().inv]),
    lambda D, m: D.TransformedDistribution(
        D.Normal(m.zeros(2, 6), m.ones(2, 6)), [D.transforms.ReshapeTransform((6,), (2, 3)),
                                               D.transforms.ExpTransform()]),
], ids=["affine_exp_decreasing", "stickbreaking", "logit_uniform", "reshape"])
def test_transformed_distribution_matches_torch(build):
    rng = np.random.default_rng(5)
    dists = [build(lib.distributions, lib) for lib in (ember, torch)]
    de, dt = dists
    assert tuple(de.batch_shape) == tuple(dt.batch_shape) and tuple(de.event_shape) == tuple(dt.event_shape)
    ember.manual_seed(1)
    y = de.sample((3,))
    assert tuple(y.shape) == (3,) + tuple(dt.batch_shape) + tuple(dt.event_shape)
    assert bool(de.support.check(y).all())
    lpe = de.log_prob(y)
    lpt = dt.log_prob(torch.tensor(y.numpy()))
    np.testing.assert_allclose(_np(lpe), _np(lpt), rtol=1e-5, atol=1e-5)
    if not de.event_shape:
        np.testing.assert_allclose(_np(de.cdf(y)), _np(dt.cdf(torch.tensor(y.numpy()))), rtol=1e-5, atol=1e-6)
        u = ember.tensor([[0.2, 0.7, 0.4][: de.batch_shape[-1]]] * 2)
        np.testing.assert_allclose(_np(de.icdf(u)), _np(dt.icdf(torch.tensor(u.numpy()))), rtol=1e-5)
    e2 = de.expand((4,) + tuple(de.batch_shape))
    assert tuple(e2.batch_shape) == (4,) + tuple(de.batch_shape)
    assert tuple(e2.log_prob(y[0]).shape) == (4,) + tuple(de.batch_shape)


def test_transformed_distribution_errors_like_torch():
    for lib in (ember, torch):
        D = lib.distributions
        with pytest.raises(ValueError, match="transforms must be a Transform"):
            D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")
        with pytest.raises(ValueError):
            D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform(), 3])
        with pytest.raises(ValueError, match="base_distribution needs to have shape"):
            D.TransformedDistribution(D.Normal(0.0, 1.0), D.transforms.StickBreakingTransform())
        d = D.TransformedDistribution(D.Normal(lib.zeros(2), lib.ones(2)), D.transforms.ExpTransform())
        with pytest.raises(ValueError):
            d.log_prob(lib.tensor([-1.0, 1.0]))            # outside the support


def _tanh_normal_log_prob(loc, scale, y):
    D = ember.distributions
    d = D.TransformedDistribution(D.Normal(loc, scale, validate_args=False),
                                  [D.transforms.TanhTransform()], validate_args=False)
    return d.log_prob(y)


def test_compiled_transformed_log_prob_matches_eager():
    rng = np.random.default_rng(2)
    loc = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    scale = ember.tensor(rng.uniform(0.5, 1.5, (4,)), requires_grad=True)
    y = ember.tensor(rng.uniform(-0.9, 0.9, (3, 4)))
    ember.dynamo.reset()
    cf = ember.compile(_tanh_normal_log_prob)
    for _ in range(2):
        got, want = cf(loc, scale, y), _tanh_normal_log_prob(loc, scale, y)
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10, atol=1e-12)
        g1 = ember.autograd.grad(got.sum(), [loc, scale])
        g2 = ember.autograd.grad(want.sum(), [loc, scale])
        for a, b in zip(g1, g2):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-10, atol=1e-12)
