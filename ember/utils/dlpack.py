"""``ember.utils.dlpack``: zero-copy exchange with other array libraries (PyTorch's names).

``from_dlpack(obj)`` takes anything with ``__dlpack__`` (numpy arrays, PyTorch tensors, cupy
arrays, or a raw capsule from ``to_dlpack``) and returns an ember tensor over the same memory;
``to_dlpack(t)`` is ``t.__dlpack__()``. Tensors that require grad are refused, as PyTorch does.
"""
from __future__ import annotations

import numpy as np

__all__ = ["from_dlpack", "to_dlpack"]


class _Capsule:
    """A raw DLPack capsule (``to_dlpack``'s result) in the protocol numpy consumes."""

    def __init__(self, capsule, device):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, *args, **kwargs):
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("a DLPack capsule can be consumed only once")
        return capsule

    def __dlpack_device__(self):
        return self._device


def to_dlpack(tensor):
    """A DLPack capsule over ``tensor``'s memory (consumed once, by ``from_dlpack``). A
    versioned (DLPack 1.0) capsule where numpy can make one: it carries the writable flag, so
    the consumer's view stays writable."""
    try:
        return tensor.__dlpack__(max_version=(1, 0))
    except (TypeError, BufferError):
        return tensor.__dlpack__()


def from_dlpack(ext_tensor):
    """An ember tensor sharing memory with ``ext_tensor`` (a DLPack exporter or capsule)."""
    from .. import from_numpy
    from ..tensor import Tensor
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor, (1, 0))          # kDLCPU: ember's capsules are host memory
    device = ext_tensor.__dlpack_device__() if hasattr(ext_tensor, "__dlpack_device__") else (1, 0)
    if int(device[0]) != 1:
        try:
            import cupy
        except ImportError as e:
            raise BufferError(f"from_dlpack: the object lives on DLPack device {device}, and only host "
                              f"memory (or a GPU through cupy) can be shared") from e
        from .. import tensor as _tensor
        return _tensor(cupy.from_dlpack(ext_tensor), device="cuda")
    arr = np.from_dlpack(ext_tensor)
    if not arr.flags.writeable:
        # numpy marks memory from a legacy (unversioned) capsule read-only; ember tensors are
        # always writable, so such memory is copied rather than shared
        import warnings
        warnings.warn("from_dlpack: the producer exported read-only memory (a legacy DLPack capsule); "
                      "ember copied it, so writes do not reach the producer", UserWarning, stacklevel=2)
        arr = arr.copy()
    return from_numpy(arr)


import enum as _enum  # noqa: E402


class DLDeviceType(_enum.IntEnum):
    """DLPack's device codes (``__dlpack_device__()[0]``); ember's tensors are kDLCPU."""
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


__all__ += ["DLDeviceType"]
