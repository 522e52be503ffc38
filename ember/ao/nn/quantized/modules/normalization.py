"""Quantized LayerNorm / GroupNorm / InstanceNorm{1,2,3}d and Softmax modules, as
``torch.ao.nn.quantized``'s: the float operation of the dequantized input, quantized with the
output scale / zero point observed in calibration (torch's kernels give those integers: checked
on random data; a float result within an ulp of a rounding tie can land one step apart)."""
from __future__ import annotations

import ember
from ember import nn
from .. import functional as qF

__all__ = ["LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Softmax"]


def _requantize_float(input, fn, scale, zero_point, name):
    qF._need_quantized(input, name)
    if input._qp.per_channel:
        raise NotImplementedError(f"ember.quantization: {name} of a per-channel quantized tensor is not supported")
    y = fn(input.dequantize())
    return ember.quantize_per_tensor(y.detach(), float(scale), int(zero_point), input.dtype)


def _observed(mod):
    scale, zero_point = mod.activation_post_process.calculate_qparams()
    return float(scale), int(zero_point)


class LayerNorm(nn.LayerNorm):
    def __init__(self, normalized_shape, weight, bias, scale, zero_point, eps=1e-5, elementwise_affine=True,
                 device=None, dtype=None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
        self.weight = weight
        self.bias = bias
        self.register_buffer("scale", ember.tensor(scale))
        self.register_buffer("zero_point", ember.tensor(zero_point))

    def forward(self, input):
        return _requantize_float(input, lambda d: nn.functional.layer_norm(d, self.normalized_shape, self.weight,
                                                                           self.bias, self.eps),
                                 self.scale, self.zero_point, "quantized.layer_norm")

    def _get_name(self):
        return "QuantizedLayerNorm"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.normalized_shape, mod.weight, mod.bias, *_observed(mod), mod.eps, mod.elementwise_affine)


class GroupNorm(nn.GroupNorm):
    def __init__(self, num_groups, num_channels, weight, bias, scale, zero_point, eps=1e-5, affine=True,
                 device=None, dtype=None):
        super().__init__(num_groups, num_channels, eps, affine)
        self.weight = weight
        self.bias = bias
        self.register_buffer("scale", ember.tensor(scale))
        self.register_buffer("zero_point", ember.tensor(zero_point))

    def forward(self, input):
        return _requantize_float(input, lambda d: nn.functional.group_norm(d, self.num_groups, self.weight,
                                                                           self.bias, self.eps),
                                 self.scale, self.zero_point, "quantized.group_norm")

    def _get_name(self):
        return "QuantizedGroupNorm"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.num_groups, mod.num_channels, mod.weight, mod.bias, *_observed(mod), mod.eps, mod.affine)


def _instance_norm(float_cls, dims):
    class _InstanceNorm(float_cls):
        def __init__(self, num_features, weight, bias, scale, zero_point, eps=1e-5, momentum=0.1, affine=False,
                     track_running_stats=False, device=None, dtype=None):
            super().__init__(num_features, eps, momentum, affine, track_running_stats)
            self.weight = weight
            self.bias = bias
            self.register_buffer("scale", ember.tensor(scale))
            self.register_buffer("zero_point", ember.tensor(zero_point))

        def forward(self, input):
            return _requantize_float(input, lambda d: nn.functional.instance_norm(d, weight=self.weight,
                                                                                  bias=self.bias, eps=self.eps),
                                     self.scale, self.zero_point, "quantized.instance_norm")

        def _get_name(self):
            return f"QuantizedInstanceNorm{dims}d"

        @classmethod
        def from_float(cls, mod, use_precomputed_fake_quant=False):
            return cls(mod.num_features, mod.weight, mod.bias, *_observed(mod), mod.eps, mod.affine)

    _InstanceNorm.__name__ = _InstanceNorm.__qualname__ = f"InstanceNorm{dims}d"
    return _InstanceNorm


InstanceNorm1d = _instance_norm(nn.InstanceNorm1d, 1)
InstanceNorm2d = _instance_norm(nn.InstanceNorm2d, 2)
InstanceNorm3d = _instance_norm(nn.InstanceNorm3d, 3)


class Softmax(nn.Softmax):
    def __init__(self, dim=None, scale=1.0, zero_point=0):
        super().__init__()
        self.dim = dim
        self.scale = scale
        self.zero_point = zero_point

    def forward(self, input):
        dim = self.dim
        if dim is None:
            import warnings
            warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include "
                          "dim=X as an argument.", stacklevel=3)
            dim = 0 if input.ndim in (0, 1, 3) else 1          # (torch's legacy implicit-dim choice)
        return _requantize_float(input, lambda d: nn.functional.softmax(d, dim), self.scale, self.zero_point,
                                 "quantized.softmax")

    def _get_name(self):
        return "QuantizedSoftmax"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return Softmax(mod.dim, *_observed(mod))
