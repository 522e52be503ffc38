"""Shared by the dynamic quantized recurrent modules (rnn.py, rnn_cells.py): dtype checks,
weight quantization with the qconfig's observer, float input checks."""
from __future__ import annotations

import numpy as np

import ember
from .linear import _quantize_weight


def _check_dtype(dtype):
    if dtype not in (ember.qint8, ember.float16):
        raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")


def _prepare_weight(w, dtype, scale):
    """A constructor's placeholder weight: quantized at ``scale`` (qint8) or kept float (float16)."""
    return ember.quantize_per_tensor(w, scale, 0, ember.qint8) if dtype is ember.qint8 else w


def _observe_and_quantize(weight, dtype, observer_ctor):
    if dtype is not ember.qint8:
        return weight.detach().float()
    obs = observer_ctor()
    obs(weight)
    return _quantize_weight(weight.detach().float(), obs)


def _weight_observer_ctor(mod):
    if getattr(mod, "qconfig", None) is not None and mod.qconfig.weight is not None:
        return mod.qconfig.weight
    from ember.ao.quantization.qconfig import default_dynamic_qconfig
    return default_dynamic_qconfig.weight


def _float_input(x, who):
    if not isinstance(x, ember.Tensor) or x.is_quantized:
        raise RuntimeError(f"{who} expects a float input tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dtype is not ember.float32:
        raise RuntimeError(f"expected scalar type Float but found {x.dtype.legacy_name}")
    return np.asarray(x.detach()._data, np.float32)
