"""``ember.nn.attention``: the attention-backend switch (``sdpa_kernel``) and ``flex_attention``.

``sdpa_kernel(backends)`` is PyTorch's context manager choosing which scaled-dot-product
attention kernels may run. ember has one implementation per device (the math formulation:
matmul, softmax, matmul -- fused by the inductor when compiled); it stands for MATH and,
like PyTorch's CPU build, for FLASH_ATTENTION (PyTorch has a CPU flash kernel). The switch
sets the same ``ember.backends.cuda.*_sdp`` flags PyTorch's does, and
``F.scaled_dot_product_attention`` refuses to run when neither of those is enabled, with
PyTorch's message -- so code that restricts backends behaves as on a PyTorch CPU build.
"""
from __future__ import annotations

import contextlib
from enum import IntEnum

from ...backends import cuda as _cuda

from ._registry import (activate_flash_attention_impl, current_flash_attention_impl, list_flash_attention_impls,
                        register_flash_attention_impl, restore_flash_attention_impl)
from ._sdpa_params import SDPAParams, can_use_efficient_attention, can_use_flash_attention

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS", "SDPAParams", "can_use_flash_attention",
           "can_use_efficient_attention", "register_flash_attention_impl", "activate_flash_attention_impl",
           "list_flash_attention_impls", "current_flash_attention_impl", "restore_flash_attention_impl"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(IntEnum):
    """The scaled-dot-product-attention kernels PyTorch knows (values as PyTorch's)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __repr__(self):
        return f"<SDPBackend.{self.name}: {self.value}>"

    def __str__(self):
        return f"SDPBackend.{self.name}"


_FLAG_OF = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
            SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn",
            SDPBackend.OVERRIDEABLE: "overrideable"}


def _chosen(backends):
    """The list of SDPBackend members ``backends`` names (PyTorch's assertion otherwise)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
                             f"got {type(backends).__name__}")
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend "
                                 f"instances, got {type(b).__name__}")
    return chosen


class sdpa_kernel(contextlib.ContextDecorator):  # noqa: N801 - PyTorch's name
    """Within the block (or the decorated function), only ``backends`` (one SDPBackend or a
    list) may run ``scaled_dot_product_attention``; the previous switches come back on exit.
    Under ``ember.compile`` the block is traced straight through (ember's kernel is the same
    whichever switch is on); a block that allows no kernel ember has runs eagerly, where the
    attention call raises."""

    def __init__(self, backends, set_priority=False):
        self.chosen = _chosen(backends)
        self.set_priority = set_priority
        self._saved = []

    def allows_ember_kernel(self):
        return SDPBackend.MATH in self.chosen or SDPBackend.FLASH_ATTENTION in self.chosen

    def __enter__(self):
        self._saved.append(_cuda._sdp_flags())
        _cuda._set_sdp_flags({flag: (b in self.chosen) for b, flag in _FLAG_OF.items()})
        return {}

    def __exit__(self, *exc):
        _cuda._set_sdp_flags(self._saved.pop())
        return False


def __getattr__(name):
    if name == "flex_attention":
        import importlib
        return importlib.import_module(".flex_attention", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
