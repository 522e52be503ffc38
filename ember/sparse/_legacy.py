"""The legacy sparse tensor types: ``ember.sparse.FloatTensor``, ``DoubleTensor``, ...

Old PyTorch code builds COO tensors with ``torch.sparse.FloatTensor(indices, values, size)``
or empty ones with ``torch.sparse.FloatTensor(2, 3)``, and tests ``isinstance(t,
torch.sparse.FloatTensor)``. As with the dense legacy types (``ember.FloatTensor``), each is
a constructor whose ``isinstance`` is a test of layout, dtype and device, not a Tensor
subclass.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from ._tensor import COO, SparseTensor, Structure, from_values

_SIGNATURES = (" * (*, ember.device device = None)\n"
               " * (Tensor indices, Tensor values, *, ember.device device = None)\n"
               " * (Tensor indices, Tensor values, tuple of ints size, *, ember.device device = None)\n"
               " * (tuple of ints size, *, ember.device device = None)\n")


class _LegacySparseMeta(type):
    """``isinstance(t, ember.sparse.FloatTensor)``: a CPU COO tensor of float32."""

    def __instancecheck__(cls, obj):
        return (isinstance(obj, SparseTensor) and obj.layout is COO and obj.dtype is cls.dtype
                and obj.device.type == "cpu")

    def __repr__(cls):
        return f"<class 'ember.sparse.{cls.__name__}'>"


def _invalid(args):
    got = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args)
    return TypeError(f"new() received an invalid combination of arguments - got ({got}), but expected one of:\n"
                     f"{_SIGNATURES}")


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _empty(dt, shape):
    from ..ops import api
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    sd = len(shape)
    st = Structure(COO, shape, sd, indices=np.zeros((sd, 0), np.int64), coalesced=True)
    return from_values(st, api.zeros((0,), dtype=dt))


def _legacy_sparse_new(cls, args, kwargs):
    device = kwargs.pop("device", None)
    size_kw = kwargs.pop("size", None)
    if kwargs:
        raise _invalid(args)
    if device is not None and _t.device(device).type != "cpu":
        raise RuntimeError(f"legacy constructor ember.sparse.{cls.__name__} expects device type: cpu but device "
                           f"type: {_t.device(device).type} was passed (ember.sparse is CPU only)")
    dt = cls.dtype
    if size_kw is not None:
        if args:
            raise _invalid(args)
        return _empty(dt, tuple(int(s) for s in size_kw))
    if not args:
        return _empty(dt, (0,))
    if isinstance(args[0], Tensor):
        if len(args) not in (2, 3) or not isinstance(args[1], Tensor):
            raise _invalid(args)
        from ._convert import sparse_coo_tensor
        return sparse_coo_tensor(args[0], args[1], args[2] if len(args) == 3 else None)
    if len(args) == 1 and isinstance(args[0], _t.Size):
        return _empty(dt, tuple(args[0]))
    if len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):
        raise TypeError("ember.sparse.SparseTensor(sequence) only accepts sizes.  Please use "
                        "ember.sparse_coo_tensor() or construct a strided tensor and convert it to sparse via "
                        "to_sparse.")
    if all(_is_int(a) for a in args):
        return _empty(dt, tuple(int(a) for a in args))
    raise _invalid(args)


def _legacy_sparse_type(name, dt):
    def __new__(cls, *args, **kwargs):
        return _legacy_sparse_new(cls, args, kwargs)
    doc = (f"``ember.sparse.{name}(...)``: PyTorch's legacy constructor of a COO tensor -- ``(indices, values"
           f"[, size])`` (the values' dtype, as torch) or sizes (an empty {dt.name} tensor); "
           f"``isinstance(t, ember.sparse.{name})`` tests layout, dtype and device.")
    return _LegacySparseMeta(name, (), {"__new__": __new__, "dtype": dt, "is_cuda": False, "is_sparse": True,
                                        "layout": COO, "__doc__": doc, "__module__": "ember.sparse"})


LEGACY_SPARSE_TYPES = {name: _legacy_sparse_type(name, dt) for name, dt in [
    ("FloatTensor", _t.float32), ("DoubleTensor", _t.float64), ("HalfTensor", _t.float16),
    ("BFloat16Tensor", _t.bfloat16), ("LongTensor", _t.int64), ("IntTensor", _t.int32),
    ("ShortTensor", _t.int16), ("CharTensor", _t.int8), ("ByteTensor", _t.uint8)]}
