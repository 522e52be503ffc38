"""Elementwise prims: unary math, binary arithmetic, comparisons, logical and
bitwise ops, ``where`` and ``convert_element_type``.

Semantics shared by all of them (why: a code generator lowers each prim to one
expression per element, so nothing may depend on broadcasting or promotion):

* tensor operands have the same shape and the same dtype (checked; the error
  names the prim and the argument); a Python number operand takes the tensor
  operands' dtype, and is refused when it is of a higher kind (a float with an
  integer tensor);
* the result has the operands' shape and dtype (comparisons, ``is*``,
  ``signbit`` and the ``logical_*`` prims give bool);
* float16/bfloat16 are computed in float32 and rounded once at the end;
* IEEE rules: no exceptions, NaN/inf propagate; integer arithmetic wraps.
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as _t
from ..ops import _meta
from ..ops._helpers import int_zero_check
from ._defprim import (check_dtype, check_operands, compute_np, defprim, dtype_of, fail, finish,
                       is_scalar, scalar_array)

__all__: list = []   # prim names defined here (bound in ember.prims)

FLOAT = frozenset({"floating"})
INT = frozenset({"integer"})
INTB = frozenset({"integer", "bool"})
NUM = frozenset({"integer", "floating"})
ANY = frozenset({"integer", "floating", "bool"})


def _export(b):
    """Prims are exported by ``ember.prims`` (from ``PRIMS``), not as module globals here:
    names like ``slice``, ``sum``, ``abs``, ``round`` would shadow builtins."""
    __all__.append(b.__name__)
    return b


def _erf_funcs():
    from ..ops import pointwise as pw
    return pw._erf_erfc, pw._erfinv


def _erf(xp, x):
    return _erf_funcs()[0](xp, x, x.dtype != np.float64)[0]


def _erfc(xp, x):
    return _erf_funcs()[0](xp, x, x.dtype != np.float64)[1]


def _erfinv(xp, x):
    return _erf_funcs()[1](xp, x, x.dtype != np.float64)


_LGAMMA = np.frompyfunc(lambda v: math.lgamma(v) if math.isfinite(v) and not (v <= 0 and v == int(v))
                        else (math.inf if not math.isnan(v) else math.nan), 1, 1)


def _lgamma(xp, x):
    return np.asarray(_LGAMMA(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _round_half_even(xp, x):
    return xp.rint(x)


def _sign(xp, x):
    if x.dtype == np.bool_:
        return x.copy()
    # (0 < x) - (x < 0), as PyTorch: NaN gives 0 (xp.sign would give NaN), -0.0 gives +0.0
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


# ---------------------------------------------------------------------- unary
def _meta_unary(out_dtype=None):
    def meta(a):
        return _meta.pointwise_out(tuple(a.shape), out_dtype or a.dtype, a)
    return meta


def _unary(name, fn, kinds, doc, *, out_bool=False, int_fn=None):
    """Register unary prim ``name``: ``fn(xp, x)`` over the compute dtype.
    ``int_fn`` (if given) handles integer/bool inputs exactly, without a float detour."""
    def check(a):
        if is_scalar(a):
            fail(name, "argument 'a' must be a tensor, not a Python number")
        check_dtype(name, "a", a, kinds)

    def kernel(xp, a):
        dt = dtype_of(a)
        out_dt = _t.bool_ if out_bool else dt
        with np.errstate(all="ignore"):
            if dt.category < 2 and int_fn is not None:
                return finish(xp, int_fn(xp, a), out_dt)
            r = fn(xp, a.astype(compute_np(dt), copy=False))
        return finish(xp, r, out_dt)
    kernel.__name__ = name
    meta = _meta_unary(_t.bool_ if out_bool else None)
    return _export(defprim(f"{name}(Tensor a) -> Tensor", meta=meta, tags=("pointwise",), check=check,
                           doc=doc)(kernel))


_F = "Floating tensors only; the result has the input's dtype."
_unary("abs", lambda xp, x: xp.abs(x), NUM, "|a|. Integer abs wraps (abs(INT_MIN) == INT_MIN).",
       int_fn=lambda xp, x: xp.abs(x))
_unary("neg", lambda xp, x: -x, NUM, "-a. Integer negation wraps.", int_fn=lambda xp, x: -x)
_unary("sign", _sign, ANY, "-1, 0 or 1 by the sign of a: (0 < a) - (a < 0), so NaN and -0.0 give 0 (bool is unchanged).",
       int_fn=_sign)
_unary("exp", lambda xp, x: xp.exp(x), FLOAT, "e**a. " + _F)
_unary("exp2", lambda xp, x: xp.exp2(x), FLOAT, "2**a. " + _F)
_unary("expm1", lambda xp, x: xp.expm1(x), FLOAT, "e**a - 1, accurate near 0. " + _F)
_unary("log", lambda xp, x: xp.log(x), FLOAT, "Natural log (log(0) = -inf, log(<0) = NaN). " + _F)
_unary("log2", lambda xp, x: xp.log2(x), FLOAT, "Base-2 log. " + _F)
_unary("log10", lambda xp, x: xp.log10(x), FLOAT, "Base-10 log. " + _F)
_unary("log1p", lambda xp, x: xp.log1p(x), FLOAT, "log(1 + a), accurate near 0. " + _F)
_unary("sqrt", lambda xp, x: xp.sqrt(x), FLOAT, "Square root (NaN below 0). " + _F)
_unary("rsqrt", lambda xp, x: 1.0 / xp.sqrt(x), FLOAT, "1 / sqrt(a). " + _F)
_unary("reciprocal", lambda xp, x: 1.0 / x, FLOAT, "1 / a (±inf at ±0). " + _F)
_unary("sin", lambda xp, x: xp.sin(x), FLOAT, "Sine (radians). " + _F)
_unary("cos", lambda xp, x: xp.cos(x), FLOAT, "Cosine (radians). " + _F)
_unary("tan", lambda xp, x: xp.tan(x), FLOAT, "Tangent (radians). " + _F)
_unary("asin", lambda xp, x: xp.arcsin(x), FLOAT, "Arc sine (NaN outside [-1, 1]). " + _F)
_unary("acos", lambda xp, x: xp.arccos(x), FLOAT, "Arc cosine (NaN outside [-1, 1]). " + _F)
_unary("atan", lambda xp, x: xp.arctan(x), FLOAT, "Arc tangent. " + _F)
_unary("sinh", lambda xp, x: xp.sinh(x), FLOAT, "Hyperbolic sine. " + _F)
_unary("cosh", lambda xp, x: xp.cosh(x), FLOAT, "Hyperbolic cosine. " + _F)
_unary("tanh", lambda xp, x: xp.tanh(x), FLOAT, "Hyperbolic tangent. " + _F)
_unary("asinh", lambda xp, x: xp.arcsinh(x), FLOAT, "Inverse hyperbolic sine. " + _F)
_unary("acosh", lambda xp, x: xp.arccosh(x), FLOAT, "Inverse hyperbolic cosine (NaN below 1). " + _F)
_unary("atanh", lambda xp, x: xp.arctanh(x), FLOAT, "Inverse hyperbolic tangent (±inf at ±1). " + _F)
_unary("erf", _erf, FLOAT, "The error function 2/sqrt(pi) * integral_0^a exp(-t^2) dt. " + _F)
_unary("erfc", _erfc, FLOAT, "1 - erf(a), accurate in the tails. " + _F)
_unary("erfinv", _erfinv, FLOAT, "Inverse of erf on (-1, 1) (±inf at ±1, NaN outside). " + _F)
_unary("lgamma", _lgamma, FLOAT, "log|Gamma(a)| (+inf at the poles 0, -1, -2, ...). " + _F)
_unary("floor", lambda xp, x: xp.floor(x), NUM, "Round toward -inf (integers unchanged).",
       int_fn=lambda xp, x: x.copy())
_unary("ceil", lambda xp, x: xp.ceil(x), NUM, "Round toward +inf (integers unchanged).",
       int_fn=lambda xp, x: x.copy())
_unary("round", _round_half_even, NUM, "Round to the nearest integer, ties to even (integers unchanged).",
       int_fn=lambda xp, x: x.copy())
_unary("trunc", lambda xp, x: xp.trunc(x), NUM, "Round toward 0 (integers unchanged).",
       int_fn=lambda xp, x: x.copy())
_unary("bitwise_not", lambda xp, x: ~x, INTB, "~a (logical not for bool). Integer/bool tensors only.",
       int_fn=lambda xp, x: xp.invert(x))

_unary("isnan", lambda xp, x: xp.isnan(x), ANY, "a != a, as bool (False for integers).", out_bool=True,
       int_fn=lambda xp, x: xp.zeros(x.shape, dtype=bool))
_unary("isinf", lambda xp, x: xp.isinf(x), ANY, "a is ±inf, as bool (False for integers).", out_bool=True,
       int_fn=lambda xp, x: xp.zeros(x.shape, dtype=bool))
_unary("isfinite", lambda xp, x: xp.isfinite(x), ANY, "a is neither inf nor NaN, as bool (True for integers).",
       out_bool=True, int_fn=lambda xp, x: xp.ones(x.shape, dtype=bool))
_unary("signbit", lambda xp, x: xp.signbit(x), ANY, "The sign bit of a (True for -0.0 and negative "
       "numbers; False for bool).", out_bool=True,
       int_fn=lambda xp, x: x < 0 if x.dtype != np.bool_ else xp.zeros(x.shape, dtype=bool))
_unary("logical_not", lambda xp, x: x == 0, ANY, "a == 0, as bool.", out_bool=True,
       int_fn=lambda xp, x: x == 0)


# ---------------------------------------------------------------------- binary
def _meta_nary(out_bool=False):
    def meta(*args):
        ts = [a for a in args if not is_scalar(a)]
        t = ts[0]
        return _meta.pointwise_out(tuple(t.shape), _t.bool_ if out_bool else t.dtype, *ts)
    return meta


def _operands(xp, args, dt, cnp):
    out = []
    for a in args:
        if is_scalar(a):
            out.append(scalar_array(xp, a, dt).astype(cnp))
        else:
            out.append(a.astype(cnp, copy=False))
    return out


def _binary(name, fn, kinds, doc, *, out_bool=False, int_fn=None, names=("a", "b")):
    """Register binary prim ``name``: ``fn(xp, x, y)`` over the compute dtype (``int_fn`` for
    integer/bool operands, in their own dtype)."""
    def check(a, b):
        check_operands(name, names, (a, b))
        for n, v in zip(names, (a, b)):
            if not is_scalar(v):
                check_dtype(name, n, v, kinds)
                break

    def kernel(xp, a, b):
        t = a if not is_scalar(a) else b
        dt = dtype_of(t)
        out_dt = _t.bool_ if out_bool else dt
        with np.errstate(all="ignore"):
            if dt.category < 2 and int_fn is not None:
                x, y = _operands(xp, (a, b), dt, dt.np)
                return finish(xp, int_fn(xp, x, y), out_dt)
            x, y = _operands(xp, (a, b), dt, compute_np(dt))
            r = fn(xp, x, y)
        return finish(xp, r, out_dt)
    kernel.__name__ = name
    return _export(defprim(f"{name}(Tensor|Scalar {names[0]}, Tensor|Scalar {names[1]}) -> Tensor",
                           meta=_meta_nary(out_bool), tags=("pointwise",), check=check, doc=doc)(kernel))


def _int_div_trunc(xp, x, y):
    """C-style truncating integer division. By zero it raises, as PyTorch's eager kernel and
    ember's op do: until session 52 the prims gave 0 there, so a compiled ``a // b`` returned 0
    where eager raised (the C++ kernels now flag it, the Triton ones assert); no decomposition
    divides by an integer that can be 0."""
    int_zero_check(xp, y)
    safe = xp.where(y == 0, 1, y)
    q = xp.floor_divide(x, safe)
    r = x - q * safe
    q = xp.where((r != 0) & ((x < 0) != (safe < 0)), q + 1, q)
    return xp.where(y == 0, 0, q)


def _int_floordiv(xp, x, y):
    int_zero_check(xp, y)
    safe = xp.where(y == 0, 1, y)
    return xp.where(y == 0, 0, xp.floor_divide(x, safe))


def _int_remainder(xp, x, y):
    int_zero_check(xp, y)
    safe = xp.where(y == 0, 1, y)
    return xp.where(y == 0, 0, xp.remainder(x, safe))


def _int_fmod(xp, x, y):
    int_zero_check(xp, y)
    safe = xp.where(y == 0, 1, y)
    return xp.where(y == 0, 0, xp.fmod(x, safe))


def _float_floordiv(xp, x, y):
    """PyTorch's div_floor for floats: floor(a / b) computed from fmod so it is exact."""
    mod = xp.fmod(x, y)
    div = (x - mod) / y
    fix = (mod != 0) & ((y < 0) != (mod < 0))
    div = xp.where(fix, div - 1, div)
    fl = xp.floor(div)
    fl = xp.where(div - fl > 0.5, fl + 1, fl)
    out = xp.where(div != 0, fl, xp.copysign(xp.zeros_like(div), x / y))
    return xp.where(y == 0, x / y, out)


def _int_pow(xp, x, y):
    if (y < 0).any():
        # PyTorch: integers to negative integer powers are an error
        raise RuntimeError("prims.pow: integers to negative integer powers are not allowed")
    return xp.power(x, y)


def _shift(left):
    def fn(xp, x, y):
        bits = x.dtype.itemsize * 8
        big = (y >= bits) | (y < 0)
        ys = xp.where(big, 0, y).astype(x.dtype)
        r = xp.left_shift(x, ys) if left else xp.right_shift(x, ys)
        if left:
            fill = xp.zeros_like(x)
        else:
            fill = xp.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else xp.zeros_like(x)
        return xp.where(big, fill, r)
    return fn


def _bool_or_int(fn_bool, fn_int):
    return lambda xp, x, y: fn_bool(xp, x, y) if x.dtype == np.bool_ else fn_int(xp, x, y)


def _no_bool(name, fn):
    def f(xp, x, y):
        if x.dtype == np.bool_:
            raise RuntimeError(f"prims.{name}: not defined for bool tensors (decompositions turn bool "
                               f"arithmetic into logical prims)")
        return fn(xp, x, y)
    return f


_binary("add", lambda xp, x, y: x + y, ANY, "a + b (bool: logical or). Integer overflow wraps.",
        int_fn=_bool_or_int(lambda xp, x, y: x | y, lambda xp, x, y: x + y))
_binary("sub", lambda xp, x, y: x - y, NUM, "a - b. Integer overflow wraps.",
        int_fn=lambda xp, x, y: x - y)
_binary("mul", lambda xp, x, y: x * y, ANY, "a * b (bool: logical and). Integer overflow wraps.",
        int_fn=_bool_or_int(lambda xp, x, y: x & y, lambda xp, x, y: x * y))
_binary("div", lambda xp, x, y: x / y, NUM, "a / b: true division for floats, truncation toward zero for "
        "integers (integer division by zero raises RuntimeError).", int_fn=_int_div_trunc)
_binary("floor_divide", _float_floordiv, NUM, "floor(a / b), computed exactly (PyTorch's div_floor; integer "
        "division by zero raises RuntimeError).", int_fn=_int_floordiv)


def _float_remainder(xp, x, y):
    """fmod moved into the divisor's sign; a zero keeps fmod's sign (ember.ops.pointwise)."""
    m = xp.fmod(x, y)
    return xp.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)


_binary("remainder", _float_remainder, NUM, "a - floor(a / b) * b: a non-zero result has the sign of "
        "the divisor (Python's %), a zero one the dividend's (fmod's, as PyTorch: remainder(-4., 2.) "
        "is -0.0).", int_fn=_int_remainder)
_binary("fmod", lambda xp, x, y: xp.fmod(x, y), NUM, "C fmod: a - trunc(a / b) * b, the sign of the dividend.",
        int_fn=_int_fmod)
def _pow(xp, x, y):
    """C's pow: numpy's (SIMD) power takes x ** 0.5 as sqrt(x) ((-inf) ** 0.5 NaN, (-0.0) ** 0.5
    -0.0); C pow gives +inf and +0.0 there."""
    r = xp.power(x, y)
    fix = (y == 0.5) & ((x == 0) | (x == -np.inf))
    if np.any(fix):
        r = xp.where(fix, xp.where(x == 0, 0.0, np.inf).astype(r.dtype), r)
    return r


_binary("pow", _pow, NUM, "a ** b (integers: exact, wrapping; a negative integer "
        "exponent is an error).", int_fn=_int_pow)
_binary("atan2", lambda xp, x, y: xp.arctan2(x, y), FLOAT, "atan2(a, b): the angle of the point (b, a). "
        "Floating tensors only.")
_binary("maximum", lambda xp, x, y: xp.maximum(x, y), ANY, "The larger of a and b; NaN if either is NaN.",
        int_fn=lambda xp, x, y: xp.maximum(x, y))
_binary("minimum", lambda xp, x, y: xp.minimum(x, y), ANY, "The smaller of a and b; NaN if either is NaN.",
        int_fn=lambda xp, x, y: xp.minimum(x, y))
_binary("copysign", lambda xp, x, y: xp.copysign(x, y), FLOAT, "|a| with the sign bit of b. Floating "
        "tensors only.")
_binary("bitwise_and", None, INTB, "a & b. Integer/bool tensors only.", int_fn=lambda xp, x, y: x & y)
_binary("bitwise_or", None, INTB, "a | b. Integer/bool tensors only.", int_fn=lambda xp, x, y: x | y)
_binary("bitwise_xor", None, INTB, "a ^ b. Integer/bool tensors only.", int_fn=lambda xp, x, y: x ^ y)
_binary("shift_left", None, INT, "a << b; shifts by b >= the bit width (or b < 0) give 0. Integer tensors "
        "only.", int_fn=_no_bool("shift_left", _shift(True)))
_binary("shift_right", None, INT, "a >> b (arithmetic for signed types); shifts by b >= the bit width (or "
        "b < 0) give 0, or -1 for negative a.", int_fn=_no_bool("shift_right", _shift(False)))
_LOGICAL = lambda op: (lambda xp, x, y: op(x != 0, y != 0))  # noqa: E731
_binary("logical_and", _LOGICAL(np.logical_and), ANY, "(a != 0) and (b != 0), as bool.", out_bool=True,
        int_fn=_LOGICAL(np.logical_and))
_binary("logical_or", _LOGICAL(np.logical_or), ANY, "(a != 0) or (b != 0), as bool.", out_bool=True,
        int_fn=_LOGICAL(np.logical_or))
_binary("logical_xor", _LOGICAL(np.logical_xor), ANY, "(a != 0) xor (b != 0), as bool.", out_bool=True,
        int_fn=_LOGICAL(np.logical_xor))
for _n, _f, _s in (("eq", np.equal, "=="), ("ne", np.not_equal, "!="), ("lt", np.less, "<"),
                   ("le", np.less_equal, "<="), ("gt", np.greater, ">"), ("ge", np.greater_equal, ">=")):
    _binary(_n, (lambda f: lambda xp, x, y: f(x, y))(_f), ANY,
            f"a {_s} b, as bool (IEEE: every comparison with NaN is False except !=).", out_bool=True,
            int_fn=(lambda f: lambda xp, x, y: f(x, y))(_f))


# ---------------------------------------------------------------------- where
def _where_check(pred, a, b):
    if is_scalar(pred) or dtype_of(pred) is not _t.bool_:
        fail("where", f"argument 'pred' must be a bool tensor, got "
                      f"{type(pred).__name__ if is_scalar(pred) else dtype_of(pred).name}")
    t, dt = check_operands("where", ("a", "b"), (a, b))
    from ._defprim import fmt_shape, same_shape
    if not same_shape(tuple(pred.shape), tuple(t.shape)):
        fail("where", f"argument 'pred' has shape {fmt_shape(pred.shape)} but 'a'/'b' have "
                      f"{fmt_shape(t.shape)} — prims do not broadcast; use prims.broadcast_in_dim")


def _where_meta(pred, a, b):
    t = a if not is_scalar(a) else b
    return _meta.pointwise_out(tuple(t.shape), t.dtype, *[x for x in (a, b) if not is_scalar(x)])


@defprim("where(Tensor pred, Tensor|Scalar a, Tensor|Scalar b) -> Tensor", meta=_where_meta,
         tags=("pointwise",), check=_where_check)
def _where(xp, pred, a, b):
    """a where pred is True, else b. ``pred`` is a bool tensor of the same shape as the tensor
    operands; ``a`` and ``b`` have one dtype (or one is a Python number taking it)."""
    t = a if not is_scalar(a) else b
    dt = dtype_of(t)
    x, y = _operands(xp, (a, b), dt, dt.np)
    return finish(xp, xp.where(pred, x, y), dt)


_export(_where)


# ---------------------------------------------------------------------- convert_element_type
def _cet_check(a, dtype):
    if is_scalar(a):
        fail("convert_element_type", "argument 'a' must be a tensor, not a Python number")
    try:
        _t.as_dtype(dtype)
    except Exception:  # noqa: BLE001
        fail("convert_element_type", f"argument 'dtype' must be an ember dtype, got {dtype!r}")


def _cet_meta(a, dtype):
    return _meta.pointwise_out(tuple(a.shape), _t.as_dtype(dtype), a)


@defprim("convert_element_type(Tensor a, ScalarType dtype) -> Tensor", meta=_cet_meta, tags=("pointwise",),
         check=_cet_check)
def _convert_element_type(xp, a, dtype):
    """``a`` converted elementwise to ``dtype`` (always a new tensor): floats to integers truncate
    toward zero (out-of-range and NaN values are unspecified), anything to bool is ``!= 0``,
    narrowing floats round to nearest even, integers wrap."""
    dt = _t.as_dtype(dtype)
    if dt is _t.bool_:
        return a != 0
    src = dtype_of(a)
    if src.np in (np.dtype(np.float16), _t.bfloat16.np) and dt.np in (np.dtype(np.float16), _t.bfloat16.np) \
            and src is not dt:
        a = a.astype(np.float32)
    if dt._limited == "float8" and xp is np and a.dtype != dt.np:
        from .._float8 import to_float8   # torch's rounding into float8 (eager's _to_copy does the same)
        return to_float8(a, dt.np)
    with np.errstate(all="ignore"):
        return a.astype(dt.np, copy=True)


_export(_convert_element_type)
