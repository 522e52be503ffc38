"""Elementwise functions of (per-tensor) quantized tensors, bit for bit torch's.

* ``clamp`` / ``hardtanh`` / ``threshold``: the bounds quantized with the input's parameters,
  the integers clamped / replaced.
* ``sigmoid`` / ``tanh`` / ``hardsigmoid``: the float function of the dequantized values on torch's
  fixed output grid (scale 1/256 or 1/128, the dtype's zero point).
* ``quantized_batch_norm``: eval-mode batch norm into given output parameters.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import kernels as K
from .ops import _like, _per_tensor
from .pooling import _no_cpu_kernel
from .tensor import QuantizedTensor, make_qtensor


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
