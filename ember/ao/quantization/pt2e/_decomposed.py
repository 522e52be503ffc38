"""``ember.ops.quantized_decomposed``: the quantize / dequantize operators a PT2E-converted graph
calls (torch's ``torch.ops.quantized_decomposed`` library, ``torch/ao/quantization/fx/_decomposed.py``).

The quantized values live in plain integer tensors; the quantization parameters are arguments.
The arithmetic follows torch's reference implementations step for step in float32 so that the
integers (and the dequantized floats) are bit for bit torch's:

* per tensor:  ``clamp(round(x * (1.0 / scale)) + zero_point, qmin, qmax).to(dtype)`` (the
  reciprocal in double precision, then multiplied as a float32 scalar), and
  ``(q.to(float32) - zero_point) * scale``;
* per channel: ``1.0 / scales`` is a float32 tensor division, ``(q - zero_points) * scales``.

Each operator is defined once through ``ember.library`` with a composite kernel written in ember
ops (so ``ember.compile`` traces through it) and a fake kernel (shape / dtype only).
"""
from __future__ import annotations

import numpy as np

import ember

__all__ = ["quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel",
           "choose_qparams_tensor", "quantize_per_tensor_tensor", "dequantize_per_tensor_tensor"]

_BOUNDS = {}


def _bounds():
    if not _BOUNDS:
        _BOUNDS.update({ember.uint8: (0, 255), ember.int8: (-128, 127), ember.int16: (-(2 ** 15), 2 ** 15 - 1),
                        ember.int32: (-(2 ** 31), 2 ** 31 - 1)})
    return _BOUNDS


def _check_bounds(quant_min, quant_max, dtype):
    b = _bounds()
    if dtype not in b:
        raise ValueError(f"Unsupported dtype: {dtype}")
    lo, hi = b[dtype]
    if quant_min < lo:
        raise AssertionError("quant_min out of bounds for dtype, "
                             f"quant_min_lower_bound: {lo} quant_min: {quant_min}")
    if quant_max > hi:
        raise AssertionError("quant_max out of bounds for dtype, "
                             f"quant_max_upper_bound: {hi} quant_max: {quant_max}")


def _float_input(input):
    if input.dtype in (ember.float16, ember.bfloat16):
        input = input.to(ember.float32)
    if input.dtype != ember.float32:
        raise AssertionError(f"Expecting input to have dtype torch.float32, but got dtype: {input.dtype}")
    return input


def quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    input = _float_input(input)
    _check_bounds(quant_min, quant_max, dtype)
    inv_scale = float(np.float32(1.0 / scale))
    return ember.clamp(ember.round(input * inv_scale) + zero_point, quant_min, quant_max).to(dtype)


def _quantize_per_tensor_fake(input, scale, zero_point, quant_min, quant_max, dtype):
    input = _float_input(input)
    _check_bounds(quant_min, quant_max, dtype)
    return ember.empty_like(input, dtype=dtype)


def dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
    if input.dtype != dtype:
        raise AssertionError(f"Expecting input to have dtype: {dtype}, but got {input.dtype}")
    if dtype not in _bounds():
        raise ValueError(f"Unsupported dtype in dequantize_per_tensor: {dtype}")
    out_dtype = ember.float32 if out_dtype is None else out_dtype
    return (input.to(out_dtype) - zero_point) * scale


def _dequantize_per_tensor_fake(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
    if input.dtype != dtype:
        raise AssertionError(f"Expecting input to have dtype: {dtype}, but got {input.dtype}")
    return ember.empty_like(input, dtype=ember.float32 if out_dtype is None else out_dtype)


def _to_axis_zero(x, axis):
    perm = list(range(x.dim()))
    perm[axis], perm[0] = 0, axis
    return x.permute(tuple(perm)), perm


def _per_channel_checks(input, axis, quant_min, quant_max, dtype):
    if axis >= input.dim():
        raise AssertionError(f"Expecting axis to be < {input.dim()}")
    _check_bounds(quant_min, quant_max, dtype)


def quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype):
    input = _float_input(input)
    _per_channel_checks(input, axis, quant_min, quant_max, dtype)
    x, perm = _to_axis_zero(input, axis)
    shape = [1] * x.dim()
    shape[0] = scales.shape[0]
    s = scales.view(shape)
    zp = zero_points.view(shape)
    res = ember.clamp(ember.round(x * (1.0 / s)) + zp, quant_min, quant_max)
    return res.permute(tuple(perm)).to(dtype)


def _quantize_per_channel_fake(input, scales, zero_points, axis, quant_min, quant_max, dtype):
    input = _float_input(input)
    _per_channel_checks(input, axis, quant_min, quant_max, dtype)
    return ember.empty_like(input, dtype=dtype)


def dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None):
    if input.dtype != dtype:
        raise AssertionError(f"Expecting input to have dtype: {dtype}, but got dtype: {input.dtype}")
    out_dtype = ember.float32 if out_dtype is None else out_dtype
    _per_channel_checks(input, axis, quant_min, quant_max, dtype)
    x, perm = _to_axis_zero(input, axis)
    shape = [1] * x.dim()
    shape[0] = scales.shape[0]
    s = scales.view(shape)
    res = (x - zero_points.view(shape)) * s if zero_points is not None else x * s
    return res.to(out_dtype).permute(tuple(perm))


def _dequantize_per_channel_fake(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None):
    if input.dtype != dtype:
        raise AssertionError(f"Expecting input to have dtype: {dtype}, but got dtype: {input.dtype}")
    return ember.empty_like(input, dtype=ember.float32 if out_dtype is None else out_dtype)


def choose_qparams_tensor(input, quant_min, quant_max, eps, dtype):
    """Scale and zero point of ``input``'s [min, max] (widened to hold 0) for per tensor affine
    quantization into [quant_min, quant_max] (torch's ``determine_qparams``)."""
    if input.dtype not in (ember.float32, ember.float16, ember.bfloat16):
        raise AssertionError(f"Expecting input to have dtype torch.float32/16/b16, but got dtype: {input.dtype}")
    if dtype not in _bounds():
        raise AssertionError(f"Expecting target dtype to be one of {list(_bounds())}, but got: {dtype}")
    mn, mx = ember.aminmax(input)
    zero = ember.zeros_like(mn)
    mn_neg, mx_pos = ember.minimum(mn, zero), ember.maximum(mx, zero)
    scale = ember.maximum((mx_pos - mn_neg) / float(quant_max - quant_min), ember.tensor([eps], dtype=mn.dtype))
    zp = ember.clamp(quant_min - ember.round(mn_neg / scale).to(ember.int32), quant_min, quant_max)
    return scale.to(ember.float64), zp.to(ember.int64)


def _choose_qparams_tensor_fake(input, quant_min, quant_max, eps, dtype):
    return ember.empty(1, dtype=ember.float64), ember.empty(1, dtype=ember.int64)


def quantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    """``quantize_per_tensor`` with one-element scale / zero point tensors (dynamic quantization)."""
    if zero_point.numel() != 1:
        raise AssertionError(f"Expecting zero_point tensor to be one element, but received : {zero_point.numel()}")
    if scale.numel() != 1:
        raise AssertionError(f"Expecting scale tensor to be one element, but received : {scale.numel()}")
    input = _float_input(input)
    _check_bounds(quant_min, quant_max, dtype)
    inv = (1.0 / scale.to(ember.float64)).to(ember.float32)
    return ember.clamp(ember.round(input * inv) + zero_point, quant_min, quant_max).to(dtype)


def dequantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None):
    if zero_point.numel() != 1:
        raise AssertionError(f"Expecting zero_point tensor to be one element, but received : {zero_point.numel()}")
    if scale.numel() != 1:
        raise AssertionError(f"Expecting scale tensor to be one element, but received : {scale.numel()}")
    if input.dtype != dtype:
        raise AssertionError(f"Expecting input to have dtype: {dtype}, but got {input.dtype}")
    out_dtype = ember.float32 if out_dtype is None else out_dtype
    return ((input.to(out_dtype) - zero_point) * scale.to(out_dtype)).to(out_dtype)


_SCHEMAS = {
    "choose_qparams_tensor": ("choose_qparams_tensor(Tensor input, int quant_min, int quant_max, float eps, "
                              "ScalarType dtype) -> (Tensor, Tensor)",
                              choose_qparams_tensor, _choose_qparams_tensor_fake),
    "quantize_per_tensor_tensor": ("quantize_per_tensor_tensor(Tensor input, Tensor scale, Tensor zero_point, "
                                   "int quant_min, int quant_max, ScalarType dtype) -> Tensor",
                                   quantize_per_tensor_tensor, _quantize_per_tensor_fake),
    "dequantize_per_tensor_tensor": ("dequantize_per_tensor_tensor(Tensor input, Tensor scale, Tensor zero_point, "
                                     "int quant_min, int quant_max, ScalarType dtype, *, "
                                     "ScalarType? out_dtype=None) -> Tensor",
                                     dequantize_per_tensor_tensor, _dequantize_per_tensor_fake),
    "quantize_per_tensor": ("quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
                            "int quant_max, ScalarType dtype) -> Tensor",
                            quantize_per_tensor, _quantize_per_tensor_fake),
    "dequantize_per_tensor": ("dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
                              "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
                              dequantize_per_tensor, _dequantize_per_tensor_fake),
    "quantize_per_channel": ("quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, "
                             "int quant_min, int quant_max, ScalarType dtype) -> Tensor",
                             quantize_per_channel, _quantize_per_channel_fake),
    "dequantize_per_channel": ("dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, "
                               "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) "
                               "-> Tensor", dequantize_per_channel, _dequantize_per_channel_fake),
}

_LIB = []


def ops():
    """The ``ember.ops.quantized_decomposed`` namespace, its operators defined on first use."""
    if not _LIB:
        from ember.library import Library
        try:
            ember.ops.quantized_decomposed.quantize_per_tensor  # noqa: B018  (someone defined it already)
        except AttributeError:
            lib = Library("quantized_decomposed", "DEF")
            for name, (schema, fn, fake) in _SCHEMAS.items():
                lib.define(schema)
                lib.impl(name, fn, "CompositeExplicitAutograd")
                lib._register_fake(name, fake)
            _LIB.append(lib)
            # torch spells the tensor-qparams variants as overloads (``quantize_per_tensor.tensor``);
            # an ember op has one overload, so they are ops of their own, reachable by torch's name too
            ns = ember.ops.quantized_decomposed
            ns.quantize_per_tensor.tensor = ns.quantize_per_tensor_tensor.default
            ns.dequantize_per_tensor.tensor = ns.dequantize_per_tensor_tensor.default
        else:
            _LIB.append(None)
    return ember.ops.quantized_decomposed


ops()
