"""Storages: the flat memory behind tensors (``UntypedStorage``, ``TypedStorage``, ``FloatStorage``, ...).

Why this exists: library code written for PyTorch reaches below the tensor to its storage, mostly
to detect aliasing (``a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()``), to size
checkpoints (``nbytes()``), and to rebuild tensors over shared memory (``t.set_(storage, offset,
size, stride)``).

ember keeps no storage objects of its own: a tensor holds a backend array, and views are backend
views of their base's array. A storage is therefore a *window* computed on demand: a 1-d ``uint8``
array over exactly the bytes the tensor's storage root addresses. The root is the tensor that owns
the memory (``t._base`` for a view, else ``t``); a tensor given a storage by ``set_`` remembers that
storage's bytes (``_sbuf``), so it and its views report that storage. Reads and writes through a
storage go to the real shared memory. Two storage objects of one tensor are different Python
objects (as in PyTorch, where ``untyped_storage()`` returns a fresh wrapper); compare them with
``data_ptr()``.

What numpy cannot do: grow or shrink memory that arrays already view. ``resize_`` therefore works
on storages no tensor views (those made with ``UntypedStorage(n)`` and not yet given to ``set_``)
and raises a NotImplementedError naming the limitation otherwise.
"""
from __future__ import annotations

import numbers
import os
import warnings
import weakref
from collections.abc import Sequence

import numpy as np

from . import types as _t
from ._fake import FakeArray
from .tensor import Tensor, _data_ptr

__all__ = ["UntypedStorage", "TypedStorage", "is_storage", "from_file"]


# ---------------------------------------------------------------------- byte windows
def _byte_span(arr):
    """(lowest, one-past-highest) address of the bytes ``arr`` addresses (negative strides too)."""
    ptr = _data_ptr(arr)
    if arr.size == 0:
        return ptr, ptr
    lo = hi = ptr
    for n, s in zip(arr.shape, arr.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + arr.itemsize


class _Window:
    """An ``__array_interface__`` over raw bytes whose ``base`` keeps the owning array alive
    (what ``np.asarray`` needs to view memory that starts before an array's first element)."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, lo, n, owner, readonly):
        self.__array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (lo, readonly), "version": 3}
        self.base = owner


def _window(owner, lo, hi):
    """A 1-d uint8 array over [lo, hi) inside the memory of ``owner`` (numpy or cupy)."""
    if isinstance(owner, np.ndarray):
        if owner.dtype == np.uint8 and owner.ndim == 1 and _byte_span(owner) == (lo, hi):
            return owner
        return np.asarray(_Window(lo, hi - lo, owner, not owner.flags.writeable))
    import cupy  # the only other backend: device memory
    return cupy.ndarray((hi - lo,), dtype=cupy.uint8, memptr=owner.data + (lo - _data_ptr(owner)))


def _contains(buf, arr):
    lo, hi = _byte_span(buf)
    a, b = _byte_span(arr)
    return lo <= a and b <= hi


def _np_root(arr):
    """The array at the end of ``arr``'s numpy ``.base`` chain (through the interface objects
    ``as_strided`` leaves in it) -- the allocation a view was cut from."""
    while True:
        b = getattr(arr, "base", None)
        if b is None:
            return arr
        if isinstance(b, (np.ndarray, _Window)) or type(b).__module__.startswith("cupy"):
            arr = b.base if isinstance(b, _Window) else b
            continue
        inner = getattr(b, "base", None)
        if isinstance(inner, np.ndarray) and hasattr(b, "__array_interface__"):
            arr = inner
            continue
        return arr


def _tensor_buf(t):
    """The uint8 window over ``t``'s storage (real tensors): set_'s storage, else its root's bytes."""
    d = t._data
    own = t.__dict__.get("_sbuf")
    if own is not None and _contains(own, d):
        return own
    root = t._base if t._base is not None else t
    if root is not t:
        sb = root.__dict__.get("_sbuf")
        if sb is not None and _contains(sb, d):
            return sb
    rd = root._data
    if type(rd) is type(d) and type(rd) is not FakeArray:
        lo, hi = _byte_span(rd)
        a, b = _byte_span(d)
        if lo <= a and b <= hi or d.size == 0 and lo <= a <= hi:
            return _window(rd, lo, hi)
    # the root's memory was replaced after this view was made (``data =``, share_memory_()):
    # the view still holds the old allocation
    r = _np_root(d)
    lo, hi = _byte_span(r)
    return _window(r, lo, hi)


def storage_start(t):
    """Address of the first byte of ``t``'s storage (``Tensor.storage_offset`` counts from it)."""
    if "_sbuf" not in t.__dict__:
        root = t._base if t._base is not None else t
        rd, d = root._data, t._data
        if "_sbuf" not in root.__dict__ and type(rd) is type(d):
            lo, hi = _byte_span(rd)
            a, b = _byte_span(d)
            if lo <= a and b <= hi or d.size == 0 and lo <= a <= hi:
                return lo
    return _data_ptr(_tensor_buf(t))


# ---------------------------------------------------------------------- UntypedStorage
def _check_device(device):
    dev = _t.cpu if device is None else _t.as_device(device)
    if dev.type == "meta":
        raise NotImplementedError("ember: storages on the meta device are not supported (a meta tensor has no "
                                  "memory in ember); use a fake tensor's untyped_storage() for metadata")
    return dev


def _xp(dev):
    from .ops.registry import xp_of
    return xp_of(dev)


def _fake_error(what):
    from .ops._meta import DataDependentOutputError
    raise DataDependentOutputError(what, "a fake tensor's storage has no data")


class UntypedStorage:
    """Bytes: ``UntypedStorage()``, ``UntypedStorage(nbytes, device=)``, ``UntypedStorage(list of
    ints, device=)``, or ``tensor.untyped_storage()`` (a window onto the tensor's memory)."""

    __slots__ = ("_buf", "_device", "_fake", "_owner", "_bound", "__weakref__")

    is_sparse = False

    def __init__(self, *args, device=None):
        dev = _check_device(device)
        self._device = dev
        self._fake = None
        self._owner = None       # weakref to the tensor whose memory this is (share_memory_)
        self._bound = False      # some tensor views these bytes (resize_ would leave it behind)
        if len(args) > 1:
            raise TypeError("UntypedStorage() takes at most one positional argument (a size or a sequence of "
                            f"ints), got {len(args)}")
        xp = _xp(dev)
        if not args:
            self._buf = xp.empty((0,), dtype=np.uint8)
            return
        a = args[0]
        if isinstance(a, numbers.Integral) and not isinstance(a, bool):
            n = int(a)
            if n < 0:
                raise RuntimeError(f"ember.UntypedStorage(): the size in bytes must be non-negative, got {n}")
            self._buf = xp.zeros((n,), dtype=np.uint8)
            return
        if isinstance(a, Tensor) or not isinstance(a, Sequence):
            raise RuntimeError(f"ember.UntypedStorage(): Expected a sequence type, but got {type(a).__name__}")
        for v in a:
            if not isinstance(v, numbers.Integral):
                raise RuntimeError(f"ember.UntypedStorage(): tried to construct a storage from a sequence "
                                   f"({type(a).__name__}), but one of the items was of type {type(v).__name__} "
                                   "instead of int")
        self._buf = xp.asarray(np.array([int(v) for v in a], dtype=np.int64).astype(np.uint8))

    # -------------------------------------------------------------- construction helpers
    @classmethod
    def _wrap(cls, buf, device, owner=None, bound=False):
        s = object.__new__(cls)
        s._buf = buf
        s._device = device
        s._fake = None
        s._owner = None if owner is None else weakref.ref(owner)
        s._bound = bound
        return s

    @classmethod
    def _of_tensor(cls, t):
        if type(t._data) is FakeArray:
            s = object.__new__(cls)
            s._buf = None
            s._device = t.device
            s._fake = t._data.storage
            s._owner = None
            s._bound = True
            return s
        root = t._base if t._base is not None else t
        return cls._wrap(_tensor_buf(t), t.device, owner=root, bound=True)

    # -------------------------------------------------------------- metadata
    @property
    def device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    @property
    def is_hpu(self):
        return False

    def get_device(self):
        return -1 if self._device.type == "cpu" else (self._device.index or 0)

    def nbytes(self):
        if self._fake is not None:
            return self._fake.nbytes
        return int(self._buf.size)

    def size(self):
        return self.nbytes()

    def __len__(self):
        return self.nbytes()

    def element_size(self):
        return 1

    def data_ptr(self):
        if self._fake is not None:
            return self._fake.base_ptr
        return _data_ptr(self._buf)

    def resizable(self):
        return self._fake is None and not self._bound

    def untyped(self):
        return self

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return "ember.storage.UntypedStorage"
        raise TypeError("UntypedStorage.type(dtype): an untyped storage has no element type; wrap it with "
                        "ember.TypedStorage(wrap_storage=..., dtype=...)")

    def _data(self, what):
        if self._fake is not None:
            _fake_error(what)
        return self._buf

    # -------------------------------------------------------------- element access
    def _index(self, idx):
        if isinstance(idx, bool) or not isinstance(idx, numbers.Integral):
            raise TypeError(f"can't index a ember.storage.UntypedStorage with {type(idx).__name__}")
        n = self.nbytes()
        i = int(idx)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"index {j if i < 0 else i} out of range for storage of size {n}")
        return j

    def _slice(self, idx):
        if idx.step not in (None, 1):
            raise RuntimeError(f"Trying to slice with a step of {idx.step}, but only a step of 1 is supported")
        start, stop, _ = idx.indices(self.nbytes())
        return start, max(start, stop)

    def __getitem__(self, idx):
        buf = self._data("UntypedStorage.__getitem__")
        if isinstance(idx, slice):
            a, b = self._slice(idx)
            return UntypedStorage._wrap(buf[a:b], self._device, bound=True)
        return int(buf[self._index(idx)])

    def __setitem__(self, idx, value):
        buf = self._data("UntypedStorage.__setitem__")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise RuntimeError(f"can only set storage content with a int types, but got {type(value).__name__} "
                               "instead")
        v = int(value) & 0xFF        # as torch: the value wraps modulo 256
        if isinstance(idx, slice):
            a, b = self._slice(idx)
            buf[a:b] = v
        else:
            buf[self._index(idx)] = v

    def tolist(self):
        return [int(v) for v in _host(self._data("UntypedStorage.tolist"))]

    def __iter__(self):
        return iter(self.tolist())

    def fill_(self, value):
        buf = self._data("UntypedStorage.fill_")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise RuntimeError(f"can only fill a storage with a int value, but got {type(value).__name__}")
        buf[...] = int(value) & 0xFF
        return self

    def copy_(self, source, non_blocking=None):
        """Byte copy from another storage (untyped or typed) of the same size in bytes."""
        if isinstance(source, TypedStorage):
            source = source._untyped_storage
        if not isinstance(source, UntypedStorage):
            raise TypeError(f"copy_(): argument 'source' must be a storage, not {type(source).__name__}")
        dst = self._data("UntypedStorage.copy_")
        src = source._data("UntypedStorage.copy_")
        if dst.size != src.size:
            raise RuntimeError(f"size does not match, self was {dst.size} bytes but src was {src.size} bytes")
        if self._device == source._device:
            dst[...] = src
        else:
            dst[...] = _xp(self._device).asarray(_host(src))
        return self

    def clone(self):
        buf = self._data("UntypedStorage.clone")
        return UntypedStorage._wrap(buf.copy(), self._device)

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = self.clone()
        return memo[id(self)]

    def resize_(self, size):
        buf = self._data("UntypedStorage.resize_")
        n = int(size)
        if n < 0:
            raise RuntimeError(f"UntypedStorage.resize_: the size in bytes must be non-negative, got {n}")
        if n == buf.size:
            return self
        if self._bound:
            raise NotImplementedError(
                "ember: UntypedStorage.resize_ of a storage that tensors view is not supported: ember's memory is a "
                "numpy/cupy allocation that cannot be grown or shrunk in place under its views; make a new "
                "storage (ember.UntypedStorage(n)) and copy into it, or resize the tensor (Tensor.resize_)")
        new = _xp(self._device).zeros((n,), dtype=np.uint8)
        k = min(n, buf.size)
        new[:k] = buf[:k]
        self._buf = new
        return self

    # -------------------------------------------------------------- devices
    def to(self, *, device, non_blocking=False):
        dev = _check_device(device)
        if dev == self._device:
            return self
        buf = self._data("UntypedStorage.to")
        return UntypedStorage._wrap(_xp(dev).asarray(_host(buf)), dev)

    def cpu(self):
        return self.to(device="cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to(device=_t.device("cuda", device) if isinstance(device, int) else (device or "cuda"))

    def is_pinned(self, device="cuda"):
        return False

    def pin_memory(self, device="cuda"):
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError("ember: pin_memory() needs CUDA (ember.cuda.is_available() is False)")
        return self.clone()

    # -------------------------------------------------------------- shared memory
    def is_shared(self):
        if self._fake is not None or not isinstance(self._buf, np.ndarray):
            return False
        from .multiprocessing._shared import shared_name
        return shared_name(self._buf) is not None

    def share_memory_(self):
        """Move the bytes into a named shared-memory block (``ember.multiprocessing``). For a
        tensor's storage this is the tensor's ``share_memory_()``: the tensor the storage came
        from moves; views made of it before keep the old memory, as ``Tensor.share_memory_``."""
        buf = self._data("UntypedStorage.share_memory_")
        if self._device.type != "cpu" or self.is_shared():
            return self
        from .multiprocessing._shared import share_array
        owner = self._owner() if self._owner is not None else None
        if owner is not None and owner.__dict__.get("_sbuf") is None and type(owner._data) is np.ndarray \
                and _byte_span(owner._data) == _byte_span(buf):
            owner.share_memory_()
            self._buf = _tensor_buf(owner)
        else:
            self._buf = share_array(buf)
        return self

    # -------------------------------------------------------------- typed views
    def _typed(self, dtype):
        return TypedStorage(wrap_storage=self, dtype=dtype, _internal=True)

    def __reduce_ex__(self, proto):
        from ._torch_pickle import reduce_storage     # the bytes (and dtype of a TypedStorage)
        return reduce_storage(self)

    def __sizeof__(self):
        return super().__sizeof__() + self.nbytes()

    def __repr__(self):
        return _storage_str(self, "ember.storage.UntypedStorage", f"device={self._device}")

    __str__ = __repr__


def _host(arr):
    return arr if isinstance(arr, np.ndarray) else arr.get()


def _storage_str(s, name, info):
    head = f"[{name}({info}) of size {len(s)}]"
    if s._fake is not None:
        return head
    items = s.tolist()
    return " " + "\n ".join(str(v) for v in items) + "\n" + head


# ---------------------------------------------------------------------- TypedStorage
_warned = {"typed": False}
_always_warn = {"typed": False}


def _warn_typed_storage_removal(stacklevel=2):
    """PyTorch's deprecation warning for TypedStorage: once per process (unless
    ``_set_always_warn_typed_storage_removal(True)``), a UserWarning."""
    if _always_warn["typed"] or not _warned["typed"]:
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. This should only matter to you if you are using storages directly.  To "
                      "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
                      UserWarning, stacklevel=stacklevel + 1)
        _warned["typed"] = True


def _reset_warn_typed_storage_removal():
    _warned["typed"] = False


def _set_always_warn_typed_storage_removal(always_warn):
    if not isinstance(always_warn, bool):
        raise TypeError(f"always_warn must be bool, got {type(always_warn).__name__}")
    _always_warn["typed"] = always_warn


def _get_always_warn_typed_storage_removal():
    return _always_warn["typed"]


_INIT_ERROR = ("TypedStorage.__init__ received an invalid combination of arguments. Expected one of:\n"
               " * (*, ember.device device, ember.dtype dtype)\n"
               " * (int size, *, ember.device device, ember.dtype dtype)\n"
               " * (Sequence data, *, ember.device device, ember.dtype dtype)\n"
               " * (*, UntypedStorage wrap_storage, ember.dtype dtype)")


class TypedStorage:
    """A storage read as elements of one dtype (deprecated in PyTorch: constructing one, or
    ``tensor.storage()``, warns once). ``_untyped_storage`` holds the bytes."""

    is_sparse = False

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal=False):
        if not _internal:
            _warn_typed_storage_removal()
        if wrap_storage is not None:
            if args or device is not None:
                raise RuntimeError(_INIT_ERROR + "\nNo positional arguments or device should be given when using "
                                                 "'wrap_storage'")
            if dtype is None:
                raise RuntimeError(_INIT_ERROR + "\nArgument 'dtype' must be specified")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(_INIT_ERROR + f"\nArgument 'wrap_storage' must be UntypedStorage, but got "
                                              f"{type(wrap_storage).__name__}")
            self.dtype = _t.as_dtype(dtype)
            self._untyped_storage = wrap_storage
            return
        self.dtype = _t.get_default_dtype() if dtype is None else _t.as_dtype(dtype)
        dev = _check_device(device)
        if len(args) > 1:
            raise RuntimeError(_INIT_ERROR + "\nToo many positional arguments")
        isz = self.dtype.itemsize
        if not args:
            self._untyped_storage = UntypedStorage(device=dev)
            return
        a = args[0]
        if isinstance(a, numbers.Integral) and not isinstance(a, bool):
            if int(a) < 0:
                raise RuntimeError(f"TypedStorage(): the size must be non-negative, got {int(a)}")
            self._untyped_storage = UntypedStorage(int(a) * isz, device=dev)
            return
        if isinstance(a, Sequence) and not isinstance(a, (str, bytes)):
            from .ops import api
            arr = api.tensor(list(a), dtype=self.dtype)._data.reshape(-1)
            buf = _xp(dev).asarray(np.ascontiguousarray(arr).view(np.uint8))
            self._untyped_storage = UntypedStorage._wrap(buf, dev)
            return
        raise TypeError(_INIT_ERROR + f"\nArgument type not recognized: {type(a).__name__}")

    @classmethod
    def _of_tensor(cls, t):
        return cls(wrap_storage=UntypedStorage._of_tensor(t), dtype=t.dtype, _internal=True)

    # -------------------------------------------------------------- metadata
    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def get_device(self):
        return self._untyped_storage.get_device()

    def untyped(self):
        _warn_typed_storage_removal()
        return self._untyped_storage

    def element_size(self):
        return self.dtype.itemsize

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def size(self):
        return self.nbytes() // self.dtype.itemsize

    def __len__(self):
        return self.size()

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    def resizable(self):
        return self._untyped_storage.resizable()

    def is_shared(self):
        return self._untyped_storage.is_shared()

    def share_memory_(self):
        self._untyped_storage.share_memory_()
        return self

    def pickle_storage_type(self):
        return f"{self.dtype.legacy_name}Storage"

    def _get_legacy_storage_class(self):
        return LEGACY_STORAGE_TYPES.get(f"{self.dtype.legacy_name}Storage")

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            legacy = self._get_legacy_storage_class()
            return f"ember.{legacy.__name__}" if legacy is not None else "ember.storage.TypedStorage"
        target = _t.as_dtype(dtype.dtype if isinstance(dtype, _LegacyStorageMeta) else dtype)
        return self._to(target)

    def _elements(self, what):
        buf = self._untyped_storage._data(what)
        n = self.size() * self.dtype.itemsize
        return buf[:n].view(self.dtype.np)

    # -------------------------------------------------------------- element access
    def _index(self, idx):
        if isinstance(idx, bool) or not isinstance(idx, numbers.Integral):
            raise TypeError(f"can't index a ember.storage.TypedStorage with {type(idx).__name__}")
        n = self.size()
        i = int(idx)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"index {i} out of range for storage of size {n}")
        return j

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        v = self._elements("TypedStorage.__getitem__")[self._index(idx)]
        return _py(v, self.dtype)

    def __setitem__(self, idx, value):
        el = self._elements("TypedStorage.__setitem__")
        if isinstance(value, Tensor):
            value = value.item()
        if not isinstance(value, (numbers.Number, np.generic)):
            raise TypeError(f"can't assign a {type(value).__name__} to a ember.{self.dtype.legacy_name}Tensor")
        if isinstance(idx, slice):
            el[idx] = value
        else:
            el[self._index(idx)] = value

    def tolist(self):
        return [_py(v, self.dtype) for v in _host(self._elements("TypedStorage.tolist"))]

    def __iter__(self):
        return iter(self.tolist())

    def fill_(self, value):
        el = self._elements("TypedStorage.fill_")
        el[...] = value.item() if isinstance(value, Tensor) else value
        return self

    def copy_(self, source, non_blocking=None):
        """Byte copy (as torch: a storage of another dtype is reinterpreted, not converted)."""
        self._untyped_storage.copy_(source._untyped_storage if isinstance(source, TypedStorage) else source)
        return self

    def clone(self):
        return TypedStorage(wrap_storage=self._untyped_storage.clone(), dtype=self.dtype, _internal=True)

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        import copy
        return TypedStorage(wrap_storage=copy.deepcopy(self._untyped_storage, memo), dtype=self.dtype,
                            _internal=True)

    def resize_(self, size):
        self._untyped_storage.resize_(int(size) * self.dtype.itemsize)

    def _to(self, dtype):
        if dtype is self.dtype:
            return self
        from .ops import api
        vals = api.tensor(self.tolist(), dtype=self.dtype).to(dtype)
        return TypedStorage._of_tensor(vals.to(self.device))

    def to(self, *, device, non_blocking=False):
        return TypedStorage(wrap_storage=self._untyped_storage.to(device=device), dtype=self.dtype,
                            _internal=True)

    def cpu(self):
        return self.to(device="cpu")

    def cuda(self, device=None, non_blocking=False):
        return TypedStorage(wrap_storage=self._untyped_storage.cuda(device), dtype=self.dtype, _internal=True)

    def is_pinned(self, device="cuda"):
        return False

    def __reduce_ex__(self, proto):
        from ._torch_pickle import reduce_storage     # the bytes (and dtype of a TypedStorage)
        return reduce_storage(self)

    def __repr__(self):
        s = self._untyped_storage
        head = f"[ember.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {len(self)}]"
        if s._fake is not None:
            return head
        return " " + "\n ".join(str(v) for v in self.tolist()) + "\n" + head

    __str__ = __repr__

    @classmethod
    def from_file(cls, filename, shared=False, size=0):
        if cls is TypedStorage:
            raise RuntimeError("from_file can only be called on derived classes")
        dt = cls.dtype
        us = UntypedStorage.from_file(filename, shared, int(size) * dt.itemsize)
        return TypedStorage(wrap_storage=us, dtype=dt, _internal=True)


for _conv, _dt in (("double", _t.float64), ("float", _t.float32), ("half", _t.float16), ("bfloat16", _t.bfloat16),
                   ("long", _t.int64), ("int", _t.int32), ("short", _t.int16), ("char", _t.int8),
                   ("byte", _t.uint8), ("bool", _t.bool_), ("complex_double", _t.complex128),
                   ("complex_float", _t.complex64)):
    def _make_conv(dt, name):
        def conv(self):
            return self._to(dt)
        conv.__name__ = name
        conv.__doc__ = f"This storage's values converted to {dt} (a new storage unless already {dt})."
        return conv
    setattr(TypedStorage, _conv, _make_conv(_dt, _conv))


def _py(v, dtype):
    if dtype is _t.bfloat16 or dtype is _t.float16:
        return float(v)
    return v.item()


# ---------------------------------------------------------------------- legacy storage classes
class _LegacyStorageMeta(type):
    """``isinstance(s, ember.FloatStorage)``: a CPU TypedStorage of float32 (the legacy classes only
    make TypedStorages, as torch's)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, TypedStorage) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __repr__(cls):
        return f"<class 'ember.{cls.__name__}'>"


def _legacy_new(cls, *args, wrap_storage=None, dtype=None, device=None):
    if dtype is not None or device is not None:
        raise RuntimeError(f"ember.{cls.__name__}() received an invalid combination of arguments: keyword "
                           f"argument '{'dtype' if dtype is not None else 'device'}' cannot be specified")
    _warn_typed_storage_removal(stacklevel=3)
    if wrap_storage is not None:
        if not isinstance(wrap_storage, UntypedStorage):
            raise TypeError(f"ember.{cls.__name__}(): argument 'wrap_storage' must be UntypedStorage, but got "
                            f"{type(wrap_storage).__name__}")
        if wrap_storage.device.type != "cpu":
            raise RuntimeError(f"ember.{cls.__name__}(): device of 'wrap_storage' must be cpu, but got "
                               f"{wrap_storage.device.type}")
        return TypedStorage(wrap_storage=wrap_storage, dtype=cls.dtype, _internal=True)
    if len(args) == 1 and not isinstance(args[0], (numbers.Integral, Sequence)):
        raise TypeError(f"ember.{cls.__name__}(): argument type not recognized: {type(args[0]).__name__}")
    return TypedStorage(*args, dtype=cls.dtype, _internal=True)


def _legacy_class(name, dt):
    return _LegacyStorageMeta(name, (), {"dtype": dt, "__new__": _legacy_new, "__module__": "ember",
                                         "from_file": classmethod(TypedStorage.from_file.__func__),
                                         "__doc__": f"Legacy constructor of CPU TypedStorages of {dt}."})


LEGACY_STORAGE_TYPES = {f"{dt.legacy_name}Storage": _legacy_class(f"{dt.legacy_name}Storage", dt)
                        for dt in _t.ALL_DTYPES}


# ---------------------------------------------------------------------- files
def _file_buf(filename, shared, nbytes):
    filename = os.fspath(filename)
    nbytes = int(nbytes)
    if nbytes < 0:
        raise RuntimeError(f"from_file: the size must be non-negative, got {nbytes}")
    if shared:
        # as torch: a shared mapping creates the file, and extends it to the size asked for
        with open(filename, "ab"):
            pass
        if os.path.getsize(filename) < nbytes:
            os.truncate(filename, nbytes)
        if nbytes == 0:
            return np.zeros((0,), dtype=np.uint8)
        return np.memmap(filename, dtype=np.uint8, mode="r+", shape=(nbytes,))
    if not os.path.exists(filename):
        raise RuntimeError(f"unable to open file <{filename}> in read-only mode: No such file or directory (2)")
    have = os.path.getsize(filename)
    if have < nbytes:
        raise RuntimeError(f"file <{filename}> size <{have}> is smaller than the required mapping size <{nbytes}>")
    if nbytes == 0:
        return np.zeros((0,), dtype=np.uint8)
    # private: a copy-on-write mapping, so writes never reach the file
    return np.memmap(filename, dtype=np.uint8, mode="c", shape=(nbytes,))


def _untyped_from_file(cls, filename, shared=False, nbytes=0):
    """A storage over a file's first ``nbytes`` bytes (memory-mapped: ``shared=True`` writes go to
    the file, which is created/extended as needed; ``shared=False`` is a private copy-on-write map)."""
    return UntypedStorage._wrap(_file_buf(filename, shared, nbytes), _t.cpu)


UntypedStorage.from_file = classmethod(_untyped_from_file)


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False):
    """``ember.from_file``: a 1-d CPU tensor of ``size`` elements over a memory-mapped file."""
    from .ops import api
    dt = _t.get_default_dtype() if dtype is None else _t.as_dtype(dtype)
    if device is not None and _t.as_device(device).type != "cpu":
        raise RuntimeError("ember.from_file: only CPU tensors can map a file; call .to(device) on the result")
    buf = _file_buf(filename, bool(shared), int(size) * dt.itemsize)
    t = api.empty((0,), dtype=dt)
    t.set_(UntypedStorage._wrap(buf, _t.cpu), 0, (int(size),), (1,))
    if requires_grad:
        t.requires_grad_(True)
    return t


def is_storage(obj):
    """True for ember storages (UntypedStorage, TypedStorage and the legacy FloatStorage, ...)."""
    return isinstance(obj, (UntypedStorage, TypedStorage))


# ---------------------------------------------------------------------- Tensor methods
def _untyped_storage(self):
    """The storage this tensor views: for a tensor and all its views, one ``data_ptr()``."""
    return UntypedStorage._of_tensor(self)


def _storage(self):
    """The deprecated TypedStorage of this tensor's dtype (warns once, as PyTorch)."""
    _warn_typed_storage_removal()
    return TypedStorage._of_tensor(self)


def _typed_storage(self):
    return TypedStorage._of_tensor(self)


def _storage_type(self):
    return LEGACY_STORAGE_TYPES[f"{self.dtype.legacy_name}Storage"]


_SET_ERROR = ("set_() received an invalid combination of arguments - got ({got}), but expected one of:\n"
              " * ()\n"
              " * (ember.Storage source)\n"
              " * (ember.Storage source, int storage_offset, tuple of ints size, tuple of ints stride = None)\n"
              " * (Tensor source)\n"
              " * (Tensor source, int storage_offset, tuple of ints size, tuple of ints stride = None)")


def _set(self, source=None, storage_offset=None, size=None, stride=None):
    """``set_()`` (empty), ``set_(storage)``, ``set_(storage, offset, size, stride=None)``,
    ``set_(tensor)``, ``set_(tensor, offset, size, stride=None)``: this tensor views the given
    memory (offset, size and stride in elements of this tensor's dtype)."""
    from .ops.shape_inplace import _check_leaf
    if type(self._data) is FakeArray:
        raise NotImplementedError("ember: set_ on a fake tensor is not supported")
    got = ", ".join(type(a).__name__ for a in (source, storage_offset, size, stride) if a is not None)
    if source is not None and not isinstance(source, (Tensor, UntypedStorage, TypedStorage)):
        raise TypeError(_SET_ERROR.format(got=got))
    if storage_offset is not None and size is None:
        raise TypeError(_SET_ERROR.format(got=got))
    _check_leaf(self, "set_")
    dt = self.dtype
    if source is None:
        buf = _xp(self.device).empty((0,), dtype=np.uint8)
        storage = UntypedStorage._wrap(buf, self.device)
        offset, shape, strides = 0, (0,), (1,)
    elif isinstance(source, Tensor):
        if source.dtype is not dt:
            raise RuntimeError(f"Could not set tensor of type {_ctype(source.dtype)} to a tensor of type "
                               f"{_ctype(dt)}")
        if type(source._data) is FakeArray:
            raise NotImplementedError("ember: set_ to a fake tensor is not supported")
        storage = UntypedStorage._of_tensor(source)
        if size is None:
            offset, shape, strides = source.storage_offset(), tuple(source.shape), source.stride()
        else:
            offset, shape, strides = storage_offset, size, stride
    else:
        if isinstance(source, TypedStorage):
            if source.dtype is not dt:
                raise RuntimeError(f"Expected a Storage of type {_ctype(dt)} or an UntypedStorage, but got type "
                                   f"{source.dtype.legacy_name} for argument 1 'storage'")
            storage = source._untyped_storage
        else:
            storage = source
        if size is None:
            offset, shape, strides = 0, (storage.nbytes() // dt.itemsize,), (1,)
        else:
            offset, shape, strides = storage_offset, size, stride
    if storage.device != self.device:
        raise RuntimeError(f"Attempted to set the storage of a tensor on device \"{self.device}\" to a storage on "
                           f"different device \"{storage.device}\".  This is no longer allowed; the devices must "
                           "match.")
    offset = int(offset)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if stride is None and (size is not None or strides is None):
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        strides = tuple(reversed(strides))
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise RuntimeError(f"unequal size length ({len(shape)}) and stride length ({len(strides)})")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{list(strides)}")
    isz = dt.itemsize
    buf = storage._data("set_")
    need = 0 if 0 in shape else (offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * isz
    if need > buf.size:
        raise RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset {offset}, and "
                           f"itemsize {isz} requiring a storage size of {need} are out of bounds for storage of size "
                           f"{buf.size} (ember cannot grow a storage in place; give set_ a large enough storage)")
    byte_strides = tuple(s * isz for s in strides)
    if isinstance(buf, np.ndarray):
        # (an empty tensor needs no bytes: its offset is kept inside the buffer for numpy)
        boff = min(offset * isz, buf.size) if 0 in shape else offset * isz
        arr = np.ndarray(shape, dtype=dt.np, buffer=buf, offset=boff, strides=byte_strides)
    else:
        import cupy
        arr = cupy.ndarray(shape, dtype=dt.np, memptr=buf.data + offset * isz, strides=byte_strides)
    storage._bound = True
    d = self.__dict__
    d.pop("_base", None)        # a view given new memory is a view no more
    d.pop("_diff_view", None)
    self._data = arr
    d["_sbuf"] = buf
    self._bump_version()
    return self


def _ctype(dt):
    return {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "bool": "bool", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>"}.get(dt.name, dt.name)


def _is_set_to(self, tensor):
    """True when both tensors view the same memory the same way (storage, offset, sizes, strides)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not {type(tensor).__name__}")
    if self.device != tensor.device or self.dtype.itemsize != tensor.dtype.itemsize:
        return False
    a, b = self.untyped_storage(), tensor.untyped_storage()
    return (a.data_ptr() == b.data_ptr() and a.nbytes() == b.nbytes()
            and self.storage_offset() == tensor.storage_offset()
            and tuple(self.shape) == tuple(tensor.shape) and self.stride() == tensor.stride())


Tensor.untyped_storage = _untyped_storage
Tensor.storage = _storage
Tensor._typed_storage = _typed_storage
Tensor.storage_type = _storage_type
Tensor.set_ = _set
Tensor.is_set_to = _is_set_to
for _n, _f in (("untyped_storage", _untyped_storage), ("storage", _storage), ("storage_type", _storage_type),
               ("set_", _set), ("is_set_to", _is_set_to)):
    _f.__name__ = _f.__qualname__ = _n
