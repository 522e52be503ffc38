"""Observable ``MultiheadAttention`` (``quantizable.MultiheadAttention``), as torch's.

``nn.MultiheadAttention`` computes its projections inside one fused function, so nothing can
observe them. This version splits the packed input projection into ``linear_Q`` / ``linear_K`` /
``linear_V`` (plain Linear layers, observable and later quantized), scales ``q`` with a
``FloatFunctional.mul_scalar``, and places stubs where the quantized model changes domain:
``dequant_q/k/v`` before the (float) attention products and softmax, ``quant_attn_output`` /
``quant_attn_output_weights`` after. ``convert`` turns it into ``quantized.MultiheadAttention``
(``from_observed``), whose projections run as quantized Linear layers.

The computation (and its quirks) follows torch's module: with ``batch_first=True`` the heads'
output ``(batch * heads, tgt, head_dim)`` is viewed as ``(batch, tgt, embed)`` without moving the
head axis back, exactly as torch does.
"""
from __future__ import annotations

import warnings

import ember
from ember import nn
from ember.nn import functional as F

__all__ = ["MultiheadAttention"]


def _split_rows(t, start, end, requires_grad):
    return nn.Parameter(t.detach()[start:end].clone(), requires_grad)


class MultiheadAttention(nn.MultiheadAttention):
    _FLOAT_MODULE = nn.MultiheadAttention

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim, batch_first,
                         device=device, dtype=dtype)
        from ember.ao.nn.quantized import FloatFunctional
        from ember.ao.quantization.stubs import DeQuantStub, QuantStub
        self.linear_Q = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.linear_K = nn.Linear(self.kdim, self.embed_dim, bias=bias)
        self.linear_V = nn.Linear(self.vdim, self.embed_dim, bias=bias)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.q_scaling_product = FloatFunctional()
        self.quant_attn_output = QuantStub()
        self.quant_attn_output_weights = QuantStub()
        self.dequant_q = DeQuantStub()
        self.dequant_k = DeQuantStub()
        self.dequant_v = DeQuantStub()

    def _get_name(self):
        return "QuantizableMultiheadAttention"

    @classmethod
    def from_float(cls, other):
        """The observed module: ``other``'s weights split into the three projections, observers
        attached (``prepare``) with ``other.qconfig``."""
        from ember.ao.quantization import prepare
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls(other.embed_dim, other.num_heads, other.dropout, other.in_proj_bias is not None,
                       other.bias_k is not None, other.add_zero_attn, other.kdim, other.vdim, other.batch_first)
        observed.bias_k = other.bias_k
        observed.bias_v = other.bias_v
        observed.qconfig = other.qconfig
        observed.out_proj.weight = other.out_proj.weight
        observed.out_proj.bias = other.out_proj.bias
        e = other.embed_dim
        b = other.in_proj_bias
        if other._qkv_same_embed_dim:
            w = other.in_proj_weight
            for i, lin in enumerate((observed.linear_Q, observed.linear_K, observed.linear_V)):
                lin.weight = _split_rows(w, i * e, (i + 1) * e, w.requires_grad)
                lin.bias = None if b is None else _split_rows(b, i * e, (i + 1) * e, b.requires_grad)
        else:
            for i, (lin, w) in enumerate(((observed.linear_Q, other.q_proj_weight),
                                          (observed.linear_K, other.k_proj_weight),
                                          (observed.linear_V, other.v_proj_weight))):
                lin.weight = nn.Parameter(w.detach().clone())
                lin.bias = None if b is None else _split_rows(b, i * e, (i + 1) * e, True)
        observed.eval()
        return prepare(observed, inplace=True)

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to prepare an MHA module. Please, see the examples "
                                  "on quantizable MHAs.")

    def dequantize(self):
        """A float ``nn.MultiheadAttention`` with this (quantized) module's weights dequantized."""
        wb = [lin._weight_bias() for lin in (self.linear_Q, self.linear_K, self.linear_V)]
        fp = self._FLOAT_MODULE(self.embed_dim, self.num_heads, self.dropout, wb[0][1] is not None,
                                self.bias_k is not None, self.add_zero_attn, self.kdim, self.vdim, self.batch_first)
        if self.bias_k is not None:
            fp.bias_k = nn.Parameter(self.bias_k.dequantize())
        if self.bias_v is not None:
            fp.bias_v = nn.Parameter(self.bias_v.dequantize())
        w, b = self.out_proj._weight_bias()
        fp.out_proj.weight = nn.Parameter(w.dequantize())
        if b is not None:
            fp.out_proj.bias = nn.Parameter(b)
        ws = [w_.dequantize() for w_, _ in wb]
        bs = [b_ for _, b_ in wb]
        if fp._qkv_same_embed_dim and fp.in_proj_bias is not None:
            for name, b_ in zip("QKV", bs):      # torch's check (it cannot write a packed bias back)
                if not bool((b_ == 0).all()):
                    raise AssertionError(f"Expected all b{name} elements to be 0")
        with ember.no_grad():
            if fp._qkv_same_embed_dim:
                fp.in_proj_weight.copy_(ember.cat(ws, 0))
            else:
                fp.q_proj_weight, fp.k_proj_weight, fp.v_proj_weight = (nn.Parameter(w_) for w_ in ws)
            if fp.in_proj_bias is not None:
                fp.in_proj_bias.copy_(ember.cat(bs, 0))
        return fp

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if attn_mask is not None and is_causal:
            raise AssertionError("Only allow causal mask or attn_mask")
        if is_causal:
            raise AssertionError("causal mask not supported by AO MHA module")
        if self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        tgt_len, bsz, embed_dim_to_check = query.shape
        if self.embed_dim != embed_dim_to_check:
            raise AssertionError(f"embed_dim mismatch: {self.embed_dim} != {embed_dim_to_check}")
        if key.shape[0] != value.shape[0] or key.shape[1] != value.shape[1]:
            raise AssertionError(f"key and value size mismatch: key.size()={key.shape}, value.size()={value.shape}")
        heads = self.num_heads
        head_dim = self.embed_dim // heads
        if head_dim * heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        scaling = float(head_dim) ** -0.5
        q = self.q_scaling_product.mul_scalar(self.linear_Q(query), scaling)
        k = self.linear_K(key)
        v = self.linear_V(value)
        attn_mask = self._check_attn_mask(attn_mask, query, key, bsz)
        if key_padding_mask is not None and key_padding_mask.dtype is ember.uint8:
            warnings.warn("Byte tensor for `key_padding_mask` in `nn.MultiheadAttention` is deprecated. Use bool "
                          "tensor instead.", stacklevel=3)
            key_padding_mask = key_padding_mask.to(ember.bool)
        if self.bias_k is not None and self.bias_v is not None:
            k = ember.cat([k, _repeat_batch(self.bias_k, bsz)])
            v = ember.cat([v, _repeat_batch(self.bias_v, bsz)])
            if attn_mask is not None:
                attn_mask = F.pad(attn_mask, (0, 1))
            if key_padding_mask is not None:
                key_padding_mask = F.pad(key_padding_mask, (0, 1))
        elif self.bias_k is not None or self.bias_v is not None:
            raise AssertionError("self.bias_k must be None when self.bias_v is None" if self.bias_k is not None
                                 else "self.bias_v must be None when self.bias_k is None")
        q = q.contiguous().view(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * heads, head_dim).transpose(0, 1)
        src_len = k.shape[1]
        if key_padding_mask is not None:
            if key_padding_mask.shape[0] != bsz:
                raise AssertionError(f"key_padding_mask.size(0) must be {bsz}, got {key_padding_mask.shape[0]}")
            if key_padding_mask.shape[1] != src_len:
                raise AssertionError(f"key_padding_mask.size(1) must be {src_len}, got {key_padding_mask.shape[1]}")
        if self.add_zero_attn:
            src_len += 1
            k = ember.cat([k, _zeros_like_rows(k)], dim=1)
            v = ember.cat([v, _zeros_like_rows(v)], dim=1)
            if attn_mask is not None:
                attn_mask = F.pad(attn_mask, (0, 1))
            if key_padding_mask is not None:
                key_padding_mask = F.pad(key_padding_mask, (0, 1))
        q, k, v = self.dequant_q(q), self.dequant_k(k), self.dequant_v(v)
        weights = ember.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            if attn_mask.dtype is ember.bool:
                weights = weights.masked_fill(attn_mask, float("-inf"))
            else:
                weights = weights + attn_mask
        if key_padding_mask is not None:
            weights = weights.view(bsz, heads, tgt_len, src_len).masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf")).view(bsz * heads, tgt_len, src_len)
        weights = F.softmax(weights, dim=-1)
        weights = F.dropout(weights, p=self.dropout, training=self.training)
        attn_output = ember.bmm(weights, v)
        if self.batch_first:
            attn_output = attn_output.view(bsz, tgt_len, self.embed_dim)
        else:
            attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, self.embed_dim)
        attn_output = self.out_proj(self.quant_attn_output(attn_output))
        weights = self.quant_attn_output_weights(weights)
        if not need_weights:
            return attn_output, None
        weights = weights.view(bsz, heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return attn_output, weights

    def _check_attn_mask(self, attn_mask, query, key, bsz):
        if attn_mask is None:
            return None
        if attn_mask.dtype is ember.uint8:
            warnings.warn("Byte tensor for `attn_mask` in `nn.MultiheadAttention` is deprecated. Use bool tensor "
                          "instead.", stacklevel=4)
            attn_mask = attn_mask.to(ember.bool)
        if not attn_mask.is_floating_point() and attn_mask.dtype is not ember.bool:
            raise AssertionError(f"Only float and bool types are supported for attn_mask, not {attn_mask.dtype}")
        if attn_mask.dim() == 2:
            attn_mask = attn_mask.unsqueeze(0)
            if list(attn_mask.shape) != [1, query.shape[0], key.shape[0]]:
                raise RuntimeError("The size of the 2D attn_mask is not correct.")
        elif attn_mask.dim() == 3:
            if list(attn_mask.shape) != [bsz * self.num_heads, query.shape[0], key.shape[0]]:
                raise RuntimeError("The size of the 3D attn_mask is not correct.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
        return attn_mask


def _zeros_like_rows(t):
    """One all-zero row along dim 1 for ``add_zero_attn`` (quantized with ``t``'s parameters when
    ``t`` is quantized)."""
    zeros = ember.zeros((t.shape[0], 1) + tuple(t.shape[2:]))
    if t.is_quantized:
        zeros = ember.quantize_per_tensor(zeros, t.q_scale(), t.q_zero_point(), t.dtype)
    return zeros


def _repeat_batch(bias, bsz):
    """``bias.repeat(1, bsz, 1)``; a quantized bias (after convert) repeats its integers."""
    if not bias.is_quantized:
        return bias.repeat(1, bsz, 1)
    import numpy as np
    from ember._quantized.tensor import make_qtensor
    return make_qtensor(np.ascontiguousarray(np.tile(bias._irepr, (1, bsz, 1))), bias.dtype, bias._qp)
