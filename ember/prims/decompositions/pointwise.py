"""Decompositions of the pointwise ops (ember/ops/pointwise.py) into prims.

Every decomposition follows the kernel's recipe step by step, made explicit:

1. the result dtype by PyTorch's promotion (``result_dtype``: tensors of
   rank > 0, then 0-d tensors, then Python numbers), float-only functions
   turning integer results into the default float dtype (``floaty``);
2. the compute dtype: float32 for float16/bfloat16 (``comp``), else the
   result dtype;
3. every tensor operand converted (``convert_element_type``) and broadcast
   (``broadcast_in_dim``) to the common shape; Python numbers stay numbers
   (a prim gives them the tensors' dtype, wrapping integers like the kernel);
4. the prim expression, then one conversion to the result dtype.

Argument errors the kernels raise from arguments alone (bool subtraction,
float-only functions on integers, a bad ``rounding_mode``) are raised by the
decompositions with the same messages. Checks on *values* cannot live in a
graph: integer division or remainder by zero, an error in the eager kernel,
gives 0 in a decomposed graph (the prims define it so).

The helpers at the top are shared with ``reductions`` and ``creation``.
"""
from __future__ import annotations

import math

import numpy as np

from ... import types as _t
from ...ops import _meta
from ...tensor import Tensor
from ..table import register_decomposition

from ember import prims  # noqa: E402  (resolved at call time)

_HALF = (_t.float16, _t.bfloat16)
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


# ---------------------------------------------------------------------- helpers
def is_tensor(x):
    return isinstance(x, Tensor)


def result_dtype(*args):
    return _meta.result_dtype(*args)


def floaty(dt):
    return dt if dt.is_floating_point else _t.get_default_dtype()


def comp(dt):
    """The dtype the kernels compute in for result dtype ``dt``."""
    return _t.float32 if dt in _HALF else dt


def to(x, dtype):
    """``x`` converted to ``dtype`` (no node when it has it already; numbers pass through)."""
    if not is_tensor(x) or x.dtype is dtype:
        return x
    return prims.convert_element_type(x, dtype)


def bcast(x, shape):
    """``x`` broadcast numpy-style (trailing dims aligned) to ``shape``; numbers pass through."""
    if not is_tensor(x):
        return x
    shape = tuple(shape)
    from .shape import same_shape
    if same_shape(x.shape, shape):    # (no guard on symbolic sizes that happen to match)
        return x
    lead = len(shape) - x.ndim
    return prims.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def common_shape(*args):
    return _meta.broadcast_shapes(*[tuple(a.shape) for a in args if is_tensor(a)])


def prep(args, dt, shape=None):
    """The operands converted to ``dt`` and broadcast to their common shape."""
    shape = common_shape(*args) if shape is None else shape
    return [bcast(to(a, dt), shape) for a in args]


def half_operands(args, dt):
    """The operands of an op whose result dtype ``dt`` is float16/bfloat16 as its kernel sees
    them: one of another dtype (a 0-dim float32/float64/int64 tensor, a Python number) rounded to
    ``dt`` first -- torch's CPU TensorIterator casts every input to the common dtype before the
    kernel computes in float32 -- through float32, as c10::Half/BFloat16 are built from a float
    (eager: ``ember.ops.pointwise._operand``). Other result dtypes: the operands unchanged."""
    if dt not in _HALF:
        return list(args)
    out = []
    for a in args:
        if is_tensor(a):
            out.append(a if a.dtype is dt else to(to(a, _t.float32), dt))
        elif isinstance(a, (bool, np.bool_)):
            out.append(a)
        else:
            with np.errstate(all="ignore"):
                out.append(float(np.float32(a).astype(dt.np)))
    return out


def _one_element(x):
    """Whether tensor ``x`` surely has one element (a symbolic size is not 1: dynamo specializes
    sizes 0 and 1)."""
    return all(isinstance(s, (int, np.integer)) and s == 1 for s in x.shape)


def scalar_path_operands(args, dt):
    """The two operands of mul / div / floor_divide (every rounding mode) whose result dtype
    ``dt`` is float16/bfloat16, as their CPU kernels see them: a one-element second operand (a
    Python number, a 0-dim or size-1 tensor: TensorIterator's ``is_scalar(2)``) is read
    unrounded (``original_scalar_value``); any other operand of another dtype (the first one,
    an int64 tensor of many elements) is cast to ``dt`` before the kernel, as ``half_operands``
    (eager: ``ember.ops.pointwise._scalar_path_operand``). Other result dtypes: unchanged."""
    a, b = args
    if dt not in _HALF:
        return [a, b]
    a = half_operands((a,), dt)[0]
    if is_tensor(b) and not _one_element(b):
        b = half_operands((b,), dt)[0]
    return [a, b]


def fresh(x):
    """A new tensor with ``x``'s values: a decomposition must not return its input object
    (autograd would attach the op's history to the input itself)."""
    return prims.clone(x)


def full(shape, value, dtype, device):
    return prims.full(tuple(shape), value, dtype, device)


def scalar_of(v, dt):
    """A Python number converted the way the kernels convert it into dtype ``dt``."""
    if dt is _t.bool_:
        return bool(v)
    if dt.category == 1:
        return int(v)
    return float(v)


def _not_impl(kernel, dt):
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt.legacy_name}\'')


def _elementwise(fn, args, dt, cdt=None):
    """``fn`` over the operands converted to the compute dtype and broadcast; result in ``dt``."""
    cdt = comp(dt) if cdt is None else cdt
    xs = prep(args, cdt)
    return to(fn(*xs), dt)


def _alpha_check(dt, alpha):
    if alpha is None or (alpha == 1 and not isinstance(alpha, (bool, np.bool_))):
        return
    if isinstance(alpha, (bool, np.bool_)) and dt is not _t.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if dt.category < 2 and isinstance(alpha, (float, np.floating)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def _is_bool(x):
    return x.dtype is _t.bool_ if is_tensor(x) else isinstance(x, (bool, np.bool_))


def _sub_bool_check(a, b):
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                           "`^` or `logical_xor()` operator instead.")
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _alpha_is_one(alpha):
    return alpha == 1 and not isinstance(alpha, (bool, np.bool_))


def _scaled(x, alpha, dt):
    """Tensor ``x`` times ``alpha`` in the compute dtype (bool results: ``x and alpha``)."""
    if _alpha_is_one(alpha):
        return x
    if dt is _t.bool_:
        return prims.logical_and(x, bool(alpha))
    return prims.mul(x, alpha)


# ---------------------------------------------------------------------- arithmetic
def _half_alpha(alpha, dt):
    """add/sub/rsub's ``alpha`` as torch's float16/bfloat16 kernel multiplies by it: the Scalar
    converted to ``dt`` (through float32; a finite one out of range is an error, as eager). The
    product is rounded once with the sum (its vector path; eager also models the scalar path that
    ends each run, which rounds the product first: not in a graph)."""
    if dt not in _HALF or _alpha_is_one(alpha) or isinstance(alpha, (bool, np.bool_)):
        return alpha
    from ...ops.checked_scalar import check_fits
    check_fits(alpha, dt)
    return float(np.float32(alpha).astype(dt.np))


def _addsub(a, b, alpha, sign):
    dt = result_dtype(a, b)
    _alpha_check(dt, alpha)
    cdt = comp(dt)
    alpha = _half_alpha(alpha, dt)
    x, y = prep(half_operands((a, b), dt), cdt)
    if not is_tensor(y) and not _alpha_is_one(alpha):
        # the kernel rounds the number to the compute dtype before scaling it
        y = full(tuple(x.shape), y, cdt, x.device)
    if is_tensor(y):
        y = _scaled(y, alpha, dt)
    if dt is _t.bool_:
        return prims.logical_or(x, y)
    return to(prims.add(x, y) if sign > 0 else prims.sub(x, y), dt)


@register_decomposition("add")
def add(self, other, *, alpha=1):
    return _addsub(self, other, alpha, 1)


@register_decomposition("sub")
def sub(self, other, *, alpha=1):
    _sub_bool_check(self, other)
    return _addsub(self, other, alpha, -1)


@register_decomposition("rsub")
def rsub(self, other, *, alpha=1):
    _sub_bool_check(self, other)
    dt = result_dtype(self, other)
    _alpha_check(dt, alpha)
    alpha = _half_alpha(alpha, dt)
    x, y = prep(half_operands((self, other), dt), comp(dt))
    return to(prims.sub(y, _scaled(x, alpha, dt)), dt)


@register_decomposition("mul")
def mul(self, other):
    dt = result_dtype(self, other)
    if dt is _t.bool_:
        return _elementwise(prims.logical_and, (self, other), dt)
    return _elementwise(prims.mul, scalar_path_operands((self, other), dt), dt)


def _second_is_scalar(b):
    """Whether torch's CPU kernel reads ``b`` (the second operand) as one unrounded float
    (TensorIterator's ``is_scalar(2)``: a number or a one-element tensor)."""
    return not is_tensor(b) or _one_element(b)


def _round_to(x, dt):
    """Float32 tensor ``x`` rounded to half type ``dt`` and back: one step of a kernel that works
    on c10::Half / c10::BFloat16 values."""
    return to(to(x, dt), _t.float32)


def _half_floor_div_stepwise(a, b, dt):
    """Floor division of two float16/bfloat16 operands (float32 tensors holding ``dt`` values,
    ``a`` possibly a number) as PyTorch's CPU ``div_floor_floating(_vec)`` computes it on
    Half/BFloat16 values: fmod, the subtraction, the division and the -1 / +1 fix-ups each
    rounded to ``dt`` (eager: ``ember.ops.pointwise._half_floor_div_stepwise``)."""
    if not is_tensor(a):
        a = full(tuple(b.shape), a, b.dtype, b.device)
    r = lambda x: _round_to(x, dt)      # noqa: E731
    basic = r(prims.div(a, b))
    mod = r(prims.fmod(a, b))
    # the vector kernel's fix-up for a quotient that overflows while ``a`` is finite
    overflow = prims.logical_and(prims.eq(prims.abs(basic), math.inf), prims.ne(prims.abs(a), math.inf))
    num = prims.where(overflow, a, r(prims.sub(a, mod)))
    q = r(prims.div(num, b))
    fix = prims.logical_and(prims.ne(mod, 0), prims.logical_xor(prims.lt(b, 0), prims.lt(mod, 0)))
    q = prims.where(fix, r(prims.sub(q, 1.0)), q)
    fl = prims.floor(q)
    fl = prims.where(prims.gt(r(prims.sub(q, fl)), 0.5), r(prims.add(fl, 1.0)), fl)
    fl = prims.where(prims.eq(q, 0), prims.copysign(fl, basic), fl)     # (fl is a zero there)
    return prims.where(prims.eq(b, 0), basic, fl)


def _floor_div(a, b, dt, kname):
    if dt is _t.bool_:
        raise _not_impl(kname, dt)
    if dt in _HALF and not _second_is_scalar(b):
        x, y = prep(scalar_path_operands((a, b), dt), _t.float32)
        return to(_half_floor_div_stepwise(x, y, dt), dt)
    return _elementwise(prims.floor_divide, scalar_path_operands((a, b), dt), dt,
                        dt if dt.category == 1 else None)


def _trunc_div(x, y, dt, stepwise):
    """trunc(x / y) in the compute dtype; ``stepwise`` (a float16/bfloat16 kernel whose second
    operand is not one element: not the float32 scalar path) rounds the quotient to ``dt``
    first, as eager. (Decided on the operand before broadcasting: a broadcast 0-dim divisor is
    still the kernel's scalar.)"""
    q = prims.div(x, y)
    if stepwise:
        q = _round_to(q, dt)
    return prims.trunc(q)


@register_decomposition("div")
def div(self, other, *, rounding_mode=None):
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    dt = result_dtype(self, other)
    if rounding_mode is None:
        return _elementwise(prims.div, scalar_path_operands((self, other), floaty(dt)), floaty(dt))
    if rounding_mode == "floor":
        return _floor_div(self, other, dt, "div_floor_cpu")
    if dt is _t.bool_:
        raise _not_impl("div_trunc_cpu", dt)
    if dt.category == 1:
        return _elementwise(prims.div, (self, other), dt)     # integer prims.div truncates
    stepwise = dt in _HALF and not _second_is_scalar(other)
    return _elementwise(lambda x, y: _trunc_div(x, y, dt, stepwise), scalar_path_operands((self, other), dt), dt)


@register_decomposition("floor_divide")
def floor_divide(self, other):
    return _floor_div(self, other, result_dtype(self, other), "div_floor_cpu")


def _mod(prim, kname):
    def f(self, other):
        dt = result_dtype(self, other)
        if dt is _t.bool_:
            raise _not_impl(kname, dt)
        return _elementwise(prim, half_operands((self, other), dt), dt)
    return f


register_decomposition("remainder")(_mod(prims.remainder, "remainder_cpu"))
register_decomposition("fmod")(_mod(prims.fmod, "fmod_cpu"))


@register_decomposition("neg")
def neg(self):
    if self.dtype is _t.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return prims.neg(self)


def _int_pow(x, y):
    """Integer power with PyTorch's negative exponents: 1 for base 1, ±1 for base -1, else 0."""
    if not is_tensor(y):
        return prims.pow(x, y)
    ref = x if is_tensor(x) else y
    shape, dt, dev = tuple(ref.shape), ref.dtype, ref.device
    negative = prims.lt(y, 0)
    safe = prims.where(negative, 0, y)
    pos = prims.pow(x, safe)
    xs = x if is_tensor(x) else full(shape, x, dt, dev)
    one, zero = full(shape, 1, dt, dev), full(shape, 0, dt, dev)
    odd = prims.ne(prims.remainder(y, 2), 0)
    sign_one = prims.where(odd, prims.neg(one), one)
    inv = prims.where(prims.eq(xs, 1), one, prims.where(prims.eq(xs, -1), sign_one, zero))
    return prims.where(negative, inv, pos)


def _scalar_to_low(v, dt, checked=True):
    """A Python number rounded to float16/bfloat16 (PyTorch's checked conversion: a finite
    number out of range is an error), as eager's pow."""
    with np.errstate(all="ignore"):
        r = float(np.asarray(v, dtype=dt.np))
    if checked and math.isfinite(float(v)) and not math.isfinite(r):
        raise RuntimeError(f"value cannot be converted to type c10::{'Half' if dt is _t.float16 else 'BFloat16'} "
                           f"without overflow")
    return r


@register_decomposition("pow")
def pow(self, exponent):
    a, b = self, exponent
    dt = result_dtype(a, b)
    if dt.category < 2:
        if not is_tensor(b) and not isinstance(b, (bool, np.bool_)) and b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        cdt = _t.uint8 if dt is _t.bool_ else dt
        x, y = prep((a, b), cdt)
        return to(_int_pow(x, y), dt)
    if not is_tensor(b) and not isinstance(b, (bool, np.bool_)) and dt is not _t.float16 \
            and b in (0.5, -0.5):
        # PyTorch's pow(Tensor, Scalar) runs sqrt / rsqrt here (float, double, bfloat16):
        # (-inf) ** 0.5 is NaN and (-0.0) ** -0.5 is -inf, unlike C pow (as eager)
        x = to(a, comp(dt))
        return to(prims.sqrt(x) if b > 0 else prims.rsqrt(x), dt)
    if dt is _t.bfloat16 and is_tensor(a) and isinstance(b, (int, float)) and not isinstance(b, bool) \
            and b in (3, -2):
        # bfloat16 x ** 3 / x ** -2: x * x rounded to bfloat16, then times x / its reciprocal (as
        # eager and PyTorch)
        x = to(a, comp(dt))
        sq = to(to(prims.mul(x, x), dt), comp(dt))
        return to(prims.mul(sq, x) if b == 3 else prims.reciprocal(sq), dt)
    if dt in (_t.float16, _t.bfloat16):
        # PyTorch rounds a Python-number base or exponent to the tensor's dtype first (as eager)
        # (the exponent by a checked conversion, an error out of range; the base wraps to inf)
        a = a if is_tensor(a) else _scalar_to_low(a, dt, checked=False)
        b = b if is_tensor(b) else _scalar_to_low(b, dt)
        a, b = half_operands((a, b), dt)      # 0-dim tensors of another dtype
    x, y = prep((a, b), comp(dt))
    return to(prims.pow(x, y), dt)


# ---------------------------------------------------------------------- unary float functions
def _unary(name, fn):
    def f(self):
        dt = floaty(self.dtype)
        return to(fn(to(self, comp(dt))), dt)
    f.__name__ = name
    register_decomposition(name)(f)
    return f


for _name in ("reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
              "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
              "erfc", "erfinv"):
    _unary(_name, getattr(prims, _name))


def _sigmoid(x):
    return prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0))


_unary("sigmoid", _sigmoid)


@register_decomposition("atan2")
def atan2(self, other):
    dt = floaty(result_dtype(self, other))
    return _elementwise(prims.atan2, half_operands((self, other), dt), dt)


@register_decomposition("logit")
def logit(self, eps=None):
    dt = floaty(self.dtype)
    x = to(self, comp(dt))
    if eps is not None:
        x = prims.minimum(prims.maximum(x, float(eps)), 1.0 - eps)
    return to(prims.log(prims.div(x, prims.sub(1.0, x))), dt)


# ---------------------------------------------------------------------- sign, abs, rounding
@register_decomposition("abs")
def abs(self):
    if self.dtype is _t.bool_:
        raise _not_impl("abs_cpu", self.dtype)
    return prims.abs(self)


@register_decomposition("sign")
def sign(self):
    if self.dtype is _t.bool_:
        return fresh(self)
    return to(prims.sign(to(self, comp(self.dtype))), self.dtype)


def _rounding(name, prim, kname):
    def f(self):
        dt = self.dtype
        if dt is _t.bool_:
            raise _not_impl(kname, dt)
        if dt.category < 2:
            return fresh(self)
        return to(prim(to(self, comp(dt))), dt)
    register_decomposition(name)(f)


_rounding("floor", prims.floor, "floor_vml_cpu")
_rounding("ceil", prims.ceil, "ceil_vml_cpu")
_rounding("trunc", prims.trunc, "trunc_vml_cpu")


@register_decomposition("round")
def round(self, *, decimals=0):
    dt = self.dtype
    if dt is _t.bool_:
        raise _not_impl("round_vml_cpu", dt)
    if dt.category < 2:
        if decimals != 0:
            raise _not_impl("round_cpu", dt)
        return fresh(self)
    x = to(self, comp(dt))
    if decimals == 0:
        return to(prims.round(x), dt)
    p = 10.0 ** (-decimals if decimals < 0 else decimals)
    if decimals < 0:
        r = prims.mul(prims.round(prims.div(x, p)), p)
    else:
        r = prims.div(prims.round(prims.mul(x, p)), p)
    return to(r, dt)


@register_decomposition("frac")
def frac(self):
    dt = self.dtype
    if dt.category < 2:
        raise _not_impl("frac_cpu", dt)
    x = to(self, comp(dt))
    return to(prims.sub(x, prims.trunc(x)), dt)


@register_decomposition("copysign")
def copysign(self, other):
    return _elementwise(prims.copysign, (self, other), floaty(result_dtype(self, other)))


# ---------------------------------------------------------------------- clamp, min/max, where, lerp
def _clamp(a, lo, hi, name):
    if lo is None and hi is None:
        raise RuntimeError(f"{name}: At least one of 'min' or 'max' must not be None")
    dt = result_dtype(a, lo, hi)
    from ...ops.pointwise import _clamp_checks      # eager's errors (bool kernels, float overflow)
    _clamp_checks(dt, lo, hi)
    cdt = comp(dt)
    args = [x for x in (a, lo, hi) if x is not None]
    shape = common_shape(*args)
    x = bcast(to(a, cdt), shape)
    # (bound, x): maximum/minimum give the second operand when the two are equal, and clamp
    # keeps x there (a signed zero), as eager and PyTorch
    if lo is not None:
        x = prims.maximum(bcast(to(lo, cdt), shape), x)
    if hi is not None:
        x = prims.minimum(bcast(to(hi, cdt), shape), x)
    return to(x, dt)


@register_decomposition("clamp")
def clamp(self, min=None, max=None):
    return _clamp(self, min, max, "torch.clamp")


@register_decomposition("clamp_min")
def clamp_min(self, min):
    return _clamp(self, min, None, "torch.clamp_min")


@register_decomposition("clamp_max")
def clamp_max(self, max):
    return _clamp(self, None, max, "torch.clamp_max")


@register_decomposition("maximum")
def maximum(self, other):
    return _elementwise(prims.maximum, (self, other), result_dtype(self, other))


@register_decomposition("minimum")
def minimum(self, other):
    return _elementwise(prims.minimum, (self, other), result_dtype(self, other))


@register_decomposition("where")
def where(condition, self, other):
    cond = condition
    if cond.dtype is not _t.bool_:
        if cond.dtype is not _t.uint8:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{cond.dtype.legacy_name}")
        cond = prims.convert_element_type(cond, _t.bool_)
    dt = result_dtype(self, other)
    shape = common_shape(cond, self, other)
    x, y = prep((self, other), dt, shape)
    if not is_tensor(x) and not is_tensor(y):
        x = full(shape, x, dt, cond.device)
    return prims.where(bcast(cond, shape), x, y)


@register_decomposition("lerp")
def lerp(self, end, weight):
    from ...ops.pointwise import _lerp_dtype
    dt = _lerp_dtype(self, end, weight, lambda v: v.dtype, result_dtype)
    # a 0-dim weight of another dtype is rounded to the result dtype first; a number is not
    w0 = half_operands((weight,), dt)[0] if is_tensor(weight) else weight
    a, e, w = prep((self, end, w0), comp(dt))
    d = prims.sub(e, a)
    if not is_tensor(w):
        w = full(tuple(d.shape), w, d.dtype, d.device)     # the kernel rounds 1 - w in the compute dtype
    small = prims.lt(prims.abs(w), 0.5)
    r = prims.where(small, prims.add(a, prims.mul(w, d)), prims.sub(e, prims.mul(d, prims.sub(1.0, w))))
    return to(r, dt)


@register_decomposition("addcmul")
def addcmul(self, tensor1, tensor2, *, value=1):
    dt = result_dtype(self, tensor1, tensor2)
    a, t1, t2 = prep((self, tensor1, tensor2), comp(dt))
    if dt is _t.bool_:
        p = prims.logical_and(prims.logical_and(t1, t2), bool(value))
        return prims.logical_or(a, p)
    if dt in _HALF:
        # torch's half kernel: fma(value * tensor1, tensor2, self) in float32 (as eager: the
        # product of two float32 numbers is exact in float64, the sum rounded once more)
        f64 = _t.float64
        r = prims.add(to(a, f64), prims.mul(to(prims.mul(t1, scalar_of(value, dt)), f64), to(t2, f64)))
        return to(to(r, _t.float32), dt)
    return to(prims.add(a, prims.mul(scalar_of(value, dt), prims.mul(t1, t2))), dt)


@register_decomposition("addcdiv")
def addcdiv(self, tensor1, tensor2, *, value=1):
    if tensor1.dtype.category < 2 and tensor2.dtype.category < 2:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
            "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
            "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    dt = result_dtype(self, tensor1, tensor2)
    a, t1, t2 = prep((self, tensor1, tensor2), comp(dt))
    q = prims.div(t1, t2)
    return to(prims.add(a, prims.mul(value, q)), dt)


# ---------------------------------------------------------------------- classification, nan_to_num
def _classify(name, fn):
    def f(self):
        if self.dtype.category < 2:
            return full(tuple(self.shape), name == "isfinite", _t.bool_, self.device)
        return fn(to(self, comp(self.dtype)))
    register_decomposition(name)(f)


_classify("isnan", prims.isnan)
_classify("isinf", prims.isinf)
_classify("isfinite", prims.isfinite)
_classify("isposinf", lambda x: prims.eq(x, math.inf))
_classify("isneginf", lambda x: prims.eq(x, -math.inf))


@register_decomposition("nan_to_num")
def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
    dt = self.dtype
    if dt.category < 2:
        return fresh(self)
    import ml_dtypes
    big = float(ml_dtypes.finfo(dt.np).max)
    nan = 0.0 if nan is None else nan
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    x = to(self, comp(dt))
    r = prims.where(prims.eq(x, -math.inf), float(neginf), x)
    r = prims.where(prims.eq(x, math.inf), float(posinf), r)
    r = prims.where(prims.isnan(x), float(nan), r)
    return to(r, dt)


@register_decomposition("masked_fill")
def masked_fill(self, mask, value):
    from ...ops.pointwise import _TORCH_NAMES
    if mask.dtype is not _t.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_TORCH_NAMES.get(mask.dtype.name, mask.dtype.name)}")
    if is_tensor(value) and value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    dt = self.dtype
    shape = common_shape(self, mask)
    if is_tensor(value):
        v = bcast(to(value, dt), shape)
    else:
        v = full(shape, value, dt, self.device)
    return prims.where(bcast(mask, shape), v, bcast(self, shape))


# ---------------------------------------------------------------------- comparisons, logical, bitwise
def _cmp(name, prim):
    def f(self, other):
        dt = result_dtype(self, other)
        x, y = prep((self, other), dt)
        return prim(x, y)
    register_decomposition(name)(f)


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _cmp(_name, getattr(prims, _name))


def _logical(name, prim):
    def f(self, other):
        shape = common_shape(self, other)
        return prim(bcast(to(self, _t.bool_), shape), bcast(to(other, _t.bool_), shape))
    register_decomposition(name)(f)


for _name in ("logical_and", "logical_or", "logical_xor"):
    _logical(_name, getattr(prims, _name))


@register_decomposition("logical_not")
def logical_not(self):
    return prims.logical_not(self)


def _bitwise(name, prim, kname):
    def f(self, other):
        dt = result_dtype(self, other)
        if dt.is_floating_point:
            raise _not_impl(kname, dt)
        return _elementwise(prim, (self, other), dt, dt)
    register_decomposition(name)(f)


_bitwise("bitwise_and", prims.bitwise_and, "bitwise_and_cpu")
_bitwise("bitwise_or", prims.bitwise_or, "bitwise_or_cpu")
_bitwise("bitwise_xor", prims.bitwise_xor, "bitwise_xor_cpu")


@register_decomposition("bitwise_not")
def bitwise_not(self):
    if self.dtype.is_floating_point:
        raise _not_impl("bitwise_not_cpu", self.dtype)
    return prims.bitwise_not(self)


def _shift(name, prim, kname):
    def f(self, other):
        dt = result_dtype(self, other)
        if dt.category != 1:
            raise _not_impl(kname, dt)
        return _elementwise(prim, (self, other), dt, dt)
    register_decomposition(name)(f)


_shift("bitwise_left_shift", prims.shift_left, "lshift_cpu")
_shift("bitwise_right_shift", prims.shift_right, "rshift_cpu")


# ---------------------------------------------------------------------- activations
def _float_only(x, kname):
    if not x.dtype.is_floating_point:
        raise _not_impl(kname, x.dtype)
    return x.dtype


def _act(name, kname, body):
    """A float-only activation: ``body(x, *args)`` in the compute dtype."""
    def f(self, *args, **kwargs):
        dt = _float_only(self, kname)
        return to(body(to(self, comp(dt)), *args, **kwargs), dt)
    f.__name__ = name
    register_decomposition(name)(f)
    return f


@register_decomposition("relu")
def relu(self):
    if self.dtype is _t.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    return prims.maximum(0, self)       # (0, x): relu(-0.0) is -0.0, as eager and PyTorch


@register_decomposition("hardtanh")
def hardtanh(self, min_val=-1, max_val=1):
    dt = self.dtype
    if dt is _t.bool_:
        raise _not_impl("hardtanh_cpu", dt)
    if dt is _t.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    x = to(self, comp(dt))
    if dt.category == 1:
        min_val, max_val = int(min_val), int(max_val)
    return to(prims.minimum(max_val, prims.maximum(min_val, x)), dt)     # ties keep x, as eager


def _softplus_core(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (numpy's logaddexp(0, x))."""
    return prims.add(prims.maximum(x, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(x)))))


_act("leaky_relu", "leaky_relu_cpu",
     lambda x, negative_slope=0.01: prims.where(prims.gt(x, 0.0), x, prims.mul(x, float(negative_slope))))
_act("elu", "elu_cpu",
     lambda x, alpha=1.0, scale=1.0, input_scale=1.0: prims.where(
         prims.gt(x, 0.0), prims.mul(x, float(scale)),
         prims.mul(prims.mul(prims.expm1(prims.mul(x, float(input_scale))), float(alpha)), float(scale))))


@register_decomposition("celu")
def celu(self, alpha=1.0):
    dt = _float_only(self, "elu_cpu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    x = to(self, comp(dt))
    return to(prims.where(prims.gt(x, 0.0), x, prims.mul(prims.expm1(prims.div(x, float(alpha))), float(alpha))),
              dt)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


@register_decomposition("gelu")
def gelu(self, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    dt = _float_only(self, "GeluKernelImpl")
    x = to(self, comp(dt))
    if approximate == "tanh":
        inner = prims.mul(prims.add(x, prims.mul(prims.mul(prims.mul(x, x), x), _GELU_C)), _GELU_K)
        r = prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))
    else:
        r = prims.mul(prims.mul(x, 0.5), prims.add(prims.erf(prims.mul(x, _SQRT1_2)), 1.0))
    return to(r, dt)


_act("silu", "silu_cpu", lambda x: prims.div(x, prims.add(prims.exp(prims.neg(x)), 1.0)))
_act("mish", "mish_cpu", lambda x: prims.mul(x, prims.tanh(_softplus_core(x))))


@register_decomposition("softplus")
def softplus(self, beta=1.0, threshold=20.0):
    dt = _float_only(self, "softplus_cpu")
    x = to(self, comp(dt))
    bx = prims.mul(x, float(beta))
    r = prims.where(prims.gt(bx, float(threshold)), x, prims.div(_softplus_core(bx), float(beta)))
    return to(r, dt)


def _relu6_of_shift(x):
    return prims.minimum(prims.maximum(prims.add(x, 3.0), 0.0), 6.0)


_act("hardswish", "hardswish_cpu", lambda x: prims.div(prims.mul(x, _relu6_of_shift(x)), 6.0))
_act("hardsigmoid", "hardsigmoid_cpu", lambda x: prims.div(_relu6_of_shift(x), 6.0))


@register_decomposition("threshold")
def threshold(self, threshold, value):
    dt = self.dtype
    if dt is _t.bool_:
        raise _not_impl("threshold_cpu", dt)
    x = to(self, comp(dt))
    v = scalar_of(value, comp(dt))
    # integers: x > t  <=>  x > floor(t), and the prim needs an int operand
    t = threshold if comp(dt).is_floating_point else math.floor(threshold)
    # x <= t ? value : x, as PyTorch (and eager): NaN is kept
    return to(prims.where(prims.le(x, t), full(tuple(x.shape), v, x.dtype, x.device), x), dt)


_act("logsigmoid", "log_sigmoid_cpu",
     lambda x: prims.sub(prims.minimum(x, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(x))))))


def _shrink_mask(x, lambd):
    return prims.logical_or(prims.gt(x, float(lambd)), prims.lt(x, -float(lambd)))


_act("hardshrink", "hardshrink_cpu", lambda x, lambd=0.5: prims.where(_shrink_mask(x, lambd), x, 0.0))


@register_decomposition("softshrink")
def softshrink(self, lambd=0.5):
    dt = _float_only(self, "softshrink_cpu")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    x = to(self, comp(dt))
    lam = float(lambd)
    r = prims.where(prims.gt(x, lam), prims.sub(x, lam),
                    prims.where(prims.lt(x, -lam), prims.add(x, lam), 0.0))
    return to(r, dt)
