"""``LinearPackedParams``: where a quantized linear layer keeps its quantized weight and float bias.

torch packs them into an fbgemm structure; ember keeps the quantized weight tensor and the bias
as they are. The state_dict layout is torch's: ``<prefix>dtype`` and ``<prefix>_packed_params``
= ``(weight, bias)``, so quantized models save and load like torch's.
"""
from __future__ import annotations

import ember
from ember import nn


class LinearPackedParams(nn.Module):
    _version = 3

    def __init__(self, dtype=None):
        super().__init__()
        self.dtype = ember.qint8 if dtype is None else dtype
        if self.dtype is ember.qint8:
            w = ember.quantize_per_tensor(ember.zeros(1, 1), 1.0, 0, ember.qint8)
        elif self.dtype is ember.float16:
            w = ember.zeros(1, 1)
        else:
            raise RuntimeError(f"Unsupported dtype on dynamic quantized linear: {self.dtype}")
        self.set_weight_bias(w, None)

    def set_weight_bias(self, weight, bias):
        # one tuple attribute: the bias (often a Parameter) must not register as this module's own
        self._packed = (weight, bias)

    def _weight_bias(self):
        return self._packed

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        for key in ("dtype", "_packed_params"):
            if prefix + key not in state_dict:
                if strict:
                    missing_keys.append(prefix + key)
                return
        self.dtype = state_dict[prefix + "dtype"]
        w, b = state_dict[prefix + "_packed_params"]
        self.set_weight_bias(w, b)

    def __repr__(self):
        return repr(self._weight_bias())
