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

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvBn1d", "ConvBn2d", "ConvBn3d",
           "ConvBnReLU1d", "ConvBnReLU2d", "ConvBnReLU3d", "LinearBn1d", "freeze_bn_stats", "update_bn_stats"]


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


def _reset_bn(bn) -> None:
    """A fused module's batch norm at its start: fresh statistics, weight ~ U(0, 1), bias 0 (torch's)."""
    bn.reset_running_stats()
    nn.init.uniform_(bn.weight)
    nn.init.zeros_(bn.bias)


def _start_bn(mod, freeze_bn: bool) -> None:
    """The end of a conv-bn / linear-bn QAT module's ``__init__``: parameters reset, the batch norm
    updating while training unless frozen."""
    mod.reset_bn_parameters()
    if mod.training and not freeze_bn:
        mod.update_bn_stats()
    else:
        mod.freeze_bn_stats()


class _ConvBnNd:
    """Conv{1,2,3}d + BatchNorm trained with the batch norm folded into the fake-quantized weight
    (mixin: the concrete classes below add the float conv of their dimensionality)."""

    _FLOAT_MODULE = None
    _FLOAT_CONV = None
    _BN = None
    _WITH_RELU = False
    _FUSED_TO_FLOAT = None   # the float fused Sequential ``to_float`` returns (ConvReLUNd) when _WITH_RELU

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=None,
                 padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None):
        self._FLOAT_CONV.__init__(self, in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                  dilation=dilation, groups=groups, bias=False, padding_mode=padding_mode)
        self.qconfig = _need_qconfig(qconfig)
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = self._BN(out_channels, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        if bias:
            self.bias = nn.Parameter(ember.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        _start_bn(self, freeze_bn)

    def reset_running_stats(self):
        self.bn.reset_running_stats()

    def reset_bn_parameters(self):
        _reset_bn(self.bn)
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
        nd = self.weight.ndim
        weight_shape = (-1,) + (1,) * (nd - 1)
        out_shape = (1, -1) + (1,) * (nd - 2)
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(weight_shape))
        zero_bias = ember.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(out_shape)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(out_shape)
        out = self.bn(conv_orig)
        return F.relu(out) if self._WITH_RELU else out

    def forward(self, input):
        return self._forward(input)

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
        conv = self._FLOAT_CONV(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                                self.dilation, self.groups, self.bias is not None, self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        bn = self._BN(self.out_channels, self.bn.eps, self.bn.momentum)
        bn.load_state_dict(self.bn.state_dict())
        fused = fuse_conv_bn_eval(conv.eval(), bn.eval())
        return fused.weight.detach(), fused.bias.detach()

    def to_float(self):
        """The float conv with the batch norm folded in (then the ReLU, as a ``ConvReLUNd``), as torch."""
        conv = self._FLOAT_CONV(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                                self.dilation, self.groups, True, self.padding_mode)
        w, b = self.folded_weight_bias()
        conv.weight, conv.bias = nn.Parameter(w), nn.Parameter(b)
        out = self._FUSED_TO_FLOAT(conv, nn.ReLU()) if self._WITH_RELU else conv
        out.train(self.training)
        return out


def _conv_bn_class(name, float_conv, bn_cls, float_fused, with_relu, relu_fused):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=None,
                 padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None):
        _ConvBnNd.__init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                           padding_mode, eps, momentum, freeze_bn, qconfig)

    cls = type(name, (_ConvBnNd, float_conv), {
        "__init__": __init__, "_FLOAT_MODULE": float_fused, "_FLOAT_CONV": float_conv, "_BN": bn_cls,
        "_WITH_RELU": with_relu, "_FUSED_TO_FLOAT": relu_fused, "forward": _ConvBnNd.forward,
        "train": _ConvBnNd.train, "__module__": __name__,
        "__doc__": f"QAT {name}: {float_conv.__name__} + {bn_cls.__name__}{' + ReLU' if with_relu else ''}, the "
                   "batch norm folded into the fake-quantized weight while training."})
    return cls


ConvBn1d = _conv_bn_class("ConvBn1d", nn.Conv1d, nn.BatchNorm1d, nni.ConvBn1d, False, None)
ConvBn2d = _conv_bn_class("ConvBn2d", nn.Conv2d, nn.BatchNorm2d, nni.ConvBn2d, False, None)
ConvBn3d = _conv_bn_class("ConvBn3d", nn.Conv3d, nn.BatchNorm3d, nni.ConvBn3d, False, None)
ConvBnReLU1d = _conv_bn_class("ConvBnReLU1d", nn.Conv1d, nn.BatchNorm1d, nni.ConvBnReLU1d, True, nni.ConvReLU1d)
ConvBnReLU2d = _conv_bn_class("ConvBnReLU2d", nn.Conv2d, nn.BatchNorm2d, nni.ConvBnReLU2d, True, nni.ConvReLU2d)
ConvBnReLU3d = _conv_bn_class("ConvBnReLU3d", nn.Conv3d, nn.BatchNorm3d, nni.ConvBnReLU3d, True, nni.ConvReLU3d)


class LinearBn1d(nn.Linear):
    """Linear + BatchNorm1d for QAT: the weight is scaled by ``gamma / sqrt(running_var + eps)``
    and fake-quantized, the product divided back by that scale, the bias added, and the real batch
    norm applied -- the scheme of the conv-bn modules, on (N, C) activations."""

    _FLOAT_MODULE = nni.LinearBn1d

    def __init__(self, in_features, out_features, bias=True, eps=1e-05, momentum=0.1, freeze_bn=False,
                 qconfig=None):
        nn.Linear.__init__(self, in_features, out_features, bias)
        self.qconfig = _need_qconfig(qconfig)
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = nn.BatchNorm1d(out_features, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        self.bias_fake_quant = None  # torch's attribute: the bias stays float
        _start_bn(self, freeze_bn)

    def reset_bn_parameters(self):
        _reset_bn(self.bn)

    reset_running_stats = _ConvBnNd.reset_running_stats
    update_bn_stats = _ConvBnNd.update_bn_stats
    freeze_bn_stats = _ConvBnNd.freeze_bn_stats
    train = _ConvBnNd.train

    def forward(self, input):
        bn = self.bn
        if bn.running_var is None:
            raise AssertionError("self.bn.running_var must not be None")
        running_std = ember.sqrt(bn.running_var + bn.eps)
        scale_factor = bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(-1, 1))
        zero_bias = ember.zeros(self.out_features, dtype=input.dtype)
        out = F.linear(input, scaled_weight, zero_bias) / scale_factor.reshape(1, -1)
        if self.bias is not None:
            out = out + self.bias.reshape(1, -1)
        return self.bn(out)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        linear, bn = mod[0], mod[1]
        qat = cls(linear.in_features, linear.out_features, linear.bias is not None, bn.eps, bn.momentum, False,
                  mod.qconfig)
        qat.weight = linear.weight
        qat.bias = linear.bias
        qat.bn.weight = bn.weight
        qat.bn.bias = bn.bias
        qat.bn.running_mean = bn.running_mean
        qat.bn.running_var = bn.running_var
        qat.bn.num_batches_tracked = bn.num_batches_tracked
        return qat

    def folded_weight_bias(self):
        """(weight, bias) of the linear layer with the batch norm's running statistics folded in."""
        from ember.ao.quantization.fuse_modules import fuse_conv_bn_eval
        lin = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        lin.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            lin.bias = nn.Parameter(self.bias.detach())
        bn = nn.BatchNorm1d(self.out_features, self.bn.eps, self.bn.momentum)
        bn.load_state_dict(self.bn.state_dict())
        fused = fuse_conv_bn_eval(lin.eval(), bn.eval())   # per-output-row scaling: the same algebra
        return fused.weight.detach(), fused.bias.detach()

    def to_float(self):
        lin = nn.Linear(self.in_features, self.out_features)
        w, b = self.folded_weight_bias()
        lin.weight, lin.bias = nn.Parameter(w), nn.Parameter(b)
        lin.train(self.training)
        return lin


def freeze_bn_stats(mod):
    """``model.apply(freeze_bn_stats)``: the QAT conv-bn modules use their running statistics."""
    if type(mod) in _BN_FOLDING:
        mod.freeze_bn_stats()


def update_bn_stats(mod):
    if type(mod) in _BN_FOLDING:
        mod.update_bn_stats()


# the modules ``freeze_bn_stats`` / ``update_bn_stats`` act on (torch's set: the conv ones only)
_BN_FOLDING = (ConvBn1d, ConvBn2d, ConvBn3d, ConvBnReLU1d, ConvBnReLU2d, ConvBnReLU3d)
