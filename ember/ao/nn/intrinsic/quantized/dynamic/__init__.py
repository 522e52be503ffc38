"""``ember.ao.nn.intrinsic.quantized.dynamic``: the dynamically quantized ``LinearReLU`` (float in,
float out, int8 weight; the ReLU applied to the float output, as fbgemm's ``linear_relu_dynamic``)."""
from __future__ import annotations

import numpy as np

import ember
from ember.ao.nn.quantized.dynamic.modules.linear import Linear as _DynamicLinear

__all__ = ["LinearReLU"]


class LinearReLU(_DynamicLinear):
    """``DynamicQuantizedLinearReLU``: ``relu(dynamic_linear(x))``."""

    def _get_name(self):
        return "DynamicQuantizedLinearReLU"

    def forward(self, x):
        out = super().forward(x)
        return ember.tensor(np.maximum(np.asarray(out._data, np.float32), np.float32(0)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        if type(mod) is not nni.LinearReLU:
            raise AssertionError(f"nn.intrinsic.quantized.dynamic.LinearReLU.from_float only works for "
                                 f"[LinearReLU], got {type(mod).__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        linear = mod[0]
        linear.qconfig = mod.qconfig
        plain = _DynamicLinear.from_float(linear)
        out = cls(linear.in_features, linear.out_features, dtype=plain._packed_params.dtype)
        out.set_weight_bias(plain.weight(), plain.bias())
        return out
