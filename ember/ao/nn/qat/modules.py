"""QAT Linear / Conv2d: during training the weight is fake-quantized (``weight_fake_quant``, made
from the qconfig's weight constructor) before the float product, so the loss sees the rounding
the int8 model will have; ``convert`` then quantizes with the qparams those fake quantizers
learned. ``from_float`` shares the float module's Parameters (as torch: an optimizer made
before or after the swap trains the same tensors)."""
from __future__ import annotations

from ember import nn
from ember.nn import functional as F


def _need_qconfig(qconfig):
    if not qconfig:
        raise AssertionError("qconfig must be provided for QAT module")
    return qconfig


def _from_float_checks(cls, mod):
    if type(mod) is not cls._FLOAT_MODULE:
        raise AssertionError(f"qat.{cls.__name__}.from_float only works for {cls._FLOAT_MODULE.__name__}")
    if not hasattr(mod, "qconfig"):
        raise AssertionError("Input float module must have qconfig defined")
    if not mod.qconfig:
        raise AssertionError("Input float module must have a valid qconfig")


class Linear(nn.Linear):
    """``nn.Linear`` whose weight goes through ``weight_fake_quant`` in ``forward``."""

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.qconfig = _need_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        qconfig = mod.qconfig
        if type(mod).__name__ == "LinearReLU":
            mod = mod[0]
        qat = cls(mod.in_features, mod.out_features, bias=mod.bias is not None, qconfig=qconfig)
        qat.weight = mod.weight
        qat.bias = mod.bias
        return qat

    def to_float(self):
        linear = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        linear.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            linear.bias = nn.Parameter(self.bias.detach())
        linear.train(self.training)
        return linear


class _ConvNd:
    """Mixin of the QAT convolutions: the float conv's forward over the fake-quantized weight."""

    _FUSED_RELU_NAME = ""

    def _qat_init(self, qconfig):
        self.qconfig = _need_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        qconfig = mod.qconfig
        if type(mod).__name__ == cls._FUSED_RELU_NAME:
            mod = mod[0]
        qat = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride, padding=mod.padding,
                  dilation=mod.dilation, groups=mod.groups, bias=mod.bias is not None, padding_mode=mod.padding_mode,
                  qconfig=qconfig)
        qat.weight = mod.weight
        qat.bias = mod.bias
        return qat

    def to_float(self):
        conv = self._FLOAT_CONV(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                                self.dilation, self.groups, self.bias is not None, self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        conv.train(self.training)
        return conv


def _qat_conv(float_cls, dims):
    class Conv(_ConvNd, float_cls):
        __doc__ = f"``nn.Conv{dims}d`` whose weight goes through ``weight_fake_quant`` in ``forward``."
        _FLOAT_MODULE = float_cls
        _FLOAT_CONV = float_cls
        _FUSED_RELU_NAME = f"ConvReLU{dims}d"

        def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                     bias=True, padding_mode="zeros", qconfig=None, device=None, dtype=None):
            float_cls.__init__(self, in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                               dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode, device=device,
                               dtype=dtype)
            self._qat_init(qconfig)

    Conv.__name__ = Conv.__qualname__ = f"Conv{dims}d"
    return Conv


Conv1d = _qat_conv(nn.Conv1d, 1)
Conv2d = _qat_conv(nn.Conv2d, 2)
Conv3d = _qat_conv(nn.Conv3d, 3)
