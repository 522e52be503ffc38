"""What a MaskedTensor puts where a dense tensor keeps its array.

A ``MaskedTensor`` is an ``ember.Tensor`` (as in PyTorch), so any op that
was not written for it reaches a dense kernel, which reads ``tensor._data``.
Computing there would silently use the masked-out values, so ``_data`` is a
``MaskedStorage``: it answers the metadata the dispatcher and the autograd
engine read without looking at values (``shape``, ``ndim``, ``size``,
``dtype``, ``itemsize``) and raises for everything else -- numpy's array
protocols, ufuncs, indexing, arithmetic -- with PyTorch's error for an op a
MaskedTensor does not implement, naming the op found on the stack.
"""
from __future__ import annotations

import math


def unsupported_error(what=None):
    """PyTorch's error for an op MaskedTensor has no rule for (a TypeError naming the aten op)."""
    from ..sparse._storage import _running_op
    op = _running_op()
    name = op.name if op is not None else None
    if name is not None:
        return TypeError(
            f"Multiple dispatch failed for 'torch._ops.aten.{name}.default'; all __torch_dispatch__ "
            f"handlers returned NotImplemented:\n\n  - tensor subclass <class 'ember.masked.MaskedTensor'>"
            f"\n\nember.masked: '{name}' is not implemented for MaskedTensor (running it on the data would "
            f"compute on masked-out elements); use mt.get_data() / mt.to_tensor(value) for a dense tensor.")
    return NotImplementedError(
        f"ember.masked: {what or 'this operation'} is not supported for a MaskedTensor (it would read the "
        f"masked-out elements); use mt.get_data() / mt.to_tensor(value) for a dense tensor.")


class MaskedStorage:
    """The ``_data`` of a MaskedTensor: shape/dtype metadata, and an error for any other use."""

    __slots__ = ("shape", "ndim", "size", "dtype", "itemsize")

    def __init__(self, arr):
        self.shape = tuple(int(s) for s in arr.shape)
        self.ndim = len(self.shape)
        self.size = int(math.prod(self.shape))
        self.dtype = arr.dtype          # the numpy dtype of the data (no values are read)
        self.itemsize = arr.itemsize

    def _fail(self, what):
        raise unsupported_error(what)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._fail(f"reading '.{name}' of its data")

    def __array__(self, *args, **kwargs):
        self._fail("converting it to a numpy array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._fail(f"numpy's {ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        self._fail(f"numpy's {func.__name__}")

    def __repr__(self):
        return f"<masked storage, shape {self.shape}>"


def _raiser(name):
    def method(self, *args, **kwargs):
        self._fail(f"'{name}' on its data")
    method.__name__ = name
    return method


for _n in ("__getitem__", "__setitem__", "__iter__", "__len__", "__bool__", "__float__", "__int__",
           "__index__", "__complex__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
           "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__pos__", "__abs__",
           "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lt__",
           "__le__", "__gt__", "__ge__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
           "__lshift__", "__rshift__"):
    setattr(MaskedStorage, _n, _raiser(_n))
del _n
