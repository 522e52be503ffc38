"""Smaller pieces of torch's top-level API that programs written for torch use as-is:

* the legacy tensor types (``ember.FloatTensor([1, 2])``, ``ember.LongTensor(2, 3)``,
  ``isinstance(t, ember.FloatTensor)``): constructors of CPU tensors of one dtype, whose
  ``isinstance`` is a dtype test (as torch's metaclass check) -- they are not Tensor subclasses;
* the ``sym_*`` helpers (``sym_int``, ``sym_float``, ``sym_max``, ...): Python's operations on
  concrete numbers, and on ember's symbolic sizes (``ember.fx.experimental.symbolic_shapes``)
  ``sym_max``/``sym_min`` stay symbolic, the others decide the value (recording a guard);
* ``histogramdd`` (D-dimensional histograms, torch's edges and bin rules);
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
from .reduction import _return_type

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


_tensor_type = Tensor.type


def _type_accepting_legacy(self, dtype=None, non_blocking=False):
    """``Tensor.type``, also given a legacy type class (``t.type(ember.DoubleTensor)``, as torch)."""
    if isinstance(dtype, _LegacyTensorMeta):
        dtype = dtype.dtype
    return _tensor_type(self, dtype, non_blocking)


_type_accepting_legacy.__name__ = "type"
Tensor.type = _type_accepting_legacy

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


# ---------------------------------------------------------------------- histogramdd
_histogramdd_t = _return_type("histogramdd", ("hist", "bin_edges"))

def _histdd_edges(input, x, bins, range, D):
    """Per innermost-dim bin edges: the given tensors, or ``bins[d]`` equal-width bins over the
    range (the data's min and max when not given, widened by 0.5 each side if empty), in
    torch's linspace arithmetic."""
    from .misc_api import _torch_linspace_f
    if isinstance(bins, Tensor):
        raise TypeError("histogramdd(): argument 'bins' must be an int, a sequence of ints or a sequence of "
                        "Tensors, not Tensor")
    if isinstance(bins, (list, tuple)) and bins and all(isinstance(b, Tensor) for b in bins):
        if len(bins) != D:
            raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the "
                               "input.")
        if range is not None:
            raise TypeError("histogramdd(): argument 'range' is not allowed with a sequence of tensor bins")
        for b in bins:
            if b.ndim != 1:
                raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {b.ndim} "
                                   f"dimensions")
            if b.dtype is not input.dtype:
                raise RuntimeError("torch.histogramdd: input tensor and bins tensors should have the same dtype")
            if b.numel() < 1:
                raise RuntimeError("torch.histogramdd: bins tensor should have at least 1 element, but got 0 "
                                   "elements")
        return [b.detach().clone() for b in bins]
    counts = [bins] * D if isinstance(bins, numbers.Integral) and not isinstance(bins, bool) else list(bins)
    if len(counts) != D:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"histogramdd(): argument 'bins' must be an int or a sequence of ints, got an element "
                            f"of type {type(c).__name__}")
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should have {2 * D} "
                           f"elements, but got {len(range)}")
    edges = []
    for d, c in enumerate(counts):
        if c <= 0:
            raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {c} for dimension {d}")
        if range is not None:
            lo, hi = builtins.float(range[2 * d]), builtins.float(range[2 * d + 1])
        elif x.shape[0]:
            col = x[:, d]
            lo, hi = builtins.float(col.min().item()), builtins.float(col.max().item())
        else:
            lo, hi = 0.0, 1.0        # no data: torch's default range
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd(): min should not exceed max, but got min {lo} max {hi} for "
                               f"dimension {d}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        arr = _torch_linspace_f(lo, hi, int(c) + 1, np.dtype(input.dtype.np))
        edges.append(api.tensor(arr, dtype=input.dtype, device=input.device))
    return edges


@_export
def histogramdd(input, bins, *, range=None, weight=None, density=False, out=None):
    """The D-dimensional histogram of the points in ``input`` (its innermost dim holds the D
    coordinates), as torch: ``bins`` is an int (per dim), D ints or D tensors of edges; a point
    outside the edges (or NaN) is not counted, the last bin of each dim includes its right edge;
    ``weight`` (input's shape less the innermost dim) weighs the points; ``density`` divides by
    the total and the bin volumes. Returns ``(hist, bin_edges)``. Not differentiable."""
    if out is not None:
        raise TypeError("histogramdd(): the out= argument is not supported by ember")
    if not isinstance(input, Tensor):
        raise TypeError(f"histogramdd(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point or input.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{input.dtype.legacy_name[:-6]}'")
    if input.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    D = input.shape[-1]
    x = input.detach().reshape(-1, D)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the same shape as "
                               f"the input tensor excluding its innermost dimension, but got input with shape "
                               f"{list(input.shape)} and weight with shape {list(weight.shape)}")
        if weight.dtype is not input.dtype:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                               "should have the same dtype")
    edges = _histdd_edges(input, x, bins, range, D)
    nbins = [e.numel() - 1 for e in edges]
    total = int(np.prod(nbins, dtype=np.int64))
    result_t = _histogramdd_t
    if total <= 0 or min(nbins, default=0) < 1:
        return result_t(api.zeros(tuple(builtins.max(n, 0) for n in nbins), dtype=input.dtype,
                                  device=input.device), edges)
    flat = api.zeros((x.shape[0],), dtype=_t.int64, device=input.device)
    valid = api.ones((x.shape[0],), dtype=_t.bool_, device=input.device)
    for d, e in enumerate(edges):
        col = x[:, d].contiguous()
        idx = api.clamp(api.searchsorted(e, col, right=True) - 1, 0, nbins[d] - 1)
        valid = valid & (col >= e[0]) & (col <= e[-1])
        flat = flat * nbins[d] + idx
    w = weight.detach().reshape(-1) if weight is not None else api.ones((x.shape[0],), dtype=input.dtype,
                                                                         device=input.device)
    w = api.where(valid, w, api.zeros_like(w))
    hist = api.zeros((total,), dtype=input.dtype, device=input.device).index_add(0, flat, w).reshape(tuple(nbins))
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            shape = [1] * D
            shape[d] = nbins[d]
            hist = hist / (e[1:] - e[:-1]).reshape(tuple(shape))
    return result_t(hist, edges)


_export.install()
