"""A numpy-backed stand-in for the ``cupy`` module -- a test double, used only by
the tests under ``tests/cuda_device`` (no GPU and no cupy in CI).

What it models, from cupy 14's documented behaviour (docs.cupy.dev):

* ``cupy.ndarray`` is a distinct array type (here a wrapper around a numpy
  array, the "device memory"): ember must never mistake it for a numpy array;
* no implicit device -> host conversion: ``np.asarray(a)`` /``a.__array__()``
  raise ``TypeError`` ("Implicit conversion to a NumPy array is not allowed"),
  ``a.get()`` / ``cupy.asnumpy(a)`` copy to the host;
* cupy functions, ufuncs and operators refuse numpy arrays mixed with device
  arrays (``TypeError: Unsupported type <class 'numpy.ndarray'>``); host data
  enters only through ``cupy.asarray`` / ``cupy.array`` (a copy);
* ufuncs are objects with ``at``, ``reduce``, ``accumulate``, ``reduceat`` and
  ``outer`` (``cupy.ufunc``; the stand-in offers ``at`` for every ufunc, cupy
  only for those with a scatter operation: add, subtract, maximum, minimum ...);
* numpy functions called on device arrays dispatch to cupy (NEP 13/18
  ``__array_ufunc__`` / ``__array_function__``), as cupy implements them;
* reductions return 0-d device arrays, not numpy scalars;
* ``a.flags`` with ``c_contiguous``, ``f_contiguous`` and ``owndata`` only (no ``writeable``);
* ``a.data.ptr`` (a device pointer; here the host buffer's address),
  ``__cuda_array_interface__``, no ``__array_interface__`` and no ``ctypes``;
* ``cupy.cuda``: ``runtime.getDeviceCount``, ``Device`` (``use``,
  ``synchronize``, ``compute_capability``, context manager), ``Stream``
  (``null``, ``ptr``, ``use``, context manager, ``synchronize``, ``record``,
  ``wait_event``, ``done``), ``get_current_stream``, ``Event`` (``record``,
  ``synchronize``, ``done``), ``get_elapsed_time``;
* ``get_default_memory_pool()`` with ``used_bytes`` (bytes of live arrays),
  ``total_bytes`` (used + cached free blocks: freed memory stays reserved until
  ``free_all_blocks``), ``free_bytes``.

What it does NOT model: real asynchrony (every call runs to completion at once,
so the tests check which synchronisation calls happen, not that they are
needed), cupy's own dtype rules where they differ from numpy's, numerical
differences of GPU kernels, the CUDA driver, Triton launches on a GPU. Whatever
the tests verify through this module is verified against this stand-in only.
"""
from __future__ import annotations

import contextlib
import operator
import time
import types
import weakref

import numpy as np

__version__ = "14.0.0+ember-test-double"

_HOST_OK = {"asarray", "array", "asnumpy", "ascontiguousarray"}


class UnsupportedHostArray(TypeError):
    pass


def _refuse(x):
    raise UnsupportedHostArray(f"Unsupported type {type(x)}")


def _unwrap(x):
    """Device arrays to their buffers; numpy arrays refused (cupy does not mix them)."""
    if isinstance(x, ndarray):
        return x._a
    if type(x) is np.ndarray:
        _refuse(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return ndarray(x)
    if isinstance(x, np.generic):
        return ndarray(np.asarray(x))  # cupy reductions give 0-d device arrays
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _call(fn, args, kwargs):
    return _wrap(fn(*_unwrap(args), **_unwrap(kwargs)))


# ----------------------------------------------------------------------- memory pool
class MemoryPool:
    def __init__(self):
        self._live = {}          # id(root buffer) -> nbytes
        self._cached = 0         # freed bytes kept reserved until free_all_blocks

    def _track(self, arr):
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if root.base is not None or id(root) in self._live:
            return
        self._live[id(root)] = root.nbytes
        weakref.finalize(root, self._release, id(root))

    def _release(self, key):
        n = self._live.pop(key, 0)
        self._cached += n

    def used_bytes(self):
        return sum(self._live.values())

    def free_bytes(self):
        return self._cached

    def total_bytes(self):
        return self.used_bytes() + self._cached

    def free_all_blocks(self, stream=None):
        self._cached = 0


_pool = MemoryPool()


def get_default_memory_pool():
    return _pool


# ----------------------------------------------------------------------- the array
class _MemoryPointer:
    __slots__ = ("ptr", "device")

    def __init__(self, ptr, device):
        self.ptr = ptr
        self.device = device


class ndarray:
    """A device array of the stand-in (see the module docstring)."""
    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, a):
        if not isinstance(a, np.ndarray):
            raise TypeError("the stand-in's ndarray wraps a numpy buffer")
        object.__setattr__(self, "_a", a)
        _pool._track(a)

    # -- no implicit host conversion -----------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = getattr(ufunc, method)
        return _call(fn, inputs, kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        return _call(func, args, kwargs)

    # -- cupy-only API -------------------------------------------------------------
    def get(self, stream=None, order="C", out=None):
        return np.array(self._a, order=order, copy=True)

    @property
    def data(self):
        return _MemoryPointer(self._a.__array_interface__["data"][0], cuda.Device())

    @property
    def device(self):
        return cuda.Device()

    @property
    def flags(self):
        # cupy's Flags has these three only: no ``writeable`` (device arrays always are)
        f = self._a.flags
        return types.SimpleNamespace(c_contiguous=f.c_contiguous, f_contiguous=f.f_contiguous,
                                     owndata=f.owndata)

    @property
    def __cuda_array_interface__(self):
        d = dict(self._a.__array_interface__)
        d["version"] = 3
        d["stream"] = cuda.get_current_stream().ptr or 1
        return d

    def __getattr__(self, name):
        if name.startswith("__array") or name == "ctypes":
            raise AttributeError(name)
        v = getattr(self._a, name)
        if callable(v):
            return lambda *a, **k: _call(v, a, k)
        return _wrap(v)

    def __setattr__(self, name, value):
        setattr(self._a, name, value)   # shape = ..., strides = ...

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap_key(key)])

    def __setitem__(self, key, value):
        self._a[_unwrap_key(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(v) for v in self._a)

    def __bool__(self):
        return bool(self._a)

    def __int__(self):
        return int(self._a)

    def __float__(self):
        return float(self._a)

    def __index__(self):
        return operator.index(self._a)

    def __complex__(self):
        return complex(self._a)

    def __repr__(self):
        return repr(self._a)

    def __str__(self):
        return str(self._a)

    def __format__(self, spec):
        return format(self._a, spec)

    def __copy__(self):
        return ndarray(self._a.copy())

    def __deepcopy__(self, memo):
        return ndarray(self._a.copy())

    def __reduce__(self):
        raise TypeError("the stand-in's device arrays are not picklable")


def _unwrap_key(key):
    # indices may be device arrays; host index arrays are accepted too (cupy converts them)
    if isinstance(key, ndarray):
        return key._a
    if isinstance(key, tuple):
        return tuple(_unwrap_key(k) for k in key)
    return key


def _binop(name):
    op = getattr(operator, name)

    def f(self, other):
        return _wrap(op(self._a, _unwrap(other)))
    f.__name__ = f"__{name.rstrip('_')}__"
    return f


def _rbinop(name):
    op = getattr(operator, name)

    def f(self, other):
        return _wrap(op(_unwrap(other), self._a))
    return f


def _ibinop(name):
    op = getattr(operator, name)

    def f(self, other):
        op(self._a, _unwrap(other))
        return self
    return f


for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift",
           "rshift"):
    _d = _n.rstrip("_")
    setattr(ndarray, f"__{_d}__", _binop(_n))
    setattr(ndarray, f"__r{_d}__", _rbinop(_n))
    setattr(ndarray, f"__i{_d}__", _ibinop("i" + _n if not _n.endswith("_") else "i" + _d))
for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(ndarray, f"__{_n}__", _binop(_n))
for _n in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_n}__", (lambda op: lambda self: _wrap(op(self._a)))(getattr(operator, _n)))
ndarray.__hash__ = None


# ----------------------------------------------------------------------- cuda
class CUDARuntimeError(RuntimeError):
    pass


class _Runtime:
    CUDARuntimeError = CUDARuntimeError
    device_count = 1

    def getDeviceCount(self):
        if self.device_count == 0:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return self.device_count

    def getDeviceProperties(self, i):
        return {"name": b"ember test double (numpy)", "major": 9, "minor": 0, "totalGlobalMem": 80 << 30}


class Device:
    current = 0
    synchronizations = 0

    def __init__(self, device=None):
        self.id = Device.current if device is None else int(device)
        self._prev = []

    @property
    def compute_capability(self):
        return "90"

    def use(self):
        Device.current = self.id

    def synchronize(self):
        Device.synchronizations += 1

    def __enter__(self):
        self._prev.append(Device.current)
        self.use()
        return self

    def __exit__(self, *exc):
        Device.current = self._prev.pop()

    def __int__(self):
        return self.id

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.disable_timing = disable_timing
        self.t = None
        self.synchronized = 0

    def record(self, stream=None):
        self.t = time.perf_counter()
        self.stream = stream

    def synchronize(self):
        self.synchronized += 1

    @property
    def done(self):
        return True


class Stream:
    _next_ptr = 0x1000
    _stack = []
    null = None  # set below

    def __init__(self, null=False, non_blocking=False, ptr=0):
        if null:
            self.ptr = 0
        elif ptr:
            self.ptr = ptr
        else:
            Stream._next_ptr += 0x10
            self.ptr = Stream._next_ptr
        self.synchronizations = 0
        self.waited = []

    def synchronize(self):
        self.synchronizations += 1

    def use(self):
        _current[0] = self
        return self

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        self.waited.append(event)

    @property
    def done(self):
        return True

    def __enter__(self):
        Stream._stack.append(_current[0])
        self.use()
        return self

    def __exit__(self, *exc):
        _current[0] = Stream._stack.pop()

    def __repr__(self):
        return f"<Stream {self.ptr} (device {Device.current})>"


class ExternalStream(Stream):
    def __init__(self, ptr, device_id=-1):
        super().__init__(ptr=ptr)


Stream.null = Stream(null=True)
_current = [Stream.null]


def get_current_stream(device_id=-1):
    return _current[0]


def get_elapsed_time(start, end):
    if start.disable_timing or end.disable_timing or start.t is None or end.t is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle")
    return (end.t - start.t) * 1000.0


cuda = types.SimpleNamespace(runtime=_Runtime(), Device=Device, Stream=Stream, ExternalStream=ExternalStream,
                             Event=Event, get_current_stream=get_current_stream, get_elapsed_time=get_elapsed_time,
                             CUDARuntimeError=CUDARuntimeError, MemoryPool=MemoryPool)


# ----------------------------------------------------------------------- module functions
def asarray(a, dtype=None, order=None, *, blocking=False):
    if isinstance(a, ndarray):
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    return ndarray(np.array(a, dtype=dtype, order=order or "K", copy=True))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if isinstance(obj, ndarray):
        return ndarray(np.array(obj._a, dtype=dtype, copy=copy, order=order, ndmin=ndmin))
    return ndarray(np.array(obj, dtype=dtype, copy=True, order=order, ndmin=ndmin))


def ascontiguousarray(a, dtype=None):
    if type(a) is np.ndarray:
        _refuse(a)
    return _wrap(np.ascontiguousarray(_unwrap(a), dtype=dtype))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if isinstance(a, ndarray):
        return a.get()
    return np.asarray(a, order=order)


def get_array_module(*args):
    import sys
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


class _UFunc:
    """A cupy.ufunc: call, ``at``, ``reduce``, ``accumulate``, ``reduceat``, ``outer``."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout, self.nargs = uf.nin, uf.nout, uf.nargs

    def __call__(self, *a, **k):
        return _call(self._uf, a, k)

    def at(self, a, indices, b=None):
        if not isinstance(a, ndarray):
            _refuse(a)
        args = (a._a, _unwrap_key(indices)) + (() if b is None else (_unwrap(b),))
        self._uf.at(*args)

    def __getattr__(self, name):
        if name in ("reduce", "accumulate", "reduceat", "outer"):
            fn = getattr(self._uf, name)
            return lambda *a, **k: _call(fn, a, k)
        raise AttributeError(name)


class _Proxy(types.ModuleType):
    """numpy's namespace (or a submodule of it) as device functions."""

    def __init__(self, name, target):
        super().__init__(name)
        self._target = target

    def __getattr__(self, name):
        v = getattr(self._target, name)
        if isinstance(v, types.ModuleType):
            sub = _Proxy(f"{self.__name__}.{name}", v)
            setattr(self, name, sub)
            return sub
        if isinstance(v, np.ufunc):
            f = _UFunc(v)
            setattr(self, name, f)
            return f
        if callable(v) and not isinstance(v, type):
            f = (lambda fn: lambda *a, **k: _call(fn, a, k))(v)
            f.__name__ = name
            setattr(self, name, f)
            return f
        return v


_np_proxy = _Proxy("cupy", np)


def __getattr__(name):
    """Everything else: numpy's function of that name over device arrays."""
    return getattr(_np_proxy, name)


def reset():
    """Fresh counters (the fixture calls this per test)."""
    _pool._live.clear()
    _pool._cached = 0
    Device.current = 0
    Device.synchronizations = 0
    _current[0] = Stream.null
    Stream._stack.clear()
    cuda.runtime.device_count = 1


@contextlib.contextmanager
def no_device():
    """cupy imports, but the driver finds no GPU."""
    cuda.runtime.device_count = 0
    try:
        yield
    finally:
        cuda.runtime.device_count = 1
