"""MultiheadAttention (PyTorch's parameters, masks and outputs)."""
from __future__ import annotations

from ...tensor import Parameter
from .. import init
from ._F import F
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear by another name (MultiheadAttention's ``out_proj``; the name shows in reprs)."""


from .._mha_functional import _float_mask  # noqa: E402,F401  (kept importable from here)


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
        """``F.multi_head_attention_forward`` with this module's parameters (batch_first inputs
        transposed to sequence-first and back)."""
        batched = query.dim() == 3
        # PyTorch's inference fast path (_native_multi_head_attention) softmaxes like the weights
        # path: a query with every key masked gets NaN, where its need_weights=False path (SDPA)
        # gives 0. Same values here by asking for the weights and dropping them.
        native = not need_weights and self._takes_native_path(query, key, value, key_padding_mask, attn_mask)
        if batched and self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal) if not native else \
            F.multi_head_attention_forward(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                None, None, False, self.dropout, self.out_proj.weight, self.out_proj.bias, training=False,
                key_padding_mask=key_padding_mask, need_weights=True, attn_mask=attn_mask,
                average_attn_weights=average_attn_weights, is_causal=is_causal)[:1] + (None,)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _takes_native_path(self, query, key, value, key_padding_mask, attn_mask):
        """PyTorch's conditions for ``_native_multi_head_attention`` (eval, batched batch_first
        self-attention, even heads, packed projections with bias, no autograd through them)."""
        import ember
        from .transformer import _fastpath_enabled
        if not _fastpath_enabled() or query.dim() != 3 or query is not key or key is not value:
            return False
        if self.in_proj_weight is None or self.in_proj_bias is None or self.training:
            return False
        if query.dtype != self.in_proj_weight.dtype or query.dtype != self.in_proj_bias.dtype:
            return False
        if self.num_heads % 2 or not self.batch_first or self.bias_k is not None or self.bias_v is not None:
            return False
        if self.add_zero_attn or not self._qkv_same_embed_dim or ember.is_autocast_enabled():
            return False
        if ember.compiler.is_compiling():
            return False
        args = (query, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias)
        return not (ember.is_grad_enabled() and any(t is not None and t.requires_grad for t in args))
