"""``ember.ao.nn.intrinsic.qat``: quantization-aware training of the fused modules, as torch's.

``LinearReLU`` / ``ConvReLU2d``: the QAT layer with a ReLU after it. ``ConvBn2d`` /
``ConvBnReLU2d`` train the batch norm *folded into* the conv (torch's approximate method):
the weight is scaled by ``gamma / sqrt(running_var + eps)`` and fake-quantized -- the weight the
int8 model will have after folding --, the conv output is divided back by that scale, the conv
bias added, and the real batch norm applied (batch statistics in training, updating the running
ones). ``freeze_bn_stats`` switches the batch norm to its running statistics.
"""
from __future__ import annotations

import ember
from ember import nn
from ember.nn import functional as F
from ... import intrinsic as nni
from ...qat.modules import Conv1d as _QATConv1d, Conv2d as _QATConv2d, Conv3d as _QATConv3d, Linear as _QATLinear, \
    _from_float_checks, _need_qconfig

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvBn2d", "ConvBnReLU2d", "freeze_bn_stats",
           "update_bn_stats"]


class LinearReLU(_QATLinear):
    _FLOAT_MODULE = nni.LinearReLU

    def forward(self, input):
        return F.relu(F.linear(input, self.weight_fake_quant(self.weight), self.bias))

    def to_float(self):
        return nni.LinearReLU(super().to_float(), nn.ReLU())


class ConvReLU2d(_QATConv2d):
    _FLOAT_MODULE = nni.ConvReLU2d

    def forward(self, input):
        return F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias))

    def to_float(self):
        return nni.ConvReLU2d(super().to_float(), nn.ReLU())


class ConvReLU1d(_QATConv1d):
    _FLOAT_MODULE = nni.ConvReLU1d

    def forward(self, input):
        return F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias))

    def to_float(self):
        return nni.ConvReLU1d(super().to_float(), nn.ReLU())


class ConvReLU3d(_QATConv3d):
    _FLOAT_MODULE = nni.ConvReLU3d

    def forward(self, input):
        return F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias))

    def to_float(self):
        return nni.ConvReLU3d(super().to_float(), nn.ReLU())


class ConvBn2d(nn.Conv2d):
    """Conv2d + BatchNorm2d trained with the batch norm folded into the fake-quantized weight."""

    _FLOAT_MODULE = nni.ConvBn2d
    _WITH_RELU = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=None,
                 padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=False, padding_mode=padding_mode)
        self.qconfig = _need_qconfig(qconfig)
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = nn.BatchNorm2d(out_channels, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        if bias:
            self.bias = nn.Parameter(ember.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training and not freeze_bn:
            self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_running_stats(self):
        self.bn.reset_running_stats()

    def reset_bn_parameters(self):
        self.bn.reset_running_stats()
        nn.init.uniform_(self.bn.weight)
        nn.init.zeros_(self.bn.bias)
        if self.bias is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / fan_in ** 0.5
            nn.init.uniform_(self.bias, -bound, bound)

    def update_bn_stats(self):
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.training = False
        return self

    def train(self, mode=True):
        """A frozen batch norm stays in eval mode when the model trains (as torch)."""
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self

    def _forward(self, input):
        bn = self.bn
        if bn.running_var is None:
            raise AssertionError("self.bn.running_var must not be None")
        running_std = ember.sqrt(bn.running_var + bn.eps)
        scale_factor = bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(-1, 1, 1, 1))
        zero_bias = ember.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(1, -1, 1, 1)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(1, -1, 1, 1)
        out = self.bn(conv_orig)
        return F.relu(out) if self._WITH_RELU else out

    def forward(self, input):
        return self._forward(input)

    def extra_repr(self):
        return super().extra_repr()

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        conv, bn = mod[0], mod[1]
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, bn.eps, bn.momentum, False, mod.qconfig)
        qat.weight = conv.weight
        qat.bias = conv.bias
        qat.bn.weight = bn.weight
        qat.bn.bias = bn.bias
        qat.bn.running_mean = bn.running_mean
        qat.bn.running_var = bn.running_var
        qat.bn.num_batches_tracked = bn.num_batches_tracked
        return qat

    def folded_weight_bias(self):
        """(weight, bias) of the conv with the batch norm's running statistics folded in (eval)."""
        from ember.ao.quantization.fuse_modules import fuse_conv_bn_eval
        conv = nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                         self.dilation, self.groups, self.bias is not None, self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        bn = nn.BatchNorm2d(self.out_channels, self.bn.eps, self.bn.momentum)
        bn.load_state_dict(self.bn.state_dict())
        fused = fuse_conv_bn_eval(conv.eval(), bn.eval())
        return fused.weight.detach(), fused.bias.detach()


class ConvBnReLU2d(ConvBn2d):
    _FLOAT_MODULE = nni.ConvBnReLU2d
    _WITH_RELU = True


def freeze_bn_stats(mod):
    """``model.apply(freeze_bn_stats)``: the QAT conv-bn modules use their running statistics."""
    if type(mod) in (ConvBn2d, ConvBnReLU2d):
        mod.freeze_bn_stats()


def update_bn_stats(mod):
    if type(mod) in (ConvBn2d, ConvBnReLU2d):
        mod.update_bn_stats()
