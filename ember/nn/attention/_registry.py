"""The flash-attention implementation registry of ``torch.nn.attention``.

Kernel providers register a callable per implementation name ("FA3", "FA4", their own);
users opt in with ``activate_flash_attention_impl(name)``, which first undoes the previous
activation and then calls the provider's callable (it installs the kernels and may return a
handle with ``remove()`` that undoes them). ember keeps the same registry, so provider code
and user code written for PyTorch run unchanged; the built-in FA3 / FA4 entries load their
CUDA packages as PyTorch's do and, where those are installed, refuse clearly: ember has no
CUDA device to run them on."""
from __future__ import annotations

import importlib
import logging
from typing import Callable, Optional, Protocol

__all__ = ["FlashAttentionHandle", "register_flash_attention_impl", "activate_flash_attention_impl",
           "list_flash_attention_impls", "current_flash_attention_impl", "restore_flash_attention_impl"]

logger = logging.getLogger(__name__)


class FlashAttentionHandle(Protocol):
    def remove(self) -> None: ...


_IMPLS: dict = {}                      # name -> register callable
_ACTIVE: Optional[tuple] = None        # (name, handle) of the activated impl, None for the default


def register_flash_attention_impl(impl: str, *, register_fn: Callable) -> None:
    """Record ``register_fn`` as the activation of implementation ``impl`` (replacing any
    earlier one of that name); nothing is activated."""
    _IMPLS[impl] = register_fn


def activate_flash_attention_impl(impl: str) -> None:
    """Undo the current activation, then run ``impl``'s registered callable; a handle it
    returns is kept (and ``remove``d by the next activation or by restore)."""
    global _ACTIVE
    restore_flash_attention_impl(_raise_warn=False)
    register_fn = _IMPLS.get(impl)
    if register_fn is None:
        raise ValueError(f"Unknown flash attention impl '{impl}'. "
                         f"Available implementations: {list_flash_attention_impls()}")
    handle = register_fn()
    if handle is not None:
        _ACTIVE = (impl, handle)


def restore_flash_attention_impl(_raise_warn: bool = True) -> None:
    """Back to the default implementation (removing the active handle, if any)."""
    global _ACTIVE
    handle = _ACTIVE[1] if _ACTIVE is not None else None
    if handle is not None:
        handle.remove()
    elif _raise_warn:
        logger.warning("Trying to restore default FA2 impl when no custom impl was activated")
    _ACTIVE = None


def current_flash_attention_impl() -> Optional[str]:
    """The activated implementation's name, or None for the default."""
    return _ACTIVE[0] if _ACTIVE is not None else None


def list_flash_attention_impls() -> list:
    """The registered implementation names, sorted."""
    return sorted(_IMPLS)


def _cuda_package_impl(name: str, package: str) -> Callable:
    def register(*args, **kwargs):
        importlib.import_module(package)        # ModuleNotFoundError where it is missing, as PyTorch's
        raise NotImplementedError(f"ember.nn.attention: the {name} flash-attention kernels ({package}) run on CUDA "
                                  f"devices; ember has none (its attention kernel is the math formulation)")
    return register


register_flash_attention_impl("FA3", register_fn=_cuda_package_impl("FA3", "flash_attn_interface"))
register_flash_attention_impl("FA4", register_fn=_cuda_package_impl("FA4", "flash_attn"))
