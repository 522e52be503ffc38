"""``Tensor.pin_memory()`` / ``Tensor.is_pinned()``: page-locked host memory.

Pinned (page-locked) host memory lets a cuda device copy from or to it by DMA,
asynchronously to the host; PyTorch's ``DataLoader(pin_memory=True)`` and
``.to("cuda", non_blocking=True)`` are built on it. In ember the pinned allocator
is cupy's (``cupy.cuda.alloc_pinned_memory``, pooled by cupy's pinned memory pool),
so it exists exactly when ember's accelerator does (``ember.accelerator``: the cuda
backend is usable). A pinned ember tensor is an ordinary cpu tensor whose numpy
array lies in such a block.

Without an accelerator ember behaves as a CPU-only PyTorch build: ``pin_memory()``
raises RuntimeError (there is no pinned allocator) and ``is_pinned()`` is False --
the same condition under which ``DataLoader(pin_memory=True)`` warns and leaves
batches as they are (``ember/utils/data/dataloader.py``).
"""
from __future__ import annotations

import warnings

import numpy as np

_CUDA_MEMORY_TYPE_HOST = 1      # cudaMemoryType: page-locked host memory


def _warn_device_arg(method):
    warnings.warn(f"The argument 'device' of Tensor.{method}() is deprecated. Please do not pass this argument.",
                  DeprecationWarning, stacklevel=3)


def _host_array(t):
    """The tensor's numpy array, or None when it has no host data (cuda, meta, fake)."""
    if t.device.type != "cpu":
        return None
    arr = t._data
    return arr if type(arr) is np.ndarray else None


def is_pinned(t, device=None) -> bool:
    """Whether ``t``'s data lies in page-locked host memory."""
    if device is not None:
        _warn_device_arg("is_pinned")
    arr = _host_array(t)
    if arr is None or arr.size == 0:
        return False
    from .runtime import cuda as rc
    if not rc.is_available():
        return False            # no pinned allocator in this process
    try:
        attrs = rc.cupy_module().cuda.runtime.pointerGetAttributes(t.data_ptr())
        return int(attrs.type) == _CUDA_MEMORY_TYPE_HOST
    except Exception:           # memory the driver never saw (older drivers raise instead of answering)
        return False


def pin_memory(t, device=None):
    """A copy of ``t`` in pinned host memory (``t`` itself when it already is); differentiable
    like a copy. RuntimeError without an accelerator, and for tensors that are not on the cpu."""
    if device is not None:
        _warn_device_arg("pin_memory")
        from .types import as_device
        if as_device(device).type == "cpu":
            raise RuntimeError("CPU device type not an accelerator.")
    from . import accelerator
    if accelerator.current_accelerator() is None:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    arr = _host_array(t)
    if arr is None:
        raise RuntimeError(f"cannot pin '{t.type()}' only dense CPU tensors can be pinned")
    if is_pinned(t):
        return t
    from . import contiguous_format
    from .runtime import cuda as rc
    out = t.clone(memory_format=contiguous_format)     # the autograd edge (a copy's backward is the identity)
    src = out._data
    block = rc.cupy_module().cuda.alloc_pinned_memory(max(src.nbytes, 1))
    pinned = np.frombuffer(block, dtype=src.dtype, count=src.size).reshape(src.shape)
    pinned[...] = src
    out._data = pinned          # the array keeps `block` alive (its buffer's owner)
    return out


_NO_PINNED_ALLOCATOR = ("pin_memory=True requires a CUDA or other accelerator backend; no pinned memory allocator "
                        "is available on this system.")


def for_factory(t, pin: bool):
    """A factory's result with ``pin_memory=pin``: ``t`` itself when False; pinned when True
    (a leaf still, requiring grad as ``t`` did); without an accelerator torch's CPU-build
    RuntimeError -- the argument was accepted and silently ignored before."""
    if not pin:
        return t
    from . import accelerator
    if accelerator.current_accelerator() is None:
        raise RuntimeError(_NO_PINNED_ALLOCATOR)
    rg = t.requires_grad
    out = pin_memory(t.detach())
    return out.requires_grad_(True) if rg else out
