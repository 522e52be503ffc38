"""Pointwise ops: arithmetic, math functions, comparisons, logical/bitwise.

Each record: schema, a kernel over the array namespace (promotion via
``_helpers``), and a derivative formula in ember ops. Broadcast gradients
are reduced back with ``grad_for``.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ._helpers import binary_kernel, cast, grad_for, result_dtype, to_array, unary_float_kernel
from .registry import defop

PW = ("pointwise",)


# ---------------------------------------------------------------------- arithmetic
@defop("add(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, inplace=True,
       save=())
def add(xp, a, b, alpha=1):
    if alpha == 1 and type(a) is type(b) is np.ndarray and a.dtype == b.dtype and a.dtype != np.bool_:
        return np.add(a, b)
    dt = result_dtype(a, b)
    a = to_array(xp, a, dt)
    b = to_array(xp, b, dt)
    if alpha != 1:
        b = b * alpha
    return xp.asarray(xp.add(a, b))


@add.derivative
def _add_bw(ctx, g):
    a, b, alpha = ctx.args
    gb = grad_for(g, b) if ctx.needs_input_grad[1] else None
    if gb is not None and alpha != 1:
        gb = gb * alpha
    return grad_for(g, a) if ctx.needs_input_grad[0] else None, gb


@defop("sub(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, inplace=True,
       save=())
def sub(xp, a, b, alpha=1):
    dt = result_dtype(a, b)
    if dt is _t.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                           "`^` or `logical_xor()` operator instead.")
    a = to_array(xp, a, dt)
    b = to_array(xp, b, dt)
    if alpha != 1:
        b = b * alpha
    return xp.asarray(xp.subtract(a, b))


@sub.derivative
def _sub_bw(ctx, g):
    a, b, alpha = ctx.args
    gb = grad_for(-g, b) if ctx.needs_input_grad[1] else None
    if gb is not None and alpha != 1:
        gb = gb * alpha
    return grad_for(g, a) if ctx.needs_input_grad[0] else None, gb


@defop("rsub(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, save=(),
       method=False, scalar_overload=("other",), grad_fn_name=lambda a: "RsubBackward1" if not hasattr(
           a[1], "_data") else "RsubBackward0")
def rsub(xp, a, b, alpha=1):
    """other - alpha * self."""
    dt = result_dtype(a, b)
    a = to_array(xp, a, dt)
    b = to_array(xp, b, dt)
    if alpha != 1:
        a = a * alpha
    return xp.asarray(xp.subtract(b, a))


@rsub.derivative
def _rsub_bw(ctx, g):
    a, b, alpha = ctx.args
    ga = grad_for(-g, a) if ctx.needs_input_grad[0] else None
    if ga is not None and alpha != 1:
        ga = ga * alpha
    return ga, grad_for(g, b) if ctx.needs_input_grad[1] else None


@defop("mul(Tensor self, Tensor|Scalar other) -> Tensor", tags=PW, inplace=True)
def mul(xp, a, b):
    if type(a) is type(b) is np.ndarray and a.dtype == b.dtype and a.dtype != np.bool_:
        return np.multiply(a, b)
    dt = result_dtype(a, b)
    a = to_array(xp, a, dt)
    b = to_array(xp, b, dt)
    if dt is _t.bool_:
        return xp.asarray(xp.logical_and(a, b))
    return xp.asarray(xp.multiply(a, b))


@mul.derivative
def _mul_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(g * b, a) if n[0] else None,
            grad_for(g * a, b) if n[1] else None)


def _div_rounding(xp, q, rounding_mode):
    if rounding_mode is None:
        return q
    if rounding_mode == "trunc":
        return xp.trunc(q)
    if rounding_mode == "floor":
        return xp.floor(q)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                       f"'{rounding_mode}'")


@defop("div(Tensor self, Tensor|Scalar other, *, str? rounding_mode=None) -> Tensor", tags=PW, inplace=True)
def div(xp, a, b, rounding_mode=None):
    dt = result_dtype(a, b)
    if rounding_mode is None:
        if not dt.is_floating_point:
            dt = _t.get_default_dtype()
        return xp.asarray(xp.true_divide(to_array(xp, a, dt), to_array(xp, b, dt)))
    if dt.is_floating_point:
        q = xp.true_divide(to_array(xp, a, dt), to_array(xp, b, dt))
        return xp.asarray(_div_rounding(xp, q, rounding_mode)).astype(dt.np)
    a_, b_ = to_array(xp, a, dt), to_array(xp, b, dt)
    if xp.any(b_ == 0):
        raise RuntimeError("ZeroDivisionError")
    if rounding_mode == "floor":
        return xp.asarray(xp.floor_divide(a_, b_))
    if rounding_mode == "trunc":
        q = xp.floor_divide(a_, b_)
        fix = (q < 0) & (q * b_ != a_)
        return xp.asarray(q + fix.astype(q.dtype))
    return _div_rounding(xp, a_, rounding_mode)


@div.derivative
def _div_bw(ctx, g):
    a, b, mode = ctx.args
    n = ctx.needs_input_grad
    if mode is not None:
        return (grad_for(g * 0, a) if n[0] else None, grad_for(g * 0, b) if n[1] else None)
    return (grad_for(g / b, a) if n[0] else None,
            grad_for(-g * a / (b * b), b) if n[1] else None)


@defop("rdiv(Tensor self, Tensor|Scalar other) -> Tensor", tags=PW, method=False)
def rdiv(xp, a, b):
    """other / self."""
    dt = result_dtype(a, b)
    if not dt.is_floating_point:
        dt = _t.get_default_dtype()
    return xp.asarray(xp.true_divide(to_array(xp, b, dt), to_array(xp, a, dt)))


@rdiv.derivative
def _rdiv_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(-g * b / (a * a), a) if n[0] else None, grad_for(g / a, b) if n[1] else None)


@defop("neg(Tensor self) -> Tensor", tags=PW, inplace=True, save=())
def neg(xp, a):
    if a.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return xp.negative(a)


@neg.derivative
def _neg_bw(ctx, g):
    return (-g,)


@defop("exp(Tensor self) -> Tensor", tags=PW, inplace=True, save=(), save_result=True)
def exp(xp, a):
    return unary_float_kernel(lambda xp, x: xp.exp(x))(xp, a)


@exp.derivative
def _exp_bw(ctx, g):
    return (g * ctx.result,)


def _pow_name(args):
    return "PowBackward1" if hasattr(args[1], "_data") else "PowBackward0"


@defop("pow(Tensor|Scalar self, Tensor|Scalar exponent) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_pow_name, scalar_overload=("self", "exponent"))
def pow(xp, a, b):
    dt = result_dtype(a, b)
    a_ = to_array(xp, a, dt)
    b_ = to_array(xp, b, dt) if not isinstance(b, (int, float)) or dt.category < 2 else b
    if dt.category == 1:
        if np.any(np.asarray(b_) < 0):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    return xp.asarray(xp.power(a_, b_)).astype(dt.np, copy=False)


@pow.derivative
def _pow_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    ga = gb = None
    if n[0]:
        if isinstance(b, (int, float)):
            ga = g * 0 if b == 0 else g * b * a ** (b - 1)
        else:
            from . import api
            ga = grad_for(api.where(b == 0, g * 0, g * b * a ** (b - 1)), a)
    if n[1]:
        from . import api
        out = a ** b
        if isinstance(a, (int, float)):
            import math
            gb = grad_for(g * out * (math.log(a) if a > 0 else float("nan") if a < 0 else float("-inf")), b)
            if a == 0:
                gb = grad_for(api.where(b >= 0, g * 0, g * out * float("-inf")), b)
        else:
            gb = grad_for(api.where((a == 0) & (b >= 0), g * 0, g * out * api.log(a)), b)
    return ga, gb


# ---------------------------------------------------------------------- comparisons
def _cmp(name, npname):
    @defop(f"{name}(Tensor self, Tensor|Scalar other) -> Tensor", tags=PW + ("nondifferentiable",),
           inplace=True)
    def kernel(xp, a, b):
        dt = result_dtype(a, b)
        return xp.asarray(getattr(xp, npname)(to_array(xp, a, dt), to_array(xp, b, dt)))
    kernel.kernel.__name__ = npname
    return kernel


eq = _cmp("eq", "equal")
ne = _cmp("ne", "not_equal")
lt = _cmp("lt", "less")
le = _cmp("le", "less_equal")
gt = _cmp("gt", "greater")
ge = _cmp("ge", "greater_equal")
