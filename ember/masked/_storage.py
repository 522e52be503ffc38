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

from .._refusing_storage import RefusingStorage


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


class MaskedStorage(RefusingStorage):
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

    def __repr__(self):
        return f"<masked storage, shape {self.shape}>"

