"""Smaller pieces of torch's top-level API that programs written for torch use as-is:

* the legacy tensor types (``ember.FloatTensor([1, 2])``, ``ember.LongTensor(2, 3)``,
  ``isinstance(t, ember.FloatTensor)``): constructors of CPU tensors of one dtype, whose
  ``isinstance`` is a dtype test (as torch's metaclass check) -- they are not Tensor subclasses;
* the ``sym_*`` helpers (``sym_int``, ``sym_float``, ``sym_max``, ...): Python's operations on
  concrete numbers, and on ember's symbolic sizes (``ember.fx.experimental.symbolic_shapes``)
  ``sym_max``/``sym_min`` stay symbolic, the others decide the value (recording a guard);
* ``nonzero_static``, ``Tensor.prelu``, ``Tensor.resize`` / ``resize_as`` (deprecated,
  autograd-aware reshape) and ``ember.resize_as_``, ``Tensor.as_subclass``.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._exports import Exports

_export = Exports()


# ---------------------------------------------------------------------- legacy tensor types
class _LegacyTensorMeta(type):
    """``isinstance(t, ember.FloatTensor)``: ``t`` is a CPU tensor of float32 (torch's check
    is on the tensor's type id, dtype and device, not on its Python class)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __repr__(cls):
        return f"<class 'ember.{cls.__name__}'>"


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) or (
        isinstance(v, Tensor) and v.ndim == 0 and v.dtype.category < 2 and v.dtype is not _t.bool_)


def _legacy_new(cls, args, kwargs):
    """torch's legacy constructor: no argument (an empty 1-d tensor), a tensor of the same dtype
    (an alias of its memory), sizes (ints or one ``Size``: a tensor whose values torch leaves
    uninitialised, zeros here), or one sequence of data."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments: unexpected keyword argument(s) "
                        f"{', '.join(sorted(kwargs))} (only device= is accepted)")
    if device is not None and _t.device(device).type != "cpu":
        raise RuntimeError(f"legacy constructor ember.{cls.__name__} expects device type: cpu but device type: "
                           f"{_t.device(device).type} was passed")
    dt = cls.dtype
    if not args:
        return api.empty((0,), dtype=dt)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor) and not (a.ndim == 0 and _is_int(a)):
            if a.dtype is not dt:
                raise TypeError(f"new(): expected a tensor of dtype {dt.name} (ember.{cls.__name__}), got "
                                f"{a.dtype.name}")
            return a.detach().view(tuple(a.shape))
        if isinstance(a, _t.Size):
            return _legacy_sized(dt, tuple(a))
        if isinstance(a, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(a).__name__}'")
        if isinstance(a, (list, tuple, np.ndarray)):
            return api.tensor(a, dtype=dt)
        if not _is_int(a):
            raise TypeError(f"new(): data must be a sequence (got {type(a).__name__})")
    bad = next((a for a in args if not _is_int(a)), None)
    if bad is not None:
        raise TypeError(f"new(): argument 'size' must be a tuple of ints, but got an element of type "
                        f"{type(bad).__name__}")
    return _legacy_sized(dt, tuple(int(a) for a in args))


def _legacy_sized(dt, shape):
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    return api.zeros(shape, dtype=dt)


def _legacy_type(name, dt):
    def __new__(cls, *args, **kwargs):
        return _legacy_new(cls, args, kwargs)
    doc = (f"``ember.{name}(...)``: a CPU tensor of dtype {dt.name} from data, sizes (zero-filled; torch leaves "
           f"them uninitialised) or a tensor of that dtype (an alias); ``isinstance(t, ember.{name})`` tests the "
           f"dtype and device.")
    return _LegacyTensorMeta(name, (), {"__new__": __new__, "dtype": dt, "is_cuda": False, "is_sparse": False,
                                        "__doc__": doc, "__module__": "ember"})


LEGACY_TENSOR_TYPES = {name: _legacy_type(name, dt) for name, dt in [
    ("FloatTensor", _t.float32), ("DoubleTensor", _t.float64), ("HalfTensor", _t.float16),
    ("BFloat16Tensor", _t.bfloat16), ("LongTensor", _t.int64), ("IntTensor", _t.int32),
    ("ShortTensor", _t.int16), ("CharTensor", _t.int8), ("ByteTensor", _t.uint8), ("BoolTensor", _t.bool_)]}
for _name, _cls in LEGACY_TENSOR_TYPES.items():
    _export.functions[_name] = _cls


# ---------------------------------------------------------------------- sym_* helpers
def _symbolic():
    from ..fx.experimental import symbolic_shapes as ss
    return ss


def _is_sym(x):
    ss = _symbolic()
    return isinstance(x, (ss.SymInt, ss.SymBool))


_NUMBERS = (int, float, np.integer, np.floating)


def _check_number(x):
    if not isinstance(x, _NUMBERS) and not _is_sym(x):
        raise AssertionError(f"expected {_NUMBERS + (_symbolic().SymInt,)}, got {type(x)}")


@_export
def sym_float(a):
    """``float(a)``; an ember SymInt is decided (guarded) first: ember has no symbolic floats."""
    return builtins.float(a)


@_export
def sym_int(a):
    """``int(a)`` (truncating a float, as torch); an ember SymInt is returned as is."""
    if isinstance(a, _symbolic().SymInt):
        return a
    if isinstance(a, float):
        return builtins.int(math.trunc(a))
    return builtins.int(a)


def _sym_extreme(a, b, pick, name):
    ss = _symbolic()
    if isinstance(a, ss.SymInt) or isinstance(b, ss.SymInt):
        if isinstance(a, float) or isinstance(b, float):
            return builtins.float(pick(builtins.float(a), builtins.float(b)))
        return (ss.sym_max if name == "max" else ss.sym_min)(a, b)      # stays symbolic (Max/Min)
    _check_number(a)
    _check_number(b)
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return builtins.float(pick(a, b))
    return pick(a, b)


@_export
def sym_max(a, b):
    """``max(a, b)``: a float when either is a float (torch); symbolic for ember SymInts."""
    return _sym_extreme(a, b, builtins.max, "max")


@_export
def sym_min(a, b):
    """``min(a, b)``: a float when either is a float (torch); symbolic for ember SymInts."""
    return _sym_extreme(a, b, builtins.min, "min")


@_export
def sym_not(a):
    """``not a``; an ember SymBool stays symbolic (its negation)."""
    if isinstance(a, _symbolic().SymBool):
        return ~a
    return not a


@_export
def sym_ite(b, t, f):
    """``t if b else f``: ``b`` must be a bool (or an ember SymBool, decided with a guard) and
    ``t`` and ``f`` of one type, as torch asserts."""
    if not (isinstance(b, bool) or isinstance(b, _symbolic().SymBool)):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


@_export
def sym_sqrt(a):
    """``math.sqrt(a)`` (a float; ValueError for a negative number, as torch)."""
    return math.sqrt(a)


@_export
def sym_sum(args):
    """The sum of an iterable of numbers or sizes (ember SymInts add symbolically)."""
    return builtins.sum(args)


# ---------------------------------------------------------------------- nonzero_static
@_export(method=True)
def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` with a fixed number of rows: the first ``size`` indices, padded with
    ``fill_value`` rows when there are fewer (so its shape does not depend on the data)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"nonzero_static(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    for name, v in (("size", size), ("fill_value", fill_value)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"nonzero_static(): argument '{name}' must be int, not {type(v).__name__}")
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    idx = api.nonzero(input)
    n = idx.shape[0]
    if n >= size:
        return idx[:size].clone()
    pad = api.full((size - n, input.ndim), fill_value, dtype=_t.int64, device=input.device)
    return api.cat([idx, pad], 0)


# ---------------------------------------------------------------------- Tensor methods
def _prelu_method(self, weight):
    """``self.prelu(weight)`` = ``F.prelu(self, weight)``."""
    from ..nn import functional as F
    return F.prelu(self, weight)


def _resize_sizes(sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, _t.Size)):
        sizes = tuple(sizes[0])
    return tuple(int(s) for s in sizes)


def _autograd_resize(self, sizes):
    n = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if self.numel() != n:
        have = "x".join(str(s) for s in self.shape)
        raise RuntimeError(f"requested resize to {'x'.join(str(s) for s in sizes)} ({n} elements in total), but "
                           f"the given tensor has a size of {have} ({self.numel()} elements). autograd's resize "
                           f"can only change the shape of a given tensor, while preserving the number of "
                           f"elements. ")
    return self.contiguous().view(sizes)


def _resize_method(self, *sizes):
    """Deprecated out-of-place resize (torch's autograd ``Resize``): a reshape that keeps the
    number of elements, differentiable."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _autograd_resize(self, _resize_sizes(sizes))


def _resize_as_method(self, tensor):
    """Deprecated out-of-place ``resize_as``: ``self.resize(tensor.size())``."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _autograd_resize(self, tuple(tensor.shape))


@_export
def resize_as_(input, the_template, *, memory_format=None):
    """``input.resize_as_(the_template)``: ``input`` takes the template's sizes in place."""
    if not isinstance(input, Tensor) or not isinstance(the_template, Tensor):
        bad = input if not isinstance(input, Tensor) else the_template
        raise TypeError(f"resize_as_(): arguments 'input' and 'the_template' must be Tensor, not "
                        f"{type(bad).__name__}")
    return input.resize_as_(the_template, memory_format=memory_format)


def _as_subclass(self, cls):
    """A tensor of class ``cls`` (a Tensor subclass) sharing ``self``'s memory and attached to
    its autograd graph (a view of it)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                        "possible. Make sure your class inherits from Tensor.")
    out = self.view_as(self)
    out.__class__ = cls
    return out


_export.install()
Tensor.prelu = _prelu_method
Tensor.resize = _resize_method
Tensor.resize_as = _resize_as_method
Tensor.as_subclass = _as_subclass
