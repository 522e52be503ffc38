"""The reference quantized modules (see the package docstring): ``_ReferenceWeight`` keeps the
weight's quantization parameters as buffers (torch's names and state-dict entries) and gives
``get_weight()`` (quantize -> dequantize) / ``get_quantized_weight()``."""
from __future__ import annotations

import ember
from ember import nn
from ember._quantized import schemes as _QS
from ember.nn import functional as F

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d", "Embedding", "EmbeddingBag"]

_QDTYPES = ("quint8", "qint8", "quint4x2", "qint32")


class _ReferenceWeight:
    """Mixin: the weight's quantization parameters and its fake-quantized value."""

    _IS_REFERENCE = True

    def _init_weight_qparams(self, weight_qparams):
        if weight_qparams is None:
            weight_qparams = {"qscheme": _QS.per_tensor_affine, "dtype": ember.quint8, "scale": 1.0,
                              "zero_point": 0}
        self.weight_qscheme = weight_qparams["qscheme"]
        self.weight_dtype = weight_qparams["dtype"]
        if self.weight_qscheme not in (None, _QS.per_tensor_affine, _QS.per_channel_affine,
                                       _QS.per_channel_affine_float_qparams):
            raise AssertionError(f"qscheme: {self.weight_qscheme} is not supported in reference quantized "
                                 f"{self._get_name()}")
        if getattr(self.weight_dtype, "name", None) in _QDTYPES:
            zp = weight_qparams["zero_point"]
            scale = weight_qparams["scale"]
            self.register_buffer("weight_scale", scale.detach().clone() if isinstance(scale, ember.Tensor)
                                 else ember.tensor(scale, dtype=ember.float))
            self.register_buffer("weight_zero_point", zp.detach().clone() if isinstance(zp, ember.Tensor)
                                 else ember.tensor(zp, dtype=ember.int))
            if self.weight_qscheme in (_QS.per_channel_affine, _QS.per_channel_affine_float_qparams):
                axis = weight_qparams["axis"]
                self.register_buffer("weight_axis", axis.detach().clone() if isinstance(axis, ember.Tensor)
                                     else ember.tensor(axis, dtype=ember.int))
            else:
                self.register_buffer("weight_axis", ember.tensor(0, dtype=ember.int))
        else:
            self.register_buffer("weight_scale", ember.tensor(1.0, dtype=ember.float))
            self.register_buffer("weight_zero_point", ember.tensor(0, dtype=ember.int))
            self.register_buffer("weight_axis", ember.tensor(0, dtype=ember.int))
        self.is_decomposed = weight_qparams.get("is_decomposed", False)
        if self.is_decomposed:
            raise NotImplementedError("ember.quantization: reference modules with is_decomposed=True (the "
                                      "quantized_decomposed ops) are not supported")
        self.weight_axis_int = int(self.weight_axis.item())
        self.weight_quant_min = weight_qparams.get("quant_min")
        self.weight_quant_max = weight_qparams.get("quant_max")

    def get_quantized_weight(self):
        """The weight as a quantized tensor (float16 weights: cast)."""
        w, dtype = self.weight, self.weight_dtype
        if dtype is ember.float16:
            return w.to(dtype)
        if self.weight_qscheme is _QS.per_tensor_affine and dtype.name in ("quint8", "qint8", "qint32"):
            return ember.quantize_per_tensor(w, float(self.weight_scale), int(self.weight_zero_point), dtype)
        if self.weight_qscheme in (_QS.per_channel_affine, _QS.per_channel_affine_float_qparams) and \
                dtype.name in _QDTYPES:
            return ember.quantize_per_channel(w, self.weight_scale, self.weight_zero_point, self.weight_axis_int,
                                              dtype)
        raise ValueError(f"Unsupported dtype and qscheme: {dtype}, {self.weight_qscheme}")

    def get_weight(self):
        """The weight quantized and dequantized (unchanged when the qscheme is None)."""
        if self.weight_qscheme is None:
            return self.weight
        if self.weight_dtype is ember.float16:      # the float16-rounded weight, back in float32 (torch's)
            return self.get_quantized_weight().float()
        return self.get_quantized_weight().dequantize()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "weight_qscheme"] = self.weight_qscheme
        destination[prefix + "weight_dtype"] = self.weight_dtype
        if self.weight_qscheme is not None:
            destination[prefix + "weight_scale"] = self.weight_scale
            destination[prefix + "weight_zero_point"] = self.weight_zero_point
            if self.weight_qscheme is _QS.per_channel_affine:
                destination[prefix + "weight_axis"] = self.weight_axis

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        keys = ["weight_qscheme", "weight_dtype"]
        if state_dict.get(prefix + "weight_qscheme") is not None:
            keys += ["weight_scale", "weight_zero_point"]
        for key in keys:
            if prefix + key in state_dict:
                setattr(self, key, state_dict.pop(prefix + key))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys,
                                      error_msgs)


class Linear(_ReferenceWeight, nn.Linear):
    def __init__(self, in_features, out_features, bias_=True, device=None, dtype=None, weight_qparams=None):
        nn.Linear.__init__(self, in_features, out_features, bias_, device=device, dtype=dtype)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self):
        return "QuantizedLinear(Reference)"

    def forward(self, x):
        return F.linear(x, self.get_weight(), self.bias)

    @classmethod
    def from_float(cls, float_linear, weight_qparams):
        ref = cls(float_linear.in_features, float_linear.out_features, float_linear.bias is not None,
                  weight_qparams=weight_qparams)
        ref.weight = nn.Parameter(float_linear.weight.detach())
        if float_linear.bias is not None:
            ref.bias = nn.Parameter(float_linear.bias.detach())
        return ref


def _reference_conv(float_cls, dims):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, weight_qparams=None):
        float_cls.__init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                           padding_mode, device=device, dtype=dtype)
        self._init_weight_qparams(weight_qparams)

    def forward(self, x):
        return self._conv_forward(x, self.get_weight(), self.bias)

    def _get_name(self):
        return f"QuantizedConv{dims}d(Reference)"

    @classmethod
    def from_float(cls, float_conv, weight_qparams):
        ref = cls(float_conv.in_channels, float_conv.out_channels, float_conv.kernel_size, float_conv.stride,
                  float_conv.padding, float_conv.dilation, float_conv.groups, float_conv.bias is not None,
                  float_conv.padding_mode, weight_qparams=weight_qparams)
        ref.weight = nn.Parameter(float_conv.weight.detach())
        if float_conv.bias is not None:
            ref.bias = nn.Parameter(float_conv.bias.detach())
        return ref

    return type(f"Conv{dims}d", (_ReferenceWeight, float_cls), {
        "__init__": __init__, "forward": forward, "_get_name": _get_name, "from_float": from_float,
        "__module__": __name__,
        "__doc__": f"Reference quantized Conv{dims}d: the float convolution of the quantized-dequantized weight."})


Conv1d = _reference_conv(nn.Conv1d, 1)
Conv2d = _reference_conv(nn.Conv2d, 2)
Conv3d = _reference_conv(nn.Conv3d, 3)


class Embedding(_ReferenceWeight, nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None, weight_qparams=None):
        nn.Embedding.__init__(self, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                              scale_grad_by_freq, sparse, _weight, device=device, dtype=dtype)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self):
        return "QuantizedEmbedding(Reference)"

    def forward(self, input):
        return F.embedding(input, self.get_weight(), self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_float(cls, mod, weight_qparams):
        return cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, mod.max_norm, mod.norm_type,
                   mod.scale_grad_by_freq, mod.sparse, mod.weight, weight_qparams=weight_qparams)


class EmbeddingBag(_ReferenceWeight, nn.EmbeddingBag):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None, weight_qparams=None):
        nn.EmbeddingBag.__init__(self, num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, mode,
                                 sparse, _weight, include_last_offset, padding_idx, device=device, dtype=dtype)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self):
        return "QuantizedEmbedding(Reference)"

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.get_weight(), offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    @classmethod
    def from_float(cls, mod, weight_qparams, use_precomputed_fake_quant=False):
        return cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type, mod.scale_grad_by_freq,
                   mod.mode, mod.sparse, mod.weight, mod.include_last_offset, mod.padding_idx,
                   weight_qparams=weight_qparams)
