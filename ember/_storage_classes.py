"""The storage class names torch has beyond ember/storage.py's: ``Storage`` (torch's alias of
``FloatStorage``), ``StorageBase`` (the C base class of ``UntypedStorage``: ``isinstance`` checks
against it), and the legacy classes of the quantized dtypes (``QInt8Storage`` ...: CPU
TypedStorages of qint8 ... elements)."""
from __future__ import annotations

from . import types as _t
from .storage import LEGACY_STORAGE_TYPES, UntypedStorage, _legacy_class

__all__ = ["Storage", "StorageBase", "QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage",
           "QUInt2x4Storage"]

Storage = LEGACY_STORAGE_TYPES["FloatStorage"]


class _StorageBaseMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, UntypedStorage)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and issubclass(sub, UntypedStorage)

    def __repr__(cls):
        return "<class 'ember._C.StorageBase'>"


class StorageBase(metaclass=_StorageBaseMeta):
    """The base of untyped storages: ``isinstance(s, StorageBase)`` is ``isinstance(s, UntypedStorage)``."""

    def __new__(cls, *args, **kwargs):
        return UntypedStorage(*args, **kwargs)


QInt8Storage = _legacy_class("QInt8Storage", _t.qint8)
QUInt8Storage = _legacy_class("QUInt8Storage", _t.quint8)
QInt32Storage = _legacy_class("QInt32Storage", _t.qint32)
QUInt4x2Storage = _legacy_class("QUInt4x2Storage", _t.quint4x2)
QUInt2x4Storage = _legacy_class("QUInt2x4Storage", _t.quint2x4)
