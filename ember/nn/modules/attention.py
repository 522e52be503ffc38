"""MultiheadAttention (PyTorch's parameters, masks and outputs)."""
from __future__ import annotations

import math

from ...tensor import Parameter
from .. import init
from ._F import F
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear by another name (MultiheadAttention's ``out_proj``; the name shows in reprs)."""


def _float_mask(mask, dtype, name):
    """Bool masks (True = masked out) become additive -inf masks; float masks pass through."""
    if mask is None:
        return None
    from ... import bool as _bool, zeros_like
    if mask.dtype is _bool:
        return zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads: ``forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)``."""

    __constants__ = ["batch_first"]

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        from ... import empty
        fk = dict(device=device, dtype=dtype)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **fk))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **fk))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **fk))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **fk))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **fk))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **fk))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **fk))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        from ... import cat, zeros
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        batched = query.dim() == 3
        if not batched:
            if query.dim() != 2:
                raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                                     f"{query.dim()}-D query tensor")
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        # now (L, N, E) / (S, N, kdim|vdim)
        tgt_len, bsz, embed_dim = query.shape
        if embed_dim != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {embed_dim}")
        E, H, hd = self.embed_dim, self.num_heads, self.head_dim
        dtype = query.dtype

        b_q = b_k = b_v = None
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        q = F.linear(query, w_q, b_q)
        k = F.linear(key, w_k, b_k)
        v = F.linear(value, w_v, b_v)

        attn_mask = _float_mask(attn_mask, dtype, "attn_mask")
        key_padding_mask = _float_mask(key_padding_mask, dtype, "key_padding_mask")
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt_len, k.shape[0]):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                       f"{(tgt_len, k.shape[0])}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.dim() == 3:
                if tuple(attn_mask.shape) != (bsz * H, tgt_len, k.shape[0]):
                    raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                       f"{(bsz * H, tgt_len, k.shape[0])}.")
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

        if self.bias_k is not None:
            k = cat([k, self.bias_k.repeat(1, bsz, 1)])
            v = cat([v, self.bias_v.repeat(1, bsz, 1)])
            if attn_mask is not None:
                attn_mask = F.pad(attn_mask, (0, 1))
            if key_padding_mask is not None:
                key_padding_mask = F.pad(key_padding_mask, (0, 1))

        q = q.reshape(tgt_len, bsz * H, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * H, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * H, hd).transpose(0, 1)

        if self.add_zero_attn:
            k = cat([k, zeros((bsz * H, 1, hd), dtype=k.dtype, device=k.device)], dim=1)
            v = cat([v, zeros((bsz * H, 1, hd), dtype=v.dtype, device=v.device)], dim=1)
            if attn_mask is not None:
                attn_mask = F.pad(attn_mask, (0, 1))
            if key_padding_mask is not None:
                key_padding_mask = F.pad(key_padding_mask, (0, 1))

        src_len = k.shape[1]
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (bsz, src_len):
                raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                     f"{tuple(key_padding_mask.shape)}")
            kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, H, -1, -1).reshape(bsz * H, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm

        dropout_p = self.dropout if self.training else 0.0
        scores = (q * math.sqrt(1.0 / hd)).matmul(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = F.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = weights.matmul(v)  # (N*H, L, hd)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, E)

        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(bsz, H, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights
