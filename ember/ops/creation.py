"""Creation ops: tensor, zeros/ones/full/empty (+ _like), arange, linspace, eye,
and the random family (rand, randn, randint, randperm, normal_, uniform_, ...).

Factories with ``*size`` varargs are thin Python entry points that normalise
their arguments and call one registry record (``full``, ``_random``, ...).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _mt19937 as _mt
from .. import random as _random
from .. import types as _t
from .._fake import FakeArray
from .._state import STATE
from ..tensor import Tensor, _make
from . import _meta, api
from ._helpers import _canonical_c, half_source, is_scalar
from .checked_scalar import check_fits, checked_array
from .registry import defop
from .._torch_function import FAST_CLASSES as _FAST, PASS as _PASS, _ACTIVE as _TF, python_entry as _entry


def _is_symint(s):
    return type(s).__name__ == "SymInt" and hasattr(s, "expr")


def _keyword_size(shape, size, fn):
    """``zeros(size=(2, 3))``: torch's keyword spelling of the sizes (not with positional ones)."""
    if shape:
        raise TypeError(f"{fn}() received an invalid combination of arguments - got both positional sizes "
                        f"{tuple(shape)} and size={size!r}")
    return (size,)


def _size_args(size, fn="zeros"):
    """zeros(2, 3), zeros((2, 3)), zeros([2, 3]), zeros(ember.Size(...))."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if _is_symint(s):       # a symbolic size (fake tensors): kept as it is
            out.append(s)
            continue
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _dt(dtype, default=None):
    if dtype is None:
        return default if default is not None else _t.get_default_dtype()
    return _t.as_dtype(dtype)


def _sparse_layout(name, size, dtype, requires_grad, layout):
    """``zeros``/``ones``/``empty`` with a sparse ``layout=`` (ember/sparse/_install.py's factory
    routing, checked in the factory's own body so the dense call has no extra frame)."""
    from ..sparse._install import _factory_impl
    return _factory_impl(name, name != "ones")(*size, dtype=dtype, requires_grad=requires_grad, layout=layout)


def _with_out(fn, name, args, kwargs, out):
    """A factory called with ``out=`` (``ember/ops/_out.py``: made in ``out``'s dtype and on its
    device unless given, then written into ``out``). The factories handle it themselves instead
    of behind a wrapper, so their common call has no extra frame."""
    from ._out import factory_with_out
    return factory_with_out(fn, args, kwargs, out, name)


def _pinned(t, pin_memory):
    """``pin_memory=True`` of a factory (``ember/_pinned.py``: torch's CPU-build error without an
    accelerator)."""
    from .._pinned import for_factory
    return for_factory(t, pin_memory)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _scalar_dtype(v):
    cat = _t.scalar_category(v)
    return _t.default_for_category(cat)


# ---------------------------------------------------------------------- full / zeros / ones / empty
@defop("full(int[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
       method=False, tags=("nondifferentiable",))
def full(xp, size, fill_value, dtype=None, device=None):
    dt = _dt(dtype, _scalar_dtype(fill_value))
    if dt._limited == "float8":
        from .limited_dtypes import float8_full_value
        fill_value = float8_full_value(xp, size, fill_value, dt)
    return xp.full(tuple(size), checked_array(xp, fill_value, dt), dtype=dt.np)



def _check_size(size):
    """numpy's check in ``xp.full``/``xp.empty`` (the public entry points raise PyTorch's error first)."""
    if any(isinstance(n, int) and n < 0 for n in size):
        raise ValueError("negative dimensions are not allowed")


@full.meta_fn
def _full_meta(size, fill_value, dtype=None, device=None):
    """A fresh C-ordered buffer; sizes may be symbolic. The device comes from ``device`` (fake mode)."""
    _check_size(size)
    dt = _dt(dtype, _scalar_dtype(fill_value))
    _meta.check_fill_value(fill_value, dt)
    return _meta.out(tuple(size), dt)
_full = full.binding


def _full_entry(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None, layout=None,
                pin_memory=False):
    if _TF[0] and (_r := _entry(_full_entry, locals())) is not _PASS:
        return _r
    if isinstance(size, numbers.Integral):
        size = (size,)
    size = _size_args(tuple(size), "full")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    return _pinned(_finish(_full(size, fill_value, dtype=None if dtype is None else _t.as_dtype(dtype),
                                 device=device), requires_grad), pin_memory)


_full_entry.__name__ = "full"     # what a TorchFunctionMode sees it as (pickled by its qualname)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad=False, out=None, layout=None, pin_memory=False):
    if _TF[0] and (_r := _entry(zeros, locals())) is not _PASS:
        return _r
    size = shape if size is None else _keyword_size(shape, size, "zeros")
    if layout is not None and layout != "strided":
        return _sparse_layout("zeros", size, dtype, requires_grad, layout)
    if out is not None:
        return _with_out(zeros, "zeros", size, dict(dtype=dtype, device=device, requires_grad=requires_grad,
                                                    layout=layout, pin_memory=pin_memory), out)
    try:
        size = _size_args(size, "zeros")
    except RuntimeError as e:                          # (torch's zeros words its own check)
        if "negative dimension" in str(e):
            raise RuntimeError("zeros: Dimension size must be non-negative.") from None
        raise
    t = _finish(_full(size, 0.0 if _dt(dtype).is_floating_point else 0,
                      dtype=_dt(dtype), device=device), requires_grad)
    return _pinned(t, pin_memory) if pin_memory else t


def ones(*shape, size=None, dtype=None, device=None, requires_grad=False, out=None, layout=None, pin_memory=False):
    if _TF[0] and (_r := _entry(ones, locals())) is not _PASS:
        return _r
    size = shape if size is None else _keyword_size(shape, size, "ones")
    if layout is not None and layout != "strided":
        return _sparse_layout("ones", size, dtype, requires_grad, layout)
    if out is not None:
        return _with_out(ones, "ones", size, dict(dtype=dtype, device=device, requires_grad=requires_grad,
                                                  layout=layout, pin_memory=pin_memory), out)
    t = _finish(_full(_size_args(size, "ones"), 1, dtype=_dt(dtype), device=device), requires_grad)
    return _pinned(t, pin_memory) if pin_memory else t


@defop("empty(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor", method=False,
       tags=("nondifferentiable",))
def _empty(xp, size, dtype=None, device=None):
    return xp.empty(tuple(size), dtype=_dt(dtype).np)


@_empty.meta_fn
def _empty_meta(size, dtype=None, device=None):
    _check_size(size)
    return _meta.out(tuple(size), _dt(dtype))


def empty(*shape, size=None, dtype=None, device=None, requires_grad=False, out=None, layout=None, pin_memory=False,
          memory_format=None):
    if _TF[0] and (_r := _entry(empty, locals())) is not _PASS:
        return _r
    size = shape if size is None else _keyword_size(shape, size, "empty")
    if layout is not None and layout != "strided":
        return _sparse_layout("empty", size, dtype, requires_grad, layout)
    if out is not None:
        return _with_out(empty, "empty", size, dict(dtype=dtype, device=device, requires_grad=requires_grad,
                                                    layout=layout, pin_memory=pin_memory,
                                                    memory_format=memory_format), out)
    if memory_format == "channels_last" or memory_format == "channels_last_3d":
        # NHWC / NDHWC: made in memory order, viewed back in NCHW order (ember/_memory_format.py)
        from .._memory_format import ORDER, check_rank
        shape = tuple(_size_args(size, "empty"))
        check_rank(memory_format, len(shape))
        order = ORDER[memory_format.value if not isinstance(memory_format, str) else memory_format]
        t = _empty.binding(tuple(shape[d] for d in order), dtype=_dt(dtype), device=device)
        return _pinned(_finish(_in_order(t, order, made_in_order=True), requires_grad), pin_memory)
    t = _finish(_empty.binding(_size_args(size, "empty"), dtype=_dt(dtype), device=device), requires_grad)
    return _pinned(t, pin_memory) if pin_memory else t


zeros._ember_out = ones._ember_out = empty._ember_out = True      # (ember/ops/_out.py leaves them unwrapped)
# (and ember/sparse/_install.py leaves their layout= routing to them)
zeros._ember_routes_layout = ones._ember_routes_layout = empty._ember_routes_layout = True


def _like_order(input, memory_format):
    """The dim order (outermost first) of a ``*_like`` factory's result, or None for row-major.

    PyTorch's default, ``preserve_format``, lays the result out as ``empty_like(input)``: a
    transposed or NHWC input gives a transposed or NHWC result (``_meta.preserve_strides``).
    A row-major input (the common case) is decided by a flag test."""
    if memory_format is None or memory_format == "preserve_format":
        d = input._data
        if type(d) is np.ndarray and _canonical_c(d):
            return None
        shape, st = _meta.layout(input)
        st = [_meta._hint(x) for x in _meta.preserve_strides(shape, st)]
        order = tuple(sorted(range(len(st)), key=lambda i: -st[i]))
    elif memory_format == "channels_last":
        if input.ndim != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        order = (0, 2, 3, 1)
    elif memory_format == "channels_last_3d":
        if input.ndim != 5:
            raise RuntimeError("required rank 5 tensor to use channels_last_3d format")
        order = (0, 2, 3, 4, 1)
    elif memory_format == "contiguous_format":
        return None
    else:
        raise RuntimeError(f"unsupported memory_format {memory_format!r}")
    return None if order == tuple(range(len(order))) else order


def _in_order(t, order, made_in_order=False):
    """Row-major ``t`` laid out in dim ``order`` (None: ``t`` itself). ``made_in_order``: ``t``
    was made with its dims already in that order (a constant fill, which can be made so
    directly), else its values are rearranged. The final clone makes a tensor that owns its
    memory (a permuted view would report the base it came from)."""
    if order is None:
        return t
    inv = tuple(sorted(range(len(order)), key=lambda d: order[d]))
    if not made_in_order:
        # (a copy with fresh row-major strides: contiguous() would keep an N,C,1,1 view as it is)
        t = t.permute(order).clone(memory_format="contiguous_format")
    return t.permute(inv).clone()


def _like(fn):
    def like(input, *args, dtype=None, device=None, requires_grad=False, layout=None, memory_format=None):
        if input.__class__ not in _FAST and (_r := _entry(like, locals(), input)) is not _PASS:
            return _r
        if not isinstance(input, Tensor):
            raise TypeError(f"{fn.__name__}_like(): argument 'input' must be Tensor, not {type(input).__name__}")
        d = input._data
        if memory_format is None and type(d) is np.ndarray and d.flags.c_contiguous and 1 not in d.shape:
            # a row-major input (the common case): a row-major result, tested inline (it is hot)
            return fn(tuple(input.shape), *args, dtype=dtype or input.dtype, device=device or input.device,
                      requires_grad=requires_grad)
        order = _like_order(input, memory_format)
        shape = tuple(input.shape)
        if order is not None:
            shape = tuple(shape[d] for d in order)
        t = fn(shape, *args, dtype=dtype or input.dtype, device=device or input.device)
        return _finish(_in_order(t, order, made_in_order=True), requires_grad)
    # a module-level name (zeros_like, ...): graphs that call it can be keyed, cached and
    # pickled by reference (the aot and FX graph caches refuse closures they cannot name)
    like.__name__ = like.__qualname__ = fn.__name__ + "_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
              memory_format=None):
    if input.__class__ not in _FAST and (_r := _entry(full_like, locals(), input)) is not _PASS:
        return _r
    order = _like_order(input, memory_format)
    shape = tuple(input.shape)
    if order is not None:
        shape = tuple(shape[d] for d in order)
    t = _full_entry(shape, fill_value, dtype=dtype or input.dtype, device=device or input.device)
    return _finish(_in_order(t, order, made_in_order=True), requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    if _TF[0] and (_r := _entry(scalar_tensor, locals())) is not _PASS:
        return _r
    return _full_entry((), s, dtype=dtype or _t.get_default_dtype(), device=device,
                       requires_grad=requires_grad)


def scalar_tensor_like(s, like):
    """A 0-d tensor for a Python number on ``like``'s device, typed as a wrapped number."""
    if isinstance(s, Tensor):
        return s
    return _full((), s, dtype=_scalar_dtype(s), device=like.device)


# ---------------------------------------------------------------------- tensor()
def _infer_array(data):
    if isinstance(data, Tensor):
        return data._data.copy(), data.dtype, data.device
    if isinstance(data, np.ndarray):
        return data.copy(), _t.from_numpy_dtype(data.dtype), None
    if isinstance(data, (np.generic,)):
        arr = np.asarray(data)
        return arr, _t.from_numpy_dtype(arr.dtype), None
    if isinstance(data, (list, tuple)):
        data = _flatten_tensors(data)
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"expected sequence of equal-length lists to build a tensor ({e})") from None
    if arr.dtype == object:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}: expected numbers or nested lists "
                        "of numbers")
    if arr.dtype.kind == "f":
        dt = _t.get_default_dtype()
    elif arr.dtype.kind in "iu":
        dt = _t.int64
    elif arr.dtype.kind == "b":
        dt = _t.bool_
    elif arr.dtype.kind == "c":
        dt = _t.default_complex_dtype()
    else:
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    return arr, dt, None


def _flatten_tensors(data):
    if isinstance(data, Tensor):
        if data._data.ndim == 0:
            return data.item()
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_flatten_tensors(d) for d in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copy ``data`` (number, nested lists, numpy array, Tensor) into a new leaf tensor."""
    if _TF[0] and (_r := _entry(tensor, locals())) is not _PASS:
        return _r
    arr, dt, dev = _infer_array(data)
    if dtype is not None:
        dt = _t.as_dtype(dtype)
        if dt.category == 1 and arr.size and arr.dtype.kind in "iuf" and not isinstance(
                data, (Tensor, np.ndarray, np.generic)):
            # Python numbers are checked as PyTorch's (tensor([300], dtype=int8) raises; arrays wrap)
            for v in (arr.min(), arr.max()):
                check_fits(v.item(), dt, tensor_names=True)
    if dt._limited == "float8" and arr.dtype != dt.np:   # torch's rounding (saturating e4m3fn, e8m0fnu)
        from .._float8 import to_float8
        arr = to_float8(arr, dt.np)
    if arr.dtype != dt.np:              # torch's conversion paths (float16 from float64, bfloat16 to ints)
        arr = half_source(arr, dt.np)
    arr = np.asarray(arr, dtype=dt.np, order="C") if isinstance(arr, np.ndarray) else arr.astype(dt.np)
    dev = _t.as_device(device) if device is not None else (dev or STATE.default_device)
    if dev.type == "meta" or isinstance(arr, FakeArray):
        arr = _on_meta(arr, dev)
    elif dev.type == "cuda":
        from .registry import xp_of
        arr = xp_of(dev).asarray(arr)
    out = _make(arr, dev, dt)
    if requires_grad:
        if dt.category < 2:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        out._requires_grad = True
    return _pinned(out, pin_memory) if pin_memory else out


def _on_meta(arr, dev):
    """``tensor(data, device="meta")`` keeps the shape and dtype of the data, not the values;
    data that is itself on the meta device cannot go anywhere else."""
    if dev.type != "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    return FakeArray(arr.shape, arr.dtype)


def as_tensor(data, dtype=None, device=None):
    if _TF[0] and (_r := _entry(as_tensor, locals())) is not _PASS:
        return _r
    if isinstance(data, Tensor):
        out = data
        if dtype is not None or device is not None:
            out = out.to(dtype=dtype, device=device)
        return out
    if isinstance(data, np.ndarray) and (dtype is None or _t.as_dtype(dtype).np == data.dtype) \
            and (device is None or _t.as_device(device).type == "cpu"):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr):
    """Share ``arr``'s memory (writes through in both directions)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if any(s < 0 for s in arr.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with "
                         "negative strides are not currently supported. (You can probably work around "
                         "this by making a copy of your array  with array.copy().)")
    if any(s % arr.itemsize for s in arr.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the "
                         "numpy array to reallocate the memory.")
    return _make(arr, _t.cpu)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    if _TF[0] and (_r := _entry(asarray, locals())) is not _PASS:
        return _r
    if copy:
        return tensor(obj, dtype=dtype, device=device, requires_grad=requires_grad)
    return _finish(as_tensor(obj, dtype=dtype, device=device), requires_grad)


# ---------------------------------------------------------------------- ranges
def _num(x):
    return x.item() if isinstance(x, Tensor) else x


def _symbolic(v):
    return hasattr(v, "expr") and hasattr(v, "env")


def _arange_symbolic(start, end, step, dtype, device, requires_grad):
    """``arange`` with a symbolic size among its integer bounds (``arange(x.shape[1])`` while
    tracing with dynamic shapes): the ``iota`` prim, whose length stays a size expression, so
    the traced graph computes it from its inputs instead of baking in a constant."""
    from ..prims import iota
    if not all(isinstance(v, numbers.Integral) or _symbolic(v) for v in (start, end, step)):
        # a float bound: the length needs a float division of the size; specialise it (a guard)
        return arange(*[int(v) if _symbolic(v) else v for v in (start, end, step)], dtype=dtype,
                      device=device, requires_grad=requires_grad)
    step = int(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    n = (end - start + step - 1) // step if step > 0 else (start - end - step - 1) // (-step)
    if n < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    dt = _t.as_dtype(dtype) if dtype is not None else _t.int64
    if _symbolic(start):
        # a symbolic start (``arange(pos, pos + T)`` in a decode step whose position is a dynamic
        # int) stays symbolic: iota from 0 plus the start, added in the result's dtype (exact
        # for integer dtypes; torch's float aranges compute start + i * step the same way)
        return _finish(iota(n, 0, step, dt, device) + start, requires_grad)
    return _finish(iota(n, int(start), step, dt, device), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(arange, locals())) is not _PASS:
        return _r
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    if dtype is not None and (_t.as_dtype(dtype).is_complex or _t.as_dtype(dtype)._limited):
        raise NotImplementedError(f'"arange_cpu" not implemented for \'{_t.as_dtype(dtype).legacy_name}\'')
    if _symbolic(start) or _symbolic(end) or _symbolic(step):
        return _arange_symbolic(start, end, step, dtype, device, requires_grad)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) / step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = _t.get_default_dtype() if any(isinstance(v, (float, np.floating)) for v in (start, end, step)) \
            else _t.int64
    dt = _t.as_dtype(dtype)
    n = int(math.ceil((end - start) / step))
    arr = (start + np.arange(n, dtype=np.float64 if dt.is_floating_point or not all(
        isinstance(v, numbers.Integral) for v in (start, step)) else np.int64) * step)
    return _finish(tensor(arr.astype(dt.np), dtype=dt, device=device), requires_grad)


def range_(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    if _TF[0] and (_r := _entry(range_, locals())) is not _PASS:
        return _r
    return arange(start, end + step / 2 if step > 0 else end + step / 2, step, dtype=dtype or
                  _t.get_default_dtype(), device=device, requires_grad=requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(linspace, locals())) is not _PASS:
        return _r
    start, end = _num(start), _num(end)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _dt(dtype)
    if steps == 1:
        arr = np.array([start], dtype=np.complex128 if isinstance(start, complex) else np.float64)
    else:
        step = (end - start) / (steps - 1)
        i = np.arange(steps, dtype=np.complex128 if isinstance(step, complex) else np.float64)
        half = steps // 2
        arr = np.where(i < half, start + step * i, end - step * (steps - 1 - i))
    if dt.category < 2:
        arr = np.trunc(arr)
    return _finish(tensor(arr.astype(dt.np), dtype=dt, device=device), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    if _TF[0] and (_r := _entry(logspace, locals())) is not _PASS:
        return _r
    lin = linspace(start, end, steps, dtype=_t.float64)
    return _finish(tensor(np.power(base, lin._data).astype(_dt(dtype).np), dtype=_dt(dtype), device=device),
                   requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(eye, locals())) is not _PASS:
        return _r
    for pos, name, v in ((1, "n", n), (2, "m", m)):
        if v is not None and (isinstance(v, (bool, float)) or not isinstance(v, numbers.Integral)) \
                and not _symbolic(v):
            raise TypeError(f"eye(): argument '{name}' (position {pos}) must be int, not {type(v).__name__}")
    if m is None:
        m = n
    for name, v in (("n", n), ("m", m)):
        if v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    dt = _dt(dtype)
    return _finish(tensor(np.eye(n, m, dtype=dt.np), dtype=dt, device=device), requires_grad)


# ---------------------------------------------------------------------- random
def _gen(generator):
    return generator if generator is not None else _random.default_generator


def _rand_array(kind, size, dt, generator=None, **kw):
    if dt.is_complex and kind in ("uniform", "normal"):
        # torch's complex draws: real and imaginary parts drawn independently (interleaved), a
        # normal one with variance 1/2 each so that E|z|^2 = 1
        parts = _rand_array(kind, tuple(size) + (2,), dt.to_real(), generator, **kw)
        if kind == "normal":
            parts = parts * np.sqrt(0.5).astype(parts.dtype)
        return np.ascontiguousarray(parts).view(dt.np)[..., 0]
    if dt.is_complex:
        raise RuntimeError(f"{kind} is not implemented for complex tensors ({dt.legacy_name})")
    drawn = _torch_stream_draw(kind, size, dt, _gen(generator), kw)
    if drawn is not None:
        return drawn
    g = _gen(generator)._np
    if kind == "uniform":
        a = g.random(size, dtype=np.float64)
        lo, hi = kw.get("low", 0.0), kw.get("high", 1.0)
        if (lo, hi) != (0.0, 1.0):
            a = lo + (hi - lo) * a
    elif kind == "normal":
        a = g.standard_normal(size, dtype=np.float64)
        mean, std = kw.get("mean", 0.0), kw.get("std", 1.0)
        if (mean, std) != (0.0, 1.0):
            a = mean + std * a
    elif kind == "randint":
        a = g.integers(kw["low"], kw["high"], size=size, dtype=np.int64)
    elif kind == "exponential":
        a = g.exponential(1.0 / kw.get("lambd", 1.0), size=size)
    elif kind == "bernoulli":
        a = g.random(size) < kw["p"]
    else:
        raise ValueError(kind)
    out = a.astype(dt.np)
    if kind == "uniform" and dt.is_floating_point and dt.itemsize > 1:
        _keep_below_high(out, kw.get("low", 0.0), kw.get("high", 1.0))
    return out


_TORCH_STREAM_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})


def _torch_stream_draw(kind, size, dt, gen, kw):
    """The draw from the generator's Mersenne Twister, as PyTorch makes it (``ember/_mt19937.py``),
    or None for the draws only the numpy stream makes (integer uniforms/normals, float8, ...)."""
    n = int(np.prod(size, dtype=np.int64))
    floating = dt.name in _TORCH_STREAM_FLOATS
    if kind == "uniform" and floating:
        a = _mt.uniform(gen._mt, n, dt.np, kw.get("low", 0.0), kw.get("high", 1.0))
    elif kind == "normal" and floating:
        a = _mt.normal(gen._mt, n, dt.np, kw.get("mean", 0.0), kw.get("std", 1.0), kw.get("contiguous", True))
    elif kind == "randint" and (floating or dt.category <= 1):
        a = _mt.cast_int64(_mt.randint(gen._mt, n, kw["low"], kw["high"], default=kw.get("default", False)), dt.np)
    elif kind == "bernoulli" and (floating or dt.category <= 1):
        a = _mt.bernoulli(gen._mt, n, kw["p"]).astype(dt.np)
    elif kind == "exponential" and floating:
        a = _mt.exponential(gen._mt, n, kw.get("lambd", 1.0))
        if dt.itemsize < 4:            # PyTorch casts a double to Half/BFloat16 by way of float
            a = a.astype(np.float32)
        a = a.astype(dt.np)
    else:
        return None
    return a.reshape(tuple(size))


def _keep_below_high(out, lo, hi):
    """torch's uniform draws lie in [low, high): a float64 draw just under ``high`` can round up
    to it once cast (float16 ``rand``: one value in 4096). Such values become the largest value
    of the dtype on the ``low`` side of ``high``; every other draw is left as it was."""
    if not hi > lo:
        return
    top = np.array(hi, dtype=out.dtype)
    hit = out >= top
    if hit.any():
        out[hit] = largest_below(hi, out.dtype)


def largest_below(hi, npdtype):
    """The largest value of the (IEEE-layout) float ``npdtype`` below ``hi`` as cast to it."""
    top = np.array(hi, dtype=npdtype).reshape(1)
    bits = top.view(f"u{top.dtype.itemsize}")
    if top[0] == 0:                                    # below +0: the smallest negative subnormal
        sign = np.array(1, bits.dtype) << np.array(8 * top.dtype.itemsize - 1, bits.dtype)
        bits = sign | np.array(1, bits.dtype)
    else:                                              # one step towards -inf
        bits = bits + 1 if top[0] < 0 else bits - 1
    return np.asarray(bits, dtype=bits.dtype).reshape(1).view(npdtype)[0]


def _drawn(kind, size, dt, device, generator, a=0.0, b=1.0):
    """A fresh tensor filled by the ``_random`` op: eager, the same numpy draw as before; traced
    (``ember.compile``), a Philox stream seeded at every call (``prims.rng_seed``). Built from raw
    arrays instead, the draw was a constant of a traced graph: every compiled call returned the
    numbers of the first one."""
    out = _random_op.inplace_variant.binding(empty(size, dtype=dt, device=device), kind, a, b, generator)
    out._vc = None                    # a new tensor: version 0, as PyTorch's (the fill was its making)
    return out


def rand(*shape, size=None, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(rand, locals())) is not _PASS:
        return _r
    size = shape if size is None else _keyword_size(shape, size, "rand")
    dt = _dt(dtype)
    return _finish(_drawn("uniform", _size_args(size, "rand"), dt, device, generator), requires_grad)


def randn(*shape, size=None, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(randn, locals())) is not _PASS:
        return _r
    size = shape if size is None else _keyword_size(shape, size, "randn")
    dt = _dt(dtype)
    return _finish(_drawn("normal", _size_args(size, "randn"), dt, device, generator), requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False,
            out=None, layout=None):
    if _TF[0] and (_r := _entry(randint, locals())) is not _PASS:
        return _r
    three = size is not None and high is not None and not isinstance(high, (tuple, list))
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    _mt.randint_arg_errors(low, high, size, three)
    dt = _dt(dtype, _t.int64)
    shape = _size_args((size,), "randint")
    # PyTorch's randint is ``empty(size, dtype).random_(low, high)``: its bounds checks and draws
    drawn = _mt.random_args(dt, (low, high), {}, int(np.prod(shape, dtype=np.int64)))
    if drawn is None:
        return _finish(empty(shape, dtype=dt, device=device), requires_grad)
    return _finish(_drawn(drawn[0], shape, dt, device, generator, drawn[1], drawn[2]), requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    if input.__class__ not in _FAST and (_r := _entry(rand_like, locals(), input)) is not _PASS:
        return _r
    # drawn in row-major order whatever the layout, so the values do not depend on it
    t = rand(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)
    return _finish(_in_order(t, _like_order(input, memory_format)), requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    if input.__class__ not in _FAST and (_r := _entry(randn_like, locals(), input)) is not _PASS:
        return _r
    t = randn(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)
    return _finish(_in_order(t, _like_order(input, memory_format)), requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    if input.__class__ not in _FAST and (_r := _entry(randint_like, locals(), input)) is not _PASS:
        return _r
    if high is None:
        low, high = 0, low
    t = randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)
    return _finish(_in_order(t, _like_order(input, None)), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False,
           out=None):
    if _TF[0] and (_r := _entry(normal, locals())) is not _PASS:
        return _r
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        return _normal_tensors(mean, std, generator)
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_fmt_std(std)}")
    if size is None:
        raise TypeError("normal() with float mean and std needs a size")
    # PyTorch's normal_(mean, std) of a fresh tensor (x * std + mean fused, as its kernel)
    shape = _size_args((size,) if not isinstance(size, (tuple, list)) else (tuple(size),), "normal")
    return _finish(_drawn("normal", shape, _dt(dtype), device, generator, float(mean), float(std)), requires_grad)


def _fmt_std(std):
    return f"{float(std):g}"


def _normal_tensors(mean, std, generator):
    """PyTorch's ``normal(Tensor, float)`` / ``(float, Tensor)`` / ``(Tensor, Tensor)``: a fresh
    tensor of the mean's dtype (the std's without one) and the broadcast shape, filled with
    ``normal_(0, std)`` plus ``mean`` (a number std) or ``normal_(0, 1)`` times ``std`` plus
    ``mean``, in place in that dtype, as its kernel does. Differentiable with zero gradients."""
    m = mean if isinstance(mean, Tensor) else None
    s = std if isinstance(std, Tensor) else None
    like = m if m is not None else s
    dt = like.dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f'"normal_kernel_cpu" not implemented for \'{dt.legacy_name}\'')
    if s is None and not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_fmt_std(std)}")
    if s is not None and s.numel() and not bool((s.detach() >= 0).all()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    shape = _broadcast_or_torchs_error(*(tuple(x.shape) for x in (m, s) if x is not None))
    from ..autograd import no_grad
    with no_grad():
        if s is None:
            out = _drawn("normal", shape, dt, like.device, generator, 0.0, float(std))
        else:
            out = _drawn("normal", shape, dt, like.device, generator, 0.0, 1.0)
            out = (out * s.detach()).to(dt)
        out = (out + (m.detach() if m is not None else mean)).to(dt)
    grads = [x for x in (m, s) if x is not None and x.requires_grad]
    if grads:
        out = _ZeroGradNormal.apply(out, *grads)
    return out


def _broadcast_or_torchs_error(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        a, b = shapes
        n = max(len(a), len(b))
        a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        for i in range(n - 1, -1, -1):
            if a[i] != b[i] and a[i] != 1 and b[i] != 1:
                raise RuntimeError(f"The size of tensor a ({a[i]}) must match the size of tensor b ({b[i]}) at "
                                   f"non-singleton dimension {i}") from None
        raise


def _zero_grad_normal():
    from ..autograd.function import Function

    class ZeroGradNormal(Function):
        """The draws, with PyTorch's zero gradients for the mean and std tensors."""
        @staticmethod
        def forward(ctx, out, *params):
            ctx.shapes = [(tuple(p.shape), p.dtype) for p in params]
            return out.clone()

        @staticmethod
        def backward(ctx, g):
            return (None,) + tuple(zeros(sh, dtype=d) for sh, d in ctx.shapes)
    return ZeroGradNormal


class _LazyZeroGrad:
    _cls = None

    def apply(self, *args):
        if _LazyZeroGrad._cls is None:
            _LazyZeroGrad._cls = _zero_grad_normal()
        return _LazyZeroGrad._cls.apply(*args)


_ZeroGradNormal = _LazyZeroGrad()


_RANDOM_KINDS = ("uniform", "normal", "bernoulli", "random", "random_default", "exponential")


@defop("_random(Tensor self, str kind, float a=0.0, float b=1.0, Generator? generator=None) -> Tensor",
       method=False, function=False, inplace=True, tags=("random", "nondeterministic"))
def _random_op(xp, self, kind, a=0.0, b=1.0, generator=None):
    dt = _t.from_numpy_dtype(self.dtype)
    if kind not in _RANDOM_KINDS:      # (before the empty return: the meta function refuses it too)
        raise ValueError(f"unknown random kind {kind!r}")
    _mt.check_random_args(kind, a, b)
    if self.size == 0:                 # nothing to draw (any dtype: torch returns before its kernel)
        return xp.empty(self.shape, dtype=self.dtype)
    # PyTorch fills a tensor in memory order (its iterator walks the dims by falling stride), and
    # normal_ of a non-contiguous one takes the value-by-value path: drawn here in that order
    flags = getattr(self, "flags", None)
    contiguous = flags is None or flags.c_contiguous or self.ndim < 2
    order = None if contiguous else _memory_order(self)
    shape = tuple(self.shape) if order is None else tuple(self.shape[d] for d in order)
    if kind == "uniform":
        arr = _rand_array("uniform", shape, dt, generator, low=a, high=b)
    elif kind == "normal":
        arr = _rand_array("normal", shape, dt, generator, mean=a, std=b, contiguous=contiguous)
    elif kind in ("random", "random_default"):
        arr = _rand_array("randint", shape, dt, generator, low=int(a), high=int(b), default=kind == "random_default")
    elif kind == "bernoulli":
        arr = _rand_array("bernoulli", shape, dt, generator, p=a)
    elif kind == "exponential":
        arr = _rand_array("exponential", shape, dt, generator, lambd=a)
    else:
        raise ValueError(f"unknown random kind {kind!r}")
    if order is not None:
        arr = np.ascontiguousarray(np.transpose(arr, np.argsort(order)))
    return xp.asarray(arr)


def _memory_order(a):
    """The dims of strided array ``a`` from outermost to innermost in memory (largest stride
    first, ties in dim order), or None when that is the C order."""
    order = sorted(range(a.ndim), key=lambda d: (-abs(a.strides[d]), d))
    return None if order == list(range(a.ndim)) else order


@_random_op.meta_fn
def _random_meta(self, kind, a=0.0, b=1.0, generator=None):
    """A fresh C-ordered array like ``self``, with the kernel's argument errors (PyTorch's)."""
    shape = tuple(self.shape)
    if kind not in _RANDOM_KINDS:
        raise ValueError(f"unknown random kind {kind!r}")
    _mt.check_random_args(kind, a, b)
    return _meta.out(shape, self.dtype)


@_random_op.derivative(save=())
def _random_bw(ctx, g):
    return (g * 0,)


def _random_entry(kind):
    def fn(self, a=0.0, b=1.0, *, generator=None):
        return _random_op.inplace_variant.binding(self, kind, a, b, generator)
    return fn


def uniform_(self, a=0.0, b=1.0, *, generator=None, **kw):
    if self.__class__ not in _FAST and (_r := _entry(uniform_, locals(), self)) is not _PASS:
        return _r
    a, b = kw.get("from", a), kw.get("to", b)
    return _random_op.inplace_variant.binding(self, "uniform", a, b, generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    if self.__class__ not in _FAST and (_r := _entry(normal_, locals(), self)) is not _PASS:
        return _r
    return _random_op.inplace_variant.binding(self, "normal", mean, std, generator)


def random_(self, *args, generator=None, **kwargs):
    """PyTorch's overloads: ``random_()``, ``random_(to)``, ``random_(from, to)`` (``to`` None: up
    to the dtype's largest value; ``from``/``to`` as keywords too), its checks and its draws
    (``ember._mt19937.random_args``)."""
    if self.__class__ not in _FAST and (_r := _entry(random_, locals(), self)) is not _PASS:
        return _r
    drawn = _mt.random_args(self.dtype, args, kwargs, self.numel())
    if drawn is None:                                # nothing to fill (PyTorch returns before its kernel)
        return self
    return _random_op.inplace_variant.binding(self, drawn[0], drawn[1], drawn[2], generator)


def bernoulli_(self, p=0.5, *, generator=None):
    if self.__class__ not in _FAST and (_r := _entry(bernoulli_, locals(), self)) is not _PASS:
        return _r
    return _random_op.inplace_variant.binding(self, "bernoulli", float(p), 0.0, generator)


def exponential_(self, lambd=1.0, *, generator=None):
    if self.__class__ not in _FAST and (_r := _entry(exponential_, locals(), self)) is not _PASS:
        return _r
    return _random_op.inplace_variant.binding(self, "exponential", lambd, 0.0, generator)


def bernoulli(input, p=None, *, generator=None):
    if input.__class__ not in _FAST and (_r := _entry(bernoulli, locals())) is not _PASS:
        return _r
    probs = input if p is None else full_like(input, p)
    u = rand(tuple(probs.shape), dtype=probs.dtype, device=probs.device, generator=generator)
    return (u < probs).to(probs.dtype)


# ---------------------------------------------------------------------- export
for _name, _fn in dict(zeros=zeros, ones=ones, empty=empty, full=_full_entry, zeros_like=zeros_like,
                       ones_like=ones_like, empty_like=empty_like, full_like=full_like, tensor=tensor,
                       as_tensor=as_tensor, from_numpy=from_numpy, asarray=asarray, arange=arange,
                       linspace=linspace, logspace=logspace, eye=eye, rand=rand, randn=randn,
                       randint=randint, rand_like=rand_like, randn_like=randn_like,
                       randint_like=randint_like, normal=normal, bernoulli=bernoulli,
                       scalar_tensor=scalar_tensor,
                       scalar_tensor_like=scalar_tensor_like).items():
    setattr(api, _name, _fn)
api.range = range_

for _name, _fn in dict(uniform_=uniform_, normal_=normal_, random_=random_, bernoulli_=bernoulli_,
                       exponential_=exponential_).items():
    setattr(Tensor, _name, _fn)
Tensor.bernoulli = bernoulli
