"""``ember.accelerator``: device-generic access to the current accelerator (PyTorch's ``torch.accelerator``).

ember has one accelerator backend, ``cuda`` (cupy on an NVIDIA GPU; see
``ember.runtime.cuda``). It counts as present exactly when ``ember.cuda.is_available()``
(cupy imports and the driver reports a GPU); then every function here forwards to
``ember.cuda``. Without it ember answers as a CPU-only PyTorch build does:
``current_accelerator()`` is None, ``is_available()`` False, ``device_count()`` 0, and
whatever needs a device raises ``RuntimeError("Cannot access accelerator device when
none is available.")``.
"""
from __future__ import annotations

import functools
import warnings
from collections import OrderedDict

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "current_stream", "device_count",
           "device_index", "empty_cache", "empty_host_cache", "get_memory_info", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
           "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device_idx", "set_device_index",
           "set_stream", "synchronize"]

_NO_ACCELERATOR = "Cannot access accelerator device when none is available."


def _cuda():
    from . import cuda
    return cuda


def current_accelerator(check_available: bool = False):
    """``ember.device("cuda")`` when ember's cuda backend can run, else None. ember only
    knows a backend once it has found a GPU, so ``check_available`` changes nothing."""
    if _cuda().is_available():
        from .types import device
        return device("cuda")
    return None


def is_available() -> bool:
    """Whether an accelerator is present and usable."""
    return current_accelerator() is not None and _cuda().is_available()


def device_count() -> int:
    """How many accelerator devices there are (0 without one)."""
    return 0 if current_accelerator() is None else _cuda().device_count()


def _require():
    """``ember.cuda``, or PyTorch's RuntimeError when there is no accelerator."""
    if current_accelerator() is None:
        raise RuntimeError(_NO_ACCELERATOR)
    return _cuda()


def _get_device_index(device, optional=False):
    """An accelerator device index from an int, a device string or an ember.device; the
    current index when the device names none and ``optional``."""
    if isinstance(device, int):
        return device
    from .types import device as _device
    if isinstance(device, str):
        device = _device(device)
    index = None
    if isinstance(device, _device):
        acc = current_accelerator()
        if acc is None:
            raise RuntimeError("Accelerator expected")
        if acc.type != device.type:
            raise ValueError(f"{device.type} doesn't match the current accelerator {acc}.")
        index = device.index
    if index is None:
        if not optional:
            raise ValueError(f"Expected a ember.device with a specified index or an integer, but got:{device}")
        return current_device_index()
    return index


def current_device_index() -> int:
    """The index of the current accelerator device."""
    return _require().current_device()


def set_device_index(device, /) -> None:
    """Make ``device`` (an index, or a device with an index) the current accelerator device."""
    index = _get_device_index(device, optional=False)
    _require().set_device(index)


def _deprecated(new, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        warnings.warn(f"Use `{new}` instead.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    return wrapper


current_device_idx = _deprecated("current_device_index", current_device_index)
set_device_idx = _deprecated("set_device_index", set_device_index)


class device_index:  # noqa: N801 - PyTorch's name
    """``with ember.accelerator.device_index(i):`` -- ``i`` is the current device inside, the
    previous one again after. ``None`` changes nothing (and needs no accelerator)."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            cuda = _require()
            self.prev_idx = cuda.current_device()
            cuda.set_device(self.idx)

    def __exit__(self, *exc_info):
        if self.idx is not None and self.prev_idx >= 0:
            _cuda().set_device(self.prev_idx)


def synchronize(device=None, /) -> None:
    """Wait for all work queued on the device (the current one by default)."""
    index = _get_device_index(device, optional=True)
    _require().synchronize(index)


def current_stream(device=None, /):
    """The current stream of the device (an ``ember.cuda.Stream``)."""
    index = _get_device_index(device, optional=True)
    cuda = _require()
    with cuda.device(index):
        return cuda.current_stream()


def set_stream(stream) -> None:
    """Make ``stream`` the current stream (and its device the current device)."""
    from .runtime.cuda import Stream
    if not isinstance(stream, Stream):
        raise TypeError(f"set_stream(): argument 'stream' must be ember.cuda.Stream, not {type(stream).__name__}")
    cuda = _require()
    dev = getattr(stream._cs, "device_id", None)
    if dev is not None:
        cuda.set_device(int(dev))
    stream._cs.use()


# ----------------------------------------------------------------------------- memory
def memory_stats(device_index=None, /):
    """What ember knows of the device's allocator (cupy's default memory pool), under
    PyTorch's key names: ``allocated_bytes.all.current``, ``reserved_bytes.all.current``
    and ``allocated_bytes.all.peak`` (an upper bound; see ``ember.cuda.max_memory_allocated``)."""
    cuda = _require()
    index = _get_device_index(device_index, optional=True)
    with cuda.device(index):
        stats = {"allocated_bytes.all.current": cuda.memory_allocated(),
                 "allocated_bytes.all.peak": cuda.max_memory_allocated(),
                 "reserved_bytes.all.current": cuda.memory_reserved()}
    return OrderedDict(sorted(stats.items()))


def memory_allocated(device_index=None, /) -> int:
    """Bytes held by live tensors on the device."""
    return memory_stats(device_index)["allocated_bytes.all.current"]


def max_memory_allocated(device_index=None, /) -> int:
    """The peak of :func:`memory_allocated` (an upper bound: cupy's pool keeps no peak counter)."""
    return memory_stats(device_index)["allocated_bytes.all.peak"]


def memory_reserved(device_index=None, /) -> int:
    """Bytes the allocator holds from the driver (live plus cached)."""
    return memory_stats(device_index)["reserved_bytes.all.current"]


def _no_peak_counters(what):
    _require()
    raise NotImplementedError(f"ember.accelerator.{what}: cupy's memory pool keeps no peak or accumulated counters "
                              "to read or reset; use memory_reserved() / memory_allocated()")


def max_memory_reserved(device_index=None, /) -> int:
    _no_peak_counters("max_memory_reserved")


def reset_peak_memory_stats(device_index=None, /) -> None:
    _no_peak_counters("reset_peak_memory_stats")


def reset_accumulated_memory_stats(device_index=None, /) -> None:
    _no_peak_counters("reset_accumulated_memory_stats")


def empty_cache() -> None:
    """Give the allocator's cached free blocks back to the driver."""
    _require().empty_cache()


def empty_host_cache() -> None:
    """Give the cached free blocks of pinned host memory (``Tensor.pin_memory``) back."""
    _require()
    from .runtime import cuda as rc
    rc.cupy_module().get_default_pinned_memory_pool().free_all_blocks()


def get_memory_info(device_index=None, /):
    """``(free, total)`` bytes of the device, as the driver reports them."""
    cuda = _require()
    index = _get_device_index(device_index, optional=True)
    from .runtime import cuda as rc
    with cuda.device(index):
        free, total = rc.cupy_module().cuda.runtime.memGetInfo()
    return int(free), int(total)


# ----------------------------------------------------------------------------- ember.get_device_module
def get_device_module(device=None):
    """The module behind a device type: ``ember.cuda`` for ``"cuda"`` / ``ember.device("cuda:1")``,
    the cpu module (``torch.cpu``'s surface) for ``"cpu"``; without an argument, the current
    accelerator's module, or the cpu one when there is none."""
    import types as _pytypes
    from .types import device as _device
    if isinstance(device, _device):
        kind = device.type
    elif isinstance(device, str):
        kind = _device(device).type
    elif device is None:
        acc = current_accelerator()
        kind = "cpu" if acc is None else acc.type
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect ember.device, str, or None")
    if kind == "cpu":
        from . import cpu
        return cpu
    import ember
    mod = getattr(ember, kind, None) if kind.isidentifier() else None
    if not isinstance(mod, _pytypes.ModuleType):
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'ember.{kind}'.")
    return mod


def get_device_capability(device=None, /):
    """The capabilities of an accelerator device (supported dtypes...); ember has no
    accelerator, so this raises PyTorch's no-accelerator RuntimeError."""
    _require()
    raise NotImplementedError("ember.accelerator.get_device_capability: accelerator devices are not supported")


class Graph:
    """An accelerator graph capture (torch.accelerator.Graph); without an accelerator,
    constructing one raises PyTorch's RuntimeError."""

    def __init__(self, *args, **kwargs):
        _require()
        raise NotImplementedError("ember.accelerator.Graph: accelerator graph capture is not supported")


__all__ += ["get_device_capability", "Graph"]
