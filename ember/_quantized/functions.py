"""``ember.quantize_per_tensor`` and friends: make quantized tensors from float32 tensors.

Argument checks raise torch's messages (a float32 input only, a quantized dtype, a zero
point inside the dtype's range, a channel axis inside the tensor, one scale per channel).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import kernels as K
from . import schemes as QS
from .tensor import QParams, QuantizedTensor, make_qtensor


_DEPRECATION = ("torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation functions "
                "that produce tensors with dtype torch.quint8, torch.qint8, and torch.qint32 are deprecated and will "
                "be removed in a future PyTorch release. Please see https://github.com/pytorch/pytorch/issues/184982 "
                "for more information.")
_warned = [False]


def _warn_deprecated_once():
    """torch 2.13 deprecates making quantized tensors: one UserWarning per process (TORCH_WARN_ONCE),
    at the first one made; ember's text is torch's (it names torch's functions and issue)."""
    if not _warned[0]:
        _warned[0] = True
        import warnings
        warnings.warn(_DEPRECATION, UserWarning, stacklevel=3)


def _check_qdtype(dtype, fn):
    if not isinstance(dtype, _t.dtype):
        raise TypeError(f"{fn}(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")
    if dtype not in _t.QUANTIZED_DTYPES:
        raise RuntimeError(f"ScalarType {dtype.legacy_name} is not supported in new_qtensor.")
    return dtype


def _float_input(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if isinstance(x, QuantizedTensor):
        raise RuntimeError(f"{fn}: the input is already quantized ({x.dtype}); dequantize() it first")
    if x.dtype is not _t.float32:
        raise RuntimeError(f"Quantize only works on Float Tensor, got {x.dtype.legacy_name}")
    if x.device.type != "cpu":
        raise NotImplementedError("ember.quantization: quantizing a tensor on a non-cpu device is not supported")
    return np.asarray(x.detach()._data)


def _scalar(v, name, kind):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise RuntimeError(f"quantize_per_tensor: {name} must be a one-element tensor, got shape "
                               f"{list(v.shape)}")
        v = v.item()
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            if isinstance(v, float) and v == int(v):
                return int(v)
            raise TypeError(f"quantize_per_tensor(): argument 'zero_point' must be int, not {type(v).__name__}")
        return int(v)
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise TypeError(f"quantize_per_tensor(): argument 'scale' must be float, not {type(v).__name__}")
    return float(v)


def _check_zero_point(zp, dtype, fn):
    lo, hi = K.qrange(dtype)
    if zp > hi:
        raise RuntimeError(f"{fn} zero_point {zp} is above upper bound.")
    if zp < lo:
        raise RuntimeError(f"{fn} zero_point {zp} is below lower bound.")


def quantize_per_tensor(input, scale, zero_point, dtype):
    """Quantize a float32 tensor with one scale and zero point: ``q = clamp(round(x / scale) + zero_point)``
    (rounding: kernels.py). A list of tensors takes 1-d tensors of scales and zero points, one per item."""
    if isinstance(input, (list, tuple)):
        if not isinstance(scale, Tensor) or not isinstance(zero_point, Tensor):
            raise TypeError("quantize_per_tensor(): a list of tensors takes scales and zero_points as tensors")
        sc = np.asarray(scale.detach()._data).reshape(-1)
        zp = np.asarray(zero_point.detach()._data).reshape(-1)
        if len(sc) != len(input) or len(zp) != len(input):
            raise RuntimeError(f"quantize_per_tensor: {len(input)} tensors need as many scales and zero points, "
                               f"got {len(sc)} and {len(zp)}")
        return [quantize_per_tensor(t, float(s), int(z), dtype) for t, s, z in zip(input, sc, zp)]
    dtype = _check_qdtype(dtype, "quantize_per_tensor")
    arr = _float_input(input, "quantize_per_tensor")
    scale = _scalar(scale, "scale", float)
    zero_point = _scalar(zero_point, "zero_point", int)
    _check_zero_point(zero_point, dtype, "quantize_tensor_per_tensor_affine")
    _warn_deprecated_once()
    q = K.quantize_per_tensor(arr, scale, zero_point, dtype)
    return make_qtensor(q, dtype, QParams(QS.per_tensor_affine, scale=scale, zero_point=zero_point))


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """Quantize a float32 tensor with ``scales[c]`` / ``zero_points[c]`` for the slice ``c`` along ``axis``."""
    dtype = _check_qdtype(dtype, "quantize_per_channel")
    if dtype.name in ("quint4x2", "quint2x4"):
        raise NotImplementedError(f"\"quantize_tensor_per_channel_affine\" not implemented for "
                                  f"'{dtype.legacy_name}'")
    arr = _float_input(input, "quantize_per_channel")
    for name, v in (("scales", scales), ("zero_points", zero_points)):
        if not isinstance(v, Tensor):
            raise TypeError(f"quantize_per_channel(): argument '{name}' must be Tensor, not {type(v).__name__}")
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"quantize_per_channel(): argument 'axis' must be int, not {type(axis).__name__}")
    nd = arr.ndim
    if not 0 <= axis < nd:
        raise RuntimeError(f"Channel axis out of range in per channel affine quantization. Got: {axis}"
                           f"Expected: [0, {nd})")
    sc = np.asarray(scales.detach()._data, dtype=np.float64).reshape(-1).copy()
    zp_src = np.asarray(zero_points.detach()._data).reshape(-1)
    zp = zp_src.astype(np.float32 if zero_points.dtype.is_floating_point else np.int64, copy=True)
    ch = arr.shape[axis]
    if len(sc) != ch:
        raise RuntimeError(f"length of scales must equal to channel, expected {ch} got, {len(sc)}")
    if len(zp) != ch:
        raise RuntimeError(f"length of zero_points must equal to channel expected {ch} got, {len(zp)}")
    if not zero_points.dtype.is_floating_point:
        for z in zp:
            _check_zero_point(int(z), dtype, "quantize_tensor_per_channel_affine")
    _warn_deprecated_once()
    q = K.quantize_per_channel(arr, sc, zp, int(axis), dtype)
    return make_qtensor(q, dtype, QParams(QS.per_channel_affine, scales=sc, zero_points=zp, axis=int(axis)))


def quantize_per_tensor_dynamic(input, dtype, reduce_range):
    """Quantize with the scale and zero point that cover the tensor's own min..max (and 0)."""
    dtype = _check_qdtype(dtype, "quantize_per_tensor_dynamic")
    if dtype not in (_t.qint8, _t.quint8):
        raise RuntimeError(f"dtype {dtype.legacy_name}not supported")
    arr = _float_input(input, "quantize_per_tensor_dynamic")
    _warn_deprecated_once()
    lo, hi = K.qrange(dtype)
    xmin = float(arr.min()) if arr.size else 0.0
    xmax = float(arr.max()) if arr.size else 0.0
    scale, zp = K.choose_qparams(xmin, xmax, lo, hi, reduce_range=bool(reduce_range))
    return quantize_per_tensor(input, scale, zp, dtype)


def dequantize(tensor):
    """The float32 values of a quantized tensor (a list of them: a list); a dense tensor: itself."""
    if isinstance(tensor, (list, tuple)):
        return [dequantize(t) for t in tensor]
    if not isinstance(tensor, Tensor):
        raise TypeError(f"dequantize(): argument 'self' must be Tensor, not {type(tensor).__name__}")
    return tensor.dequantize()


def int_repr(tensor):
    """The integers of a quantized tensor, as a dense int8 / uint8 / int32 tensor."""
    return tensor.int_repr()
