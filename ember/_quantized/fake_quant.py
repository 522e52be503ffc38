"""``ember.fake_quantize_per_tensor_affine`` / ``fake_quantize_per_channel_affine``: quantize and
dequantize in one step, staying in floating point (quantization-aware training).

Forward, as torch's CPU kernel: ``q = int(zp + rint(x * float32(1/scale)))``, then
``(clamp(q, quant_min, quant_max) - zp) * scale`` rounded once to the input's dtype.
Backward is the straight-through estimator: the incoming gradient passes where ``q`` fell
inside ``[quant_min, quant_max]`` and is zero where it was clamped.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..autograd.function import Function
from ..tensor import Tensor, _make

_FLOATS = ("float32", "float16", "bfloat16", "float64")


def _fq(x, scale, zp, qmin, qmax):
    """(output, mask) of fake quantization; ``scale``/``zp`` broadcast against ``x``."""
    xf = x.astype(np.float32)
    inv = (np.float32(1.0) / np.asarray(scale, np.float32)).astype(np.float32)
    if isinstance(zp, np.ndarray) and zp.dtype.kind == "f":
        return _fq_float_zp(xf, inv, np.asarray(scale, np.float32), zp.astype(np.float32), qmin, qmax, x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.rint((xf * inv).astype(np.float32)).astype(np.float64) + np.asarray(zp, np.float64)
        r = np.where(np.isfinite(r), r, np.where(np.isnan(r), -2.0 ** 63, np.sign(r) * 2.0 ** 63))
        q = np.trunc(r)
        mask = (q >= qmin) & (q <= qmax)
        out = (np.clip(q, qmin, qmax) - np.asarray(zp, np.float64)) * np.asarray(scale, np.float32).astype(np.float64)
    return out.astype(x.dtype), mask


def _fq_float_zp(xf, inv, scale, zp, qmin, qmax, dtype):
    """A float zero point (``per_channel_affine_float_qparams``): torch rounds ``x / scale + zp``
    as a whole (float32), clamps, and returns ``(q - zp) * scale`` rounded once to float32 (bit for
    bit torch's on random data)."""
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.rint(((xf * inv).astype(np.float32) + zp).astype(np.float32))
        mask = (q >= qmin) & (q <= qmax)
        out = ((np.clip(q, qmin, qmax).astype(np.float64) - zp) * scale).astype(np.float32)   # one rounding
    return out.astype(dtype), mask


class _FakeQuant(Function):
    @staticmethod
    def forward(ctx, x, scale, zp, qmin, qmax):
        out, mask = _fq(np.asarray(x._data), scale, zp, qmin, qmax)
        ctx.mask = mask
        return _make(out, x.device, x.dtype)

    @staticmethod
    def backward(ctx, grad):
        mask = _make(ctx.mask, grad.device, _t.bool_)
        return grad * mask, None, None, None, None


def _check_input(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.is_quantized or x.dtype.name not in _FLOATS:
        raise RuntimeError(f"\"fake_quantize_tensor_cachemask_kernel_type_handling\" not implemented for "
                           f"'{x.dtype.legacy_name}'")


def _check_range(qmin, qmax, zps):
    if qmin > qmax:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")
    zps = np.asarray(zps)
    if zps.size and (np.any(zps < qmin) or np.any(zps > qmax)):
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """Quantize-dequantize ``input`` with one scale and zero point (floats/ints or 1-element tensors)."""
    _check_input(input, "fake_quantize_per_tensor_affine")
    if isinstance(scale, Tensor):
        if scale.numel() != 1:
            raise RuntimeError(f"fake_quantize_per_tensor_affine: scale must have one element, got "
                               f"{list(scale.shape)}")
        scale = float(np.asarray(scale.detach()._data).reshape(()))
    if isinstance(zero_point, Tensor):
        if zero_point.numel() != 1:
            raise RuntimeError(f"fake_quantize_per_tensor_affine: zero_point must have one element, got "
                               f"{list(zero_point.shape)}")
        zero_point = int(np.asarray(zero_point.detach()._data).reshape(()))
    if not isinstance(zero_point, numbers.Integral):
        raise TypeError(f"fake_quantize_per_tensor_affine(): argument 'zero_point' must be int, not "
                        f"{type(zero_point).__name__}")
    _check_range(quant_min, quant_max, [zero_point])
    return _FakeQuant.apply(input, float(scale), int(zero_point), int(quant_min), int(quant_max))


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """Quantize-dequantize with ``scale[c]`` / ``zero_point[c]`` for each slice along ``axis``."""
    _check_input(input, "fake_quantize_per_channel_affine")
    if not isinstance(scale, Tensor) or not isinstance(zero_point, Tensor):
        raise TypeError("fake_quantize_per_channel_affine(): 'scale' and 'zero_point' must be Tensors")
    if zero_point.dtype.name not in ("int32", "float32", "float16"):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {zero_point.dtype.legacy_name}")
    if scale.dim() != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if zero_point.dim() != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    if scale.numel() != zero_point.numel():
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    nd = input.dim()
    if not 0 <= axis < nd and not -nd <= axis < 0:
        raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
    axis = axis % nd
    if scale.numel() != input.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    sc = np.asarray(scale.detach()._data, np.float32)
    zp = np.asarray(zero_point.detach()._data)
    if zero_point.dtype.name == "int32":
        _check_range(quant_min, quant_max, zp)
    elif quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")
    shp = tuple(-1 if d == axis else 1 for d in range(nd))
    zp = zp.astype(np.float64) if zero_point.dtype.name == "int32" else zp.astype(np.float32)
    return _FakeQuant.apply(input, sc.reshape(shp), zp.reshape(shp), int(quant_min), int(quant_max))


def _flag_on(t, name):
    if not isinstance(t, Tensor) or t.numel() < 1:
        raise TypeError(f"fused_moving_avg_obs_fake_quant(): argument '{name}' must be a one-element Tensor")
    return bool(np.asarray(t.detach()._data).reshape(-1)[0])


def fused_moving_avg_obs_fake_quant(input, observer_on, fake_quant_on, running_min, running_max, scale, zero_point,
                                    averaging_const, quant_min, quant_max, ch_axis, per_row_fake_quant=False,
                                    symmetric_quant=False):
    """torch's fused observer + fake quantization step (what FusedMovingAvgObsFakeQuantize runs):
    with ``observer_on``, the running min/max move toward this batch's (``running += c * (batch -
    running)``; a running value still at +-inf takes the batch's) and ``scale`` / ``zero_point`` are
    recomputed from them (ATen's ChooseQuantizationParams, symmetric on request) -- all four updated
    in place; with ``fake_quant_on``, ``input`` is fake-quantized with them, else returned as is.
    ``per_row_fake_quant``: one min/max/scale/zero point per slice along ``ch_axis``."""
    from . import kernels as K
    _check_input(input, "fused_moving_avg_obs_fake_quant")
    for name, t in (("running_min", running_min), ("running_max", running_max), ("scale", scale),
                    ("zero_point", zero_point)):
        if not isinstance(t, Tensor):
            raise TypeError(f"fused_moving_avg_obs_fake_quant(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    x = np.asarray(input.detach()._data, np.float32)
    if _flag_on(observer_on, "observer_on") and x.size:
        if per_row_fake_quant:
            axis = ch_axis % x.ndim
            rows = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
            bmin, bmax = rows.min(axis=1), rows.max(axis=1)
        else:
            bmin, bmax = np.float32(x.min()), np.float32(x.max())
        c = np.float32(averaging_const)
        old_min = np.asarray(running_min.detach()._data, np.float32)
        old_max = np.asarray(running_max.detach()._data, np.float32)
        new_min = np.where(np.isinf(old_min), bmin, (old_min + c * (bmin - old_min)).astype(np.float32))
        new_max = np.where(np.isinf(old_max), bmax, (old_max + c * (bmax - old_max)).astype(np.float32))
        running_min.copy_(_make(np.asarray(new_min, np.float32).reshape(old_min.shape), _t.cpu, _t.float32))
        running_max.copy_(_make(np.asarray(new_max, np.float32).reshape(old_max.shape), _t.cpu, _t.float32))
        pairs = [K.choose_qparams(a, b, quant_min, quant_max, preserve_sparsity=bool(symmetric_quant))
                 for a, b in zip(np.atleast_1d(new_min), np.atleast_1d(new_max))]
        sc = np.array([p[0] for p in pairs], np.float32)
        zp = np.array([p[1] for p in pairs], np.asarray(zero_point.detach()._data).dtype)
        scale.copy_(_make(sc.reshape(tuple(scale.shape)), _t.cpu, scale.dtype))
        zero_point.copy_(_make(zp.reshape(tuple(zero_point.shape)), _t.cpu, zero_point.dtype))
    if not _flag_on(fake_quant_on, "fake_quant_on"):
        return input
    if per_row_fake_quant:
        return fake_quantize_per_channel_affine(input, scale, zero_point.to(_t.int32), ch_axis, quant_min, quant_max)
    return fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max)
