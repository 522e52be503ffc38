"""Operations torch runs on (per-tensor) quantized tensors, on their integers, bit for bit torch's.

* ``cat`` / ``stack``: the result takes the *first* tensor's scale and zero point; a tensor with
  other parameters is dequantized and requantized with them (torch's rule); mixed dtypes or a
  per-channel tensor raise torch's errors.
* ``max`` / ``min`` (whole tensor or along a dim, with int64 indices) and ``max_pool``: order
  does not change under an affine map with a positive scale, so they select integers and keep
  the parameters.
* nearest-neighbour upsampling (2-d, 3-d), ``flip``: the integers moved, the parameters kept.
* ``sigmoid`` / ``tanh`` / ``hardsigmoid``: the float function of the dequantized values on torch's
  fixed output grid (scale 1/256 or 1/128, the dtype's zero point).
* ``mean`` / adaptive average pooling: the sum of the raw integers divided by the count,
  rounded half to even, with the input's parameters (torch's kernels average the stored
  integers); ``avg_pool``: ``rint(float32(sum(q - zp)) * float32(1 / divisor) + zp)`` -- the
  two differ on ties and with ``divisor_override``; both checked against torch 2.13 on random
  data.

The dispatcher hands these here through ``QuantizedTensor.__ember_route__`` (op names in
``ROUTED``); the functions of ``ember.nn.quantized.functional`` call them directly.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make, _wrap_dim
from . import kernels as K
from .tensor import QuantizedTensor, make_qtensor


def _per_tensor(q, what):
    if q._qp.per_channel:
        raise RuntimeError(what)
    return q


def _like(q, ints):
    """A new quantized tensor over ``ints`` with ``q``'s dtype and (per-tensor) parameters."""
    return make_qtensor(np.ascontiguousarray(ints.astype(q._irepr.dtype, copy=False)) if ints.ndim else
                        np.asarray(ints, dtype=q._irepr.dtype), q.dtype, q._qp)


# -- joining ---------------------------------------------------------------------------
def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    first = tensors[0]
    for t in tensors:
        if not isinstance(t, QuantizedTensor):
            t.qscheme()                   # a dense tensor: torch's "no CPU kernel for qscheme" error
        if t._qp.per_channel:
            raise RuntimeError("Only per-tensor quantization is supported in 'cat'!")
    if any(t.dtype is not first.dtype for t in tensors):
        raise RuntimeError("All dtypes must be the same.")
    nd = first._irepr.ndim
    d = _wrap_dim(dim, nd)
    scale, zp = first._qp.scale, first._qp.zero_point
    parts = []
    for t in tensors:
        if t._irepr.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(t._irepr.shape, first._irepr.shape))
                                      if i != d):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                               f"{first._irepr.shape[[i for i in range(nd) if i != d][0]] if nd > 1 else 0} but "
                               f"got size {t._irepr.shape[[i for i in range(nd) if i != d][0]] if nd > 1 else 0} "
                               "for tensor number 1 in the list.")
        if t._qp.same_as(first._qp):
            parts.append(t._irepr)
        else:
            parts.append(K.quantize_per_tensor(t.dequantize()._data, scale, zp, first.dtype))
    return _like(first, np.concatenate(parts, axis=d))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _wrap_dim(dim, tensors[0]._irepr.ndim + 1)
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError("stack expects each tensor to be equal size")
    return cat([t.unsqueeze(d) for t in tensors], d)


# -- reductions -------------------------------------------------------------------------
_MAX_PC = ("{} operator for quantized tensors only works for per tensor quantized tensors. Please open an issue on "
           "https://github.com/pytorch/pytorch/issues if you need per channel quantized tensor support.")


def _extreme(q, which):
    _per_tensor(q, _MAX_PC.format(which.capitalize()))
    if q._irepr.size == 0:
        raise RuntimeError(f"{which}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    return _like(q, np.asarray(q._irepr.max() if which == "max" else q._irepr.min()))


def _extreme_dim(q, dim, keepdim, which):
    from .. import return_types
    _per_tensor(q, _MAX_PC.format(which.capitalize()))
    arr = q._irepr
    d = _wrap_dim(dim, arr.ndim) if arr.ndim else 0
    a = arr if arr.ndim else arr.reshape(1)
    idx = np.argmax(a, axis=d) if which == "max" else np.argmin(a, axis=d)
    vals = np.take_along_axis(a, np.expand_dims(idx, d), d)
    if not keepdim:
        vals = np.squeeze(vals, d)
    else:
        idx = np.expand_dims(idx, d)
    if not arr.ndim:
        vals, idx = vals.reshape(()), idx.reshape(())
    cls = getattr(return_types, which)
    return cls(_like(q, vals), _make(np.ascontiguousarray(idx.astype(np.int64)), _t.cpu, _t.int64))


def _avg_round(total, count, dtype):
    """``rint(sum / count)`` of integer sums, clamped to the dtype's range."""
    lo, hi = K.qrange(dtype)
    return np.clip(np.rint(total / count), lo, hi)


def mean(q, dim=None, keepdim=False, dtype=None):
    q.q_scale()                           # (torch's per-tensor-only error for a per-channel tensor)
    if dtype is not None and _t.as_dtype(dtype) is not q.dtype:
        raise NotImplementedError(f"ember.quantization: mean of a quantized tensor with dtype={dtype} is not "
                                  "supported")
    arr = q._irepr.astype(np.int64)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        axes = tuple(range(arr.ndim))
    else:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
        axes = tuple(sorted({_wrap_dim(d, arr.ndim) for d in dims}))
    count = int(np.prod([arr.shape[a] for a in axes])) if axes else 1
    total = arr.sum(axis=axes, keepdims=bool(keepdim)) if axes else arr
    return _like(q, np.asarray(_avg_round(total, count, q.dtype)))


# -- pooling -----------------------------------------------------------------------------
def _out_size(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _check_pool_input(q, name):
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"{name}: expected a quantized tensor, got {getattr(q, 'dtype', type(q).__name__)}")
    _per_tensor(q, f"ember.quantization: {name} of a per-channel quantized tensor is not supported")
    if q._irepr.ndim not in (3, 4):
        raise RuntimeError(f"{name}: Expected 3D or 4D (batch mode) tensor for input, got {list(q.shape)}")


def _windows(arr, k, s, p, d, out, fill):
    """(N, C, OH, OW, KH, KW) windows of the (N, C, H, W) array padded with ``fill`` (and enough
    extra on the bottom/right for ceil_mode windows)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = k, s, p, d, out
    h, w = arr.shape[2:]
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1
    extra_h = max(0, need_h - (h + 2 * ph))
    extra_w = max(0, need_w - (w + 2 * pw))
    padded = np.pad(arr, ((0, 0), (0, 0), (ph, ph + extra_h), (pw, pw + extra_w)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(padded, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :oh, :ow]


def _pool_args(q, kernel_size, stride, padding, dilation, ceil_mode):
    pair = (lambda v: (int(v), int(v)) if isinstance(v, numbers.Integral) else
            (tuple(int(x) for x in v) * 2 if len(v) == 1 else tuple(int(x) for x in v)))
    k = pair(kernel_size)
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0) else pair(stride)
    p, d = pair(padding), pair(dilation)
    h, w = q._irepr.shape[-2:]
    out = (_out_size(h, k[0], s[0], p[0], d[0], ceil_mode), _out_size(w, k[1], s[1], p[1], d[1], ceil_mode))
    if out[0] <= 0 or out[1] <= 0:
        raise RuntimeError(f"Given input size: ({q._irepr.shape[-3]}x{h}x{w}). Calculated output size: "
                           f"({q._irepr.shape[-3]}x{out[0]}x{out[1]}). Output size is too small")
    return k, s, p, d, out


def max_pool(q, kernel_size, stride, padding, dilation, ceil_mode):
    """(values, int64 flat indices into H*W) of 2-d max pooling over the integers."""
    _check_pool_input(q, "max_pool2d")
    k, s, p, d, out = _pool_args(q, kernel_size, stride, padding, dilation, ceil_mode)
    arr = q._irepr if q._irepr.ndim == 4 else q._irepr[None]
    lo = np.iinfo(arr.dtype).min
    win = _windows(arr.astype(np.int64), k, s, p, d, out, lo - 1)
    n, c, oh, ow = win.shape[:4]
    flat = win.reshape(n, c, oh, ow, -1)
    arg = flat.argmax(axis=-1)
    vals = np.take_along_axis(flat, arg[..., None], -1)[..., 0]
    h, w = arr.shape[2:]
    kh_i, kw_i = np.divmod(arg, k[1])
    rows = np.arange(oh)[:, None] * s[0] - p[0] + kh_i * d[0]
    cols = np.arange(ow)[None, :] * s[1] - p[1] + kw_i * d[1]
    idx = (rows * w + cols).astype(np.int64)
    if q._irepr.ndim == 3:
        vals, idx = vals[0], idx[0]
    return _like(q, vals), _make(np.ascontiguousarray(idx), _t.cpu, _t.int64)


def avg_pool(q, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    _check_pool_input(q, "avg_pool2d")
    k, s, p, d, out = _pool_args(q, kernel_size, stride, padding, 1, ceil_mode)
    arr = q._irepr if q._irepr.ndim == 4 else q._irepr[None]
    h, w = arr.shape[2:]
    # the sum of (q - zp) over the window's real elements (padding is a real 0), scaled by the
    # float32 reciprocal of the divisor, plus zp, rounded in float32: torch's kernel, ties included
    zp = q._qp.zero_point
    win = _windows(arr.astype(np.int64) - zp, k, s, p, d, out, 0)
    total = win.sum(axis=(-2, -1))
    if divisor_override:
        count = np.full(out, int(divisor_override))
    else:
        oh, ow = out
        hs = np.arange(oh) * s[0] - p[0]
        ws = np.arange(ow) * s[1] - p[1]
        he = np.minimum(hs + k[0], h + p[0])
        we = np.minimum(ws + k[1], w + p[1])
        if count_include_pad:
            count = (he - hs)[:, None] * (we - ws)[None, :]
        else:
            count = (np.minimum(he, h) - np.maximum(hs, 0))[:, None] * (np.minimum(we, w) - np.maximum(ws, 0))[None, :]
    lo, hi = K.qrange(q.dtype)
    inv = (np.float32(1) / np.asarray(count, np.float32)).astype(np.float32)
    res = np.clip(np.rint((total.astype(np.float32) * inv).astype(np.float32) + np.float32(zp)), lo, hi)
    return _like(q, res if q._irepr.ndim == 4 else res[0])


def adaptive_avg_pool2d(q, output_size):
    """Each output averages its adaptive window (start floor(i*H/OH), end ceil((i+1)*H/OH))."""
    _check_pool_input(q, "adaptive_avg_pool2d")
    arr = q._irepr if q._irepr.ndim == 4 else q._irepr[None]
    h, w = arr.shape[2:]
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]), w if output_size[1] is None
              else int(output_size[1]))
    ints = arr.astype(np.int64)
    res = np.empty(arr.shape[:2] + (oh, ow), np.float64)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            total = ints[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
            res[:, :, i, j] = _avg_round(total, (h1 - h0) * (w1 - w0), q.dtype)
    return _like(q, res if q._irepr.ndim == 4 else res[0])


def _resample(q, mats, name):
    """The adaptive average pools of ``ember.nn.functional`` reach here as ``_resample`` with one
    averaging matrix per pooled axis (row i: 1/len over window i): the windows are read off the
    matrices' nonzero pattern and the raw integers averaged as ``adaptive_avg_pool2d`` does."""
    if not str(name).startswith("AdaptiveAvgPool"):
        return NotImplemented
    _per_tensor(q, f"ember.quantization: {name[:-len('Backward0')]} of a per-channel quantized tensor is not "
                   "supported")
    total = q._irepr.astype(np.int64)
    count = 1
    for axis, m in mats:
        mask = (np.asarray(m) != 0).astype(np.int64)            # (out, in)
        total = np.moveaxis(np.tensordot(total, mask, axes=([axis], [1])), -1, axis)
        count = count * mask.sum(axis=1).reshape((-1,) + (1,) * (total.ndim - 1 - axis))
    return _like(q, _avg_round(total, count, q.dtype))


def _bound(q, v):
    """The integer of real ``v`` under ``q``'s parameters (torch quantizes the clamp bounds)."""
    return int(K.quantize_per_tensor(np.asarray([v], np.float32), q._qp.scale, q._qp.zero_point, q.dtype)[0])


def clamp(q, min=None, max=None):
    """Clamp between the quantized bounds: the integers stay on the input's grid."""
    if q._qp.per_channel:
        raise NotImplementedError("ember.quantization: clamp of a per-channel quantized tensor is not supported")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        raise NotImplementedError("ember.quantization: clamp of a quantized tensor with tensor bounds is not "
                                  "supported")
    if min is None and max is None:
        raise RuntimeError("At least one of 'min' or 'max' must not be None")
    lo = None if min is None else _bound(q, float(min))
    hi = None if max is None else _bound(q, float(max))
    return _like(q, np.clip(q._irepr, lo, hi))


def threshold(q, threshold, value):
    """``x if x > threshold else value`` (compared in real numbers, ``value`` quantized)."""
    keep = q.dequantize()._data > np.float32(threshold)
    return _like(q, np.where(keep, q._irepr, np.asarray(_bound(q, float(value)), q._irepr.dtype)))


def _gather_axes(q, spec, name):
    """Nearest-neighbour resizing (``F.interpolate(mode='nearest' / 'nearest-exact')``) reaches here
    as ``_gather_axes`` with the source index of every output position per axis (computed as
    for a float tensor): the integers are gathered, the parameters kept. Padding (same op, with
    fill masks) is left to the dense path's error."""
    name = str(name)
    if not name.startswith("UpsampleNearest") or "1D" in name or any(m is not None for _, _, m, _ in spec):
        return NotImplemented            # (torch has no quantized 1-d nearest upsampling either)
    _per_tensor(q, f"ember.quantization: {name[:-len('Backward0')]} of a per-channel quantized tensor is not "
                   "supported")
    out = q._irepr
    for axis, idx, _, _ in spec:
        out = np.take(out, np.asarray(idx), axis=axis)
    return _like(q, out)


def _fixed_grid(name, fn, scale, zero_points):
    """An activation with a known output range that torch quantizes on a fixed grid (``scale``,
    the dtype's zero point from ``zero_points``): ``fn`` of the dequantized values, requantized."""
    def apply(q):
        from .tensor import QParams
        from . import schemes as QS
        _per_tensor(q, f"ember.quantization: {name} of a per-channel quantized tensor is not supported")
        zp = zero_points.get(q.dtype.name)
        if zp is None:
            raise NotImplementedError(f"ember.quantization: {name} of a {q.dtype} tensor is not supported (quint8 "
                                      "and qint8 are)")
        with np.errstate(over="ignore"):
            y = np.asarray(fn(np.asarray(q.dequantize()._data, np.float32)), np.float32)
        ints = K.quantize_per_tensor(y, scale, zp, q.dtype)
        return make_qtensor(ints, q.dtype, QParams(QS.per_tensor_affine, scale=scale, zero_point=zp))
    apply.__name__ = name
    return apply


_F32 = np.float32
sigmoid = _fixed_grid("sigmoid", lambda d: (_F32(1) / (_F32(1) + np.exp(-d))).astype(_F32), 1.0 / 256,
                      {"quint8": 0, "qint8": -128})
tanh = _fixed_grid("tanh", np.tanh, 1.0 / 128, {"quint8": 128, "qint8": 0})
hardsigmoid = _fixed_grid("hardsigmoid", lambda d: (np.clip((d + _F32(3)).astype(_F32), 0, 6) / _F32(6))
                          .astype(_F32), 1.0 / 256, {"quint8": 0, "qint8": -128})


def flip(q, dims):
    """The integers reversed along ``dims`` (per-tensor only, as torch)."""
    from .tensor import _UNIFORM_ONLY
    _per_tensor(q, _UNIFORM_ONLY)
    dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
    axes = tuple(sorted({_wrap_dim(d, q._irepr.ndim) for d in dims}))
    return _like(q, np.flip(q._irepr, axes))


def _no_cpu_kernel(name):
    return NotImplementedError(f"Could not run 'aten::{name}' with arguments from the 'CPU' backend. ember's "
                               f"{name} takes a quantized tensor (ember.quantize_per_tensor).")


def quantized_max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch's top-level quantized max pooling (N, C, H, W) / (C, H, W): the integers' maxima."""
    if not isinstance(input, QuantizedTensor):
        raise _no_cpu_kernel("quantized_max_pool2d")
    return max_pool(input, kernel_size, None if not stride else stride, padding, dilation, ceil_mode)[0]


def quantized_max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """1-d max pooling of (N, C, L) / (C, L) as the 2-d one over a height of 1."""
    if not isinstance(input, QuantizedTensor):
        raise _no_cpu_kernel("quantized_max_pool1d")
    one = lambda v, d: (d,) + (tuple(v) if isinstance(v, (list, tuple)) else (v,))  # noqa: E731
    out = max_pool(input.unsqueeze(-2), one(kernel_size, 1), None if not stride else one(stride, 1),
                   one(padding, 0), one(dilation, 1), ceil_mode)[0]
    return out.squeeze(-2)


def quantized_batch_norm(input, weight, bias, mean, var, eps, output_scale, output_zero_point):
    """Batch norm (eval statistics) of a quantized (N, C, ...) tensor into ``output_scale`` /
    ``output_zero_point``: ``rint((q - zp) * a + b)`` per channel with ``a = weight / sqrt(var + eps)
    * in_scale / out_scale`` and ``b = (bias - mean * weight / sqrt(var + eps)) / out_scale + out_zp``
    (float32), clamped -- torch's integers (checked on 200k random values)."""
    from .tensor import QParams
    from . import schemes as QS
    if not isinstance(input, QuantizedTensor):
        raise _no_cpu_kernel("quantized_batch_norm")
    if weight is None:
        raise RuntimeError("Weight must be provided")
    if bias is None:
        raise RuntimeError("Bias must be provided")
    _per_tensor(input, "ember.quantization: quantized_batch_norm of a per-channel quantized tensor is not supported")
    f32 = np.float32
    arr = (lambda t: np.asarray(t.detach()._data, f32))
    w, b, m, v = arr(weight), arr(bias), arr(mean), arr(var)
    inv_std = (w / np.sqrt((v + f32(eps)).astype(f32))).astype(f32)
    beta = (b - m * inv_std).astype(f32)
    a = (inv_std * f32(input._qp.scale) / f32(output_scale)).astype(f32)
    c = (beta / f32(output_scale) + f32(output_zero_point)).astype(f32)
    shape = (1, -1) + (1,) * (input._irepr.ndim - 2)
    x = (input._irepr.astype(f32) - f32(input._qp.zero_point)).astype(f32)
    lo, hi = K.qrange(input.dtype)
    y = np.clip(np.rint((x * a.reshape(shape) + c.reshape(shape)).astype(f32)), lo, hi)
    return make_qtensor(np.ascontiguousarray(y.astype(input._irepr.dtype)), input.dtype,
                        QParams(QS.per_tensor_affine, scale=float(output_scale), zero_point=int(output_zero_point)))


def _routed_max(q):
    return _extreme(q, "max")


def _routed_min(q):
    return _extreme(q, "min")


# op name (ember/ops/registry.py) -> function taking the op's arguments as called
ROUTED = {
    "cat": cat, "stack": stack, "max": _routed_max, "min": _routed_min,
    "max_dim": lambda q, dim, keepdim=False: _extreme_dim(q, dim, keepdim, "max"),
    "min_dim": lambda q, dim, keepdim=False: _extreme_dim(q, dim, keepdim, "min"),
    "mean": mean, "max_pool_with_indices": max_pool, "avg_pool": avg_pool, "_resample": _resample,
    "clamp": clamp, "hardtanh": lambda q, min_val=-1.0, max_val=1.0: clamp(q, min_val, max_val),
    "_gather_axes": _gather_axes, "sigmoid": sigmoid, "tanh": tanh, "hardsigmoid": hardsigmoid, "flip": flip,
}

