"""Pointwise ops: arithmetic, activations, comparisons, logic, where, casts.

ONNX's binary ops want both operands of one element type while torch promotes, so each
operand is cast to the dtype the FX node's metadata says the result has (comparisons: to the
operands' promoted dtype)."""
from __future__ import annotations

import math

import numpy as np

from ._context import Value
from ._dtypes import is_float, numpy_dtype, onnx_type
from ._registry import arg, register


def _binary(onnx_op):
    def handler(ctx, args, kwargs):
        a, b = args[0], arg(args, kwargs, 1, "other")
        dt = ctx.out_dtype
        return ctx.op(onnx_op, [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    return handler


for _k, _o in {"mul": "Mul", "minimum": "Min", "maximum": "Max", "fmin": "Min", "fmax": "Max"}.items():
    register(_k)(_binary(_o))


@register("add", "sub")
def _add_sub(ctx, args, kwargs):
    a, b = args[0], arg(args, kwargs, 1, "other")
    alpha = arg(args, kwargs, 2, "alpha", 1)
    dt = ctx.out_dtype
    bt = ctx.tensor(b, dt)
    if alpha != 1:
        bt = ctx.op("Mul", [bt, ctx.tensor(alpha, dt)])
    return ctx.op("Add" if ctx.node.target.__name__ == "add" else "Sub", [ctx.tensor(a, dt), bt])


@register("rsub")
def _rsub(ctx, args, kwargs):
    a, b = args[0], arg(args, kwargs, 1, "other")
    dt = ctx.out_dtype
    return ctx.op("Sub", [ctx.tensor(b, dt), ctx.tensor(a, dt)])


@register("div")
def _div(ctx, args, kwargs):
    a, b = args[0], arg(args, kwargs, 1, "other")
    mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    dt = ctx.out_dtype
    if mode is None:
        return ctx.op("Div", [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    if is_float(dt):
        q = ctx.op("Div", [ctx.tensor(a, dt), ctx.tensor(b, dt)])
    else:   # integer division through float64 so that floor/trunc round as torch's do
        import ember
        q = ctx.op("Div", [ctx.tensor(a, ember.float64), ctx.tensor(b, ember.float64)])
    if mode == "floor":
        q = ctx.op("Floor", [q])
    elif mode == "trunc":
        q = ctx.op("Mul", [ctx.op("Sign", [q]), ctx.op("Floor", [ctx.op("Abs", [q])])])
    else:
        raise ctx.unsupported(f"div rounding_mode={mode!r}")
    return q if is_float(dt) else ctx.op("Cast", [q], to=onnx_type(dt))


@register("remainder")
def _remainder(ctx, args, kwargs):
    a, b = args[0], arg(args, kwargs, 1, "other")
    dt = ctx.out_dtype
    if is_float(dt):
        return _float_remainder(ctx, ctx.tensor(a, dt), ctx.tensor(b, dt))
    return ctx.op("Mod", [ctx.tensor(a, dt), ctx.tensor(b, dt)], fmod=0)   # the divisor's sign, as torch


def _float_remainder(ctx, a, b):
    # torch's remainder has the divisor's sign: a - floor(a / b) * b
    return ctx.op("Sub", [a, ctx.op("Mul", [ctx.op("Floor", [ctx.op("Div", [a, b])]), b])])


@register("pow")
def _pow(ctx, args, kwargs):
    a, b = args[0], arg(args, kwargs, 1, "exponent")
    dt = ctx.out_dtype
    if isinstance(b, (int, float)) and not isinstance(b, bool) and b == 2:
        x = ctx.tensor(a, dt)
        return ctx.op("Mul", [x, x])
    return ctx.op("Pow", [ctx.tensor(a, dt), ctx.tensor(b, dt)])


_UNARY = {"neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "relu": "Relu",
          "sigmoid": "Sigmoid", "tanh": "Tanh", "erf": "Erf", "sin": "Sin", "cos": "Cos", "tan": "Tan",
          "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "reciprocal": "Reciprocal", "asin": "Asin",
          "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
          "atanh": "Atanh", "logical_not": "Not", "softsign": "Softsign", "mish": None}


def _unary(onnx_op):
    def handler(ctx, args, kwargs):
        return ctx.op(onnx_op, [ctx.tensor(args[0], ctx.out_dtype)])
    return handler


for _k, _o in _UNARY.items():
    if _o is not None:
        register(_k)(_unary(_o))


@register("bitwise_not")
def _bitwise_not(ctx, args, kwargs):
    x = args[0]
    if str(x.dtype) != "ember.bool":
        raise ctx.unsupported("bitwise_not on integer tensors")
    return ctx.op("Not", [x.name])


@register("rsqrt")
def _rsqrt(ctx, args, kwargs):
    return ctx.op("Reciprocal", [ctx.op("Sqrt", [ctx.tensor(args[0], ctx.out_dtype)])])


@register("round")
def _round(ctx, args, kwargs):
    if arg(args, kwargs, 1, "decimals", 0):
        raise ctx.unsupported("round(decimals=...)")
    return ctx.op("Round", [ctx.tensor(args[0], ctx.out_dtype)])   # both round half to even


@register("log1p")
def _log1p(ctx, args, kwargs):
    dt = ctx.out_dtype
    return ctx.op("Log", [ctx.op("Add", [ctx.tensor(args[0], dt), ctx.tensor(1.0, dt)])])


@register("expm1")
def _expm1(ctx, args, kwargs):
    dt = ctx.out_dtype
    return ctx.op("Sub", [ctx.op("Exp", [ctx.tensor(args[0], dt)]), ctx.tensor(1.0, dt)])


@register("log2", "log10")
def _log_base(ctx, args, kwargs):
    dt = ctx.out_dtype
    base = 2.0 if ctx.node.target.__name__ == "log2" else 10.0
    return ctx.op("Div", [ctx.op("Log", [ctx.tensor(args[0], dt)]), ctx.tensor(math.log(base), dt)])


@register("silu")
def _silu(ctx, args, kwargs):
    x = ctx.tensor(args[0], ctx.out_dtype)
    return ctx.op("Mul", [x, ctx.op("Sigmoid", [x])])


@register("gelu")
def _gelu(ctx, args, kwargs):
    approximate = arg(args, kwargs, 1, "approximate", "none")
    dt = ctx.out_dtype
    x = ctx.tensor(args[0], dt)
    if approximate not in ("none", "tanh"):
        raise ctx.unsupported(f"gelu approximate={approximate!r}")
    if ctx.opset >= 20:
        return ctx.op("Gelu", [x], approximate=approximate)
    c = lambda v: ctx.tensor(v, dt)  # noqa: E731
    if approximate == "tanh":       # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = ctx.op("Mul", [ctx.op("Mul", [x, x]), x])
        inner = ctx.op("Mul", [ctx.op("Add", [x, ctx.op("Mul", [x3, c(0.044715)])]), c(math.sqrt(2 / math.pi))])
        t = ctx.op("Tanh", [inner])
    else:                           # 0.5 x (1 + erf(x / sqrt(2)))
        t = ctx.op("Erf", [ctx.op("Mul", [x, c(1 / math.sqrt(2))])])
    return ctx.op("Mul", [ctx.op("Mul", [x, c(0.5)]), ctx.op("Add", [t, c(1.0)])])


@register("leaky_relu")
def _leaky_relu(ctx, args, kwargs):
    slope = arg(args, kwargs, 1, "negative_slope", 0.01)
    return ctx.op("LeakyRelu", [ctx.tensor(args[0], ctx.out_dtype)], alpha=float(slope))


@register("elu")
def _elu(ctx, args, kwargs):
    alpha = arg(args, kwargs, 1, "alpha", 1.0)
    scale = arg(args, kwargs, 2, "scale", 1.0)
    input_scale = arg(args, kwargs, 3, "input_scale", 1.0)
    if scale != 1 or input_scale != 1:
        raise ctx.unsupported("elu with scale/input_scale other than 1")
    return ctx.op("Elu", [ctx.tensor(args[0], ctx.out_dtype)], alpha=float(alpha))


@register("softplus")
def _softplus(ctx, args, kwargs):
    beta = arg(args, kwargs, 1, "beta", 1.0)
    threshold = arg(args, kwargs, 2, "threshold", 20.0)
    dt = ctx.out_dtype
    x = ctx.tensor(args[0], dt)
    bx = ctx.op("Mul", [x, ctx.tensor(float(beta), dt)]) if beta != 1 else x
    sp = ctx.op("Softplus", [bx])
    if beta != 1:
        sp = ctx.op("Div", [sp, ctx.tensor(float(beta), dt)])
    # torch reverts to the identity above the threshold
    return ctx.op("Where", [ctx.op("Greater", [bx, ctx.tensor(float(threshold), dt)]), x, sp])


@register("hardtanh", "clamp", "clip")
def _clamp(ctx, args, kwargs):
    name = ctx.node.target.__name__
    lo_default, hi_default = (-1.0, 1.0) if name == "hardtanh" else (None, None)
    lo = arg(args, kwargs, 1, "min_val" if name == "hardtanh" else "min", lo_default)
    hi = arg(args, kwargs, 2, "max_val" if name == "hardtanh" else "max", hi_default)
    dt = ctx.out_dtype
    x = ctx.tensor(args[0], dt)
    if isinstance(lo, Value) or isinstance(hi, Value):   # tensor bounds: Max / Min broadcast
        if lo is not None:
            x = ctx.op("Max", [x, ctx.tensor(lo, dt)])
        if hi is not None:
            x = ctx.op("Min", [x, ctx.tensor(hi, dt)])
        return x
    return ctx.op("Clip", [x, ctx.tensor(lo, dt) if lo is not None else None,
                           ctx.tensor(hi, dt) if hi is not None else None])


@register("relu6")
def _relu6(ctx, args, kwargs):
    dt = ctx.out_dtype
    return ctx.op("Clip", [ctx.tensor(args[0], dt), ctx.tensor(0.0, dt), ctx.tensor(6.0, dt)])


@register("hardsigmoid")
def _hardsigmoid(ctx, args, kwargs):
    return ctx.op("HardSigmoid", [ctx.tensor(args[0], ctx.out_dtype)], alpha=1 / 6, beta=0.5)


@register("hardswish")
def _hardswish(ctx, args, kwargs):
    return ctx.op("HardSwish", [ctx.tensor(args[0], ctx.out_dtype)])


# ---- comparisons and logic
_CMP = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


def _compare(onnx_op, negate=False):
    def handler(ctx, args, kwargs):
        a, b = args[0], arg(args, kwargs, 1, "other")
        dt = ctx.common_dtype(a, b)
        out = ctx.op(onnx_op, [ctx.tensor(a, dt), ctx.tensor(b, dt)])
        return ctx.op("Not", [out]) if negate else out
    return handler


for _k, _o in _CMP.items():
    register(_k)(_compare(_o))
register("ne")(_compare("Equal", negate=True))


def _logical(onnx_op):
    def handler(ctx, args, kwargs):
        import ember
        a, b = args[0], arg(args, kwargs, 1, "other")
        ins = []
        for x in (a, b):
            if isinstance(x, Value) and x.dtype != ember.bool:
                ins.append(ctx.op("Not", [ctx.op("Equal", [x.name, ctx.tensor(0, x.dtype)])]))
            else:
                ins.append(ctx.tensor(x, ember.bool))
        return ctx.op(onnx_op, ins)
    return handler


for _k, _o in {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}.items():
    register(_k)(_logical(_o))


def _bitwise(onnx_op, name):
    def handler(ctx, args, kwargs):
        import ember
        a, b = args[0], arg(args, kwargs, 1, "other")
        if ctx.out_dtype != ember.bool:
            raise ctx.unsupported(f"{name} on integer tensors (only bool)")
        return ctx.op(onnx_op, [ctx.tensor(a, ember.bool), ctx.tensor(b, ember.bool)])
    return handler


for _k, _o in {"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}.items():
    register(_k)(_bitwise(_o, _k))


@register("where")
def _where(ctx, args, kwargs):
    import ember
    cond, a, b = args[0], arg(args, kwargs, 1, "input"), arg(args, kwargs, 2, "other")
    if a is None or b is None:
        raise ctx.unsupported("where(condition) with one argument (data-dependent output shape)")
    dt = ctx.out_dtype
    return ctx.op("Where", [ctx.tensor(cond, ember.bool), ctx.tensor(a, dt), ctx.tensor(b, dt)])


@register("masked_fill")
def _masked_fill(ctx, args, kwargs):
    import ember
    x, mask, value = args[0], arg(args, kwargs, 1, "mask"), arg(args, kwargs, 2, "value")
    dt = ctx.out_dtype
    return ctx.op("Where", [ctx.tensor(mask, ember.bool), ctx.tensor(value, dt), ctx.tensor(x, dt)])


@register("isnan")
def _isnan(ctx, args, kwargs):
    return ctx.op("IsNaN", [ctx.tensor(args[0])])


@register("_to_copy", "to", "type_as", "_to_dtype")
def _to_copy(ctx, args, kwargs):
    x = args[0]
    dt = ctx.out_dtype
    if not isinstance(x, Value):
        return ctx.tensor(x, dt)
    if x.dtype == dt:
        return ctx.op("Identity", [x.name])
    return ctx.op("Cast", [x.name], to=onnx_type(dt))


@register("clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh", "dropout_eval",
          "_assert_tensor_metadata_noop")
def _identity(ctx, args, kwargs):
    return ctx.op("Identity", [ctx.tensor(args[0])])


@register("dropout", "native_dropout", "feature_dropout", "alpha_dropout")
def _dropout(ctx, args, kwargs):
    train = arg(args, kwargs, 2, "train", arg(args, kwargs, 2, "training", False))
    p = arg(args, kwargs, 1, "p", 0.5)
    if train and p > 0:
        raise ctx.unsupported("dropout in training mode (random); export the model in eval mode")
    out = ctx.op("Identity", [ctx.tensor(args[0])])
    return out


@register("scalar_tensor")
def _scalar_tensor(ctx, args, kwargs):
    return ctx.b.const(np.asarray(args[0], dtype=numpy_dtype(ctx.out_dtype)), numpy_dtype(ctx.out_dtype),
                       "scalar")


@register("_random", "rand", "randn", "randint", "bernoulli", "normal", "uniform", "rand_like", "randn_like",
          "randint_like", "multinomial", "randperm")
def _random(ctx, args, kwargs):
    raise ctx.unsupported("random number generation has no reproducible ONNX translation (dropout in training "
                          "mode? export the model in eval mode)")
