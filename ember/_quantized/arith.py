"""Arithmetic of two (per-tensor, same dtype) quantized tensors into given output parameters,
torch's ``quantized::add`` / ``add_relu`` / ``mul`` / ``mul_relu`` / ``cat`` (what ``QFunctional``
and the quantized LSTM run), following ATen's vectorized x86 kernels:

* ``add``: each side dequantized as ``fma(scale, q, -zp * scale)`` (float32, one rounding), the
  float32 sum (ReLU'd), requantized as ``rint(sum * (1 / out_scale)) + out_zp``;
* ``mul``: the integer product ``(a - za) * (b - zb)`` (exact), requantized as
  ``rint(float32(c) * m) + out_zp`` with ``m = float32(sa * sb * (1 / out_scale))``; a fused ReLU
  clamps at the output zero point.

Broadcasting follows numpy's (= torch's). Inputs are ``QuantizedTensor``s.
"""
from __future__ import annotations

import numpy as np

from . import kernels as K
from . import schemes as QS
from .tensor import QParams, QuantizedTensor, make_qtensor

_F32 = np.float32


def _check(a, b, name):
    for t in (a, b):
        if not isinstance(t, QuantizedTensor):
            raise RuntimeError(f"quantized::{name}: expected quantized tensors, got a "
                               f"{getattr(t, 'dtype', type(t).__name__)} operand")
        if t._qp.per_channel:
            raise RuntimeError(f"Only per tensor quantization is supported in {name}.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"quantized::{name}: expected both operands to have the same dtype, got {a.dtype} and "
                           f"{b.dtype}")


def _dequant_fma(q):
    """float32 values of ``q``'s integers as the AVX kernels compute them: ``fma(s, q, -zp * s)``."""
    s = _F32(q._qp.scale)
    premul = _F32(s * _F32(-q._qp.zero_point))
    # fma: the float64 product of two float32s is exact; one rounding to float32 after the add
    return (q._irepr.astype(np.float64) * np.float64(s) + np.float64(premul)).astype(_F32)


def _out(ints, dtype, scale, zero_point):
    lo, hi = K.qrange(dtype)
    ints = np.clip(ints, lo, hi).astype(dtype.np)
    return make_qtensor(np.ascontiguousarray(ints) if ints.ndim else ints, dtype,
                        QParams(QS.per_tensor_affine, scale=float(scale), zero_point=int(zero_point)))


def add(a, b, scale, zero_point, relu=False):
    """``quantized::add`` (``relu``: ``add_relu``) of ``a`` and ``b`` into ``scale`` / ``zero_point``."""
    _check(a, b, "add")
    c = (_dequant_fma(a) + _dequant_fma(b)).astype(_F32)
    if relu:
        c = np.maximum(c, _F32(0))
    inv = _F32(1) / _F32(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.rint((c * inv).astype(_F32)).astype(np.float64) + int(zero_point)
    return _out(r, a.dtype, scale, zero_point)


def mul(a, b, scale, zero_point, relu=False):
    """``quantized::mul`` (``relu``: ``mul_relu``) of ``a`` and ``b`` into ``scale`` / ``zero_point``."""
    _check(a, b, "mul")
    c = (a._irepr.astype(np.int64) - a._qp.zero_point) * (b._irepr.astype(np.int64) - b._qp.zero_point)
    m = _F32(_F32(_F32(a._qp.scale) * _F32(b._qp.scale)) * (_F32(1) / _F32(scale)))
    r = np.rint((c.astype(_F32) * m).astype(_F32)).astype(np.float64) + int(zero_point)
    if relu:
        r = np.maximum(r, int(zero_point))
    return _out(r, a.dtype, scale, zero_point)


def cat(tensors, scale, zero_point, dim=0, relu=False):
    """``quantized::cat``: the tensors joined along ``dim`` into ``scale`` / ``zero_point``: the
    integers copied when every tensor already has those parameters, else each tensor's values
    (dequantized) joined and quantized once."""
    from .ops import cat as _cat
    tensors = list(tensors)
    joined = _cat(tensors, dim)                 # (torch's checks: same dtype, per tensor, sizes)
    if not relu and all(t._qp.scale == float(scale) and t._qp.zero_point == int(zero_point) for t in tensors):
        return joined
    vals = np.concatenate([np.asarray(t.dequantize()._data, _F32) for t in tensors],
                          axis=_wrap(dim, joined._irepr.ndim))
    if relu:
        vals = np.maximum(vals, _F32(0))
    return _out(K.quantize_per_tensor(vals, scale, zero_point, joined.dtype), joined.dtype, scale, zero_point)


def _wrap(dim, ndim):
    return dim + ndim if dim < 0 else dim
