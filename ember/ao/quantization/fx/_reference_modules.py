"""Reference quantized modules, what ``convert_to_reference_fx`` swaps in for float linear /
conv layers: the float layer run on its weight quantized and dequantized again (with the
weight observer's qparams), so the graph around it says in float ops exactly what a
quantized kernel computes -- for backends that lower the pattern themselves."""
from __future__ import annotations

import ember
from ember import nn
from ember.nn import functional as F

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d"]


class _WeightQDQ:
    """The weight's quantization parameters (from its observer) and its quantize-dequantize."""

    def _init_weight_qparams(self, weight_qparams):
        self.weight_qscheme = weight_qparams["qscheme"]
        self.weight_dtype = weight_qparams["dtype"]
        per_channel = self.weight_qscheme in (ember.per_channel_affine, ember.per_channel_symmetric,
                                              ember.per_channel_affine_float_qparams)
        scale = ember.as_tensor(weight_qparams["scale"], dtype=ember.float32)
        zero_point = ember.as_tensor(weight_qparams["zero_point"],
                                     dtype=ember.int64 if per_channel else ember.int32)
        self.register_buffer("weight_scale", scale.clone())
        self.register_buffer("weight_zero_point", zero_point.clone())
        self.weight_axis_int = int(weight_qparams.get("axis", 0)) if per_channel else 0
        self._per_channel = per_channel

    def get_weight(self):
        """The weight as the quantized kernel sees it: quantized, then dequantized."""
        w = self.weight
        if self._per_channel:
            q = ember.quantize_per_channel(w, self.weight_scale, self.weight_zero_point, self.weight_axis_int,
                                           self.weight_dtype)
        else:
            q = ember.quantize_per_tensor(w, float(self.weight_scale), int(self.weight_zero_point),
                                          self.weight_dtype)
        return q.dequantize()

    def _weight_repr(self):
        return f"weight_qscheme={self.weight_qscheme}, weight_dtype={self.weight_dtype}"


def weight_qparams_of(observer):
    """The dict reference modules are built from: the weight observer's scheme, dtype, scale,
    zero point and (per channel) axis."""
    scale, zero_point = observer.calculate_qparams()
    out = {"qscheme": observer.qscheme, "dtype": observer.dtype, "scale": scale, "zero_point": zero_point}
    if hasattr(observer, "ch_axis"):
        out["axis"] = observer.ch_axis
    return out


class Linear(nn.Linear, _WeightQDQ):
    """``QuantizedLinear(Reference)``: ``F.linear(x, dequant(quant(weight)), bias)``."""

    def __init__(self, in_features, out_features, bias_=True, weight_qparams=None):
        super().__init__(in_features, out_features, bias_)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self):
        return "QuantizedLinear(Reference)"

    def forward(self, x):
        return F.linear(x, self.get_weight(), self.bias)

    @classmethod
    def from_float(cls, float_linear, weight_qparams):
        ref = cls(float_linear.in_features, float_linear.out_features, float_linear.bias is not None,
                  weight_qparams=weight_qparams)
        ref.weight = nn.Parameter(float_linear.weight.detach())
        if float_linear.bias is not None:
            ref.bias = nn.Parameter(float_linear.bias.detach())
        return ref


def _conv_class(nd):
    base = getattr(nn, f"Conv{nd}d")
    fn = getattr(F, f"conv{nd}d")

    class RefConv(base, _WeightQDQ):
        __doc__ = f"``QuantizedConv{nd}d(Reference)``: the float conv on ``dequant(quant(weight))``."

        def __init__(self, *args, weight_qparams=None, **kwargs):
            super().__init__(*args, **kwargs)
            self._init_weight_qparams(weight_qparams)

        def _get_name(self):
            return f"QuantizedConv{nd}d(Reference)"

        def forward(self, x):
            if self.padding_mode != "zeros":
                raise NotImplementedError(f"ember.ao.quantization.quantize_fx: reference Conv{nd}d with "
                                          f"padding_mode={self.padding_mode!r} is not supported")
            return fn(x, self.get_weight(), self.bias, self.stride, self.padding, self.dilation, self.groups)

        @classmethod
        def from_float(cls, float_conv, weight_qparams):
            ref = cls(float_conv.in_channels, float_conv.out_channels, float_conv.kernel_size, float_conv.stride,
                      float_conv.padding, float_conv.dilation, float_conv.groups, float_conv.bias is not None,
                      float_conv.padding_mode, weight_qparams=weight_qparams)
            ref.weight = nn.Parameter(float_conv.weight.detach())
            if float_conv.bias is not None:
                ref.bias = nn.Parameter(float_conv.bias.detach())
            return ref

    RefConv.__name__ = RefConv.__qualname__ = f"Conv{nd}d"
    RefConv.__module__ = __name__
    return RefConv


Conv1d, Conv2d, Conv3d = _conv_class(1), _conv_class(2), _conv_class(3)
