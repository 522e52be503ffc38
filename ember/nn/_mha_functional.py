"""``F.multi_head_attention_forward``: the functional form of ``nn.MultiheadAttention`` (torch's
signature), which the module calls with its parameters.

Inputs are sequence-first: query (L, N, E) / key, value (S, N, kdim|vdim), or unbatched
(L, E) / (S, kdim|vdim). Masks follow torch: a bool mask is True where attention is not
allowed (it becomes an additive -inf mask), a float mask is added to the scores; the
key_padding_mask (N, S) is merged into the attention mask per head. ``static_k`` /
``static_v`` (N * num_heads, S, head_dim) replace the projected keys / values.
"""
from __future__ import annotations

import math

from ..tensor import Tensor



def _causal_float_mask(tgt_len, src_len, dtype, device):
    """-inf above the main diagonal of a (tgt_len, src_len) grid, 0 elsewhere."""
    from .. import ones, zeros
    above = ones((tgt_len, src_len), dtype=_bool_dtype(), device=device).triu(1)
    return zeros((tgt_len, src_len), dtype=dtype, device=device).masked_fill(above, float("-inf"))


def _bool_dtype():
    from .. import bool as _b
    return _b


def _check_key_value_shapes(key, value, use_separate_proj_weight):
    """Keys and values pair up: the same (seq, batch) dims, and the same shape unless separate
    projections let their feature sizes (kdim / vdim) differ -- torch's assertions."""
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")


def _check_key_padding_mask(key_padding_mask, src_len, bsz):
    """torch's per-dimension check (and wording, typo included) of a key padding mask's shape."""
    if key_padding_mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                             f"{key_padding_mask.shape[1]}")

def _float_mask(mask, dtype, name):
    """Bool masks (True = masked out) become additive -inf masks; float masks pass through."""
    if mask is None:
        return None
    from .. import bool as _bool, zeros_like
    if mask.dtype is _bool:
        return zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention with torch's arguments; returns ``(output, weights)`` (weights
    averaged over heads when ``average_attn_weights``, None unless ``need_weights``)."""
    from .. import cat, zeros
    from . import functional as F
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"multi_head_attention_forward(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                           "module method `generate_square_subsequent_mask` to create this mask.")
    batched = query.dim() == 3
    if not batched:
        if query.dim() != 2:
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                                 f"{query.dim()}-D query tensor")
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                                 f"{key.dim()}-D and {value.dim()}-D tensors respectively")
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            if key_padding_mask.dim() != 1:
                raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or "
                                     f"1-D but found {key_padding_mask.dim()}-D tensor instead")
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif key.dim() != 3 or value.dim() != 3:
        raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                             f"{key.dim()}-D and {value.dim()}-D tensors respectively")
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    E, H = embed_dim, num_heads
    hd = E // H
    if hd * H != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    dtype = query.dtype

    _check_key_value_shapes(key, value, use_separate_proj_weight)
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    q = F.linear(query, w_q, b_q)
    k = F.linear(key, w_k, b_k)
    v = F.linear(value, w_v, b_v)

    # torch's is_causal hint: with no key padding mask and no weights wanted, the given mask is
    # dropped and attention is causal (top-left aligned, as SDPA's is_causal) -- whatever the mask
    causal_hint = is_causal and key_padding_mask is None and not need_weights
    if causal_hint:
        attn_mask = None
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

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key/value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))
    elif (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must both be given or both be None")

    q = q.reshape(tgt_len, bsz * H, hd).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * H, hd).transpose(0, 1)
    else:
        if tuple(static_k.shape[:1]) != (bsz * H,) or static_k.shape[2] != hd:
            raise AssertionError(f"expecting static_k of shape ({bsz * H}, S, {hd}), but got "
                                 f"{tuple(static_k.shape)}")
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * H, hd).transpose(0, 1)
    else:
        if tuple(static_v.shape[:1]) != (bsz * H,) or static_v.shape[2] != hd:
            raise AssertionError(f"expecting static_v of shape ({bsz * H}, S, {hd}), but got "
                                 f"{tuple(static_v.shape)}")
        v = static_v

    if add_zero_attn:
        k = cat([k, zeros((bsz * H, 1, hd), dtype=k.dtype, device=k.device)], dim=1)
        v = cat([v, zeros((bsz * H, 1, hd), dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))

    src_len = k.shape[1]
    if key_padding_mask is not None:
        _check_key_padding_mask(key_padding_mask, src_len, bsz)
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, H, -1, -1).reshape(bsz * H, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if causal_hint:
        attn_mask = _causal_float_mask(tgt_len, src_len, dtype, q.device)
    if not training:
        dropout_p = 0.0
    scores = (q * math.sqrt(1.0 / hd)).matmul(k.transpose(-2, -1))
    if attn_mask is not None:
        scores = scores + attn_mask
    if need_weights or attn_mask is None:
        weights = F.softmax(scores, dim=-1)
    else:
        # PyTorch runs SDPA when the weights aren't returned: a query with every key masked gets zeros
        weights = F._safe_softmax(scores)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights.matmul(v)  # (N*H, L, hd)
    out = out.transpose(0, 1).reshape(tgt_len * bsz, E)
    out = F.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, E)
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
