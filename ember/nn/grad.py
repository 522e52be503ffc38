"""``ember.nn.grad``: gradients of a convolution with respect to its input or its weight, given
the gradient of its output (torch.nn.grad) -- what a hand-written backward of a custom conv layer
calls. A convolution is linear in each argument, so the gradient for one does not depend on the
other's values: each function differentiates the convolution at zeros of the requested size."""
from __future__ import annotations

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _grad_input(conv, input_size, weight, grad_output, stride, padding, dilation, groups):
    import ember
    x = ember.zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    with ember.enable_grad():
        out = conv(x, weight.detach(), None, stride, padding, dilation, groups)
    return ember.autograd.grad(out, x, grad_output)[0]


def _grad_weight(conv, input, weight_size, grad_output, stride, padding, dilation, groups):
    import ember
    w = ember.zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    with ember.enable_grad():
        out = conv(input.detach(), w, None, stride, padding, dilation, groups)
    return ember.autograd.grad(out, w, grad_output)[0]


def _conv(n):
    from . import functional as F
    return getattr(F, f"conv{n}d")


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_input(_conv(1), input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_weight(_conv(1), input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_input(_conv(2), input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_weight(_conv(2), input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_input(_conv(3), input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _grad_weight(_conv(3), input, weight_size, grad_output, stride, padding, dilation, groups)
