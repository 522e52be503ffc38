"""``quantized.MultiheadAttention``: the converted ``quantizable.MultiheadAttention`` -- its
projections are quantized Linear layers (quantized tensors in and out), ``q`` is scaled with
``quantized::mul_scalar``, the attention products and softmax run in float between the
dequantize / quantize stubs, and ``bias_k`` / ``bias_v`` become quint8 tensors."""
from __future__ import annotations

import ember
from ember.ao.nn.quantizable.activation import MultiheadAttention as _QuantizableMHA

__all__ = ["MultiheadAttention"]


class MultiheadAttention(_QuantizableMHA):
    _FLOAT_MODULE = _QuantizableMHA

    def _get_name(self):
        return "QuantizedMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-observed MHA module. Please, see "
                                  "the examples on quantizable MHAs.")

    @classmethod
    def from_observed(cls, other):
        from ember.ao.quantization import convert
        converted = convert(other, mapping=None, inplace=False, remove_qconfig=True, convert_custom_config_dict=None)
        converted.__class__ = cls
        for name in ("bias_k", "bias_v"):
            bias = getattr(converted, name)
            if bias is not None:
                bias = converted._parameters.pop(name)
                # (torch takes bias_v's parameters from bias_k's values: kept)
                source = converted.__dict__.get("bias_k", bias) if name == "bias_v" else bias
                source = source.dequantize() if source.is_quantized else source
                scale, zero_point = _choose_qparams(source)
                setattr(converted, name, ember.quantize_per_tensor(bias.detach(), scale, zero_point, ember.quint8))
        del converted.in_proj_weight
        del converted.in_proj_bias
        return converted


def _choose_qparams(t):
    """quint8 scale / zero point covering ``t``'s range (with 0), torch's ``_choose_qparams_per_tensor``."""
    from ember.ao.quantization.observer import MinMaxObserver
    obs = MinMaxObserver(dtype=ember.quint8)
    obs(t.detach())
    scale, zp = obs.calculate_qparams()
    return float(scale), int(zp)
