"""``skip_init``: build a module without running its parameter initialization."""
from __future__ import annotations

import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Instantiate ``module_cls(*args, **kwargs)`` with uninitialized parameters and buffers
    (``to_empty``) on ``device`` (default ``"cpu"``). The class must take a ``device`` argument.

    torch builds the module on the ``meta`` device so no initialization runs; ember cannot run
    kernels on ``meta``, so when that fails the module is built on the target device and then
    emptied: the result is the same (uninitialized storage), only the init cost is not saved.
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    try:
        module = module_cls(*args, **kwargs, device="meta")
    except RuntimeError as e:
        if "meta" not in str(e):
            raise
        module = module_cls(*args, **kwargs, device=final_device)
    return module.to_empty(device=final_device)
