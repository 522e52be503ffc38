"""Edge values (inf, NaN, -0.0, overflow-range magnitudes, integer wrap) and edge shapes (0-d)
in eager ops, against PyTorch's results (session 46's edge-value fuzzer found each of these).

The last test is a small seeded differential fuzzer, ember eager vs torch eager, over special
values and layouts; ``EMBER_EDGE_FUZZ=N`` runs N cases instead of the CI handful.
"""
import math
import os

import numpy as np
import pytest

import ember

INF, NAN = float("inf"), float("nan")


def _same(a, b):
    """Bit-level float equality of two lists: NaN equals NaN, -0.0 differs from 0.0."""
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b):
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), (a, b)
        else:
            assert x == y and math.copysign(1, x) == math.copysign(1, y), (a, b)


# ---------------------------------------------------------------------- median / nanmedian of all
@pytest.mark.parametrize("fn", ["median", "nanmedian"])
@pytest.mark.parametrize("vals, want, grad", [
    ([-INF] * 4, -INF, [0.25] * 4),
    ([INF, 1.0, INF], INF, [0.5, 0.0, 0.5]),
    ([-INF, 1.0, -INF, 3.0], -INF, [0.5, 0.0, 0.5, 0.0]),
    ([2.0, 1.0, 2.0, 3.0], 2.0, [0.5, 0.0, 0.5, 0.0]),
])
def test_median_of_all_with_infinities(fn, vals, want, grad):
    # the whole-tensor median split its gradient with v + sum(x - v) / count: inf - inf made it NaN
    x = ember.tensor(vals, dtype=ember.float64, requires_grad=True)
    m = getattr(ember, fn)(x)
    assert m.item() == want
    (g,) = ember.autograd.grad(m, [x])
    assert g.tolist() == grad


def test_nanmedian_of_all_skips_nan_next_to_infinity():
    x = ember.tensor([-INF, 1.0, -INF, NAN], dtype=ember.float64, requires_grad=True)
    assert math.isnan(ember.median(x).item())
    n = ember.nanmedian(x)
    assert n.item() == -INF
    assert ember.autograd.grad(n, [x])[0].tolist() == [0.5, 0.0, 0.5, 0.0]


# ---------------------------------------------------------------------- ldexp
def test_ldexp_integer_exponent_scales_exactly():
    # 2**other rounded to float32 first overflowed (0 * inf = NaN) or flushed to 0 (-inf * 0)
    x = ember.tensor([0.0, -INF, 1.0, 1e-30, 3.0, NAN, -0.0])
    e = ember.tensor([1100, -200, 3, 200, -149, 4, 5])
    r = ember.ldexp(x, e)
    assert r.dtype is ember.float32
    want = [float(np.ldexp(np.float32(v), int(k))) for v, k in zip(x.tolist(), e.tolist())]
    _same(r.tolist(), want)


def test_ldexp_float64_beyond_2_to_the_1023():
    x = ember.tensor([0.0, -INF, 1e-300, 5e-324, 1.5, 1.0], dtype=ember.float64)
    e = ember.tensor([1100, -200, 2000, 2097, -1074, -5000])
    want = [float(np.ldexp(v, int(k))) for v, k in zip(x.tolist(), e.tolist())]
    _same(ember.ldexp(x, e).tolist(), want)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_ldexp_half_keeps_its_dtype(dt):
    # PyTorch: an integer exponent keeps self's floating dtype (it was promoted to float32)
    x = ember.tensor([1e-3, 1e4, 0.0], dtype=getattr(ember, dt))
    r = ember.ldexp(x, ember.tensor([20, -30, 100]))
    assert r.dtype is getattr(ember, dt)
    want = [v * 2.0 ** k for v, k in zip(x.float().tolist(), (20, -30, 100))]
    np.testing.assert_allclose(r.float().tolist(), want, rtol=1e-2)


def test_ldexp_float_exponent_is_mul_pow():
    # a floating exponent stays PyTorch's self * pow(2, other), overflow included
    r = ember.ldexp(ember.tensor([1e-30, 0.0]), ember.tensor([200.0, 200.0]))
    assert r.tolist()[0] == INF and math.isnan(r.tolist()[1])


# ---------------------------------------------------------------------- 0-d index_select / masked_select
def test_index_select_of_0d_is_0d():
    x = ember.tensor(5.0, requires_grad=True)
    for idx in (ember.tensor([0]), ember.tensor(0)):
        y = ember.index_select(x, 0, idx)
        assert tuple(y.shape) == ()
        assert ember.autograd.grad(y, [x])[0].item() == 1.0
    for idx in (ember.tensor([0, 0]), ember.tensor([], dtype=ember.int64)):
        with pytest.raises(RuntimeError, match="Index to scalar can have only 1 value"):
            ember.index_select(x, 0, idx)


@pytest.mark.parametrize("m", [True, False])
def test_masked_select_0d_backward(m):
    # the backward indexed with the 0-d mask, which index_put refuses
    x = ember.tensor(0.75, requires_grad=True)
    y = ember.masked_select(x, ember.tensor(m))
    assert y.tolist() == ([0.75] if m else [])
    assert ember.autograd.grad((y * 3).sum(), [x])[0].item() == (3.0 if m else 0.0)


# ---------------------------------------------------------------------- pointwise edge values
def test_logit_gradient_outside_unit_interval_is_nan():
    x = ember.tensor([-0.5, 0.3, 1.5], dtype=ember.float64, requires_grad=True)
    g = ember.autograd.grad(ember.logit(x).sum(), [x])[0].tolist()
    assert math.isnan(g[0]) and math.isnan(g[2]) and g[1] == pytest.approx(1 / 0.21)
    x = ember.tensor([-0.5, 0.3, 1.5], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.grad(ember.logit(x, eps=0.1).sum(), [x])[0].tolist()[::2] == [0.0, 0.0]


def test_xlogy_zero_self_is_positive_zero():
    x = ember.tensor([-0.0, 0.0, -0.0, 0.0, -2.0, 0.0], dtype=ember.float64)
    y = ember.tensor([2.0, 0.5, 0.0, INF, 1.0, NAN], dtype=ember.float64)
    _same(ember.xlogy(x, y).tolist(), [0.0, 0.0, 0.0, 0.0, -0.0, NAN])


def test_lcm_wraps_as_pytorch():
    a = ember.tensor([-16, 6, -4, 0, 0])
    b = ember.tensor([-(2 ** 63 - 1), 2 ** 63 - 1, 3, 0, 5])
    assert ember.lcm(a, b).tolist() == [16, 6, 12, 0, 0]
    assert ember.lcm(ember.tensor([-16], dtype=ember.int32),
                     ember.tensor([2 ** 31 - 1], dtype=ember.int32)).tolist() == [16]


def test_nextafter_half_equal_operands_return_other():
    r = ember.nextafter(ember.tensor([0.0, -0.0, 1.0], dtype=ember.float16),
                        ember.tensor([-0.0, 0.0, 2.0], dtype=ember.float16))
    _same(r.float().tolist(), [-0.0, 0.0, 1.0009765625])


@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16"])
def test_hypot_no_overflow_or_underflow_of_the_squares(dt):
    d = getattr(ember, dt)
    a = ember.tensor([1e20, 1e-30, 3.0, INF, NAN, 0.0], dtype=d)
    b = ember.tensor([1e20, 1e-30, 4.0, NAN, -INF, -0.0], dtype=d)
    r = ember.hypot(a, b).float().tolist()
    av = a.float().tolist()
    np.testing.assert_allclose(r[:3], [av[0] * math.sqrt(2), av[1] * math.sqrt(2), 5.0], rtol=1e-2 if dt == "bfloat16" else 1e-6)
    assert r[3:] == [INF, INF, 0.0]


def test_hypot_float64_extremes_and_gradient():
    a = ember.tensor([1e300, 1e-300, 3.0], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([1e300, 1e-300, 4.0], dtype=ember.float64)
    r = ember.hypot(a, b)
    np.testing.assert_allclose(r.tolist(), [1e300 * math.sqrt(2), 1e-300 * math.sqrt(2), 5.0], rtol=1e-15)
    np.testing.assert_allclose(ember.autograd.grad(r.sum(), [a])[0].tolist(), [0.5 ** 0.5, 0.5 ** 0.5, 0.6],
                               rtol=1e-15)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_remainder_zero_takes_the_dividends_sign(dt):
    d = getattr(ember, dt)
    a = ember.tensor([-4.0, 4.0, -0.0, 0.0, 3.0, -3.0, 5.0, 2.5], dtype=d)
    b = ember.tensor([2.0, -2.0, 2.0, -2.0, 1.5, INF, -INF, 0.0], dtype=d)
    _same(ember.remainder(a, b).float().tolist(), [-0.0, 0.0, -0.0, 0.0, 0.0, INF, -INF, NAN])
    _same((a % 2).float().tolist(), [-0.0, 0.0, -0.0, 0.0, 1.0, 1.0, 1.0, 0.5])


# ---------------------------------------------------------------------- the seeded fuzzer
def _fuzz_ops():
    """name -> (dtypes, differentiable, fn(T, x, y)); y is a second input of x's shape."""
    FL = ["float32", "float64", "float16", "bfloat16"]
    IN = ["int32", "int64"]
    ops = {}
    for n in ["abs", "neg", "exp", "log1p", "sqrt", "tanh", "sigmoid", "floor", "ceil", "round", "trunc", "frac",
              "sign", "reciprocal", "isnan", "isinf", "signbit", "nan_to_num", "erf", "atan", "expm1"]:
        ops[n] = (FL, n not in ("floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "signbit"),
                  lambda T, x, y, n=n: getattr(T, n)(x))
    for n in ["add", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "remainder", "fmod",
              "copysign", "xlogy", "logaddexp", "eq", "lt", "ge"]:
        ops[n] = (FL, n in ("add", "mul", "div", "maximum", "minimum", "atan2", "hypot"),
                  lambda T, x, y, n=n: getattr(T, n)(x, y))
    for n in ["floor_divide", "remainder", "fmod", "bitwise_xor", "gcd", "lcm"]:
        ops["i_" + n] = (IN, False, lambda T, x, y, n=n: getattr(T, n)(x, y))
    for n in ["sum", "prod", "amax", "amin", "logsumexp", "mean", "nansum"]:
        ops[n] = (FL, True, lambda T, x, y, n=n: getattr(T, n)(x, -1, keepdim=True))
    ops["max_dim"] = (FL + IN, True, lambda T, x, y: tuple(T.max(x, -1)))
    ops["argmin"] = (FL + IN, False, lambda T, x, y: T.argmin(x, -1))
    ops["median_all"] = (FL, True, lambda T, x, y: (T.median(x), T.nanmedian(x)))
    ops["cumsum"] = (FL, True, lambda T, x, y: T.cumsum(x, -1))
    ops["cummax"] = (FL + IN, False, lambda T, x, y: tuple(T.cummax(x, -1)))
    ops["sort"] = (FL + IN, True, lambda T, x, y: tuple(T.sort(x, -1, stable=True)))
    ops["softmax"] = (["float32", "float64"], True, lambda T, x, y: T.softmax(x, -1))
    ops["clamp"] = (FL, True, lambda T, x, y: T.clamp(x, -1.0, 2.0))
    ops["where"] = (FL + IN, True, lambda T, x, y: T.where(x > 0, x, y))
    # no gradient check: PyTorch's ldexp backward computes 2**other in integer arithmetic
    # (0 for a negative or overflowing exponent); ember's is the float 2**other
    ops["ldexp"] = (["float32", "float64"], False, lambda T, x, y: T.ldexp(x, T.tensor([1100, -200, 3])[:x.shape[-1]]
                                                                         if x.shape[-1] <= 3 else T.tensor(7)))
    ops["index_select0"] = (FL + IN, True, lambda T, x, y: T.index_select(x.reshape(-1)[0], 0, T.tensor([0])))
    return ops


def _edge_array(rng, shape, dt):
    n = int(np.prod(shape))
    if dt.startswith("int"):
        ii = np.iinfo(dt)
        v = rng.integers(-9, 10, size=n)
        m = rng.random(n) < 0.3
        # not ii.min: PyTorch's own lcm/gcd die of SIGFPE on some INT_MIN operands
        v[m] = rng.choice([ii.min + 1, ii.max, 0, -1], size=int(m.sum()))
        return v.astype(dt).reshape(shape)
    v = rng.standard_normal(n) * 3
    m = rng.random(n) < 0.4
    v[m] = rng.choice([INF, -INF, NAN, -0.0, 0.0, 1e20, 1e-30, 2.0, -2.0], size=int(m.sum()))
    return v.reshape(shape)


def _to_np(t):
    if t.dtype.is_floating_point and t.dtype.itemsize == 2:
        t = t.float()
    return t.detach().numpy()


def _close(a, b, dt):
    if a.dtype.kind in "iub":
        return np.array_equal(a, b)
    a, b = a.astype(np.float64), b.astype(np.float64)
    r = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-4}.get(dt, 1e-9)
    return np.allclose(a, b, rtol=r, atol=r * 1e-3, equal_nan=True) and np.array_equal(np.isinf(a), np.isinf(b))


def test_edge_value_fuzz_eager_vs_torch():
    torch = pytest.importorskip("torch")
    ops = _fuzz_ops()
    names = sorted(ops)
    n_cases = int(os.environ.get("EMBER_EDGE_FUZZ", "150"))
    shapes = [(3,), (2, 3), (1, 3), (3, 1), ()]
    bad = []
    for seed in range(n_cases):
        rng = np.random.default_rng((46, seed))
        name = names[int(rng.integers(len(names)))]
        dts, diff, fn = ops[name]
        dt = dts[int(rng.integers(len(dts)))]
        shape = shapes[int(rng.integers(len(shapes)))]
        if name in ("sum", "prod", "amax", "amin", "logsumexp", "mean", "nansum", "max_dim", "argmin", "cumsum",
                    "cummax", "sort", "softmax") and shape == ():
            shape = (3,)
        xa, ya = _edge_array(rng, shape, dt), _edge_array(rng, shape, dt)
        grad = diff and dt in ("float32", "float64") and seed % 2 == 0
        if grad:   # gradients at finite inputs, without ties
            xa = np.where(np.isfinite(xa), xa, 0.75) + rng.standard_normal(shape) * 1e-3
            xa = np.clip(xa, -50, 50)
        outs = []
        for T in (ember, torch):
            d = getattr(T, dt)
            x = T.tensor(xa.tolist(), dtype=T.float64 if dt.startswith("f") or dt.startswith("b") else d).to(d)
            y = T.tensor(ya.tolist(), dtype=T.float64 if dt.startswith("f") or dt.startswith("b") else d).to(d)
            if grad:
                x.requires_grad_(True)
            try:
                r = fn(T, x, y)
            except Exception as e:      # noqa: BLE001 - an error is an outcome to compare
                outs.append(e)
                continue
            r = r if isinstance(r, tuple) else (r,)
            vals = [_to_np(t) for t in r]
            g = None
            if grad:
                fl = [t for t in r if t.dtype.is_floating_point and t.requires_grad]
                if fl:
                    g = _to_np(T.autograd.grad(sum((t * 0.5).sum() for t in fl), [x])[0])
            outs.append((vals, [str(t.dtype).split(".")[-1] for t in r], g))
        e, t = outs
        if isinstance(e, Exception) or isinstance(t, Exception):
            if isinstance(e, Exception) and not isinstance(t, Exception):
                bad.append(f"seed {seed} {name} {dt} {shape}: ember raises {type(e).__name__}: {e}")
            continue
        if e[1] != t[1]:
            bad.append(f"seed {seed} {name} {dt}: dtypes {e[1]} vs torch {t[1]}")
            continue
        for a, b in zip(e[0], t[0]):
            if a.shape != b.shape or not _close(a, b, dt):
                bad.append(f"seed {seed} {name} {dt} {shape}: {xa.ravel()} {ya.ravel()}\n  {a} vs torch {b}")
                break
        else:
            if e[2] is not None and t[2] is not None and not _close(e[2], t[2], dt):
                bad.append(f"seed {seed} {name} {dt} {shape} grad: {e[2]} vs torch {t[2]}")
    assert not bad, "\n".join(bad[:10])


# ---------------------------------------------------------------------- bfloat16 ordering with NaN
_BF_ROW = [2.0, NAN, 1e20, -1.0, NAN, 3.0]
_BF_UP = [-1.0, 2.0, 3.0, 99727710148492263424.0, NAN, NAN]     # 1e20 rounded to bfloat16


def test_bfloat16_sort_family_orders_nan_last():
    # ml_dtypes' bfloat16 argsort left a NaN and everything after it unsorted
    x = ember.tensor([_BF_ROW], dtype=ember.bfloat16)
    _same(ember.sort(x).values.float()[0].tolist(), _BF_UP)
    _same(ember.sort(x, descending=True).values.float()[0].tolist(), _BF_UP[::-1])
    assert ember.argsort(x, descending=True)[0].tolist() == [1, 4, 2, 5, 0, 3]
    _same(ember.topk(x, 3).values.float()[0].tolist(), [NAN, NAN, _BF_UP[3]])
    _same(ember.topk(x, 3, largest=False).values.float()[0].tolist(), _BF_UP[:3])
    assert math.isnan(ember.median(x).item()) and ember.nanmedian(x).item() == 2.0
    _same(ember.unique(x).float().tolist(), _BF_UP)
    assert ember.searchsorted(ember.sort(x).values, x).tolist() == [[1, 6, 3, 0, 6, 2]]


def test_bfloat16_searchsorted_large_places_nan_last():
    # the eager binary-search path (values x boundaries above 65536) searched the bfloat16 array
    # itself, where a NaN value landed at 0
    seq = ember.tensor([-1.0, 2.0, 3.0], dtype=ember.bfloat16)
    v = ember.tensor([NAN, 2.0, 5.0, -3.0] * 6000, dtype=ember.bfloat16)
    assert ember.searchsorted(seq, v)[:4].tolist() == [3, 1, 3, 0]
    assert ember.searchsorted(seq, v, right=True)[:4].tolist() == [3, 2, 3, 0]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_sinc_gradient_near_zero(dt):
    # sin(pi x) / (pi x)'s gradient was inf at x = 3e-39 (x * x underflows) and cancelled to noise
    # for |x| ~ 1e-4 in float32; the slope there is -pi**2 x / 3
    xs = [2.9387e-39, 1e-20, 1e-5, 1e-4, 0.01]
    x = ember.tensor(xs, dtype=getattr(ember, dt), requires_grad=True)
    y = ember.sinc(x)
    assert y.tolist() == pytest.approx([1 - (math.pi * v) ** 2 / 6 for v in x.tolist()], rel=1e-7)
    g = ember.autograd.grad(y.sum(), [x])[0].tolist()
    want = [math.pi * sum((-1) ** k * 2 * k * (math.pi * v) ** (2 * k - 1) / math.factorial(2 * k + 1)
                          for k in range(1, 7)) for v in x.tolist()]
    np.testing.assert_allclose(g, want, rtol=1e-5 if dt == "float32" else 1e-12)
    x = ember.tensor([0.0, 0.3, 2.0], dtype=getattr(ember, dt), requires_grad=True)
    g = ember.autograd.grad(ember.sinc(x).sum(), [x])[0].tolist()
    np.testing.assert_allclose(g, [0.0, -0.9020281301388888, 0.5], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fn", ["median", "nanmedian"])
def test_median_of_empty_is_nan_with_a_gradient(fn):
    # the NaN of an empty tensor was a constant: autograd.grad raised "does not require grad"
    x = ember.zeros(0, dtype=ember.float64, requires_grad=True)
    m = getattr(ember, fn)(x)
    assert math.isnan(m.item())
    assert tuple(ember.autograd.grad(m, [x])[0].shape) == (0,)


def test_prod_gradient_with_a_tiny_factor():
    # p * (1 / x_i) overflowed: 1 / 2**-128 is inf in float32, while p / x_i is -46.04
    x = ember.tensor([0.517270725, 50.0, 2.93873588e-39, -1.13002058, -2.0, -0.787618085], requires_grad=True)
    g = ember.autograd.grad(ember.prod(x), [x])[0].tolist()
    assert all(math.isfinite(v) for v in g)
    assert g[2] == pytest.approx(0.517270725 * 50.0 * -1.13002058 * -2.0 * -0.787618085, rel=1e-6)
    y = ember.tensor([[1e-30, 2.0], [3.0, 0.0]], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.grad(ember.prod(y, 1).sum(), [y])[0].tolist() == [[2.0, 1e-30], [0.0, 3.0]]
