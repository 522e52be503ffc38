"""Pooling and resizing of (per-tensor) quantized tensors, on their integers, bit for bit torch's.

* ``max_pool`` (and torch's top-level ``quantized_max_pool1d/2d``): order does not change under
  an affine map with a positive scale, so the maxima are integers' maxima, parameters kept.
* adaptive average pooling: the sum of the raw integers over each window divided by its size,
  rounded half to even; ``avg_pool``: ``rint(float32(sum(q - zp)) * float32(1 / divisor) + zp)``
  -- the two differ on ties and with ``divisor_override``; both checked against torch 2.13.
* nearest-neighbour upsampling (2-d, 3-d): the integers gathered, the parameters kept.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import _make
from . import kernels as K
from .ops import _avg_round, _like, _per_tensor
from .tensor import QuantizedTensor


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
