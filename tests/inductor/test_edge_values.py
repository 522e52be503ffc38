"""Edge values (NaN, ±inf, -0.0, out-of-range scalars, half-precision accumulation): each case
runs in PyTorch (the truth), in ember eager and compiled by ``ember.compile`` (the inductor),
and all three must agree -- values, NaN positions, the sign of zeros, dtypes and shapes, or
raising alike.

Every case here was a silent wrong answer in eager, compiled, or both."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

nan, inf = float("nan"), float("inf")


def _raw(fn):
    """An input built by ``fn(lib)`` (0-d tensors and the like)."""
    return ("raw", fn)


def _make(lib, v, dt):
    if isinstance(v, tuple) and v and v[0] == "raw":
        return v[1](lib)
    return lib.tensor(v, dtype=getattr(lib, dt))


def _norm(v):
    if isinstance(v, (tuple, list)):
        return tuple(_norm(u) for u in v)
    if isinstance(v, torch.Tensor):
        v = v.detach()
        name = str(v.dtype).split(".")[-1]
        return name, (v.float() if v.dtype == torch.bfloat16 else v).numpy()
    name = str(v.dtype).split(".")[-1]
    return name, (v.float() if v.dtype is ember.bfloat16 else v).detach().numpy()


def _assert_same(got, want, tol, what):
    if isinstance(want, tuple) and want and isinstance(want[0], tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for g, w in zip(got, want):
            _assert_same(g, w, tol, what)
        return
    assert got[0] == want[0], f"{what}: dtype {got[0]} != {want[0]}"
    g, w = np.asarray(got[1]), np.asarray(want[1])
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    if w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol * 1e-3, equal_nan=True, err_msg=what)
    zero = (g64 == 0) & (w64 == 0)
    np.testing.assert_array_equal(np.signbit(g64[zero]), np.signbit(w64[zero]), err_msg=f"{what}: sign of zero")


def _run(lib, fn, args, dts, compiled=False):
    xs = [_make(lib, a, d) for a, d in zip(args, dts)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if compiled:
            return ember.compile(lambda *t: fn(ember, *t))(*xs)
        return fn(lib, *xs)


def check(fn, args, dt, tol=None):
    dts = dt if isinstance(dt, (list, tuple)) else [dt] * len(args)
    if tol is None:
        tol = 1e-2 if {"float16", "bfloat16"} & set(dts) else 1e-5
    try:
        want = _run(torch, fn, args, dts)
    except RuntimeError as e:
        msg = str(e)
        with pytest.raises(RuntimeError, match=msg[:30]):
            _run(ember, fn, args, dts)
        with pytest.raises(RuntimeError, match=msg[:30]):
            _run(ember, fn, args, dts, compiled=True)
        return
    want = _norm(want)
    _assert_same(_norm(_run(ember, fn, args, dts)), want, tol, "eager vs torch")
    _assert_same(_norm(_run(ember, fn, args, dts, compiled=True)), want, tol, "compiled vs torch")


FLOATS = ["float32", "float64", "float16", "bfloat16"]
SPECIAL = [nan, inf, -inf, -0.0, 0.0, 2.5, -2.5, 0.5]

# ---------------------------------------------------------------------- sign: (0 < x) - (x < 0)
SIGN = {f"sign_{dt}": (lambda L, x: x.sign(), [SPECIAL], dt) for dt in FLOATS}
SIGN["sgn_float32"] = (lambda L, x: x.sgn(), [SPECIAL], "float32")
SIGN["sign_0d_nan"] = (lambda L, x: x.sign(), [_raw(lambda L: L.tensor(nan))], "float32")
SIGN["abs_grad_free_sign_use"] = (lambda L, x: (x + 1).sign() * x, [SPECIAL], "float32")

# ---------------------------------------------------------------------- softmax family with ±inf / NaN
_ROWS = [[inf, 1., 2.], [-inf, -inf, -inf], [-inf, 1., 2.], [inf, inf, 1.], [nan, 1., 2.], [1., 2., 3.]]
SOFTMAX = {}
for _dt in ["float32", "float64", "float16"]:
    SOFTMAX[f"softmax_{_dt}"] = (lambda L, x: x.softmax(-1), [_ROWS], _dt)
    SOFTMAX[f"log_softmax_{_dt}"] = (lambda L, x: x.log_softmax(-1), [_ROWS], _dt)
    SOFTMAX[f"softmax_dim0_{_dt}"] = (lambda L, x: x.t().softmax(0), [_ROWS], _dt)
SOFTMAX["cross_entropy"] = (lambda L, x: L.nn.functional.cross_entropy(
    x, L.tensor([1, 0, 2, 2, 0, 1]), reduction="none"), [_ROWS], "float32")
SOFTMAX["cross_entropy_mean"] = (lambda L, x: L.nn.functional.cross_entropy(
    x[0:3], L.tensor([1, 1, 2])), [_ROWS], "float32")
for _v in (nan, inf, -inf):
    _z = _raw((lambda v: lambda L: L.tensor(v))(_v))
    SOFTMAX[f"softmax_0d_{_v}"] = (lambda L, x: x.softmax(0), [_z], "float32")
    SOFTMAX[f"log_softmax_0d_{_v}"] = (lambda L, x: x.log_softmax(-1), [_z], "float32")

# ---------------------------------------------------------------------- signed zeros in sums
ZERO_SUMS = {
    "sum_0d_negzero": (lambda L, x: x.sum(), [_raw(lambda L: L.tensor(-0.0))], "float32"),
    "sum_0d_negzero_dim": (lambda L, x: x.sum(0), [_raw(lambda L: L.tensor(-0.0))], "float64"),
    "mean_0d_negzero": (lambda L, x: x.mean(), [_raw(lambda L: L.tensor(-0.0))], "float32"),
    "sum_0d_negzero_f16": (lambda L, x: x.half().sum(), [_raw(lambda L: L.tensor(-0.0))], "float32"),
    "cumsum_negzero": (lambda L, x: x.cumsum(-1), [[[-0.0, -0.0], [0.0, -0.0]]], "float32"),
    "cumsum_negzero_f16": (lambda L, x: x.cumsum(0), [[-0.0]], "float16"),
}

# ---------------------------------------------------------------------- negative literal bases (FX codegen)
NEG_BASE = {
    "rpow_neg_one": (lambda L, x: (-1.0) ** x, [[2.0, 3.0, 2.5, 0.0, nan, inf]], "float32"),
    "rpow_neg_two": (lambda L, x: (-2.0) ** x, [[2.0, 3.0, 2.5, 0.0, -1.0]], "float32"),
    "rpow_neg_inf": (lambda L, x: (-inf) ** x, [[2.0, 3.0, -1.0, 0.5]], "float64"),
    "rpow_neg_int": (lambda L, x: (-3) ** x, [[0, 1, 2, 3]], "int64"),
}

# ---------------------------------------------------------------------- threshold keeps NaN
THRESHOLD = {f"threshold_{dt}": (lambda L, x: L.nn.functional.threshold(x, 0.5, -3.0), [SPECIAL], dt)
             for dt in FLOATS}

# ---------------------------------------------------------------------- pow: PyTorch's special cases
POW = {}
for _dt in ["float32", "float64", "bfloat16"]:
    POW[f"pow_m05_{_dt}"] = (lambda L, x: x ** -0.5, [SPECIAL], _dt)      # rsqrt: (-0.0) ** -0.5 is -inf
for _dt in FLOATS:
    # a tensor exponent is C pow: (-inf) ** 0.5 is +inf, (-0.0) ** 0.5 is +0.0 (GCC's vectorised
    # powf(x, 0.5f) was sqrt)
    POW[f"pow_tensor_05_{_dt}"] = (lambda L, x: L.pow(x, L.full_like(x, 0.5)), [SPECIAL * 3], _dt, 1e-2)
POW["pow_05_float16"] = (lambda L, x: x ** 0.5, [SPECIAL], "float16", 1e-2)          # C pow for half
POW["pow_03_bfloat16"] = (lambda L, x: x ** 0.3, [[1e30, 2.0, 7.0]], "bfloat16", 1e-3)   # exponent rounded to bf16
POW["rpow_03_bfloat16"] = (lambda L, x: 0.3 ** x, [[2.0, -2.0, -3.0, -0.5]], "bfloat16", 1e-3)
POW["rpow_big_float16"] = (lambda L, x: 1e10 ** x, [[0.5, -0.5, 0.0]], "float16")      # base rounds to inf
POW["pow_overflow_exponent_float16"] = (lambda L, x: x ** 1e10, [[0.5, 2.0]], "float16")  # an error

# ---------------------------------------------------------------------- accumulation dtypes
ACC = {
    "sum_dtype_int8": (lambda L, x: x.sum(1, dtype=L.int8), [[[7, -7, 100, 100, 1]]], "int64"),
    "sum_dtype_int32": (lambda L, x: x.sum(dtype=L.int32), [[[2**31 - 1, 1]]], "int64"),
    "sum_bfloat16_acc": (lambda L, x: x.sum(1), [[[256.] + [1.] * 7]], "bfloat16"),
    "cumsum_float16_acc": (lambda L, x: x.cumsum(1), [[[2048.] + [1.] * 7]], "float16"),
    "cumsum_bfloat16_acc": (lambda L, x: x.cumsum(1), [[[256.] + [1.] * 7]], "bfloat16"),
    "cumprod_float16_acc": (lambda L, x: x.cumprod(1), [[[300., 300., 1e-3]]], "float16"),
}

CASES = {**SIGN, **SOFTMAX, **ZERO_SUMS, **NEG_BASE, **THRESHOLD, **POW, **ACC}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_values(name):
    fn, args, dt, *tol = CASES[name]
    check(fn, args, dt, *tol)


def test_fx_code_parenthesises_negative_literals():
    """``operator.pow(-2.0, x)`` printed as ``-2.0 ** x`` ran as ``-(2.0 ** x)``."""
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm.code)
        return gm

    f = ember.compile(lambda x: (-2.0) ** x, backend=backend)
    out = f(ember.tensor([2.0, 3.0]))
    np.testing.assert_array_equal(out.numpy(), [4.0, -8.0])
    assert "(-2.0) ** " in seen[0]
