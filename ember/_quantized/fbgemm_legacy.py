"""torch's deprecated fbgemm linear functions (``fbgemm_linear_quantize_weight``,
``fbgemm_pack_quantized_matrix``, ``fbgemm_linear_int8_weight[_fp32_activation]``): the pieces a
user feeds to the legacy quantized RNN cells (``ember.quantized_lstm_cell`` ...).

* the weight is quantized to int8 over its own min..max (asymmetric: any zero point in -128..127,
  the scale rounded to float32), returned as a plain int8 tensor with its column offsets
  ``sum_k (w_q - zp)``;
* the "packed matrix" is fbgemm's private layout in torch; ember's is its own (the int8 bytes
  reinterpreted as uint8) and the product reads the int8 weight it is passed alongside;
* the product quantizes the input per call to uint8 over its min..max (full range 0..255, no
  reduce_range), multiplies exactly and adds the bias in fbgemm's fused epilogue -- bit for bit
  torch's (the dynamic Linear's arithmetic, ``_dynamic_int8_linear``).

Each warns once per process, as torch does.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make
from . import kernels as K
from . import schemes as QS
from .tensor import QParams, make_qtensor

_warned = set()


def _deprecated(name):
    if name not in _warned:
        _warned.add(name)
        import warnings
        warnings.warn(f"{name} is deprecated and will be removed in a future PyTorch release.", UserWarning,
                      stacklevel=3)


def _float32(t, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(t).__name__}")
    if t.dtype is not _t.float32:
        raise RuntimeError(f"expected scalar type Float but found {t.dtype.legacy_name}")
    return np.asarray(t.detach()._data, np.float32)


def fbgemm_linear_quantize_weight(input):
    """(int8 weight, int32 column offsets, scale, zero point) of a float32 (N, K) weight."""
    _deprecated("fbgemm_linear_quantize_weight")
    w = _float32(input, "fbgemm_linear_quantize_weight")
    if w.ndim != 2:
        raise RuntimeError(f"fbgemm_linear_quantize_weight: expected a 2-d weight, got {w.ndim}-d")
    lo = float(w.min()) if w.size else 0.0
    hi = float(w.max()) if w.size else 0.0
    scale, zp = K.choose_qparams(lo, hi, -128, 127)
    scale = float(np.float32(scale))
    q = K.quantize_per_tensor(w, scale, zp, _t.qint8)
    col = (q.astype(np.int64) - zp).sum(axis=1).astype(np.int32)
    return _make(q.astype(np.int8), _t.cpu, _t.int8), _make(col, _t.cpu, _t.int32), scale, int(zp)


def fbgemm_pack_quantized_matrix(input, K=None, N=None):
    """ember's "packed" form of an int8 weight: its bytes as uint8 (fbgemm's layout is private)."""
    _deprecated("fbgemm_pack_quantized_matrix")
    if not isinstance(input, Tensor) or input.dtype is not _t.int8:
        raise RuntimeError(f"fbgemm_pack_quantized_matrix: expected an int8 weight, got "
                           f"{getattr(input, 'dtype', type(input).__name__)}")
    arr = np.ascontiguousarray(np.asarray(input._data, np.int8))
    return _make(arr.reshape(-1).view(np.uint8).copy(), _t.cpu, _t.uint8)


def int8_linear(x, weight, weight_scale, weight_zero_point, bias):
    """numpy (..., K) float32 x int8 (N, K) weight -> (..., N) float32 (module doc)."""
    from ..ao.nn.quantized.dynamic.modules.linear import _dynamic_int8_linear
    w = np.asarray(weight._data, np.int8)
    if x.shape[-1] != w.shape[1]:
        raise RuntimeError("Expected K == weight.size(1) to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")
    qw = make_qtensor(w, _t.qint8, QParams(QS.per_tensor_affine, scale=float(weight_scale),
                                             zero_point=int(weight_zero_point)))
    b = None if bias is None else np.asarray(bias.detach()._data, np.float32)
    out = _dynamic_int8_linear(x.reshape(-1, x.shape[-1]), qw, b, reduce_range=False)
    return out.reshape(x.shape[:-1] + (w.shape[0],))


def fbgemm_linear_int8_weight_fp32_activation(input, weight, packed, col_offsets, weight_scale, weight_zero_point,
                                              bias):
    _deprecated("fbgemm_linear_int8_weight_fp32_activation")
    x = _float32(input, "fbgemm_linear_int8_weight_fp32_activation")
    if not isinstance(weight, Tensor) or weight.dtype is not _t.int8:
        raise RuntimeError("fbgemm_linear_int8_weight_fp32_activation: expected the int8 weight of "
                           "fbgemm_linear_quantize_weight")
    return _make(int8_linear(x, weight, weight_scale, weight_zero_point, bias), _t.cpu, _t.float32)


def fbgemm_linear_int8_weight(input, weight, packed, col_offsets, weight_scale, weight_zero_point, bias):
    _deprecated("fbgemm_linear_int8_weight")
    x = _float32(input, "fbgemm_linear_int8_weight")
    return _make(int8_linear(x, weight, float(weight_scale), int(weight_zero_point), bias), _t.cpu, _t.float32)
