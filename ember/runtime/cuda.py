"""The cuda device, backed by cupy when it is importable.

Without cupy (or without a GPU) nothing here is imported until a tensor asks
for ``device='cuda'``, which then fails with an error saying what is missing.
"""
from __future__ import annotations

_cupy = None
_error = None


def _load():
    global _cupy, _error
    if _cupy is not None or _error is not None:
        return
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        _cupy = cupy
    except Exception as e:  # ImportError, CUDARuntimeError, ...
        _error = e


def is_available():
    _load()
    if _cupy is None:
        return False
    try:
        return _cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def cupy_module(dev=None):
    _load()
    if _cupy is None:
        raise RuntimeError(
            "ember: device='cuda' needs cupy and an NVIDIA GPU with a working driver "
            f"(install with `pip install ember[cuda]`); cupy could not be used: {_error!r}")
    if dev is not None and dev.index is not None:
        _cupy.cuda.Device(dev.index).use()
    return _cupy


def device_count():
    _load()
    if _cupy is None:
        return 0
    try:
        return _cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def synchronize(device=None):
    cupy_module().cuda.Stream.null.synchronize()
    cupy_module().cuda.get_current_stream().synchronize()


def memory_allocated(device=None):
    return cupy_module().get_default_memory_pool().used_bytes()


def max_memory_allocated(device=None):
    return cupy_module().get_default_memory_pool().total_bytes()


def empty_cache():
    cupy_module().get_default_memory_pool().free_all_blocks()


def manual_seed(seed):
    pass


def manual_seed_all(seed):
    pass
