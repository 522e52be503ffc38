"""Every elementwise prim lowered to Triton and run under Triton's interpreter
equals its numpy reference on random data (float32/float64, integer types,
bool, half precision, casts).

One graph per family and dtype holds every op, so each family is one kernel
(the interpreter runs a kernel per program in Python: shapes are small)."""
import numpy as np
import pytest

from ._triton import ON_GPU, compile_interp, import_triton_interpreted

import_triton_interpreted()

import ember  # noqa: E402
import ember.prims as P  # noqa: E402
from ember.tensor import _make  # noqa: E402

from ._helpers import RNG, assert_same, rand, randint  # noqa: E402

DOMAIN = {
    "abs": "any", "neg": "any", "sign": "any", "exp": "any", "exp2": "any", "expm1": "any", "log": "pos",
    "log2": "pos", "log10": "pos", "log1p": "pos", "sqrt": "pos", "rsqrt": "pos", "reciprocal": "pos",
    "sin": "any", "cos": "any", "tan": "unit", "asin": "unit", "acos": "unit", "atan": "any", "sinh": "any",
    "cosh": "any", "tanh": "any", "asinh": "any", "acosh": "ge1", "atanh": "unit", "erf": "any",
    "erfc": "any", "erfinv": "unit", "lgamma": "pos", "floor": "any", "ceil": "any", "round": "halves",
    "trunc": "any",
}
FLOAT_BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum",
                "minimum", "copysign"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
UNARY_BOOL = ["isnan", "isinf", "isfinite", "signbit", "logical_not"]
INT_BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "maximum", "minimum",
              "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"]
TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-13, atol=1e-14)}
SHAPE = (5, 23)


@pytest.fixture(scope="module", params=[np.float32, np.float64], ids=["float32", "float64"])
def float_results(request):
    dtype = request.param
    ins = {
        "any": rand(*SHAPE, dtype=dtype, lo=-3, hi=3),
        "pos": rand(*SHAPE, dtype=dtype, lo=0.05, hi=6),
        "unit": rand(*SHAPE, dtype=dtype, lo=-0.95, hi=0.95),
        "ge1": rand(*SHAPE, dtype=dtype, lo=1.01, hi=6),
        "halves": _make((RNG.integers(-20, 20, size=SHAPE) * 0.5).astype(dtype)),
    }
    names = list(ins)
    b = rand(*SHAPE, dtype=dtype, lo=0.3, hi=3)
    bneg = _make(np.where(RNG.random(SHAPE) < 0.5, -1, 1).astype(dtype) * b.numpy())
    special = _make(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0,
                              3e38 if dtype == np.float32 else 1e300], dtype=dtype))

    def fn(any_, pos, unit, ge1, halves, b, bneg, special):
        d = dict(zip(names, (any_, pos, unit, ge1, halves)))
        out = {f"u_{op}": getattr(P, op)(d[dom]) for op, dom in DOMAIN.items()}
        for op in FLOAT_BINARY:
            x = d["pos"] if op == "pow" else d["any"]
            out[f"b_{op}"] = getattr(P, op)(x, bneg if op != "pow" else b)
        out["b_maximum_nan"] = P.maximum(special, P.flip(special, [0]))
        out["b_minimum_nan"] = P.minimum(special, P.flip(special, [0]))
        out["b_floor_divide_zero"] = P.floor_divide(special, P.flip(special, [0]))
        for op in COMPARE:
            out[f"c_{op}"] = getattr(P, op)(d["halves"], P.round(d["any"]))
        for op in UNARY_BOOL:
            out[f"ub_{op}"] = getattr(P, op)(special)
        out["u_sign_special"] = P.sign(special)
        out["scalar_mul"] = P.mul(d["any"], 2.5)
        out["scalar_rsub"] = P.sub(1.0, d["any"])
        out["where"] = P.where(P.gt(d["any"], 0.0), d["any"], P.mul(d["any"], 0.1))
        return out

    args = [ins[n] for n in names] + [b, bneg, special]
    cg, got, want = compile_interp(fn, *args)
    keys = sorted(fn(*args))
    return dtype, dict(zip(keys, got)), dict(zip(keys, want)), cg


FLOAT_KEYS = ([f"u_{op}" for op in DOMAIN] + [f"b_{op}" for op in FLOAT_BINARY] +
              ["b_maximum_nan", "b_minimum_nan", "b_floor_divide_zero", "u_sign_special"] +
              [f"c_{op}" for op in COMPARE] + [f"ub_{op}" for op in UNARY_BOOL] +
              ["scalar_mul", "scalar_rsub", "where"])


@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_float_pointwise(float_results, key):
    dtype, got, want, _ = float_results
    tol = TOL[dtype]
    if key in ("u_lgamma", "u_erfinv", "u_tan", "b_pow", "u_acosh", "u_atanh"):
        tol = dict(rtol=tol["rtol"] * 4, atol=tol["atol"] * 4)
    assert_same(got[key], want[key], **tol)


INT_DTYPES = [np.int8, np.int32, np.int64, np.uint8]


@pytest.fixture(scope="module")
def int_results():
    ins = []
    for dt in INT_DTYPES:
        lo, hi = (0, 255) if dt == np.uint8 else (-100, 100)
        a = randint(*SHAPE, dtype=dt, lo=lo, hi=hi)
        bb = np.asarray(RNG.integers(lo, hi, size=SHAPE)).astype(dt)
        bb[bb == 0] = 1  # (division by zero raises: test_int_zero_division_s52.py)
        if dt != np.uint8:
            bb[1, :5] = -1
        sh = RNG.integers(0, 12, size=SHAPE)
        sh[2, :3] = [70, 8 * np.dtype(dt).itemsize, 200 if dt == np.uint8 else -3]  # out-of-range shifts
        ins += [a, _make(bb), _make(sh.astype(dt))]
    ins.append(_make(RNG.random(SHAPE) < 0.5))
    ins.append(_make(RNG.random(SHAPE) < 0.5))

    def fn(*args):
        out = {}
        for k, dt in enumerate(INT_DTYPES):
            a, b, sh = args[3 * k:3 * k + 3]
            n = np.dtype(dt).name
            for op in INT_BINARY:
                rhs = sh if op.startswith("shift") else b
                out[f"{n}_{op}"] = getattr(P, op)(a, rhs)
            ed = ember.types.from_numpy_dtype(np.dtype(dt))
            out[f"{n}_pow"] = P.pow(a, P.convert_element_type(P.remainder(sh, 4), ed))
            for op in ("abs", "neg", "sign", "bitwise_not", "floor", "round", "signbit", "isnan", "isinf",
                       "isfinite", "logical_not"):
                if op == "neg" and dt == np.uint8:
                    continue
                out[f"{n}_{op}"] = getattr(P, op)(a)
            for op in ("lt", "eq", "logical_and"):
                out[f"{n}_{op}"] = getattr(P, op)(a, b)
            out[f"{n}_scalar"] = P.add(P.mul(a, 3), 7)
        p, q = args[-2:]
        for op in ("add", "mul", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor",
                   "logical_xor", "eq", "ne"):
            out[f"bool_{op}"] = getattr(P, op)(p, q)
        out["bool_not"] = P.bitwise_not(p)
        out["bool_where"] = P.where(p, q, P.logical_not(q))
        return out

    cg, got, want = compile_interp(fn, *ins)
    keys = sorted(fn(*ins))
    return dict(zip(keys, got)), dict(zip(keys, want))


def _int_keys():
    keys = []
    for dt in INT_DTYPES:
        n = np.dtype(dt).name
        keys += [f"{n}_{op}" for op in INT_BINARY + ["pow", "abs", "sign", "bitwise_not", "floor", "round",
                                                     "signbit", "isnan", "isinf", "isfinite", "logical_not",
                                                     "lt", "eq", "logical_and", "scalar"]]
        if dt != np.uint8:
            keys.append(f"{n}_neg")
    keys += [f"bool_{op}" for op in ("add", "mul", "maximum", "minimum", "bitwise_and", "bitwise_or",
                                     "bitwise_xor", "logical_xor", "eq", "ne", "not", "where")]
    return keys


@pytest.mark.parametrize("key", _int_keys())
def test_int_bool_pointwise(int_results, key):
    got, want = int_results
    assert_same(got[key], want[key])


def test_convert_element_type():
    x = rand(5, 33, dtype=np.float32, lo=-100, hi=100)
    i = randint(5, 33, dtype=np.int64, lo=-1000, hi=1000)
    dts = [ember.float64, ember.int32, ember.int8, ember.bool, ember.float16, ember.bfloat16, ember.uint8]

    def fn(x, i):
        out = {}
        for d in dts:
            out[f"x_{d}"] = P.convert_element_type(P.abs(x) if d is ember.uint8 else x, d)
            out[f"i_{d}"] = P.convert_element_type(i, d)
        out["x_f16_rt"] = P.convert_element_type(P.convert_element_type(x, ember.float16), ember.float32)
        out["x_bf16_rt"] = P.convert_element_type(P.convert_element_type(x, ember.bfloat16), ember.float32)
        out["b_f32"] = P.convert_element_type(P.gt(x, 0.0), ember.float32)
        return out

    _, got, want = compile_interp(fn, x, i)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_half_precision_chain():
    """float16/bfloat16 are computed in float32 inside the kernel and rounded when stored."""
    for np_dt, ed in ((np.float16, ember.float16), (ember.bfloat16.np, ember.bfloat16)):
        x = _make(RNG.uniform(-2, 2, size=(6, 40)).astype(np_dt))
        y = _make(RNG.uniform(-2, 2, size=(6, 40)).astype(np_dt))
        _, got, want = compile_interp(lambda x, y: (P.tanh(P.mul(x, y)), P.sum(x, [1]), P.amax(y, [0])), x, y)
        tol = 1e-2 if ed is ember.bfloat16 else 2e-3
        for g, w in zip(got, want):
            assert_same(g, w, rtol=tol, atol=tol)


@pytest.mark.skipif(ON_GPU, reason="device-side checks are the interpreter's (debug=True); a GPU build has none")
@pytest.mark.parametrize("prim", ["div", "floor_divide", "remainder", "fmod"])
def test_integer_division_by_zero_raises(prim):
    """As the eager prim (RuntimeError "ZeroDivisionError"): a device assertion under the
    interpreter; masked-off lanes (loaded as 0) do not trip it."""
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor.codegen.triton_wrapper import compile_graph_triton
    a = randint(3, 37, dtype=np.int32, lo=-50, hi=50)
    good = _make(np.asarray(RNG.integers(1, 9, size=(3, 37)), dtype=np.int32))
    gm = make_fx(lambda a, b: getattr(P, prim)(a, b))(a, good)
    cg = compile_graph_triton(gm, [a, good], mode="interpret")
    np.testing.assert_array_equal(cg(a, good).numpy(), gm(a, good).numpy())
    bad = good.numpy().copy()
    bad[1, 5] = 0
    with pytest.raises(Exception, match="ZeroDivisionError"):
        cg(a, _make(bad))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        gm(a, _make(bad))
