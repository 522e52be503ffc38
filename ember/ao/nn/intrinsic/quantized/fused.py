"""Quantized fused modules whose fused operation is not a clamp: ``LinearLeakyReLU``,
``LinearTanh`` (a linear layer then the activation) and ``ConvAdd2d`` / ``ConvAddReLU2d`` (a conv
whose output is added to a second quantized input, then optionally a ReLU).

torch runs these with oneDNN only (the ``onednn`` quantized engine). oneDNN computes the layer's
float output ``acc * x_scale * w_scale + bias`` (float32), applies the post-ops in float32 (the
activation; for the add, the dequantized extra input is summed in), and quantizes once with the
output's scale and zero point. ember does the same with its exact int32 accumulation, so the
integers agree with torch's up to float32 rounding of that sequence (one step at rare ties).
"""
from __future__ import annotations

import numpy as np

import ember
from ember._quantized import kernels as _K
from ember.ao.nn.quantized.modules.conv import Conv2d as _QConv2d, _channels_first
from ember.ao.nn.quantized.modules.static import Linear as _QLinear, _need_quantized

__all__ = ["LinearLeakyReLU", "LinearTanh", "ConvAdd2d", "ConvAddReLU2d"]

_F32 = np.float32


def _float_out(acc, x_scale, w_scales, bias):
    """The layer's float32 output from the int32 accumulator (oneDNN's order: scale, then bias)."""
    r = (acc.astype(_F32) * (_F32(x_scale) * w_scales.astype(_F32)).astype(_F32)).astype(_F32)
    if bias is not None:
        r = (r + bias.astype(_F32)).astype(_F32)
    return r


def _quantize_out(mod, y):
    return mod._out(_K.quantize_per_tensor(np.ascontiguousarray(y, _F32), float(mod.scale), int(mod.zero_point),
                                           ember.quint8))


class LinearLeakyReLU(_QLinear):
    """``QuantizedLinearLeakyReLU``: ``leaky_relu(linear(x), negative_slope)`` quantized once."""

    def __init__(self, in_features, out_features, negative_slope, bias=True, dtype=None):
        super().__init__(in_features, out_features, bias)
        self.negative_slope = negative_slope

    def _get_name(self):
        return "QuantizedLinearLeakyReLU"

    def forward(self, x):
        acc, ws, bias = self._int_acc(x)
        r = _float_out(acc, x.q_scale(), ws, bias)
        y = np.where(r > 0, r, (r * _F32(self.negative_slope)).astype(_F32))
        return _quantize_out(self, y.reshape(tuple(x.shape[:-1]) + (self.out_features,)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        if type(mod) is not nni.LinearLeakyReLU:
            raise AssertionError("Input float module should be LinearLeakyReLU")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        plain = _QLinear.from_float(mod)
        out = cls(mod[0].in_features, mod[0].out_features, mod[1].negative_slope)
        out.set_weight_bias(plain.weight(), plain.bias())
        out.scale, out.zero_point = plain.scale, plain.zero_point
        return out


class LinearTanh(_QLinear):
    """``QuantizedLinearTanh``: ``tanh(linear(x))`` quantized once."""

    def _get_name(self):
        return "QuantizedLinearTanh"

    def forward(self, x):
        acc, ws, bias = self._int_acc(x)
        y = np.tanh(_float_out(acc, x.q_scale(), ws, bias)).astype(_F32)
        return _quantize_out(self, y.reshape(tuple(x.shape[:-1]) + (self.out_features,)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        if type(mod) is not nni.LinearTanh:
            raise AssertionError("Input float module should be LinearTanh")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        plain = _QLinear.from_float(mod)
        out = cls(mod[0].in_features, mod[0].out_features)
        out.set_weight_bias(plain.weight(), plain.bias())
        out.scale, out.zero_point = plain.scale, plain.zero_point
        return out


class ConvAdd2d(_QConv2d):
    """``QuantizedConvAdd2d``: ``conv(input) + extra_input`` (a quantized tensor of the conv output's
    shape), quantized once with this module's output parameters."""

    _ADD_RELU = False

    def _get_name(self):
        return "QuantizedConvAddReLU2d" if self._ADD_RELU else "QuantizedConvAdd2d"

    def forward(self, input, extra_input):
        if len(input.shape) != 4:
            raise ValueError("Input shape must be `(N, C, H, W)`!")
        _need_quantized(extra_input, self._get_name())
        acc, ws, bias = self._int_acc(input)
        r = _channels_first(_float_out(acc, input.q_scale(), ws, bias))
        if tuple(extra_input.shape) != r.shape:
            raise RuntimeError(f"{self._get_name()}: extra_input must have the conv output's shape {r.shape}, got "
                               f"{tuple(extra_input.shape)}")
        r = (r + np.asarray(extra_input.dequantize()._data, _F32)).astype(_F32)
        if self._ADD_RELU:
            r = np.maximum(r, _F32(0))
        return _quantize_out(self, r)


class ConvAddReLU2d(ConvAdd2d):
    """``QuantizedConvAddReLU2d``: ``relu(conv(input) + extra_input)``."""

    _ADD_RELU = True
