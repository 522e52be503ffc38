"""Gradients at edge values against PyTorch (session 47): lgamma at +-inf, xlogy at self == 0,
var/std with no degrees of freedom left, scatter_reduce(reduce='prod')."""
import math
import warnings

import numpy as np
import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _same(a, b):
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def _close(a, b, rtol=1e-12):
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y or
                                    abs(x - y) <= rtol * max(1.0, abs(y)) for x, y in zip(a, b))


# ---------------------------------------------------------------- lgamma at +-inf
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_lgamma_grad_at_infinities_is_digamma_there(dtype):
    """digamma(inf) = inf, digamma(-inf) = NaN (where() used to give 0), random points unchanged."""
    torch = _torch()
    rng = np.random.default_rng(1)
    x = [math.inf, -math.inf] + list(rng.uniform(-5, 5, 6)) + [-3.0, 0.0]
    up = [1.0, 0.0] + list(rng.uniform(0.5, 2, 8))
    out = {}
    for T in (ember, torch):
        t = T.tensor(x, dtype=getattr(T, dtype), requires_grad=True)
        y = T.lgamma(t)
        g = T.autograd.grad(y, [t], T.tensor(up, dtype=getattr(T, dtype)))[0]
        out[T.__name__] = (y.float().tolist(), g.float().tolist())
    assert _same(out["ember"][0][:2], out["torch"][0][:2])
    assert _same(out["ember"][1][:2], out["torch"][1][:2]), out
    assert _same(out["ember"][1][-2:], out["torch"][1][-2:])
    rtol = 1e-12 if dtype == "float64" else (1e-5 if dtype == "float32" else 1e-2)
    assert _close(out["ember"][1][2:8], out["torch"][1][2:8], rtol)


# ---------------------------------------------------------------- xlogy at self == 0
def _xlogy_grads(T, xs, ys, dtype, up):
    x = T.tensor(xs, dtype=getattr(T, dtype), requires_grad=True)
    y = T.tensor(ys, dtype=getattr(T, dtype), requires_grad=True)
    v = T.xlogy(x, y)
    gx, gy = T.autograd.grad(v, [x, y], T.full_like(v, up))
    return v.tolist(), gx.tolist(), gy.tolist()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_xlogy_grads_at_special_points_match_torch(dtype):
    """self == 0: d/dself is log(other) (inf at other = inf, 0 for other <= 0, NaN for NaN);
    d/dother is self / other (NaN at other = 0). Plus random points."""
    torch = _torch()
    rng = np.random.default_rng(2)
    vals = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, float(rng.uniform(0.1, 3))]
    xs = [a for a in vals for _ in vals] + list(rng.uniform(-2, 2, 8))
    ys = [b for _ in vals for b in vals] + list(rng.uniform(0.1, 3, 8))
    up = float(rng.uniform(0.5, 2))
    got, want = _xlogy_grads(ember, xs, ys, dtype, up), _xlogy_grads(torch, xs, ys, dtype, up)
    for g, w in zip(got, want):
        assert _close(g, w, 1e-12 if dtype == "float64" else 1e-6), [
            (xs[i], ys[i], g[i], w[i]) for i in range(len(g)) if not _close([g[i]], [w[i]], 1e-6)]


def test_xlogy_number_operand_grads_match_torch():
    """xlogy(0, t): d/dt = 0 / t (NaN at 0 and NaN); xlogy(t, nan): d/dt 0 where t == 0."""
    torch = _torch()
    rng = np.random.default_rng(3)
    ys = [0.0, math.inf, math.nan, -1.0] + list(rng.uniform(0.1, 3, 4))
    xs = [0.0, -0.0, math.nan] + list(rng.uniform(-2, 2, 4))
    res = {}
    for T in (ember, torch):
        y = T.tensor(ys, dtype=T.float64, requires_grad=True)
        a = T.autograd.grad(T.xlogy(0.0, y).sum(), [y])[0].tolist()
        x = T.tensor(xs, dtype=T.float64, requires_grad=True)
        b = [T.autograd.grad(T.xlogy(x, o).sum(), [x])[0].tolist() for o in (math.nan, math.inf, 0.0, 2.5)]
        res[T.__name__] = (T.xlogy(0.0, y).tolist(), a, b)
    assert _same(res["ember"][0], res["torch"][0])
    assert _same(res["ember"][1], res["torch"][1])
    for g, w in zip(res["ember"][2], res["torch"][2]):
        assert _close(g, w), (g, w)


# ---------------------------------------------------------------- var / std without dof
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_var_grad_without_degrees_of_freedom_matches_torch(name):
    """A full reduction (no dim, or a 0-d input) with correction >= numel: PyTorch's gradient is
    grad * (NaN where x equals the mean, inf elsewhere); ember used to give -0.0 / finite."""
    torch = _torch()
    rng = np.random.default_rng(4)
    cases = [((), 2), ((), 1), ((1,), 3), ((3,), 3), ((3,), 7), ((2, 3), 6), ((2, 3), 9)]
    for shape, c in cases:
        data = rng.standard_normal(shape)
        if len(shape) and shape[-1] == 3:
            data.reshape(-1)[0] = data.reshape(-1)[1]     # ties do not matter: each vs the mean
        for kw in ({}, {"keepdim": True}):
            out = {}
            for T in (ember, torch):
                x = T.tensor(data, requires_grad=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = getattr(T, name)(x, correction=c, **kw)
                r = r if isinstance(r, tuple) else (r,)
                loss = sum((ri * (k + 1.5)).sum() for k, ri in enumerate(r))
                out[T.__name__] = T.autograd.grad(loss, [x])[0].reshape(-1).tolist()
            assert _close(out["ember"], out["torch"]), (shape, c, kw, out)
    x = ember.tensor(1.5, dtype=ember.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = ember.autograd.grad(ember.var(x, correction=2), [x])[0]
    assert math.isnan(g.item())


# ---------------------------------------------------------------- scatter_reduce prod
def _prod_case(rng, zeros):
    shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 3))))
    d = int(rng.integers(0, len(shape)))
    ishape = tuple(int(rng.integers(1, s + 1)) if k != d else int(rng.integers(1, 7)) for k, s in enumerate(shape))
    a, src = rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape), rng.uniform(0.5, 2, ishape)
    if zeros:
        a[rng.random(shape) < 0.3] = 0
        src[rng.random(ishape) < 0.3] = 0
    return a, d, rng.integers(0, shape[d], ishape), src


def test_scatter_reduce_prod_grads_match_torch():
    """Self and src gradients with zeros (one and several per slot), include_self either way
    (ember raised 'not implemented' before)."""
    torch = _torch()
    rng = np.random.default_rng(5)
    for trial in range(120):
        a, d, idx, src = _prod_case(rng, zeros=trial % 2 == 0)
        inc = trial % 4 < 2
        w = rng.uniform(-1, 1, a.shape)
        out = {}
        for T in (ember, torch):
            at, st = T.tensor(a, requires_grad=True), T.tensor(src, requires_grad=True)
            r = T.scatter_reduce(at, d, T.tensor(idx), st, "prod", include_self=inc)
            ga, gs = T.autograd.grad((r * T.tensor(w)).sum(), [at, st])
            out[T.__name__] = [r.detach().numpy(), ga.numpy(), gs.numpy()]
        for g, t in zip(out["ember"], out["torch"]):
            np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)


def test_scatter_reduce_prod_grad_is_finite_difference_slope():
    """Away from zeros the gradient is the slope (float64 central differences)."""
    rng = np.random.default_rng(6)
    a, d, idx, src = _prod_case(rng, zeros=False)
    w = ember.tensor(rng.uniform(-1, 1, a.shape))

    def f(x, s):
        return (ember.scatter_reduce(x, d, ember.tensor(idx), s, "prod") * w).sum()
    st = ember.tensor(src, requires_grad=True)
    gs = ember.autograd.grad(f(ember.tensor(a), st), [st])[0].numpy()
    h = 1e-6
    for k in np.ndindex(src.shape):
        sp, sm = src.copy(), src.copy()
        sp[k] += h
        sm[k] -= h
        fd = (f(ember.tensor(a), ember.tensor(sp)).item() - f(ember.tensor(a), ember.tensor(sm)).item()) / (2 * h)
        assert abs(fd - gs[k]) <= 1e-6 * max(1.0, abs(fd))


# ---------------------------------------------------------------- special.ndtri / special.entr
def test_ndtri_tails_values_and_grads_match_torch():
    """sqrt 2 erfinv(2p - 1) lost p's digits: float32 ndtri(1e-10) was -inf, float64's off in
    the 8th digit, ndtri(1e-30) -inf. First and second derivatives too."""
    torch = _torch()
    rng = np.random.default_rng(12)
    p = [1e-310, 1e-300, 1e-30, 1e-10, 1e-3, 0.0, 1.0, -0.1, 1.5, 0.5, 1 - 1e-10, math.nan] + \
        list(10.0 ** -rng.uniform(0, 12, 10)) + list(rng.uniform(0, 1, 10))
    out = {}
    for T in (ember, torch):
        x = T.tensor(p, dtype=T.float64, requires_grad=True)
        y = T.special.ndtri(x)
        g, = T.autograd.grad(y.sum(), [x], create_graph=True)
        h, = T.autograd.grad(g.sum(), [x])
        out[T.__name__] = (y.tolist(), g.tolist(), h.tolist())
    for e, t in zip(out["ember"], out["torch"]):
        assert _close(e, t, 1e-13), [(p[i], e[i], t[i]) for i in range(len(p)) if not _close([e[i]], [t[i]], 1e-13)]
    p32 = [1e-30, 1e-10, 1e-6, 0.02, 0.3, 0.999]
    got = ember.special.ndtri(ember.tensor(p32)).tolist()
    want = torch.special.ndtri(torch.tensor(p32).double()).float().tolist()   # correctly rounded
    assert _close(got, want, 2.5e-7), (got, want)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_entr_grads_at_special_points_match_torch(dtype):
    """-(1 + log x): inf at 0, NaN below 0, -inf at inf (ember gave 0 / 0 / NaN)."""
    torch = _torch()
    rng = np.random.default_rng(13)
    p = [0.0, -0.0, -1.0, -2.5, math.inf, -math.inf, math.nan] + list(rng.uniform(0.01, 3, 8))
    out = {}
    for T in (ember, torch):
        x = T.tensor(p, dtype=getattr(T, dtype), requires_grad=True)
        y = T.special.entr(x)
        g, = T.autograd.grad(y.sum(), [x])
        out[T.__name__] = (y.float().tolist(), g.float().tolist(), str(y.dtype).split(".")[-1])
    assert out["ember"][2] == out["torch"][2]
    assert _same(out["ember"][0][:7], out["torch"][0][:7]) and _same(out["ember"][1][:7], out["torch"][1][:7])
    rtol = 1e-12 if dtype == "float64" else (1e-6 if dtype == "float32" else 1e-2)
    assert _close(out["ember"][0], out["torch"][0], rtol) and _close(out["ember"][1], out["torch"][1], rtol)


@pytest.mark.parametrize("name", ["i1", "i1e"])
def test_i1_i1e_grads_at_tiny_and_nan_inputs_match_torch(name):
    """PyTorch takes the limit 1/2 wherever |x| <= eps (and at NaN); ember's 1/x overflowed for
    denormals (i1e' was -inf at 1e-310) and NaN gave NaN."""
    torch = _torch()
    rng = np.random.default_rng(15)
    p = [0.0, -0.0, 1e-310, -1e-310, 1e-30, 1e-17, math.nan] + list(rng.uniform(-5, 5, 8))
    out = {}
    for T in (ember, torch):
        x = T.tensor(p, dtype=T.float64, requires_grad=True)
        out[T.__name__] = T.autograd.grad(getattr(T.special, name)(x).sum(), [x])[0].tolist()
    assert _same(out["ember"][:7], out["torch"][:7]), out
    assert _close(out["ember"], out["torch"], 1e-10)
