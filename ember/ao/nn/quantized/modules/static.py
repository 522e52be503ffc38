"""Statically quantized modules (eager mode): quantized tensors in, quantized tensors out.

``Quantize`` / ``DeQuantize`` convert at the borders; ``Linear`` and the convolutions (conv.py;
and their ReLU-fused forms) compute as fbgemm does on x86:

1. the integers: ``acc = sum (x_q - x_zp) * (w_q - w_zp)`` exactly (int32; ``_int_gemm``),
   a convolution as that product over im2col patches, padded with the input's zero point;
2. requantization with a float bias: ``r = float32(acc) + bias / (x_scale * w_scale)``, then
   ``q = rint(r * (x_scale * w_scale / y_scale)) + y_zp`` clamped to 0..255 (from ``y_zp`` with
   a fused ReLU) -- the output's scale and zero point were observed during calibration.
"""
from __future__ import annotations

import numpy as np

import ember
from ember import nn
from ember._quantized import schemes as QS
from ember._quantized.tensor import QParams, QuantizedTensor, make_qtensor
from .._int_gemm import exact_int_matmul, int8_gemm_saturates, saturation_correction
from .linear import LinearPackedParams


def _quantize_weight(float_wt, observer):
    from ..dynamic.modules.linear import _quantize_weight as qw
    return qw(float_wt, observer)


def _need_quantized(x, who):
    if not isinstance(x, QuantizedTensor):
        raise RuntimeError(f"{who}: expected a quantized input (quint8, from a QuantStub / Quantize), got a "
                           f"{getattr(x, 'dtype', type(x).__name__)} tensor")
    if x.dtype is not ember.quint8 or x.qscheme() is not QS.per_tensor_affine:
        raise NotImplementedError(f"ember.quantization: {who} takes a per-tensor quint8 input, got {x.dtype} "
                                  f"{x.qscheme()}")


def _weight_ints(qweight, n):
    """(w_q - w_zp as int32 (N, K...), per-output-channel float32 scales)."""
    qp = qweight._qp
    w = qweight._irepr.astype(np.int32)
    if qp.per_channel:
        if qp.axis != 0:
            raise NotImplementedError("ember.quantization: quantized weights must be per-channel along axis 0")
        shp = (-1,) + (1,) * (w.ndim - 1)
        return w - qp.zero_points.astype(np.int32).reshape(shp), qp.scales.astype(np.float32)
    return w - np.int32(qp.zero_point), np.full(n, np.float32(qp.scale))


def _requantize(acc, x_scale, w_scale, bias, y_scale, y_zp, relu):
    """fbgemm's float-bias requantization of int32 ``acc`` (..., N) to quint8 integers."""
    f32 = np.float32
    act_w = (f32(x_scale) * w_scale).astype(f32)
    r = acc.astype(f32)
    if bias is not None:
        r = (r + (bias.astype(f32) / act_w).astype(f32)).astype(f32)
    mult = (act_w / f32(y_scale)).astype(f32)
    q = np.rint((r * mult).astype(f32)).astype(np.int64) + int(y_zp)
    return np.clip(q, int(y_zp) if relu else 0, 255).astype(np.uint8)


def _weight_post_process(mod):
    """(the module holding the float weight, the weight's observer / fake quantizer) for ``from_float``:
    a QAT module brings its trained ``weight_fake_quant`` (a conv-bn one first folds its batch norm
    into the weight, as torch); a fused float module its first layer and a fresh qconfig observer."""
    from ember.ao.nn import intrinsic as nni
    if hasattr(mod, "weight_fake_quant"):
        if hasattr(mod, "folded_weight_bias"):
            w, b = mod.folded_weight_bias()
            mod.weight, mod.bias = nn.Parameter(w), nn.Parameter(b)
        return mod, mod.weight_fake_quant
    if isinstance(mod, nni._FusedModule):
        return mod[0], mod.qconfig.weight()
    return mod, mod.qconfig.weight()


class Quantize(nn.Module):
    """float -> quantized with the scale / zero point observed at the QuantStub."""

    def __init__(self, scale, zero_point, dtype, factory_kwargs=None):
        super().__init__()
        self.register_buffer("scale", ember.tensor([float(scale)]))
        self.register_buffer("zero_point", ember.tensor([int(zero_point)], dtype=ember.long))
        self.dtype = dtype

    def forward(self, X):
        return ember.quantize_per_tensor(X, float(self.scale), int(self.zero_point), self.dtype)

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        scale, zp = mod.activation_post_process.calculate_qparams()
        return Quantize(float(scale), int(zp), mod.activation_post_process.dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(nn.Module):
    """quantized -> float32."""

    def forward(self, Xq):
        return Xq.dequantize()

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return DeQuantize()


class ReLU(nn.Module):
    """ReLU of a quantized tensor (its qparams kept: integers below the zero point become it)."""

    def forward(self, x):
        return x.relu() if isinstance(x, QuantizedTensor) else ember.relu(x)

    def _get_name(self):
        return "ReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class _QuantizedWeighted(nn.Module):
    """Shared by Linear / Conv2d: output scale and zero point, state_dict of torch's layout."""

    _FUSE_RELU = False

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = ember.tensor(float(self.scale))
        destination[prefix + "zero_point"] = ember.tensor(int(self.zero_point))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        for key in ("scale", "zero_point"):
            if prefix + key in state_dict:
                setattr(self, key, float(state_dict[prefix + key]) if key == "scale"
                        else int(state_dict[prefix + key]))
            elif strict:
                missing_keys.append(prefix + key)

    def _out(self, q_ints):
        return make_qtensor(q_ints, ember.quint8, QParams(QS.per_tensor_affine, scale=float(self.scale),
                                                          zero_point=int(self.zero_point)))


class Linear(_QuantizedWeighted):
    """``QuantizedLinear``: quint8 (.., K) -> quint8 (.., N), int8 weight, float bias."""

    _version = 3

    def __init__(self, in_features, out_features, bias_=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        w = ember.quantize_per_tensor(ember.zeros(out_features, in_features), 1.0, 0, ember.qint8)
        self._packed_params = LinearPackedParams(ember.qint8)
        self._packed_params.set_weight_bias(w, ember.zeros(out_features) if bias_ else None)
        self.scale = 1.0
        self.zero_point = 0

    def _get_name(self):
        return "QuantizedLinearReLU" if self._FUSE_RELU else "QuantizedLinear"

    def __repr__(self):
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, scale={self.scale}, "
                f"zero_point={self.zero_point}, qscheme={self.weight().qscheme()}")

    def weight(self):
        return self._packed_params._weight_bias()[0]

    def bias(self):
        return self._packed_params._weight_bias()[1]

    def _weight_bias(self):
        return self._packed_params._weight_bias()

    def set_weight_bias(self, w, b):
        self._packed_params.set_weight_bias(w, b)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        self._packed_params._load_from_state_dict(state_dict, prefix + "_packed_params.", local_metadata, strict,
                                                  missing_keys, unexpected_keys, error_msgs)

    def forward(self, x):
        acc, ws, bias = self._int_acc(x)
        q = _requantize(acc, x.q_scale(), ws, bias, self.scale, self.zero_point, self._FUSE_RELU)
        return self._out(q.reshape(tuple(x.shape[:-1]) + (self.out_features,)))

    def _int_acc(self, x):
        """(int32 acc (M, N) of the flattened input, per-channel weight scales, float32 bias or None)."""
        _need_quantized(x, self._get_name())
        w, b = self._packed_params._weight_bias()
        wi, ws = _weight_ints(w, self.out_features)
        xi = x._irepr.reshape(-1, self.in_features).astype(np.int32) - np.int32(x.q_zero_point())
        acc = exact_int_matmul(xi, wi.T)
        if int8_gemm_saturates():   # fbgemm without VNNI: int16-saturated pairs of input features
            acc = acc + saturation_correction(x._irepr.reshape(-1, self.in_features), w._irepr)
        acc = acc.astype(np.int32)
        bias = None if b is None else np.asarray(b.detach()._data, np.float32)
        return acc, ws, bias

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        act = mod.activation_post_process
        mod, wobs = _weight_post_process(mod)
        wobs(mod.weight)
        if wobs.dtype is not ember.qint8:
            raise AssertionError("Weight observer must have dtype torch.qint8")
        qweight = _quantize_weight(mod.weight.detach().float(), wobs)
        out = cls(mod.in_features, mod.out_features)
        out.set_weight_bias(qweight, None if mod.bias is None else mod.bias.detach().clone())
        s, z = act.calculate_qparams()
        out.scale, out.zero_point = float(s), int(z)
        return out


class LinearReLU(Linear):
    _FUSE_RELU = True


# the convolutions (any dimensionality) live in conv.py, built on the helpers above
from .conv import (Conv1d, Conv2d, Conv3d, ConvReLU1d, ConvReLU2d, ConvReLU3d, ConvTranspose1d,  # noqa: E402,F401
                   ConvTranspose2d, ConvTranspose3d)
