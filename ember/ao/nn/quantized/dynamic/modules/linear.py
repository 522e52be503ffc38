"""``DynamicQuantizedLinear``: float in, float out, int8 weights (torch's fbgemm dynamic linear).

Each call

1. takes the min and max of the whole input (with 0) and chooses an activation scale and zero
   point for uint8 with ``reduce_range=True`` -- integers 0..127, torch's choice on x86/fbgemm,
   whose u8 x s8 instruction (vpmaddubsw) would saturate int16 pairs with the full range;
2. quantizes the input with them (rounding as fbgemm: half to even after ``x * (1/scale)``);
3. multiplies the integers exactly: ``sum_k (a_ik - a_zp) * (w_jk - w_zp_j)`` accumulated in
   int32 (see ``_int_gemm``: float32 SGEMM on blocks of the reduction short enough to be exact);
4. scales back to float and adds the float bias as fbgemm's AVX2 epilogue does:
   ``fma(float32(acc), float32(a_scale * w_scale_j), bias_j)``.

Against torch 2.13 the output is bit for bit the same on the shapes tested (tests/quantization);
should fbgemm take another code path (another CPU's vector width, its scalar tail), the
difference is an ulp of the epilogue, far below one quantization step of the output. ``dtype=ember.float16`` keeps the weight rounded to
float16 and computes in float32 (fbgemm's fp16 path: the same products, in float).
"""
from __future__ import annotations

import numpy as np

import ember
from ember import nn
from ember._quantized import kernels as K
from ember._quantized import schemes as QS
from ...modules.linear import LinearPackedParams
from ..._int_gemm import exact_int_matmul, int8_gemm_saturates, saturation_correction


def _quantize_weight(float_wt, observer):
    """A quantized weight with the observer's qparams (per tensor or per channel, qint8)."""
    scale, zp = observer.calculate_qparams()
    if observer.qscheme in QS.PER_TENSOR:
        return ember.quantize_per_tensor(float_wt, float(scale), int(zp), ember.qint8)
    if observer.qscheme in (QS.per_channel_symmetric, QS.per_channel_affine):
        return ember.quantize_per_channel(float_wt, scale.to(ember.float64), zp.to(ember.int64), observer.ch_axis,
                                          ember.qint8)
    raise NotImplementedError(f"ember.quantization: dynamic Linear weights with qscheme {observer.qscheme} are "
                              f"not supported")


class Linear(nn.Module):
    """A dynamically quantized ``nn.Linear`` (``ember.ao.nn.quantized.dynamic.Linear``)."""

    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=None):
        super().__init__()
        dtype = ember.qint8 if dtype is None else dtype
        self.in_features = in_features
        self.out_features = out_features
        bias = ember.zeros(out_features, dtype=ember.float32) if bias_ else None
        if dtype is ember.qint8:
            qweight = ember.quantize_per_tensor(ember.zeros(out_features, in_features), 1.0, 0, ember.qint8)
        elif dtype is ember.float16:
            qweight = ember.zeros(out_features, in_features, dtype=ember.float32)
        else:
            raise RuntimeError("Unsupported dtype specified for quantized Linear!")
        self._packed_params = LinearPackedParams(dtype)
        self._packed_params.set_weight_bias(qweight, bias)
        self.scale = 1.0
        self.zero_point = 0
        self.reduce_range = True

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def __repr__(self):
        # the packed parameters are an implementation detail: torch hides them in the repr
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        s = f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._packed_params.dtype}"
        if self._packed_params.dtype is ember.qint8:
            s += f", qscheme={self.weight().qscheme()}"
        return s

    def weight(self):
        return self._packed_params._weight_bias()[0]

    def bias(self):
        return self._packed_params._weight_bias()[1]

    def set_weight_bias(self, w, b):
        self._packed_params.set_weight_bias(w, b)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = ember.tensor(float(self.scale))
        destination[prefix + "zero_point"] = ember.tensor(int(self.zero_point))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        if prefix + "scale" in state_dict:
            self.scale = float(state_dict[prefix + "scale"])
        if prefix + "zero_point" in state_dict:
            self.zero_point = int(state_dict[prefix + "zero_point"])
        rest = {k: v for k, v in state_dict.items() if k not in (prefix + "scale", prefix + "zero_point")}
        super()._load_from_state_dict(rest, prefix, local_metadata, False, missing_keys, unexpected_keys, error_msgs)

    # -- the computation -------------------------------------------------------
    def forward(self, x):
        if not isinstance(x, ember.Tensor) or x.is_quantized:
            raise RuntimeError("DynamicQuantizedLinear expects a float input tensor, got "
                               f"{getattr(x, 'dtype', type(x).__name__)}")
        if x.dtype is not ember.float32:
            raise RuntimeError(f"expected scalar type Float but found {x.dtype.legacy_name}")
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                               f"({int(np.prod(x.shape[:-1]))}x{x.shape[-1]} and {self.in_features}x"
                               f"{self.out_features})")
        w, b = self._packed_params._weight_bias()
        xa = np.asarray(x.detach()._data, dtype=np.float32)
        lead = xa.shape[:-1]
        x2 = xa.reshape(-1, self.in_features)
        bias = None if b is None else np.asarray(b.detach()._data, np.float32)
        if self._packed_params.dtype is ember.float16:
            wf = np.asarray(w.detach()._data, np.float32).astype(np.float16).astype(np.float32)
            out = x2 @ wf.T
            if bias is not None:
                out = out + bias
        else:
            out = _dynamic_int8_linear(x2, w, bias, self.reduce_range)
        return ember.tensor(np.ascontiguousarray(out, np.float32).reshape(lead + (self.out_features,)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """A dynamic quantized Linear from a float ``nn.Linear`` carrying a ``qconfig``."""
        from ember.ao.nn.qat import dynamic as nnqatd
        if type(mod) not in (nn.Linear, nnqatd.Linear):
            raise AssertionError(f"nn.quantized.dynamic.Linear.from_float only works for [nn.Linear, "
                                 f"ember.ao.nn.qat.dynamic.Linear], got {type(mod).__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if type(mod) is nnqatd.Linear:
            weight_observer = mod.weight_fake_quant      # the fake quantizer trained with the weight
        elif mod.qconfig is not None and mod.qconfig.weight is not None:
            weight_observer = mod.qconfig.weight()
        else:
            from ember.ao.quantization.qconfig import default_dynamic_qconfig
            weight_observer = default_dynamic_qconfig.weight()
        dtype = weight_observer.dtype
        if dtype not in (ember.qint8, ember.float16):
            raise AssertionError(f"The only supported dtypes for dynamic quantized linear are qint8 and float16 got: "
                                 f"{dtype}")
        weight_observer(mod.weight)
        if dtype is ember.qint8:
            qweight = _quantize_weight(mod.weight.detach().float(), weight_observer)
        else:
            qweight = mod.weight.detach().float()
        qlinear = cls(mod.in_features, mod.out_features, dtype=dtype)
        qlinear.set_weight_bias(qweight, mod.bias)
        return qlinear

    @classmethod
    def from_reference(cls, ref_qlinear):
        raise NotImplementedError("ember.quantization: dynamic Linear.from_reference is not supported")


def _dynamic_int8_linear(x2, qweight, bias, reduce_range):
    """(M, K) float32 input x quantized (N, K) weight -> (M, N) float32 (module doc, steps 1-4)."""
    m = x2.shape[0]
    n = qweight.shape[0]
    if x2.size:
        xmin, xmax = float(x2.min()), float(x2.max())
    else:
        xmin = xmax = 0.0
    a_scale, a_zp = K.choose_qparams(xmin, xmax, 0, 255, reduce_range=reduce_range)
    aq = K.quantize_per_tensor(x2, a_scale, a_zp, ember.quint8).astype(np.int32) - a_zp
    qp = qweight._qp
    wq = qweight._irepr.astype(np.int32)
    if qp.per_channel:
        if qp.axis != 0:
            raise NotImplementedError("ember.quantization: a per-channel dynamic Linear weight must be quantized "
                                      "along axis 0 (output features)")
        wq = wq - qp.zero_points.astype(np.int32).reshape(-1, 1)
        w_scale = qp.scales.astype(np.float32)
    else:
        wq = wq - np.int32(qp.zero_point)
        w_scale = np.full(n, np.float32(qp.scale))
    acc = exact_int_matmul(aq, wq.T) if m else np.zeros((0, n), np.int64)
    if m and int8_gemm_saturates():     # fbgemm without VNNI: int16-saturated pairs of input features
        acc = acc + saturation_correction(aq + a_zp, qweight._irepr.reshape(n, -1))
    acc = acc.astype(np.int32)                      # fbgemm's int32 accumulator
    # fbgemm's epilogue: fma(float(acc), float32(a_scale * w_scale), bias), one rounding to float32
    # (emulated in float64, where the float32 x float32 product is exact)
    mult = (np.float32(a_scale) * w_scale).astype(np.float32)
    out = acc.astype(np.float32).astype(np.float64) * mult.astype(np.float64)
    if bias is not None:
        out = out + bias.astype(np.float64)
    return out.astype(np.float32)
