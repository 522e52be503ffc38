"""``flex_attention`` under torch's HOP signature (``torch._higher_order_ops.flex_attention``).

Why: code written against torch's internals (and graphs exported by torch) call the operator
form -- a block mask flattened to a tuple, extra buffers passed to ``score_mod``/``mask_mod``,
and ``(out, lse, max_scores)`` returned with the two statistics in base-2 log space, as torch's
kernels keep them. This adapter rebuilds ember's ``BlockMask`` from the tuple and calls
``ember.nn.attention.flex_attention``'s kernel, so there is one implementation of the math.
"""
from __future__ import annotations

import math

__all__ = ["flex_attention"]


def _block_mask_from_tuple(block_mask, buffers):
    """ember's BlockMask from ``BlockMask.as_tuple()`` (ember's 13 entries or torch's longer
    layout: both start ``(q_len, kv_len, kv_num_blocks, kv_indices, full_kv_num_blocks,
    full_kv_indices, ...)`` and end ``(..., Q_BLOCK_SIZE, KV_BLOCK_SIZE, mask_mod)``)."""
    from ..nn.attention.flex_attention import BlockMask
    if not isinstance(block_mask, tuple) or len(block_mask) < 9:
        raise RuntimeError(f"flex_attention: block_mask must be the tuple BlockMask.as_tuple() returns, got "
                           f"{type(block_mask).__name__}{'' if not isinstance(block_mask, tuple) else f' of length {len(block_mask)}'}")
    seq = (block_mask[0], block_mask[1])
    kv_num, kv_idx, full_num, full_idx = block_mask[2:6]
    q_block, kv_block, mask_mod = block_mask[-3], block_mask[-2], block_mask[-1]
    if buffers and mask_mod is not None:
        inner = mask_mod

        def mask_mod(b, h, q, kv):
            return inner(b, h, q, kv, *buffers)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=(q_block, kv_block),
                                    mask_mod=mask_mod, seq_lengths=seq)


def flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
                   score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """``(out, lse / ln 2, max_scores / ln 2)`` of flex attention (torch's HOP contract).

    ``score_mod(score, b, h, q_idx, kv_idx, *score_mod_other_buffers)``; ``block_mask`` is a
    ``BlockMask.as_tuple()``; ``kernel_options`` are accepted and unused (ember has one kernel)."""
    from ..nn.attention.flex_attention import AuxRequest, flex_attention as _flex
    if not callable(score_mod):
        raise RuntimeError(f"flex_attention: score_mod must be callable, got {type(score_mod).__name__}")
    if not isinstance(kernel_options, dict):
        raise RuntimeError(f"flex_attention: kernel_options must be a dict, got {type(kernel_options).__name__}")
    sbuf, mbuf = tuple(score_mod_other_buffers), tuple(mask_mod_other_buffers)
    mod = score_mod
    if sbuf:
        def mod(score, b, h, q, kv):
            return score_mod(score, b, h, q, kv, *sbuf)
    mask = _block_mask_from_tuple(block_mask, mbuf)
    out, aux = _flex(query, key, value, mod, mask, scale, enable_gqa=query.size(1) != key.size(1),
                     return_aux=AuxRequest(lse=True, max_scores=True))
    ln2 = math.log(2.0)
    return out, aux.lse / ln2, aux.max_scores / ln2
