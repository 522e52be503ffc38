"""Fake backend arrays: the metadata of an array (shape, dtype, strides, storage), no data.

Lives apart from ``ember.ops`` so ``ember.tensor`` can recognise a fake tensor
without importing the dispatcher. See ``ember/ops/_meta.py`` and
``ember/fx/fake_tensor.py`` for how they are used.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import types as _t

_ids = itertools.count(1)


class DataDependentOutputError(RuntimeError):
    """An op whose result depends on tensor *data* was called on a fake tensor.

    ``op`` names it (``"nonzero"``, ``"item"``, ...) so a tracer can graph-break there."""

    def __init__(self, op: str, detail: str = ""):
        self.op = op
        msg = (f"{op}: the output depends on the data of a fake tensor, which has none "
               f"(data-dependent operator)")
        super().__init__(msg + (f"; {detail}" if detail else ""))


class FakeStorage:
    """The storage a fake tensor and its views share: an identity and a size, no bytes."""

    __slots__ = ("nbytes", "base_ptr", "alignment_read", "__weakref__")

    def __init__(self, nbytes):
        self.nbytes = nbytes
        # set by a dtype view's meta (view(float64) of float32, view_as_complex) that checked the
        # offset's alignment: dynamo then guards the residue of a symbolic input's real offset
        self.alignment_read = False
        # a unique, widely spaced fake address so data_ptr() arithmetic works
        self.base_ptr = next(_ids) << 40


class FakeArray:
    """Stands in for a backend array: shape, dtype, strides and storage, no data.

    It mimics the numpy attributes ember's Tensor reads (``shape``, ``ndim``,
    ``size``, ``itemsize``, ``strides`` in bytes, ``dtype`` a numpy dtype);
    anything that would need the data raises :class:`DataDependentOutputError`."""

    __slots__ = ("shape", "dtype", "estrides", "offset", "storage")

    def __init__(self, shape, dtype, estrides=None, offset=0, storage=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype.np if isinstance(dtype, _t.dtype) else dtype)
        self.estrides = tuple(estrides) if estrides is not None else _contiguous(self.shape)
        self.offset = offset
        if storage is None:
            storage = FakeStorage(_numel(self.shape) * self.dtype.itemsize)
        self.storage = storage

    # numpy-like metadata ------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _numel(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        isz = self.dtype.itemsize
        return tuple(s * isz for s in self.estrides)

    @property
    def data(self):
        return _FakePtr(self.storage.base_ptr + self.offset * self.dtype.itemsize)

    def copy(self):
        return FakeArray(self.shape, self.dtype)

    def astype(self, dtype, copy=True):
        return FakeArray(self.shape, dtype)

    def __iadd__(self, other):
        return self

    def __array__(self, *a, **k):
        raise DataDependentOutputError("numpy", "a fake tensor cannot be converted to an array")

    def get(self):
        raise DataDependentOutputError("cpu", "a fake tensor has no data to copy")

    def __repr__(self):
        return f"FakeArray(shape={self.shape}, dtype={self.dtype}, strides={self.estrides})"


class _FakePtr:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


def _numel(shape):
    n = 1
    for s in shape:
        n = n * s
    return n


def _contiguous(shape):
    strides, acc = [], 1
    for s in reversed(tuple(shape)):
        strides.append(acc)
        acc = acc * (max(s, 1) if isinstance(s, int) else s)
    return tuple(reversed(strides))
