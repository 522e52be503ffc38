"""The quantized functions ``convert_fx`` writes into a graph in place of a float op and its
quantize / dequantize neighbours (torch's ``quantized::linear``, ``quantized::add_relu`` ...):
quantized tensors in, a quantized tensor with the given output scale / zero point out.
The scale and zero point arrive as the graph's 0-d buffers."""
from __future__ import annotations

import ember
from ember._quantized import arith as _arith

__all__ = ["linear", "linear_relu", "conv1d", "conv2d", "conv3d", "conv1d_relu", "conv2d_relu", "conv3d_relu",
           "add", "add_relu", "mul", "mul_relu", "mul_scalar"]


def _s(scale):
    return float(scale.item()) if isinstance(scale, ember.Tensor) else float(scale)


def _z(zero_point):
    return int(zero_point.item()) if isinstance(zero_point, ember.Tensor) else int(zero_point)


def _qF():
    from ...nn.quantized import functional as qF
    return qF


def linear(input, weight, bias, scale, zero_point):
    """quint8 ``input`` x qint8 ``weight`` (+ float ``bias``) -> quint8 (``quantized::linear``)."""
    return _qF().linear(input, weight, bias, _s(scale), _z(zero_point))


def linear_relu(input, weight, bias, scale, zero_point):
    """``linear`` with the output clamped at the zero point (``quantized::linear_relu``)."""
    return ember.relu(linear(input, weight, bias, scale, zero_point))


def _conv(nd, relu):
    def fn(input, weight, bias, stride, padding, dilation, groups, scale, zero_point):
        out = getattr(_qF(), f"conv{nd}d")(input, weight, bias, stride, padding, dilation, groups, "zeros",
                                           _s(scale), _z(zero_point))
        return ember.relu(out) if relu else out
    fn.__name__ = fn.__qualname__ = f"conv{nd}d_relu" if relu else f"conv{nd}d"
    fn.__doc__ = f"Quantized {nd}-d convolution{' + relu' if relu else ''} into ``scale`` / ``zero_point``."
    fn.__module__ = __name__
    return fn


conv1d, conv2d, conv3d = _conv(1, False), _conv(2, False), _conv(3, False)
conv1d_relu, conv2d_relu, conv3d_relu = _conv(1, True), _conv(2, True), _conv(3, True)


def mul_scalar(a, scalar):
    """``quantized::mul_scalar``: no requantization -- the scale times ``|scalar|`` (a negative
    one mirrors the integers), as torch's kernel."""
    from ...nn.quantized.modules.functional_modules import _mul_scalar
    return _mul_scalar(a, float(scalar))


def add(a, b, scale, zero_point):
    """``quantized::add``: the sum of two quantized tensors requantized to ``scale`` / ``zero_point``."""
    return _arith.add(a, b, _s(scale), _z(zero_point))


def add_relu(a, b, scale, zero_point):
    return _arith.add(a, b, _s(scale), _z(zero_point), relu=True)


def mul(a, b, scale, zero_point):
    return _arith.mul(a, b, _s(scale), _z(zero_point))


def mul_relu(a, b, scale, zero_point):
    return _arith.mul(a, b, _s(scale), _z(zero_point), relu=True)
