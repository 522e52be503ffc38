"""``ember.ao.nn.quantized.functional`` (alias ``ember.nn.quantized.functional``): functions on
quantized tensors, as ``torch.ao.nn.quantized.functional``. They check what torch checks and run
the integer kernels of ember/_quantized (pooling.py, elementwise.py), the quantized Linear / Conv2d
modules' arithmetic (``linear``, ``conv2d``), or requantize a float activation of the dequantized
values (``elu``, ``celu``, ``leaky_relu`` with output parameters, ``hardsigmoid``, ``hardswish``); the functions
torch has that ember does not raise NotImplementedError naming them."""
from __future__ import annotations

import numpy as np

import ember
from ember._quantized import kernels as _K
from ember._quantized import elementwise as _qelem
from ember._quantized import pooling as _qpool
from ember._quantized.tensor import QParams, QuantizedTensor, make_qtensor
from ember._quantized import schemes as _QS

__all__ = ["avg_pool2d", "adaptive_avg_pool2d", "conv1d", "conv2d", "conv3d", "linear", "max_pool1d", "max_pool2d", "hardtanh",
           "threshold", "clamp", "elu", "celu", "leaky_relu", "hardsigmoid", "hardswish", "interpolate", "upsample",
           "upsample_nearest"]

_UNSUPPORTED = ("avg_pool3d", "adaptive_avg_pool3d", "upsample_bilinear")


def _need_quantized(input, name):
    if not getattr(input, "is_quantized", False):
        raise ValueError(f"Input to '{name}' must be quantized!")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _need_quantized(input, "quantized.avg_pool2d")
    return ember.nn.functional.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                          divisor_override)


def adaptive_avg_pool2d(input, output_size):
    _need_quantized(input, "quantized.functional.adaptive_avg_pool2d")
    return _qpool.adaptive_avg_pool2d(input, output_size)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise NotImplementedError("return_indices is not yet implemented!")
    stride = [] if stride is None else stride
    return ember.nn.functional.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise NotImplementedError("return_indices is not yet implemented!")
    stride = [] if stride is None else stride
    return ember.nn.functional.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    _need_quantized(input, "quantized.hardtanh")
    if inplace:
        raise NotImplementedError("ember.quantization: in-place hardtanh of a quantized tensor is not supported")
    return _qelem.clamp(input, min_val, max_val)


def threshold(input, threshold, value):
    _need_quantized(input, "quantized.threshold")
    if threshold is None:
        raise ValueError("Input to 'threshold' must be specified!")
    if value is None:
        raise ValueError("Input to 'value' must be specified!")
    return _qelem.threshold(input, threshold, value)


def clamp(input, min_, max_):
    _need_quantized(input, "quantized.clamp")
    return _qelem.clamp(input, min_, max_)


def _requantized(input, fn, scale, zero_point, name):
    """``fn`` of the dequantized values (float32), quantized with the output ``scale`` / ``zero_point``
    (torch's kernels for these activations: checked bit for bit on random data)."""
    _need_quantized(input, name)
    if input._qp.per_channel or input.dtype not in (ember.quint8, ember.qint8):
        raise NotImplementedError(f"ember.quantization: {name} of a {input.dtype} {input.qscheme()} tensor is not "
                                  "supported (per-tensor quint8 / qint8 are)")
    d = np.asarray(input.dequantize()._data, np.float32)
    with np.errstate(over="ignore"):
        y = np.asarray(fn(d), np.float32)
    ints = _K.quantize_per_tensor(y, float(scale), int(zero_point), input.dtype)
    return make_qtensor(ints, input.dtype, QParams(_QS.per_tensor_affine, scale=float(scale),
                                                     zero_point=int(zero_point)))


def elu(input, scale, zero_point, alpha=1.0):
    """``x`` above 0, ``alpha * (exp(x) - 1)`` below, quantized with the output's parameters."""
    a = np.float32(alpha)
    return _requantized(input, lambda d: np.where(d > 0, d, (a * np.expm1(d)).astype(np.float32)), scale,
                        zero_point, "quantized.elu")


def celu(input, scale, zero_point, alpha=1.0):
    """``x`` above 0, ``alpha * (exp(x / alpha) - 1)`` below."""
    a = np.float32(alpha)
    return _requantized(input, lambda d: np.where(d > 0, d, (a * np.expm1((d / a).astype(np.float32)))
                                                  .astype(np.float32)), scale, zero_point, "quantized.celu")


def leaky_relu(input, negative_slope=0.01, inplace=False, scale=None, zero_point=None):
    """``x`` above 0, ``negative_slope * x`` below, with the given output parameters."""
    if scale is None or zero_point is None:
        raise NotImplementedError("ember.quantization: quantized.functional.leaky_relu keeping the input's "
                                  "scale and zero point (no scale / zero_point given) is not supported; pass "
                                  "the output's")
    if inplace:
        raise AssertionError("Cannot rescale with `inplace`")
    k = np.float32(negative_slope)
    return _requantized(input, lambda d: np.where(d > 0, d, (d * k).astype(np.float32)), scale, zero_point,
                        "quantized.leaky_relu")


def hardswish(input, scale, zero_point):
    """``x * clamp(x + 3, 0, 6) / 6`` with the output's parameters: torch's vectorised kernel's
    result; torch computes the last ``numel % vector width`` elements with a scalar loop that can
    round one step differently."""
    six = np.float32(6)
    return _requantized(input, lambda d: ((d * np.clip((d + np.float32(3)).astype(np.float32), 0, six))
                                          .astype(np.float32) / six).astype(np.float32), scale, zero_point,
                        "quantized.hardswish")


def hardsigmoid(input, inplace=False):
    """``clamp(x + 3, 0, 6) / 6`` on the fixed output grid torch uses: scale 1/256, zero point 0
    (quint8) or -128 (qint8)."""
    _need_quantized(input, "quantized.hardsigmoid")
    if inplace:
        raise NotImplementedError("ember.quantization: in-place hardsigmoid of a quantized tensor is not supported")
    return _qelem.hardsigmoid(input)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Resize a quantized tensor; ember supports the nearest modes (the integers are gathered)."""
    _need_quantized(input, "quantized.interpolate")
    if mode not in ("nearest", "nearest-exact"):
        raise NotImplementedError(f"ember.quantization: quantized interpolate with mode={mode!r} is not supported "
                                  "(nearest and nearest-exact are)")
    return ember.nn.functional.interpolate(input, size, scale_factor, mode, align_corners)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    import warnings
    warnings.warn("nn.quantized.functional.upsample is deprecated. Use nn.quantized.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    import warnings
    warnings.warn("nn.quantized.functional.upsample_nearest is deprecated. Use nn.quantized.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def linear(input, weight, bias=None, scale=None, zero_point=None):
    """quint8 ``input`` x qint8 ``weight`` (+ float bias) -> quint8 with ``scale`` / ``zero_point``
    (the input's when None), as the quantized Linear module computes it."""
    from .modules.static import Linear
    scale = input.q_scale() if scale is None else scale
    zero_point = input.q_zero_point() if zero_point is None else zero_point
    if not isinstance(weight, QuantizedTensor) or weight.dtype is not ember.qint8:
        raise RuntimeError(f"quantized::linear_prepack: expected a qint8 weight, got "
                           f"{getattr(weight, 'dtype', type(weight).__name__)}")
    out_f, in_f = weight.shape
    mod = Linear(in_f, out_f, bias_=bias is not None)
    mod.set_weight_bias(weight, bias)
    mod.scale, mod.zero_point = float(scale), int(zero_point)
    return mod(input)


def _conv(nd, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point):
    """Quantized ``nd``-d convolution (quint8 input, qint8 weight, float bias) with torch's checks,
    computed by the quantized Conv module of that dimensionality."""
    from .modules import conv as _qconv
    if padding_mode != "zeros":
        raise NotImplementedError("Only zero-padding is supported!")
    if input.dtype is not ember.quint8:
        raise NotImplementedError("Only torch.quint8 is supported for activation tensor!")
    if weight.dtype is not ember.qint8:
        raise NotImplementedError("Only torch.qint8 is supported for weight tensor!")
    if input.ndim != nd + 2:
        raise ValueError(f"Input shape must be {_qconv._INPUT_SHAPE[nd]}!")
    out_c, in_c_g, *ks = weight.shape
    cls = {1: _qconv.Conv1d, 2: _qconv.Conv2d, 3: _qconv.Conv3d}[nd]
    mod = cls(in_c_g * groups, out_c, tuple(ks), stride, padding, dilation, groups, bias is not None)
    mod.set_weight_bias(weight, bias)
    mod.scale, mod.zero_point = float(scale), int(zero_point)
    return mod(input)


def conv1d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=None):
    """Quantized 1-d convolution (quint8 (N, C, L) input), as nn.quantized.Conv1d."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def conv2d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=None):
    """Quantized 2-d convolution (quint8 NCHW input, qint8 weight, float bias), as nn.quantized.Conv2d."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def conv3d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros", scale=1.0,
           zero_point=0, dtype=None):
    """Quantized 3-d convolution (quint8 NCDHW input), as nn.quantized.Conv3d."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale, zero_point)


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise NotImplementedError(f"ember.quantization: ember.nn.quantized.functional.{name} is not supported")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
