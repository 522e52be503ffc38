"""In-place shape methods: ``unsqueeze_``, ``squeeze_``, ``t_``, ``transpose_``, ``swapdims_``,
``swapaxes_``, ``as_strided_``, ``resize_``, ``resize_as_``.

They change a tensor's geometry, not its values: the tensor takes the geometry (and, when it
is part of a graph, the autograd history) of the matching view op's result, and its version
counter is bumped, as in PyTorch. ``resize_`` reinterprets a contiguous tensor's memory with
new sizes (growing allocates new memory that starts with the old elements), and refuses a
tensor that requires grad, as PyTorch does.
"""
from __future__ import annotations

import numpy as np

from .._state import STATE
from ..tensor import Tensor
from .registry import xp_of


def _check_leaf(self, name):
    if STATE.grad_enabled and self._requires_grad and self._grad_fn is None and not self._diff_view:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _take_geometry(self, view):
    """``self`` becomes ``view`` (a view of self made by a view op): its array, and its history.
    A tensor that owns its memory remembers that memory as its storage (ember/storage.py), so
    ``storage_offset()`` and ``untyped_storage()`` still count from the allocation's start."""
    d = self.__dict__
    if self._base is None and "_sbuf" not in d and type(self._data) is np.ndarray:
        from ..storage import _tensor_buf
        d["_sbuf"] = _tensor_buf(self)
    self._data = view._data
    if view._requires_grad and view._grad_fn is not None:
        d = self.__dict__
        d["_grad_fn"] = view._grad_fn
        d["_output_nr"] = view._output_nr
        d["_requires_grad"] = True
        d.pop("_view_version", None)
    self._bump_version()
    return self


def _geometry_inplace(view_name):
    def method(self, *args, **kwargs):
        _check_leaf(self, view_name + "_")
        return _take_geometry(self, getattr(self, view_name)(*args, **kwargs))
    method.__name__ = view_name + "_"
    method.__doc__ = f"In-place ``{view_name}``: this tensor takes the geometry of ``self.{view_name}(...)``."
    return method


def resize_(self, *sizes, memory_format=None):
    if STATE.grad_enabled and self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if shape == tuple(self._data.shape):
        return self
    n = int(np.prod(shape, dtype=np.int64))
    d = self._data
    if not d.flags.c_contiguous:
        raise RuntimeError("ember: resize_ of a non-contiguous tensor is not supported (call .contiguous() "
                           "first, or reshape)")
    flat = d.reshape(-1)
    if n <= flat.size:
        self._data = flat[:n].reshape(shape)
    else:
        if self._base is not None:
            raise RuntimeError("ember: resize_ cannot grow a view (its memory belongs to its base); "
                               "resize the base or use a new tensor")
        grown = xp_of(self.device).empty(n, dtype=d.dtype)
        grown[:flat.size] = flat
        self._data = grown.reshape(shape)
    self._bump_version()
    return self


def resize_as_(self, other, memory_format=None):
    return resize_(self, tuple(other.shape))


for _name in ("unsqueeze", "squeeze", "t", "transpose", "swapdims", "swapaxes", "as_strided"):
    setattr(Tensor, _name + "_", _geometry_inplace(_name))
Tensor.resize_ = resize_
Tensor.resize_as_ = resize_as_
