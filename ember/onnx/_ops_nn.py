"""Matrix products, convolution, normalization, softmax, reductions, pooling, embedding and
attention -- the ops that carry a network's compute."""
from __future__ import annotations

import math

import numpy as np

from ._context import Unavailable, Value, is_static
from ._dtypes import onnx_type
from ._registry import arg, register


# ---- matrix products
@register("mm", "bmm", "matmul")
def _matmul(ctx, args, kwargs):
    dt = ctx.out_dtype
    return ctx.op("MatMul", [ctx.tensor(args[0], dt), ctx.tensor(arg(args, kwargs, 1, "mat2"), dt)])


@register("addmm")
def _addmm(ctx, args, kwargs):
    """Gemm (as torch's exporter): ``x @ w.t() + b`` reads the weight untransposed (transB)."""
    dt = ctx.out_dtype
    bias, m1, m2 = args[0], args[1], args[2]
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
    b_name, trans_b = ctx.tensor(m2, dt), 0
    src = ctx.transposed_of.get(b_name)
    if src is not None:
        b_name, trans_b = src, 1
    return ctx.op("Gemm", [ctx.tensor(m1, dt), b_name, ctx.tensor(bias, dt)], alpha=float(alpha), beta=float(beta),
                  transB=trans_b or None)


@register("baddbmm", "addbmm")
def _baddbmm(ctx, args, kwargs):
    name = ctx.node.target.__name__
    dt = ctx.out_dtype
    bias, m1, m2 = (ctx.tensor(a, dt) for a in args[:3])
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
    prod = ctx.op("MatMul", [m1, m2])
    if name == "addbmm":
        prod = ctx.op("ReduceSum", [prod, ctx.b.int64s([0])], keepdims=0)
    if alpha != 1:
        prod = ctx.op("Mul", [prod, ctx.tensor(alpha, dt)])
    if beta == 0:
        return prod
    if beta != 1:
        bias = ctx.op("Mul", [bias, ctx.tensor(beta, dt)])
    return ctx.op("Add", [prod, bias])


@register("linear")
def _linear(ctx, args, kwargs):
    dt = ctx.out_dtype
    x, w = ctx.tensor(args[0], dt), args[1]
    bias = arg(args, kwargs, 2, "bias")
    wt = ctx.op("Transpose", [ctx.tensor(w, dt)], perm=[1, 0]) if w.rank == 2 else ctx.tensor(w, dt)
    y = ctx.op("MatMul", [x, wt])
    return y if bias is None else ctx.op("Add", [y, ctx.tensor(bias, dt)])


# ---- convolution
@register("convolution", "conv1d", "conv2d", "conv3d")
def _convolution(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x, w = args[0], args[1]
    bias = arg(args, kwargs, 2, "bias")
    if name == "convolution":
        stride, padding, dilation = args[3], args[4], args[5]
        transposed, output_padding, groups = args[6], args[7], args[8]
    else:
        stride = arg(args, kwargs, 3, "stride", 1)
        padding = arg(args, kwargs, 4, "padding", 0)
        dilation = arg(args, kwargs, 5, "dilation", 1)
        groups = arg(args, kwargs, 6, "groups", 1)
        transposed, output_padding = False, 0
    n = w.rank - 2
    rep = lambda v: [int(v)] * n if isinstance(v, int) else [int(i) for i in v]  # noqa: E731
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        else:
            raise ctx.unsupported(f"convolution padding={padding!r} (padding='same' reaches the graph as "
                                  f"numbers; a string here is unexpected)")
    pads = rep(padding)
    dt = ctx.out_dtype
    ins = [ctx.tensor(x, dt), ctx.tensor(w, dt)] + ([ctx.tensor(bias, dt)] if bias is not None else [])
    kernel = [int(s) for s in w.shape[2:]]
    attrs = dict(strides=rep(stride), pads=pads + pads, dilations=rep(dilation), group=int(groups),
                 kernel_shape=kernel)
    if transposed:
        op = ctx.op("ConvTranspose", ins, output_padding=rep(output_padding), **attrs)
    else:
        op = ctx.op("Conv", ins, **attrs)
    return op


# ---- normalization
@register("native_batch_norm", "_native_batch_norm_legit_no_training", "batch_norm",
          "_native_batch_norm_legit_functional")
def _batch_norm(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x, w, b, mean, var = args[0], args[1], args[2], args[3], args[4]
    if name == "_native_batch_norm_legit_no_training":
        training, eps = False, args[6] if len(args) > 6 else kwargs.get("eps", 1e-5)
    else:
        training = arg(args, kwargs, 5, "training", False)
        eps = arg(args, kwargs, 7, "eps", 1e-5)
    if training or mean is None:
        raise ctx.unsupported("batch_norm in training mode (batch statistics and running-stat updates); "
                              "export the model in eval mode")
    dt = ctx.out_dtype
    c = int(x.shape[1])
    scale = ctx.tensor(w, dt) if w is not None else ctx.b.const(np.ones(c), _np(dt), "bn_ones")
    bias = ctx.tensor(b, dt) if b is not None else ctx.b.const(np.zeros(c), _np(dt), "bn_zeros")
    y = ctx.op("BatchNormalization", [ctx.tensor(x, dt), scale, bias, ctx.tensor(mean, dt), ctx.tensor(var, dt)],
               epsilon=float(eps))
    if name == "batch_norm":
        return y
    return [Value(y, dt, ()), Unavailable("batch_norm's saved mean"), Unavailable("batch_norm's saved invstd")]


def _np(dt):
    from ._dtypes import numpy_dtype
    return numpy_dtype(dt)


@register("native_layer_norm", "layer_norm")
def _layer_norm(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x, shape = args[0], list(arg(args, kwargs, 1, "normalized_shape"))
    w, b = arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias")
    eps = arg(args, kwargs, 4, "eps", 1e-5)
    dt = x.dtype
    scale = ctx.tensor(w, dt) if w is not None else ctx.b.const(np.ones([int(s) for s in shape]), _np(dt), "ln_ones")
    ins = [x.name, scale] + ([ctx.tensor(b, dt)] if b is not None else [])
    if name == "layer_norm":
        return ctx.op("LayerNormalization", ins, axis=-len(shape), epsilon=float(eps))
    y, mean, inv = ctx.op("LayerNormalization", ins, axis=-len(shape), epsilon=float(eps), outputs=3)
    return [Value(y, dt, ()), Value(mean, None, ()), Value(inv, None, ())]


# ---- softmax
@register("_softmax", "softmax", "_log_softmax", "log_softmax")
def _softmax(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    dim = ctx.norm_dim(arg(args, kwargs, 1, "dim"), max(x.rank, 1))
    dt = ctx.out_dtype
    op = "LogSoftmax" if "log" in name else "Softmax"
    if x.rank == 0:     # a 0-d tensor is its own one-element softmax axis
        flat = ctx.op("Reshape", [ctx.tensor(x, dt), ctx.b.int64s([1])])
        return ctx.op("Reshape", [ctx.op(op, [flat], axis=0), ctx.b.int64s([])])
    return ctx.op(op, [ctx.tensor(x, dt)], axis=dim)


# ---- reductions
_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd"}


def _axes(ctx, x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [ctx.norm_dim(int(d), max(x.rank, 1)) for d in dims]


def _reduce(ctx, op, x, dim, keepdim, dt):
    axes = _axes(ctx, x, dim)
    src = ctx.tensor(x, dt)
    if x.rank == 0:
        return ctx.op("Identity", [src])
    ins = [src] + ([ctx.b.int64s(axes)] if axes is not None else [])
    return ctx.op(op, ins, keepdims=int(bool(keepdim)))


@register(*_REDUCE)
def _reduction(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    dim = arg(args, kwargs, 1, "dim", None)
    keepdim = arg(args, kwargs, 2, "keepdim", False)
    dt = ctx.out_dtype
    if name == "prod" and isinstance(dim, int):
        dim = [dim]
    return _reduce(ctx, _REDUCE[name], x, dim, keepdim, dt)


@register("max", "min")
def _max_all(ctx, args, kwargs):
    name = ctx.node.target.__name__
    if len(args) > 1 or kwargs.get("dim") is not None or kwargs.get("other") is not None:
        other = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim"))
        if isinstance(other, Value):
            dt = ctx.out_dtype
            return ctx.op("Max" if name == "max" else "Min", [ctx.tensor(args[0], dt), ctx.tensor(other, dt)])
        return _max_dim(ctx, args, kwargs, "max" if name == "max" else "min")
    return _reduce(ctx, "ReduceMax" if name == "max" else "ReduceMin", args[0], None, False, ctx.out_dtype)


@register("max_dim", "min_dim")
def _max_dim_handler(ctx, args, kwargs):
    return _max_dim(ctx, args, kwargs, ctx.node.target.__name__[:3])


def _max_dim(ctx, args, kwargs, which):
    x = args[0]
    dim = ctx.norm_dim(int(arg(args, kwargs, 1, "dim")), max(x.rank, 1))
    keepdim = int(bool(arg(args, kwargs, 2, "keepdim", False)))
    values = ctx.op("ReduceMax" if which == "max" else "ReduceMin", [x.name, ctx.b.int64s([dim])], keepdims=keepdim)
    idx = ctx.op("ArgMax" if which == "max" else "ArgMin", [x.name], axis=dim, keepdims=keepdim)
    return [Value(values, x.dtype, ()), Value(idx, None, ())]


@register("argmax", "argmin")
def _argmax(ctx, args, kwargs):
    x = args[0]
    dim = arg(args, kwargs, 1, "dim")
    keepdim = int(bool(arg(args, kwargs, 2, "keepdim", False)))
    op = "ArgMax" if ctx.node.target.__name__ == "argmax" else "ArgMin"
    if dim is None:
        flat = ctx.op("Reshape", [x.name, ctx.b.int64s([-1])])
        out = ctx.op(op, [flat], axis=0, keepdims=0)
        if keepdim:
            out = ctx.op("Reshape", [out, ctx.b.int64s([1] * x.rank)])
        return out
    return ctx.op(op, [x.name], axis=ctx.norm_dim(int(dim), max(x.rank, 1)), keepdims=keepdim)


@register("var", "std")
def _var(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    dim = arg(args, kwargs, 1, "dim", None)
    correction = kwargs.get("correction", args[2] if len(args) > 2 else None)
    unbiased = kwargs.get("unbiased")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    keepdim = kwargs.get("keepdim", args[3] if len(args) > 3 else False)
    dt = ctx.out_dtype
    axes = _axes(ctx, x, dim)
    axes = list(range(x.rank)) if axes is None else axes
    src = ctx.tensor(x, dt)
    mean = ctx.op("ReduceMean", [src, ctx.b.int64s(axes)], keepdims=1)
    d = ctx.op("Sub", [src, mean])
    ss = ctx.op("ReduceSum", [ctx.op("Mul", [d, d]), ctx.b.int64s(axes)], keepdims=int(bool(keepdim)))
    sizes = [x.shape[a] for a in axes]
    if all(is_static(s) for s in sizes):
        n = ctx.tensor(float(max(math.prod(int(s) for s in sizes) - correction, 0)), dt)
    else:
        shape = ctx.op("Shape", [src])
        cnt = ctx.op("ReduceProd", [ctx.op("Gather", [shape, ctx.b.int64s(axes)], axis=0)], keepdims=0)
        cnt = ctx.op("Sub", [ctx.op("Cast", [cnt], to=onnx_type(dt)), ctx.tensor(float(correction), dt)])
        n = ctx.op("Max", [cnt, ctx.tensor(0.0, dt)])
    v = ctx.op("Div", [ss, n])
    return ctx.op("Sqrt", [v]) if name == "std" else v


@register("cumsum")
def _cumsum(ctx, args, kwargs):
    x = args[0]
    dim = ctx.norm_dim(int(arg(args, kwargs, 1, "dim")), max(x.rank, 1))
    return ctx.op("CumSum", [ctx.tensor(x, ctx.out_dtype), ctx.b.const(dim, np.int64, "axis")])


# ---- pooling
def _pool_attrs(ctx, x, kernel, stride, padding, dilation=None):
    n = x.rank - 2
    rep = lambda v: [int(v)] * n if isinstance(v, int) else [int(i) for i in v]  # noqa: E731
    k = rep(kernel)
    s = rep(stride) if stride not in (None, [], ()) else k
    p = rep(padding)
    out = dict(kernel_shape=k, strides=s, pads=p + p)
    if dilation is not None:
        out["dilations"] = rep(dilation)
    return out


@register("max_pool_with_indices", "max_pool2d_with_indices", "max_pool1d_with_indices", "max_pool2d", "max_pool1d")
def _max_pool(ctx, args, kwargs):
    name = ctx.node.target.__name__
    x = args[0]
    kernel = arg(args, kwargs, 1, "kernel_size")
    stride = arg(args, kwargs, 2, "stride", None)
    padding = arg(args, kwargs, 3, "padding", 0)
    dilation = arg(args, kwargs, 4, "dilation", 1)
    ceil = arg(args, kwargs, 5, "ceil_mode", False)
    attrs = _pool_attrs(ctx, x, kernel, stride, padding, dilation)
    y = ctx.op("MaxPool", [x.name], ceil_mode=int(bool(ceil)), **attrs)
    if "indices" in name:
        return [Value(y, x.dtype, ()), Unavailable("max_pool's indices")]
    return y


@register("avg_pool", "avg_pool2d", "avg_pool1d")
def _avg_pool(ctx, args, kwargs):
    x = args[0]
    kernel = arg(args, kwargs, 1, "kernel_size")
    stride = arg(args, kwargs, 2, "stride", None)
    padding = arg(args, kwargs, 3, "padding", 0)
    ceil = arg(args, kwargs, 4, "ceil_mode", False)
    include_pad = arg(args, kwargs, 5, "count_include_pad", True)
    divisor = arg(args, kwargs, 6, "divisor_override", None)
    attrs = _pool_attrs(ctx, x, kernel, stride, padding)
    if ceil or divisor is not None:
        return _avg_pool_by_sums(ctx, x, attrs, bool(ceil), bool(include_pad), divisor)
    return ctx.op("AveragePool", [x.name], count_include_pad=int(bool(include_pad)), **attrs)


def _pool_out_size(n, k, s, p, ceil):
    """torch's pooled length: with ``ceil_mode`` the last window may overhang the right padding,
    but must start inside the input or its left padding."""
    span = n + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def _avg_pool_by_sums(ctx, x, attrs, ceil, include_pad, divisor):
    """avg_pool with ``ceil_mode`` or ``divisor_override`` (ONNX's AveragePool counts an overhanging
    window's divisor its own way and has no override): the window sums (AveragePool over the
    zero-padded input, times the window size) divided by torch's divisor per output position --
    the override, or the count of window cells inside the padded input (``count_include_pad``)
    or inside the input. The divisors are constants, so the pooled dims must be static."""
    n = x.rank - 2
    ins = [x.shape[x.rank - n + i] for i in range(n)]
    if not all(is_static(d) for d in ins):
        raise ctx.unsupported("avg_pool with ceil_mode/divisor_override over a dynamic spatial dimension")
    ins = [int(d) for d in ins]
    k, st, p = attrs["kernel_shape"], attrs["strides"], attrs["pads"][:n]
    outs = [_pool_out_size(L, kk, ss, pp, ceil) for L, kk, ss, pp in zip(ins, k, st, p)]
    right = [max((o - 1) * ss + kk - L - pp, 0) for o, ss, kk, L, pp in zip(outs, st, k, ins, p)]
    pads = [0] * (x.rank - n) + list(p) + [0] * (x.rank - n) + right
    padded = ctx.op("Pad", [x.name, ctx.b.int64s(pads)], name=f"{ctx.node.name}_pad") if any(pads) else x.name
    mean = ctx.op("AveragePool", [padded], kernel_shape=list(k), strides=list(st), name=f"{ctx.node.name}_mean")
    # AveragePool over the padded input may yield extra trailing windows (right padding beyond need)
    got = [(L + pp + r - kk) // ss + 1 for L, pp, r, kk, ss in zip(ins, p, right, k, st)]
    if got != outs:
        mean = ctx.op("Slice", [mean, ctx.b.int64s([0] * n), ctx.b.int64s(outs),
                                ctx.b.int64s(list(range(x.rank - n, x.rank)))], name=f"{ctx.node.name}_crop")
    dt = _np(x.dtype)
    window = float(np.prod(k))
    if divisor is not None:
        scale = np.asarray(window / float(divisor), dtype=dt)
    else:
        counts = np.ones((), dtype=np.float64)
        for L, kk, ss, pp, o in zip(ins, k, st, p, outs):
            lo, hi = (-pp, L + pp) if include_pad else (0, L)
            starts = np.arange(o) * ss - pp
            c = np.clip(starts + kk, lo, hi) - np.clip(starts, lo, hi)
            counts = np.multiply.outer(counts, c.astype(np.float64))
        scale = (window / counts).astype(dt)
    return ctx.op("Mul", [mean, ctx.b.const(scale, dt, "avg_pool_scale")])


@register("adaptive_avg_pool", "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool1d")
def _adaptive_avg_pool(ctx, args, kwargs):
    x = args[0]
    out = arg(args, kwargs, 1, "output_size")
    n = x.rank - 2
    out = [int(out)] * n if isinstance(out, int) else [None if o is None else int(o) for o in out]
    ins = [x.shape[2 + i] for i in range(n)]
    out = [ins[i] if o is None else o for i, o in enumerate(out)]
    if all(o == 1 for o in out):
        return ctx.op("GlobalAveragePool", [x.name])
    if all(is_static(s) and int(s) % o == 0 for s, o in zip(ins, out)):   # equal windows: a plain pool
        k = [int(s) // o for s, o in zip(ins, out)]
        return ctx.op("AveragePool", [x.name], kernel_shape=k, strides=k)
    if all(is_static(s) for s in ins) and n in (1, 2, 3):
        return _adaptive_avg_by_matmul(ctx, x, [int(s) for s in ins], out)
    raise ctx.unsupported(f"adaptive_avg_pool with output size {out} that does not divide the input size "
                          f"{[str(s) for s in ins]} (supported for static pooled dims)")


def _adaptive_windows(n_in, n_out, dtype):
    """(n_out, n_in) matrix averaging torch's adaptive windows: output i covers
    ``[floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out))``."""
    a = np.zeros((n_out, n_in), dtype=np.float64)
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        a[i, lo:hi] = 1.0 / (hi - lo)
    return a.astype(dtype)


def _adaptive_avg_by_matmul(ctx, x, ins, out):
    """Uneven adaptive windows as constant averaging matrices: ``x @ W^T`` over the last dim and
    ``H @ (...)`` over the one before (MatMul broadcasts over the batch and channel dims)."""
    dt = _np(x.dtype)
    w = _adaptive_windows(ins[-1], out[-1], dt).T
    y = ctx.op("MatMul", [x.name, ctx.b.const(w, dt, "adaptive_w")], name=f"{ctx.node.name}_w")
    if len(ins) >= 2:
        h = _adaptive_windows(ins[-2], out[-2], dt)
        y = ctx.op("MatMul", [ctx.b.const(h, dt, "adaptive_h"), y], name=f"{ctx.node.name}_h")
    if len(ins) == 3:       # depth: the third-last dim, averaged by an Einsum over it
        d = _adaptive_windows(ins[0], out[0], dt)
        y = ctx.op("Einsum", [y, ctx.b.const(d, dt, "adaptive_d")], equation="...dhw,ed->...ehw",
                   name=f"{ctx.node.name}_d")
    return y


# ---- embedding and attention
@register("embedding")
def _embedding(ctx, args, kwargs):
    import ember
    w, idx = args[0], args[1]
    return ctx.op("Gather", [w.name, ctx.tensor(idx, ember.int64)], axis=0)


@register("_resample")
def _resample(ctx, args, kwargs):
    """ember's separable linear resampling (adaptive pooling, bilinear/bicubic interpolate): per
    axis a constant (out, in) matrix, so a MatMul with the axis moved last."""
    x, mats = args[0], args[1]
    dt = ctx.out_dtype
    if not x.dtype.is_floating_point:
        raise ctx.unsupported("_resample of an integer tensor")
    out = ctx.tensor(x, dt)
    rank = x.rank
    for axis, m in mats:
        axis = ctx.norm_dim(int(axis), rank)
        perm = [d for d in range(rank) if d != axis] + [axis]
        inv = [perm.index(d) for d in range(rank)]
        mt = ctx.b.const(np.asarray(m).T, _np(dt), "resample_matrix")
        moved = ctx.op("Transpose", [out], perm=perm) if axis != rank - 1 else out
        prod = ctx.op("MatMul", [moved, mt])
        out = ctx.op("Transpose", [prod], perm=inv) if axis != rank - 1 else prod
    return out


@register("native_group_norm")
def _group_norm(ctx, args, kwargs):
    """(x - mean) / sqrt(var + eps) over each group of channels, then the per-channel affine;
    decomposed because ONNX's GroupNormalization changed meaning between opsets 18 and 21."""
    x, w, b = args[0], args[1], args[2]
    groups, eps = int(args[6]), float(args[7])
    dt = x.dtype
    src = ctx.tensor(x, dt)
    grouped = ctx.op("Reshape", [src, ctx.b.int64s([0, groups, -1])])
    axes = ctx.b.int64s([2])
    mean = ctx.op("ReduceMean", [grouped, axes], keepdims=1)
    d = ctx.op("Sub", [grouped, mean])
    var = ctx.op("ReduceMean", [ctx.op("Mul", [d, d]), axes], keepdims=1)
    normed = ctx.op("Div", [d, ctx.op("Sqrt", [ctx.op("Add", [var, ctx.tensor(eps, dt)])])])
    y = ctx.op("Reshape", [normed, ctx.op("Shape", [src])])
    per_channel = ctx.b.int64s([-1] + [1] * (x.rank - 2))
    if w is not None:
        y = ctx.op("Mul", [y, ctx.op("Reshape", [ctx.tensor(w, dt), per_channel])])
    if b is not None:
        y = ctx.op("Add", [y, ctx.op("Reshape", [ctx.tensor(b, dt), per_channel])])
    return [Value(y, dt, ()), Unavailable("group_norm's saved mean"), Unavailable("group_norm's saved rstd")]


@register("_gather_axes")
def _gather_axes(ctx, args, kwargs):
    """ember's constant-index gathers (nearest upsampling, reflect/replicate/constant padding):
    per axis a Gather with constant indices, then the fill value where a mask says so."""
    x, spec = args[0], args[1]
    out = ctx.tensor(x)
    rank = x.rank
    for axis, idx, mask, fill in spec:
        axis = ctx.norm_dim(int(axis), rank)
        out = ctx.op("Gather", [out, ctx.b.const(np.asarray(idx), np.int64, "gather_index")], axis=axis)
        if mask is not None:
            shape = [1] * rank
            shape[axis] = len(idx)
            m = ctx.b.const(np.asarray(mask, dtype=bool).reshape(shape), np.bool_, "gather_mask")
            out = ctx.op("Where", [m, out, ctx.tensor(fill if x.dtype.is_floating_point else int(fill), x.dtype)])
    return out


@register("_norm2_clamp")
def _norm2_clamp(ctx, args, kwargs):
    """max(||x||_2 over ``dim`` (kept), eps): F.normalize's denominator."""
    x, dim, eps = args[0], args[1], args[2]
    dt = ctx.out_dtype
    dims = [dim] if isinstance(dim, int) else list(dim)
    axes = ctx.b.int64s([ctx.norm_dim(int(d), x.rank) for d in dims])
    r = ctx.op("ReduceL2", [ctx.tensor(x, dt), axes], keepdims=1)
    return ctx.op("Max", [r, ctx.tensor(float(eps), dt)])


@register("_einsum", "einsum")
def _einsum(ctx, args, kwargs):
    eq, operands = args[0], args[1]
    if not isinstance(operands, (list, tuple)):
        operands = args[1:]
    if "..." in eq and ctx.opset < 12:
        raise ctx.unsupported("einsum with an ellipsis")
    dt = ctx.out_dtype
    return ctx.op("Einsum", [ctx.tensor(o, dt) for o in operands], equation=eq.replace(" ", ""))


@register("logsumexp")
def _logsumexp(ctx, args, kwargs):
    x = args[0]
    dim = arg(args, kwargs, 1, "dim")
    keepdim = arg(args, kwargs, 2, "keepdim", False)
    return _reduce(ctx, "ReduceLogSumExp", x, dim, keepdim, ctx.out_dtype)


@register("mish")
def _mish(ctx, args, kwargs):
    x = ctx.tensor(args[0], ctx.out_dtype)
    return ctx.op("Mul", [x, ctx.op("Tanh", [ctx.op("Softplus", [x])])])
