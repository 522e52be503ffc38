"""Numpy kernels of quantization: float32 -> int representation and back, bit for bit torch's.

torch (fbgemm / x86) rounds half to even after scaling by the *float32 reciprocal* of the
scale (``x * (1/scale)``, not ``x / scale``: the two differ on about one value in a hundred),
and the order of the zero-point addition differs between its code paths, which matters on
exact ties. The variants below were checked against torch 2.13 on random data and ties:

* per tensor, 8-bit:   ``rint(fma(x, inv, zp))`` in float32 (fbgemm's AVX2 ``Quantize``);
* per tensor, qint32, and every per-channel quantization:
  ``rint(float32(float32(x * inv) + zp))`` (ATen's scalar ``quantize_val``).

Out-of-range values clamp to the dtype's range. NaN follows torch's machine behaviour
(it is not a number, so any answer is a convention): the int8 per-tensor path maps it to
the largest value, qint32 to the smallest, per-channel 8-bit to 0.

Dequantization is ``float32(q - zp) * float32(scale)`` (the difference in int32) per tensor and
``float32((q - zp) * float64(scale))`` per channel (all float32 with float zero points), as torch's.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t

RANGES = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2 ** 31, 2 ** 31 - 1)}


def qrange(dtype):
    """(min, max) of a quantized dtype's integers; NotImplementedError for the packed 4/2-bit ones."""
    r = RANGES.get(dtype.name)
    if r is None:
        raise NotImplementedError(f"ember.quantization: quantized tensors of dtype {dtype} (packed sub-byte "
                                  f"integers) are not supported; use ember.quint8, ember.qint8 or ember.qint32")
    return r


def _clip_cast(v, dtype, nan_value):
    """Clamp float64 ``v`` to the dtype's range and cast; NaN becomes ``nan_value``."""
    lo, hi = qrange(dtype)
    v = np.asarray(v, dtype=np.float64)
    nan = np.isnan(v)
    res = np.asarray(np.clip(v, lo, hi)).astype(dtype.np)
    if nan.any():
        res[nan] = nan_value
    return res


def quantize_per_tensor(x, scale, zero_point, dtype):
    """int representation of float32 array ``x`` (any shape) with one scale and zero point."""
    lo, hi = qrange(dtype)
    inv = np.float32(1.0) / np.float32(scale)
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype is _t.qint32:
            v = np.rint((x * inv).astype(np.float32) + np.float32(zero_point))
            return _clip_cast(v.astype(np.float64), dtype, lo)
        # fma(x, inv, zp): the product is exact in float64, one rounding to float32 after the add
        v = (x.astype(np.float64) * np.float64(inv) + float(zero_point)).astype(np.float32)
        return _clip_cast(np.rint(v).astype(np.float64), dtype, hi)


def _channel_shape(ndim, axis):
    return tuple(-1 if d == axis else 1 for d in range(ndim))


def quantize_per_channel(x, scales, zero_points, axis, dtype):
    """int representation of float32 ``x`` with a scale and zero point per slice along ``axis``."""
    lo, hi = qrange(dtype)
    x = np.asarray(x, dtype=np.float32)
    shp = _channel_shape(x.ndim, axis)
    inv = (np.float32(1.0) / np.asarray(scales, dtype=np.float32)).reshape(shp)
    zp = np.asarray(zero_points).astype(np.float32).reshape(shp)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint((x * inv).astype(np.float32) + zp)
    return _clip_cast(v.astype(np.float64), dtype, lo if dtype is _t.qint32 else 0)


def _int_diff(q, zp):
    """``q - zp`` in int32 with wrap-around, as torch (qint32 extremes wrap), then float32."""
    zp = np.asarray(zp)
    if zp.dtype.kind == "f":
        return q.astype(np.float32) - zp.astype(np.float32)
    return (q.astype(np.int64) - zp.astype(np.int64)).astype(np.int32).astype(np.float32)


def dequantize_per_tensor(q, scale, zero_point):
    return _int_diff(q, zero_point) * np.float32(scale)


def dequantize_per_channel(q, scales, zero_points, axis):
    """Per channel torch multiplies by the float64 scale and rounds once to float32."""
    shp = _channel_shape(q.ndim, axis)
    zp = np.asarray(zero_points).reshape(shp)
    if zp.dtype.kind == "f":          # float zero points (per_channel_affine_float_qparams): all float32
        s32 = np.asarray(scales, dtype=np.float32).reshape(shp)
        return ((q.astype(np.float32) - zp.astype(np.float32)).astype(np.float32) * s32).astype(np.float32)
    s = np.asarray(scales, dtype=np.float64).reshape(shp)
    diff = q.astype(np.float64) - zp.astype(np.float64)
    return (diff * s).astype(np.float32)


def choose_qparams(xmin, xmax, qmin, qmax, reduce_range=False, preserve_sparsity=False):
    """torch's ``ChooseQuantizationParams`` (ATen quant_utils.h) for a float32 min/max:
    extend the range to hold 0, scale = (max - min) / (qmax - qmin) in double, 0.1 when that
    vanishes in float32, at least 6.1e-5 (the range widened to match), and the zero point from
    whichever end has the smaller rounding error, rounded half to even and clamped."""
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    xmin = float(np.float32(min(float(xmin), 0.0)))
    xmax = float(np.float32(max(float(xmax), 0.0)))
    if preserve_sparsity and xmin < 0 < xmax:
        # symmetric: the larger side sets the scale for [-(n/2 + 1), n/2] (e.g. [-128, 127])
        sym_qmin = -((qmax - qmin) // 2 + 1)
        sym_qmax = (qmax - qmin) // 2
        max_scale = max(abs(float(np.float32(xmin) / np.float32(sym_qmin))),
                        abs(float(np.float32(xmax) / np.float32(sym_qmax))))
        xmin = float(np.float32(max_scale * sym_qmin))
        xmax = float(np.float32(max_scale * sym_qmax))
    scale = (xmax - xmin) / (qmax - qmin)
    f = np.float32(scale)
    with np.errstate(divide="ignore", over="ignore"):
        if f == 0 or np.isinf(np.float32(1.0) / f):
            scale = 0.1
    small = float(np.float32(6.1e-5))
    if scale < small:
        org = scale
        scale = small
        if xmin == 0.0:
            xmax = float(np.float32(small * (qmax - qmin)))
        elif xmax == 0.0:
            xmin = float(np.float32(-small * (qmax - qmin)))
        else:
            amp = np.float32(small / org)
            xmin = float(np.float32(xmin) * amp)
            xmax = float(np.float32(xmax) * amp)
    zp_min = qmin - xmin / scale
    zp_max = qmax - xmax / scale
    err_min = abs(qmin) - abs(xmin / scale)
    err_max = abs(qmax) - abs(xmax / scale)
    zp = zp_min if err_min < err_max else zp_max
    if preserve_sparsity and xmin < 0 < xmax:
        zp = (qmin + qmax) / 2
    if zp < qmin:
        nz = qmin
    elif zp > qmax:
        nz = qmax
    else:
        nz = int(np.rint(zp))
    return float(scale), int(nz)
