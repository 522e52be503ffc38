"""``SDPAParams`` and the fused-kernel eligibility checks (``can_use_flash_attention`` /
``can_use_efficient_attention``) of ``torch.nn.attention``.

Code written for PyTorch asks these before choosing an attention path ("would the flash kernel
take these inputs?"). Both fused kernels are CUDA kernels in PyTorch, and its CPU build answers
False for every input; ember runs on the CPU, so it answers False too -- after checking that it
was handed an SDPAParams, as PyTorch does -- and the caller takes its math path, which is
ember's kernel."""
from __future__ import annotations

__all__ = ["SDPAParams", "can_use_flash_attention", "can_use_efficient_attention"]


def _tensor_type():
    from ...tensor import Tensor
    return Tensor


class SDPAParams:
    """The arguments of one ``scaled_dot_product_attention`` call, bundled read-only:
    ``SDPAParams(query, key, value, attn_mask, dropout, is_causal, enable_gqa)``."""

    __slots__ = ("_query", "_key", "_value", "_attn_mask", "_dropout", "_is_causal", "_enable_gqa")

    def __init__(self, query, key, value, attn_mask, dropout, is_causal, enable_gqa):
        Tensor = _tensor_type()
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(f"SDPAParams(): argument '{name}' must be Tensor, not {type(t).__name__}")
        if attn_mask is not None and not isinstance(attn_mask, Tensor):
            raise TypeError(f"SDPAParams(): argument 'attn_mask' must be Tensor or None, not "
                            f"{type(attn_mask).__name__}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(f"SDPAParams(): argument 'dropout' must be float, not {type(dropout).__name__}")
        for name, flag in (("is_causal", is_causal), ("enable_gqa", enable_gqa)):
            if not isinstance(flag, bool):
                raise TypeError(f"SDPAParams(): argument '{name}' must be bool, not {type(flag).__name__}")
        self._query, self._key, self._value, self._attn_mask = query, key, value, attn_mask
        self._dropout, self._is_causal, self._enable_gqa = float(dropout), is_causal, enable_gqa

    query = property(lambda self: self._query)
    key = property(lambda self: self._key)
    value = property(lambda self: self._value)
    attn_mask = property(lambda self: self._attn_mask)
    dropout = property(lambda self: self._dropout)
    is_causal = property(lambda self: self._is_causal)
    enable_gqa = property(lambda self: self._enable_gqa)


def _check_params(fn, params, debug):
    if not isinstance(params, SDPAParams):
        raise TypeError(f"{fn}(): argument 'params' must be SDPAParams, not {type(params).__name__}")
    if not isinstance(debug, bool):
        raise TypeError(f"{fn}(): argument 'debug' must be bool, not {type(debug).__name__}")


def can_use_flash_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether the flash-attention kernel would run these inputs: never on ember (a CUDA
    kernel; PyTorch's CPU build answers False as well, without debug output)."""
    _check_params("can_use_flash_attention", params, debug)
    return False


def can_use_efficient_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether the memory-efficient kernel would run these inputs: never on ember (see
    ``can_use_flash_attention``)."""
    _check_params("can_use_efficient_attention", params, debug)
    return False
