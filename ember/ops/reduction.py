"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std,
norm, logsumexp, cumsum/cumprod, all/any, softmax/log_softmax, topk, sort.

The reduced-dims convention everywhere: ``dim=None`` (or an empty list)
reduces all dims; a gradient is expanded back with ``expand_reduced``.

Ops that return ``(values, indices)`` (``max(dim)``, ``min(dim)``, ``topk``,
``sort``) are registry records returning a tuple, wrapped by thin entry
points into the named tuples of ``ember.return_types``. Entry points whose
argument conventions do not fit one schema (``max(x)`` / ``max(x, dim)`` /
``max(x, other)``, ``var(x, unbiased)``, ``norm(x, p='fro')``) are plain
Python functions over the records; they hand fx proxies to the override
protocol themselves so traces record the public function.

Gradients that route values back to selected positions (``max(dim)``,
``topk``, ``sort``) use two private records, ``_reduction_gather`` and
``_reduction_scatter`` (indices unique along the dim), each the other's
derivative, so double backward works.
"""
from __future__ import annotations

import builtins
import collections
import math
import numbers
import sys
import types as _pytypes
import warnings

import numpy as np

from .. import types as _t
from .._state import STATE as _STATE
from ..tensor import Tensor, _make
from . import _half_lanes, _native_small, api
from ._helpers import _canonical_c, as_contiguous as _C, copy_preserve, wrap_dim, wrap_dims
from . import shape as _shape
from .registry import _mark_view, defcomposite, defop

RED = ("reduction",)
_HALF = ("float16", "bfloat16")


# ---------------------------------------------------------------------- helpers
def reduce_dims(dim, ndim):
    """Sorted, wrapped dims of a reduction; ``None`` or an empty list means all dims."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        seen = set()
        for d in dim:
            w = wrap_dim(d, ndim)
            if w in seen:
                raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
            seen.add(w)
    return wrap_dims(dim, ndim)


def _axes(dims, ndim):
    """numpy axes for wrapped dims (a 0-d tensor accepts dim 0/-1 but has no axes)."""
    return dims if ndim else ()


def _numel_of(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def expand_reduced(g, shape, dims, keepdim):
    """Broadcast a reduction's gradient ``g`` back to the input ``shape``."""
    shape = tuple(shape)
    if not keepdim and len(shape) > 0:
        for d in reduce_dims(dims, len(shape)):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _keep(t, shape, dims, keepdim):
    """A reduced tensor ``t`` with the reduced dims kept (size 1), for broadcasting."""
    if keepdim or len(tuple(shape)) == 0:
        return t
    for d in reduce_dims(dims, len(tuple(shape))):
        t = t.unsqueeze(d)
    return t


def _like(g, a):
    """``g`` in ``a``'s dtype (a reduction run with ``dtype=`` returns its gradient in the input's)."""
    return g if g.dtype is a.dtype else g.to(a.dtype)


def _dt(a):
    return _t.from_numpy_dtype(a.dtype)


def _acc(a):
    """Half-precision arrays are accumulated in float32."""
    return a.astype(np.float32) if _dt(a).name in _HALF else a


def _cum_acc(a):
    """The accumulator of PyTorch's CPU cumsum/cumprod (``acc_type<T, false>``): float32 in
    float64, complex64 in complex128, half precision in float32; every partial result is
    rounded once to the output dtype (float32 accumulated in float32 was an ulp off in most
    rows)."""
    if a.dtype == np.float32:
        return a.astype(np.float64)
    if a.dtype == np.complex64:
        return a.astype(np.complex128)
    return _acc(a)


def _sum_dtype(dt, dtype):
    if dtype is not None:
        return _t.as_dtype(dtype)
    return _t.int64 if dt.category < 2 else dt


def _sign(x):
    """sign(x) as a constant (non-differentiable) tensor of x's dtype."""
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _nonempty(name, a, dims, whole, exc=IndexError):
    """Raise PyTorch's error for an identity-less reduction over an empty dim."""
    if a.size != 0:
        return
    if whole:
        raise exc(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                  f"reduction dim with the 'dim' argument.")
    for d in dims:
        if a.ndim and a.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _overridden(fn, args, kwargs):
    """fx proxies (types with ``__ember_function__``) record the public entry point ``fn``."""
    for a in list(args) + list(kwargs.values()):
        t = type(a)
        if not isinstance(a, Tensor) and hasattr(t, "__ember_function__"):
            return t.__ember_function__(fn, (t,), tuple(args), dict(kwargs))
        if isinstance(a, (list, tuple)):
            for x in a:
                if not isinstance(x, Tensor) and hasattr(type(x), "__ember_function__"):
                    return type(x).__ember_function__(fn, (type(x),), tuple(args), dict(kwargs))
    return NotImplemented


# ---------------------------------------------------------------------- return types
return_types = _pytypes.ModuleType("ember.return_types", "Named tuples returned by ops with several outputs.")


def _return_type(name, fields=("values", "indices")):
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"ember.return_types.{name}(\n{body})"

    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": "ember.return_types"})
    cls.__qualname__ = name
    setattr(return_types, name, cls)
    return cls


_max_t = _return_type("max")
_min_t = _return_type("min")
_topk_t = _return_type("topk")
_sort_t = _return_type("sort")
sys.modules.setdefault("ember.return_types", return_types)
api.return_types = return_types


# ---------------------------------------------------------------------- gather/scatter along a dim
def _along(xp, index, dim):
    """Advanced-index tuple selecting ``index`` along ``dim`` (every other dim: its own position)."""
    index = index.astype(np.int64, copy=False)
    nd = index.ndim
    out = []
    for i, n in enumerate(index.shape):
        if i == dim:
            out.append(index)
        else:
            shp = [1] * nd
            shp[i] = n
            out.append(xp.arange(n).reshape(shp))
    return tuple(out)


@defop("_reduction_gather(Tensor self, Tensor index, int dim) -> Tensor", save=("index",),
       function=False, method=False, grad_fn_name="GatherBackward0")
def _reduction_gather(xp, a, index, dim):
    if a.ndim == 0:
        return a.copy()
    return a[_along(xp, index, dim)]


@_reduction_gather.derivative
def _reduction_gather_bw(ctx, g):
    a, index, dim = ctx.args
    return _reduction_scatter.binding(g, index, dim, list(a.shape)), None


@defop("_reduction_scatter(Tensor src, Tensor index, int dim, int[] size) -> Tensor", save=("index",),
       function=False, method=False, grad_fn_name="ScatterBackward0")
def _reduction_scatter(xp, src, index, dim, size):
    """zeros(size) with ``src`` written at ``index`` along ``dim`` (indices unique along dim)."""
    if len(size) == 0:
        return src.copy().reshape(())
    out = xp.zeros(tuple(size), dtype=src.dtype)
    out[_along(xp, index, dim)] = src
    return out


@_reduction_scatter.derivative
def _reduction_scatter_bw(ctx, g):
    src, index, dim, size = ctx.args
    return _reduction_gather.binding(g, index, dim), None


def _route_back(g, idx, shape, dim, keepdim):
    """Gradient of ``take_along_dim(x, idx, dim)``: ``g`` written back at ``idx``."""
    shape = tuple(shape)
    if len(shape) == 0:
        return g.reshape(())
    if not keepdim:
        g = g.unsqueeze(dim)
        idx = idx.unsqueeze(dim)
    elif unrecorded(g, idx):               # (the op's kernel without a dispatcher round)
        return _make(_reduction_scatter.kernel(np, g._data, idx._data, dim, list(shape)), g.device)
    return _reduction_scatter.binding(g, idx, dim, list(shape))


# ---------------------------------------------------------------------- sum / mean / prod
@defop("sum(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       tags=RED, save=(), grad_fn_name=lambda a: "SumBackward0" if a[1] is None else "SumBackward1")
def sum(xp, a, dim=None, keepdim=False, dtype=None):
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    out_dt = _sum_dtype(_dt(a), dtype)
    if a.dtype != out_dt.np:
        a = a.astype(out_dt.np)
    with np.errstate(all="ignore"):         # inf + -inf is nan, quietly, as in torch
        # half precision accumulates in float32 (ml_dtypes' bfloat16 sum would round every
        # step); integers in the result dtype (numpy's sum would widen int8/int32 to int64)
        r = xp.sum(_acc(a), axis=dims, keepdims=keepdim, dtype=None if out_dt.is_floating_point else out_dt.np)
        # reductions are row-major in PyTorch (numpy keeps a permuted input's dim order)
        return _C(xp, xp.asarray(r).astype(out_dt.np, copy=False), a)


@sum.derivative
def _sum_bw(ctx, g):
    a, dim, keepdim, dtype = ctx.args
    if dim is None and g.dtype is a.dtype and unrecorded(g) and g._data.ndim == 0 and a.shape:
        # a full sum's (``x.sum().backward()``): the view expand_reduced makes -- unsqueezes of the
        # 0-d g (size-1 dims of stride 1) expanded (stride 0 where the size is not 1) -- in one step
        shape = tuple(a.shape)
        arr = _shape._strided(np, g._data, shape, [1 if n == 1 else 0 for n in shape])
        out = _make(arr, g.device, g.dtype)
        _mark_view(out, g)
        return (out,)
    return (_like(expand_reduced(g, a.shape, dim, keepdim), a),)


@defop("mean(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       tags=RED, save=(), grad_fn_name=lambda a: "MeanBackward0" if a[1] is None else "MeanBackward1")
def mean(xp, a, dim=None, keepdim=False, dtype=None):
    dt = _dt(a) if dtype is None else _t.as_dtype(dtype)
    if dt.category < 2:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {dt.legacy_name}")
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    n = _numel_of(a.shape, dims)
    acc = np.float32 if dt in (_t.float16, _t.bfloat16) else dt.np
    with np.errstate(all="ignore"):
        s = xp.sum(a.astype(acc, copy=False), axis=dims, keepdims=keepdim)
        out = s / n if n else s * np.nan
    return _C(xp, xp.asarray(out).astype(dt.np, copy=False), a)


@mean.derivative
def _mean_bw(ctx, g):
    a, dim, keepdim, dtype = ctx.args
    dims = reduce_dims(dim, len(a.shape))
    n = _numel_of(a.shape, _axes(dims, len(a.shape)))
    ge = expand_reduced(g, a.shape, dim, keepdim)
    return (_like(ge / n if n else ge * float("nan"), a),)


@defop("prod(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       tags=RED, grad_fn_name=lambda a: "ProdBackward0" if a[1] is None else "ProdBackward1")
def prod(xp, a, dim=None, keepdim=False, dtype=None):
    if dim is not None:
        dim = wrap_dim(dim, a.ndim)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    out_dt = _sum_dtype(_dt(a), dtype)
    with np.errstate(all="ignore"):
        k = len(dims)
        if out_dt.name in _HALF and type(a) is np.ndarray and k and tuple(dims) == tuple(range(a.ndim - k, a.ndim)) \
                and a.flags.c_contiguous and a.size and (a.size // _numel_of(a.shape, dims) > 1 or a.size < 32768):
            # the reduced dims trailing and contiguous: one inner reduction per output, as torch's
            # (a whole tensor of 32768 elements or more is split among threads: not modelled)
            lead = a.shape[:a.ndim - k]
            r = _half_prod_inner(a.astype(out_dt.np, copy=False).reshape(lead + (-1,)))
            return r.reshape(lead + ((1,) * k if keepdim else ()))
        return _C(xp, xp.asarray(xp.prod(a.astype(out_dt.np, copy=False), axis=dims, keepdims=keepdim)), a)


def _half_prod_inner(a):
    """prod over the last dim of a contiguous float16/bfloat16 array as torch's CPU reduction
    multiplies (each product rounded to the half dtype): four vector accumulators over blocks of
    4 vectors, combined (a0 a1)(a2 a3), the lanes folded left to right, the rest of the row
    element by element."""
    hd = a.dtype
    n = a.shape[-1]
    x = a.reshape(-1, n).astype(np.float32)

    def H(v):
        return v.astype(hd).astype(np.float32)

    v = _half_lanes.PROD_VEC
    blk = 4 * v
    count = n // blk
    out = np.ones(x.shape[0], np.float32)
    if count:
        acc = x[:, :blk]
        for i in range(1, count):
            acc = H(acc * x[:, i * blk:(i + 1) * blk])
        q = acc.reshape(-1, 4, v)
        c = H(H(q[:, 0] * q[:, 1]) * H(q[:, 2] * q[:, 3]))
        out = c[:, 0]
        for j in range(1, v):
            out = H(out * c[:, j])
    for k in range(count * blk, n):
        out = H(out * x[:, k])
    return out.astype(hd)


@prod.derivative
def _prod_bw(ctx, g):
    # d prod / d x_i = product of the other elements. With no zero in the slice
    # that is prod / x_i; with exactly one zero only that position gets the
    # product of the rest; with two or more zeros everything is zero.
    a, dim, keepdim, dtype = ctx.args
    x = a if dtype is None else a.to(_t.as_dtype(dtype))
    shape = tuple(a.shape)
    ge = expand_reduced(g, shape, dim, keepdim)
    # The formula is written so that it is also right to first order (double
    # backward): the zero values enter as factors (``zsum``), never as masks only.
    zero = x == 0
    nonzero = x != 0
    xs = x * nonzero + zero             # zeros replaced by one, with no dependence on them
    if dim is None:
        nz = zero.sum()
        p = xs.prod()                   # product of the nonzero elements
        zsum = (x * zero).sum()
    else:
        nz = zero.sum(dim, keepdim=True)
        p = xs.prod(dim, keepdim=True)
        zsum = (x * zero).sum(dim, keepdim=True)
    # p divided by x_i, not p times 1 / x_i: 1 / x_i overflows for a tiny x_i (1 / 2**-128 is inf
    # in float32) where the product of the others, p / x_i, is an ordinary number
    none = (nz == 0) * (p / xs)                             # p / x_i
    one = (nz == 1) * (zero * p + nonzero * (zsum * p / xs))  # at the zero: p; elsewhere x_z p / x_i
    two = (nz == 2) * zero * (zsum - x) * p                 # at one zero: (the other zero) * p
    r = ge * (none + one + two)
    if x.dtype in (_t.float16, _t.bfloat16):
        # torch's prod_backward where a slice has no zero: grad * (result / input), each step
        # rounded to the half dtype
        from .indexing import where
        r = where(nz == 0, ge * (p / xs), r)
    return (_like(r, a),)


# ---------------------------------------------------------------------- amax / amin / max / min
def _amaxmin(name, fn):
    @defop(f"{name}(Tensor self, int[] dim=(), bool keepdim=False) -> Tensor", tags=RED,
           save_result=True)
    def kernel(xp, a, dim=(), keepdim=False):
        dims = reduce_dims(dim, a.ndim)
        whole = dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)
        _nonempty(name, a, _axes(dims, a.ndim), whole, RuntimeError)
        with np.errstate(invalid="ignore"):
            return _C(xp, xp.asarray(getattr(xp, fn)(a, axis=_axes(dims, a.ndim), keepdims=keepdim)), a)

    @kernel.derivative
    def _bw(ctx, g):
        a, dim, keepdim = ctx.args
        return (_evenly(g, a, ctx.result, dim, keepdim),)
    return kernel


def _evenly(g, a, res, dim, keepdim):
    """Gradient of a value-selecting reduction, split evenly among the tied maxima/minima."""
    shape = tuple(a.shape)
    mask = a == _keep(res, shape, dim, keepdim)
    count = mask.sum(dim, keepdim=True)
    return expand_reduced(g, shape, dim, keepdim) * mask / count


amax = _amaxmin("amax", "max")
amin = _amaxmin("amin", "min")


def _full_maxmin(name, fn):
    @defop(f"{name}(Tensor self) -> Tensor", tags=RED, save_result=True, function=False, method=False,
           grad_fn_name=f"{name.capitalize()}Backward1")
    def kernel(xp, a):
        _nonempty(name, a, (), True, RuntimeError)
        with np.errstate(invalid="ignore"):
            return xp.asarray(getattr(xp, fn)(a))

    @kernel.derivative
    def _bw(ctx, g):
        (a,) = ctx.args
        return (_evenly(g, a, ctx.result, None, False),)
    return kernel


def _dim_maxmin(name, fn):
    @defop(f"{name}_dim(Tensor self, int dim, bool keepdim=False) -> Tensor, Tensor", tags=RED,
           save=(), save_result=True, function=False, method=False,
           grad_fn_name=f"{name.capitalize()}Backward0")
    def kernel(xp, a, dim, keepdim=False):
        d = wrap_dim(dim, a.ndim)
        if a.ndim == 0:
            return a.copy(), xp.asarray(0, dtype=np.int64)
        _nonempty(name, a, (d,), False)
        idx = getattr(xp, fn)(a, axis=d, keepdims=True)
        vals = xp.take_along_axis(a, idx, axis=d)
        if not keepdim:
            vals, idx = xp.squeeze(vals, axis=d), xp.squeeze(idx, axis=d)
        return xp.asarray(vals), xp.asarray(idx).astype(np.int64, copy=False)

    @kernel.derivative
    def _bw(ctx, grads):
        a, dim, keepdim = ctx.args
        gv = grads[0]
        if gv is None:
            return (None,)
        idx = ctx.result_at(1)
        return (_route_back(gv, idx, a.shape, wrap_dim(dim, len(a.shape)), keepdim),)
    return kernel


_max_full = _full_maxmin("max", "max")
_min_full = _full_maxmin("min", "min")
_max_dim = _dim_maxmin("max", "argmax")
_min_dim = _dim_maxmin("min", "argmin")


def _maxmin_entry(name, full, bydim, rtype, binary=None, full_doc=""):
    """The public ``name(input[, dim, keepdim])`` of a reduction with a whole-tensor form
    (``full``) and a by-dim form returning (values, indices) (``bydim``, wrapped in ``rtype``);
    with ``binary``, ``name(input, other)`` is that elementwise op (max/min)."""
    def entry(input, dim=None, keepdim=False, *, other=None, out=None):
        r = _overridden(entry, (input,) + (() if dim is None else (dim,)),
                        {"keepdim": keepdim} if keepdim else {})
        if r is not NotImplemented:
            return r
        if out is not None:       # torch's out= (ember/ops/_out.py), here rather than a wrapper frame
            from ._out import call_with_out
            return call_with_out(name, entry, (input,) if dim is None else (input, dim),
                                 {"keepdim": keepdim, "other": other}, out)
        if other is not None:
            if binary is None:
                raise TypeError(f"{name}() got an unexpected keyword argument 'other'")
            dim = other
        if isinstance(dim, Tensor):
            if binary is None:
                raise TypeError(f"{name}(): argument 'dim' must be int, not Tensor")
            return getattr(api, binary)(input, dim)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim=True needs a dim")
            return full.binding(input)
        return rtype(*bydim.binding(input, dim, keepdim))
    entry.__name__ = entry.__qualname__ = name
    entry.__module__ = "ember"
    entry.__doc__ = (f"{name}(input) -> Tensor{full_doc}; {name}(input, dim, keepdim=False) -> (values, indices)"
                     + (f"; {name}(input, other) -> {binary}(input, other)" if binary else ""))
    return entry


max = _maxmin_entry("max", _max_full, _max_dim, _max_t, "maximum")
min = _maxmin_entry("min", _min_full, _min_dim, _min_t, "minimum")


def _argmaxmin(name, fn):
    @defop(f"{name}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
           tags=RED + ("nondifferentiable",))
    def kernel(xp, a, dim=None, keepdim=False):
        if a.dtype == np.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            _nonempty(name, a, (), True)
            r = getattr(xp, fn)(a.reshape(-1))
            return xp.asarray(r, dtype=np.int64).reshape((1,) * a.ndim if keepdim else ())
        d = wrap_dim(dim, a.ndim)
        if a.ndim == 0:
            return xp.asarray(0, dtype=np.int64)
        _nonempty(name, a, (d,), False)
        return xp.asarray(getattr(xp, fn)(a, axis=d, keepdims=keepdim)).astype(np.int64, copy=False)
    return kernel


argmax = _argmaxmin("argmax", "argmax")
argmin = _argmaxmin("argmin", "argmin")


# ---------------------------------------------------------------------- var / std
def _check_float_var(a, name):
    if not _dt(a).is_floating_point:
        who = "std and var" if name in ("std", "var") else name
        raise RuntimeError(f"{who} only support floating point and complex dtypes")


def _var_core(xp, a, dim, correction, keepdim, name, sqrt=False):
    """(var, mean) in a's dtype; ``mean`` has the reduced dims squeezed unless keepdim. ``sqrt``:
    the standard deviation instead of the variance, its root taken in the accumulation dtype
    before the one rounding to a's (torch's kernel: a float16/bfloat16 ``std`` rounded the
    variance first and then its root, off by an ulp in ~1 row of 200, and every element of
    that row's gradient with it)."""
    _check_float_var(a, name)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    n = _numel_of(a.shape, dims)
    c = 1 if correction is None else correction
    dof = n - c
    if dof <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      f"reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
    # float32 moments in float64, as torch's CPU kernel does (its accumulation type for float is
    # double): squaring a float32 deviation near 1e19 overflows, while the variance stays finite
    x = a.astype(np.float64) if a.dtype == np.float32 else _acc(a)
    with np.errstate(all="ignore"):
        m = xp.sum(x, axis=dims, keepdims=True) / x.dtype.type(n)
        d = x - m
        v = xp.sum(d * d, axis=dims, keepdims=keepdim) / x.dtype.type(builtins.max(0, dof))
        if sqrt:
            v = xp.sqrt(v)
    if not keepdim:
        m = xp.squeeze(m, axis=dims)
    with np.errstate(over="ignore"):         # a float64 variance past float32's range: inf, as torch
        return (_C(xp, xp.asarray(v).astype(a.dtype, copy=False), a),
                _C(xp, xp.asarray(m).astype(a.dtype, copy=False), a))


def _var_grad(g, a, dim, correction, keepdim):
    """d var / d x = 2 (x - mean) / (N - correction)."""
    shape = tuple(a.shape)
    dims = _axes(reduce_dims(dim, len(shape)), len(shape))
    n = _numel_of(shape, dims)
    c = 1 if correction is None else correction
    if (dim is None or len(shape) == 0) and isinstance(n, int) and n - c <= 0:
        return _var_grad_no_dof(g, a)
    centred = a - (a.mean(list(dims), keepdim=True) if dims else a)
    if not isinstance(n, int) and n != c:
        # a symbolic size (a traced backward under dynamic shapes): divide by it as a tensor
        # operand rather than make 2 / (n - c) a Python float, which specialises the size
        return expand_reduced(g, shape, dim, keepdim) * 2.0 * centred / (n - c)
    scale = 2.0 / (n - c) if n != c else math.inf
    return expand_reduced(g, shape, dim, keepdim) * scale * centred


def _var_grad_no_dof(g, a):
    """PyTorch's var gradient for a full reduction (no dim, or a 0-d input) with no degrees of
    freedom left (numel <= correction): 2 / (numel - correction) taken as inf, times
    ``x - mean``, so NaN where x equals the mean and inf elsewhere, whatever the sign of the
    deviation or of numel - correction (times the incoming gradient)."""
    at_mean = a == a.mean()
    return g * api.where(at_mean, float("nan"), float("inf"))


def _std_to_var_grad(g, std):
    """d std = d var / (2 std), zero where std is zero."""
    nz = std != 0
    return g / ((std + (std == 0)) * 2) * nz


def _mean_grad(g, a, dim, keepdim):
    shape = tuple(a.shape)
    n = _numel_of(shape, _axes(reduce_dims(dim, len(shape)), len(shape)))
    ge = expand_reduced(g, shape, dim, keepdim)
    return ge / n if n else ge * float("nan")


_VARSIG = "(Tensor self, int[]? dim=None, *, Scalar? correction=None, bool keepdim=False)"


@defop("var" + _VARSIG + " -> Tensor", tags=RED, function=False, method=False)
def _var(xp, a, dim=None, correction=None, keepdim=False):
    return _var_core(xp, a, dim, correction, keepdim, "var")[0]


@_var.derivative
def _var_bw(ctx, g):
    a, dim, correction, keepdim = ctx.args
    return (_var_grad(g, a, dim, correction, keepdim),)


@defop("std" + _VARSIG + " -> Tensor", tags=RED, function=False, method=False, save_result=True)
def _std(xp, a, dim=None, correction=None, keepdim=False):
    return _var_core(xp, a, dim, correction, keepdim, "std", sqrt=True)[0]


@_std.derivative
def _std_bw(ctx, g):
    a, dim, correction, keepdim = ctx.args
    return (_var_grad(_std_to_var_grad(g, ctx.result), a, dim, correction, keepdim),)


@defop("var_mean" + _VARSIG + " -> Tensor, Tensor", tags=RED, function=False, method=False)
def _var_mean(xp, a, dim=None, correction=None, keepdim=False):
    return _var_core(xp, a, dim, correction, keepdim, "var_mean")


@_var_mean.derivative
def _var_mean_bw(ctx, grads):
    a, dim, correction, keepdim = ctx.args
    gv, gm = grads
    out = None
    if gv is not None:
        out = _var_grad(gv, a, dim, correction, keepdim)
    if gm is not None:
        mg = _mean_grad(gm, a, dim, keepdim)
        out = mg if out is None else out + mg
    return (out,)


@defop("std_mean" + _VARSIG + " -> Tensor, Tensor", tags=RED, function=False, method=False,
       save_result=True)
def _std_mean(xp, a, dim=None, correction=None, keepdim=False):
    return _var_core(xp, a, dim, correction, keepdim, "std_mean", sqrt=True)


@_std_mean.derivative
def _std_mean_bw(ctx, grads):
    a, dim, correction, keepdim = ctx.args
    gs, gm = grads
    out = None
    if gs is not None:
        out = _var_grad(_std_to_var_grad(gs, ctx.result[0]), a, dim, correction, keepdim)
    if gm is not None:
        mg = _mean_grad(gm, a, dim, keepdim)
        out = mg if out is None else out + mg
    return (out,)


def _complex_var(name, z, dim, correction, keepdim):
    """var/std(_mean) of a complex tensor, as torch: the variance is E|z - mean|^2, the sum of
    the real and imaginary parts' variances (a real result); the mean stays complex. Built from
    the parts' views, so autograd flows back into ``z``."""
    from . import api as _api
    v = var.__wrapped_op__.binding(_api.real(z), dim, correction=correction, keepdim=keepdim) + \
        var.__wrapped_op__.binding(_api.imag(z), dim, correction=correction, keepdim=keepdim)
    r = v.sqrt() if name.startswith("std") else v
    if name.endswith("_mean"):
        m = z.mean(dim, keepdim) if dim is not None else (z.mean(list(range(z.ndim)), keepdim) if keepdim
                                                         else z.mean())
        return r, m
    return r


def _var_entry(name, op):
    def entry(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
        kw = {k: v for k, v in (("unbiased", unbiased), ("keepdim", keepdim), ("correction", correction))
              if v is not None and v is not False}
        r = _overridden(entry, (input,) if dim is None else (input, dim), kw)
        if r is not NotImplemented:
            return r
        if out is not None:
            raise TypeError(f"{name}(): the out= argument is not supported by ember")
        if isinstance(dim, bool):           # var(x, unbiased)
            if unbiased is not None:
                raise TypeError(f"{name}(): unbiased given twice")
            dim, unbiased = None, dim
        if unbiased is not None:
            if correction is not None:
                raise TypeError(f"{name}(): pass either unbiased or correction, not both")
            correction = 1 if unbiased else 0
        if isinstance(dim, numbers.Integral):
            dim = [dim]
        elif dim is not None:
            dim = list(dim)
        if isinstance(input, Tensor) and input.dtype.is_complex:
            return _complex_var(name, input, dim, correction, keepdim)
        return op.binding(input, dim, correction=correction, keepdim=keepdim)
    entry.__name__ = entry.__qualname__ = name
    entry.__module__ = "ember"
    entry.__doc__ = (f"{name}(input, dim=None, unbiased=None, keepdim=False, *, correction=1): "
                     f"dims may be an int or a tuple; correction=0 is the population estimate.")
    return entry


var = _var_entry("var", _var)
var.__wrapped_op__ = _var
std = _var_entry("std", _std)
var_mean = _var_entry("var_mean", _var_mean)
std_mean = _var_entry("std_mean", _std_mean)


# ---------------------------------------------------------------------- norm
def _check_float_norm(a, dtype):
    dt = _dt(a) if dtype is None else _t.as_dtype(dtype)
    if not _dt(a).is_floating_point or not dt.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_dt(a).legacy_name}")


def norm_dtype_checks(name, in_dt, dtype):
    """torch's checks of a norm's ``dtype=`` (linalg.vector_norm / matrix_norm front ends), made
    on the input's own dtype before a complex input is replaced by its moduli: the dtype must be
    floating point or complex, complex exactly when the input is, and must not narrow it.
    Returns the dtype (None when not given)."""
    if dtype is None:
        return None
    dt = _t.as_dtype(dtype)
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"{name}: dtype should be floating point or complex, but got {dt.legacy_name}")
    if in_dt.is_complex != dt.is_complex:
        kind = "complex" if in_dt.is_complex else "real"
        raise RuntimeError(f"{name}: dtype should be {kind} for {kind} inputs, but got {dt.legacy_name}")
    if (in_dt.is_floating_point or in_dt.is_complex) and _t.promote_types(in_dt, dt) is not dt:
        raise RuntimeError(f"{name}: the dtype of the input ({in_dt.legacy_name}) should be convertible "
                           f"without narrowing to the specified dtype ({dt.legacy_name})")
    return dt


@defop("linalg_vector_norm(Tensor self, Scalar ord=2, int[]? dim=None, bool keepdim=False, *, "
       "ScalarType? dtype=None) -> Tensor", tags=RED, save_result=True, function=False, method=False)
def linalg_vector_norm(xp, a, ord=2, dim=None, keepdim=False, dtype=None):
    _check_float_norm(a, dtype)
    out_dt = _dt(a) if dtype is None else _t.as_dtype(dtype)
    x = _acc(a.astype(out_dt.np, copy=False))
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    p = float(ord)
    ax = xp.abs(x)
    with np.errstate(all="ignore"):
        if math.isinf(p):
            for d in dims:
                if a.shape[d] == 0:
                    raise RuntimeError(f"linalg.vector_norm cannot compute the {'' if p > 0 else '-'}inf norm "
                                       f"on the dimension {d} because this dimension is empty and the "
                                       f"operation does not have an identity")
            r = (xp.max if p > 0 else xp.min)(ax, axis=dims, keepdims=keepdim)
        elif p == 0:
            r = xp.sum((ax != 0).astype(x.dtype), axis=dims, keepdims=keepdim)
        elif p == 1:
            r = xp.sum(ax, axis=dims, keepdims=keepdim)
        elif p == 2:
            r = xp.sqrt(xp.sum(ax * ax, axis=dims, keepdims=keepdim))
        else:
            r = xp.sum(ax ** p, axis=dims, keepdims=keepdim) ** (1.0 / p)
        return _C(xp, xp.asarray(r).astype(out_dt.np, copy=False), a)     # (a half overflow: inf)


@linalg_vector_norm.derivative
def _vector_norm_bw(ctx, g):
    """torch's norm_backward, step for step: each step a pointwise op rounded to the dtype, so a
    float16/bfloat16 gradient rounds where torch's does (``g * (x / norm)``, not ``g * x / norm``)."""
    a, ord, dim, keepdim, dtype = ctx.args
    x = a if dtype is None else a.to(_t.as_dtype(dtype))
    shape = tuple(a.shape)
    p = float(ord)
    norm = _keep(ctx.result, shape, dim, keepdim)
    ge = expand_reduced(g, shape, dim, keepdim)
    if p == 0:
        return (None,)      # a count of non-zeros: torch's gradient is undefined (not zeros)
    sgn = _sign(x)
    if p == 1:
        return (_like(ge * sgn, a),)
    if math.isinf(p):
        # |x| equal to the norm (or NaN) share the gradient evenly, with x's sign.
        mask = (x * sgn == norm) | x.isnan()
        count = mask.sum(dim, keepdim=True)
        return (_like(sgn * (ge / count * mask), a),)
    nz = norm == 0
    if p == 2:
        # x / norm is 0/0 only where the norm, hence every x, is zero: 0 there, as torch's masked_fill
        return (_like(ge * (x / (norm + nz)), a),)
    if p < 1:
        # d ||x||_p / d x_i = sgn(x_i) |x_i|^(p-1) ||x||_p^(1-p); zero where x_i is zero
        scaled = sgn * x.abs().pow(p - 1).masked_fill(x == 0, 0)
        return (_like(scaled * ge * norm.pow(1 - p), a),)
    scaled = sgn * x.abs().pow(p - 1) if p < 2 else x * x.abs().pow(p - 2)
    scale = (ge / norm.pow(p - 1)).masked_fill(nz, 0)
    return (_like(scaled * scale, a),)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """``norm(input, p='fro', dim=None, keepdim=False, dtype=None)``: vector p-norms over ``dim``
    (all dims when None); ``'fro'`` is the 2-norm over at most two dims."""
    kw = {k: v for k, v in (("p", p), ("dim", dim), ("keepdim", keepdim), ("dtype", dtype))
          if not (k == "p" and v == "fro") and v is not None and v is not False}
    r = _overridden(norm, (input,), kw)
    if r is not NotImplemented:
        return r
    if out is not None:
        raise TypeError("norm(): the out= argument is not supported by ember")
    if isinstance(dim, numbers.Integral):
        dim = [dim]
    elif dim is not None:
        dim = list(dim)
    if isinstance(p, str) and p != "fro" and isinstance(input, Tensor):
        # torch.norm hands every other string (nuc, or one that matrix_norm rejects) to
        # linalg.matrix_norm, over all dims when none are given
        from .. import linalg as _linalg
        return _linalg.matrix_norm(input, p, list(range(input.ndim)) if dim is None else dim, keepdim,
                                   dtype=dtype)
    if isinstance(input, Tensor):
        dtype = norm_dtype_checks("linalg.vector_norm", input.dtype, dtype)
        if input.dtype.is_complex:
            # a complex tensor's norms are its moduli's (torch), computed in dtype when given
            input = (input if dtype is None else input.to(dtype)).abs()
            dtype = None
    if isinstance(p, str):
        if p == "fro":
            if dim is not None and len(dim) > 2:
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                                   f"{' '.join(str(d) for d in dim)}")
            p = 2
        else:
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    elif p is None:
        p = 2
    return linalg_vector_norm.binding(input, p, dim, keepdim, dtype=dtype)


# ---------------------------------------------------------------------- logsumexp
@defop("logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor", tags=RED, save_result=True)
def logsumexp(xp, a, dim, keepdim=False):
    if not _dt(a).is_floating_point and a.dtype.kind != "c":
        a = a.astype(_t.get_default_dtype().np)
    out_np = a.dtype
    x = _acc(a)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    with np.errstate(all="ignore"):
        if x.size == 0:
            m = xp.zeros([1 if i in dims else s for i, s in enumerate(x.shape)], x.real.dtype)
        else:
            # complex: the shift is the largest real part (torch), the phase is left alone
            m = xp.max(x.real, axis=dims, keepdims=True)
            m = xp.where(xp.isinf(m), 0, m)
        if x is not a and xp is np:
            # torch's half composite, each step rounded to the half dtype: exp(x - max), its sum
            # (accumulated in float32), the log, plus the max
            h = a.dtype
            e = np.exp((x - m).astype(h).astype(np.float32)).astype(h).astype(np.float32)
            sm = np.sum(e, axis=dims, keepdims=True).astype(h).astype(np.float32)
            s = np.log(sm).astype(h).astype(np.float32) + m
        else:
            s = xp.log(xp.sum(xp.exp(x - m), axis=dims, keepdims=True)) + m
    if not keepdim:
        s = xp.squeeze(s, axis=dims)
    return _C(xp, xp.asarray(s).astype(out_np, copy=False), a)


@logsumexp.derivative
def _logsumexp_bw(ctx, g):
    a, dim, keepdim = ctx.args
    shape = tuple(a.shape)
    r = _keep(ctx.result, shape, dim, keepdim)
    return (expand_reduced(g, shape, dim, keepdim) * (a - r).exp(),)


# ---------------------------------------------------------------------- cumsum / cumprod
@defop("_reverse_cumsum(Tensor self, int dim) -> Tensor", save=(), function=False, method=False,
       grad_fn_name="ReverseCumsumBackward0")
def _reverse_cumsum(xp, a, dim):
    """Sums from the end along ``dim``: out_i = sum_{j >= i} a_j (cumsum's derivative)."""
    if a.ndim == 0:
        return a.copy()
    d = wrap_dim(dim, a.ndim)
    with np.errstate(all="ignore"):
        # accumulated as torch's grad.flip(d).cumsum(d).flip(d) (``_cum_acc``)
        return xp.ascontiguousarray(xp.flip(xp.cumsum(_cum_acc(xp.flip(a, d)), axis=d), d)).astype(a.dtype,
                                                                                                   copy=False)


@_reverse_cumsum.derivative
def _reverse_cumsum_bw(ctx, g):
    a, dim = ctx.args
    return (cumsum.binding(g, dim),)


@defop("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", save=(), inplace=True)
def cumsum(xp, a, dim, dtype=None):
    d = wrap_dim(dim, a.ndim)
    out_dt = _sum_dtype(_dt(a), dtype)
    a = a.astype(out_dt.np, copy=False)
    if a.ndim == 0:
        return a.copy()
    with np.errstate(all="ignore"):
        # accumulated as PyTorch's (``_cum_acc``: each output rounded once)
        inexact = out_dt.is_floating_point or out_dt.is_complex
        r = xp.asarray(xp.cumsum(_cum_acc(a), axis=d, dtype=None if inexact else out_dt.np))
        if inexact:
            r = r + r.dtype.type(0)     # PyTorch's accumulator starts at +0: a -0.0 prefix sums to +0.0
        # row-major, as PyTorch's (numpy's cumsum keeps a permuted input's dim order)
        return _C(xp, r.astype(out_dt.np, copy=False), a)


@cumsum.derivative
def _cumsum_bw(ctx, g):
    a, dim, dtype = ctx.args
    return (_like(_reverse_cumsum.binding(g, dim), a),)


@defop("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", save_result=True, inplace=True)
def cumprod(xp, a, dim, dtype=None):
    d = wrap_dim(dim, a.ndim)
    out_dt = _sum_dtype(_dt(a), dtype)
    a = a.astype(out_dt.np, copy=False)
    if a.ndim == 0:
        return a.copy()
    with np.errstate(all="ignore"):
        # accumulated as PyTorch's (``_cum_acc``); integers in their own dtype
        inexact = out_dt.is_floating_point or out_dt.is_complex
        r = xp.cumprod(_cum_acc(a), axis=d, dtype=None if inexact else out_dt.np)
        return _C(xp, xp.asarray(r).astype(out_dt.np, copy=False), a)


@cumprod.derivative
def _cumprod_bw(ctx, g):
    # d out_k / d x_i = prod_{j<=k, j!=i} x_j for k >= i. Before the first zero
    # z of the slice this is out_k / x_i; at z it is the cumprod with x_z
    # replaced by one (out1); after z every term has the factor x_z = 0, kept
    # as a factor (zval) so that the formula is right to first order too
    # (double backward is exact with at most one zero per slice).
    a, dim, dtype = ctx.args
    x = a if dtype is None else a.to(_t.as_dtype(dtype))
    out = ctx.result
    if len(tuple(a.shape)) == 0:
        return (_like(g, a),)
    zero = x == 0
    seen = zero.cumsum(dim)
    before = seen == 0
    first = zero * (seen == 1)
    xs = x * (x != 0) + zero
    t1 = _reverse_cumsum.binding(g * out, dim) / xs * before
    out1 = (x - x * first + first).cumprod(dim)
    r1 = _reverse_cumsum.binding(g * out1, dim)
    t2 = r1 * first
    zval = (x * first).sum(dim, keepdim=True)
    after = (seen > 0) * (first == 0)
    t3 = zval * r1 / xs * after
    return (_like(t1 + t2 + t3, a),)


# ---------------------------------------------------------------------- all / any
def _allany_dims(dim, ndim):
    """The axes all/any reduce: PyTorch's all/any take an empty dim list for no dims at all
    (``x.any(dim=())`` is ``x != 0`` elementwise), unlike sum/amax, where it means every dim."""
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return ()
    return _axes(reduce_dims(dim, ndim), ndim)


def _allany(name, fn):
    @defop(f"{name}(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
           tags=RED + ("nondifferentiable",))
    def kernel(xp, a, dim=None, keepdim=False):
        dims = _allany_dims(dim, a.ndim)
        r = _C(xp, xp.asarray(getattr(xp, fn)(a, axis=dims, keepdims=keepdim)), a)
        return r.astype(np.uint8) if a.dtype == np.uint8 else r.astype(np.bool_, copy=False)
    return kernel


all = _allany("all", "all")
any = _allany("any", "any")


# ---------------------------------------------------------------------- softmax / log_softmax
_SOFTMAX_FAST = (np.dtype(np.float32), np.dtype(np.float64))


def _half_softmax_inner(x, e, d, half):
    """Softmax over a dim ``d`` that is not the last, of a float16/bfloat16 input (``x`` its
    float32 values, ``e`` = exp(x - max)), as torch's CPU kernel rounds it: its vector path
    divides the float32 exp by the float32 sum and rounds once, its scalar path (the lanes of
    ``_half_lanes.softmax_scalar_lanes``) stores the exp in the half dtype first and divides
    that, a second rounding an ulp apart in ~1 element of 50. Both sum the exps in
    float32 along the dim, one term after another."""
    shape = x.shape
    outer = math.prod(shape[:d])
    inner = math.prod(shape[d + 1:])
    e3 = e.reshape(outer, shape[d], inner)
    s = np.add.accumulate(e3, axis=1)[:, -1:, :]        # sequential, as the kernel's loop
    r = e3 / s
    lanes = _half_lanes.softmax_scalar_lanes(outer, inner)
    if lanes.any():
        r = np.where(lanes, e3.astype(half).astype(np.float32) / s, r)
    return r.reshape(shape)


def _softmax_kernel(name, log):
    def kernel(xp, a, dim, half_to_float=False):
        if type(a) is np.ndarray and a.dtype in _SOFTMAX_FAST and not half_to_float and a.ndim and a.size \
                and a.flags.c_contiguous and type(dim) is int and -a.ndim <= dim < a.ndim:
            # the common case, the general path's arithmetic below without its dtype, dim and
            # layout steps (each a no-op here): a few us of a small softmax
            d = dim + a.ndim if dim < 0 else dim
            with np.errstate(all="ignore"):
                z = a - np.maximum.reduce(a, axis=d, keepdims=True)       # xp.max
                if log:
                    return z - np.log(np.add.reduce(np.exp(z), axis=d, keepdims=True))
                e = np.exp(z)
                return e * (1 / np.add.reduce(e, axis=d, keepdims=True))   # xp.sum
        if not _dt(a).is_floating_point:
            d = wrap_dim(dim, a.ndim)
            impl = f"{name}_lastdim_kernel_impl" if d == builtins.max(a.ndim, 1) - 1 else f"{name}_kernel_impl"
            raise NotImplementedError(f'"{impl}" not implemented for \'{_dt(a).legacy_name}\'')
        d = wrap_dim(dim, a.ndim)
        out_np = np.float32 if half_to_float else a.dtype
        x = _acc(a)
        if a.ndim == 0:
            x = x.reshape(1)        # a one-element softmax: NaN for NaN and ±inf, as PyTorch's
        with np.errstate(all="ignore"):
            if x.size == 0:
                return _C(xp, x.astype(out_np))
            # no ±inf -> 0 shift here (unlike logsumexp): PyTorch subtracts the raw max, so a row
            # holding +inf (inf - inf) or only -inf (-inf - -inf) is NaN throughout
            m = xp.max(x, axis=d, keepdims=True)
            z = x - m
            e = xp.exp(z)
            s = xp.sum(e, axis=d, keepdims=True)
            if log and x is not a and not half_to_float and d == a.ndim - 1:
                # torch's last-dim log_softmax keeps the sum and its log in the input's half
                # dtype (each rounded), then subtracts in float: rounded as torch's
                s = s.astype(a.dtype).astype(np.float32)
                r = z - xp.log(s).astype(a.dtype).astype(np.float32)
            elif not log and x is not a and not half_to_float and type(x) is np.ndarray and d < a.ndim - 1:
                r = _half_softmax_inner(x, e, d, a.dtype)
            else:
                r = z - xp.log(s) if log else e * (1 / s)   # (as PyTorch's CPU kernel and the decomposition)
            if a.ndim == 0:
                r = r.reshape(())
        # row-major, as PyTorch's (numpy's elementwise results keep a permuted input's order)
        return _C(xp, xp.asarray(r).astype(out_np, copy=False), a)
    return kernel


_softmax = defop("_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", save=(), save_result=True,
                 function=False, method=False, grad_fn_name="SoftmaxBackward0")(_softmax_kernel("softmax", False))
_log_softmax = defop("_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", save=(),
                     save_result=True, function=False, method=False,
                     grad_fn_name="LogSoftmaxBackward0")(_softmax_kernel("log_softmax", True))


@_softmax.derivative
def _softmax_bw(ctx, g):
    a, dim, h = ctx.args
    y = ctx.result
    if len(tuple(a.shape)) == 0:
        return (g * 0,)
    return (_like(y * (g - (g * y).sum(dim, keepdim=True)), a),)


def unrecorded(*tensors) -> bool:
    """Whether a derivative formula over these tensors may run its ops' kernels back to back
    (the same kernels on the same arrays, without a dispatcher round each): grad mode off (a
    backward pass without create_graph), no dispatch / __torch_function__ mode or autocast
    region, plain Tensors on numpy arrays."""
    st = _STATE
    if st.grad_enabled or st.modes or st.tf_modes or st.autocast is not None:
        return False
    for t in tensors:
        if type(t) is not Tensor or type(t._data) is not np.ndarray:
            return False
    return True


_K = {}


def kernel_of(name):
    """The numpy kernel of the registered op ``name`` (looked up once; see ``unrecorded``)."""
    k = _K.get(name)
    if k is None:
        from .registry import OPS
        op = OPS[name]
        k = _K[name] = op.unchecked_kernel or op.kernel
    return k


@_log_softmax.derivative
def _log_softmax_bw(ctx, g):
    a, dim, h = ctx.args
    y = ctx.result
    if len(tuple(a.shape)) == 0:
        return (g * 0,)
    if g.dtype is y.dtype and y.dtype is a.dtype and type(dim) is int and unrecorded(g, y):
        # (the formula below as its kernels: exp, sum, mul, sub; _like is a no-op here)
        gd, yd = g._data, y._data
        if gd.dtype in _SOFTMAX_FAST:
            r = kernel_of("sub")(np, gd, kernel_of("mul")(np, kernel_of("exp")(np, yd),
                                                           kernel_of("sum")(np, gd, dim, True, None)))
            return (_make(r, g.device, g.dtype),)
    return (_like(g - y.exp() * g.sum(dim, keepdim=True), a),)


@defcomposite("softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")
def softmax(self, dim, dtype=None):
    x = self if dtype is None else self.to(_t.as_dtype(dtype))
    return _softmax.binding(x, dim, False)


@defcomposite("log_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")
def log_softmax(self, dim, dtype=None):
    x = self if dtype is None else self.to(_t.as_dtype(dtype))
    return _log_softmax.binding(x, dim, False)


# ---------------------------------------------------------------------- sort / argsort / topk
def sort_keys(a):
    """``a`` as numpy can order it: ml_dtypes' bfloat16 sort takes NaN for equal to everything and
    leaves it (and what follows it) unsorted; float32 holds every bfloat16 value exactly and sorts
    NaN last."""
    return a.astype(np.float32) if a.dtype == _t.bfloat16.np else a


def _sort_indices(xp, a, d, descending):
    """Stable sort indices along axis ``d`` (NaN sorts as the largest value)."""
    a = sort_keys(a)
    if descending:
        n = a.shape[d]
        idx = xp.flip(xp.argsort(xp.flip(a, d), axis=d, kind="stable"), d)
        return (n - 1 - idx).astype(np.int64, copy=False)
    return xp.argsort(a, axis=d, kind="stable").astype(np.int64, copy=False)


@defop("sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=False) -> Tensor, Tensor",
       save=(), save_result=True, function=False, method=False)
def _sort(xp, a, dim=-1, descending=False, stable=False):
    d = wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return a.copy(), xp.asarray(0, dtype=np.int64)
    idx = _sort_indices(xp, a, d, descending)
    vals = xp.take_along_axis(a, idx, axis=d)
    if _canonical_c(a):
        return vals, idx
    # PyTorch sorts into buffers laid out like the input (dense in its dim order)
    return copy_preserve(xp, a, vals), copy_preserve(xp, a, idx, np.int64)


@_sort.derivative
def _sort_bw(ctx, grads):
    a, dim, descending, stable = ctx.args
    gv = grads[0]
    if gv is None:
        return (None,)
    return (_route_back(gv, ctx.result_at(1), a.shape, wrap_dim(dim, len(a.shape)), True),)


@defop("argsort(Tensor self, int dim=-1, bool descending=False, bool stable=False) -> Tensor",
       tags=("nondifferentiable",))
def argsort(xp, a, dim=-1, descending=False, stable=False):
    d = wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return xp.asarray(0, dtype=np.int64)
    idx = _sort_indices(xp, a, d, descending)
    return idx if _canonical_c(a) else copy_preserve(xp, a, idx, np.int64)


@defop("topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> Tensor, Tensor",
       save=(), save_result=True, function=False, method=False)
def _topk(xp, a, k, dim=-1, largest=True, sorted=True):
    d = wrap_dim(dim, a.ndim)
    if a.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = a.shape[d] if a.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if a.ndim == 0:
        return a.copy(), xp.asarray(0, dtype=np.int64)
    if xp is np:     # nth_element + a sort of k in one native loop (_native_small), not a full sort
        r = _native_small.topk(a, k, d, largest)
        if r is not None:
            return r
    idx = _sort_indices(xp, a, d, largest)
    idx = xp.take(idx, xp.arange(k), axis=d)
    return xp.take_along_axis(a, idx, axis=d), idx


@_topk.derivative
def _topk_bw(ctx, grads):
    a, k, dim, largest, sorted = ctx.args
    gv = grads[0]
    if gv is None:
        return (None,)
    return (_route_back(gv, ctx.result_at(1), a.shape, wrap_dim(dim, len(a.shape)), True),)


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    """``sort(input, dim=-1, descending=False, stable=False) -> (values, indices)``; always stable."""
    r = _overridden(sort, (input,), {k: v for k, v in (("dim", dim), ("descending", descending),
                                                          ("stable", stable)) if v not in (-1, False)})
    if r is not NotImplemented:
        return r
    if out is not None:       # torch's out= (ember/ops/_out.py), here rather than a wrapper frame
        from ._out import call_with_out
        return call_with_out("sort", sort, (input, dim, descending, stable), {}, out)
    if isinstance(dim, bool) and isinstance(input, Tensor):   # sort(stable, dim, descending) form
        raise TypeError("sort(): pass stable= as a keyword argument")
    return _sort_t(*_sort.binding(input, dim, descending, stable=stable))


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """``topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices)``."""
    if not (isinstance(input, Tensor) and type(k) is int and type(dim) is int and type(largest) is bool
            and type(sorted) is bool):    # (with these types no argument is an fx proxy: nothing to test)
        r = _overridden(topk, (input, k), {kk: v for kk, v in (("dim", dim), ("largest", largest),
                                                                  ("sorted", sorted)) if v not in (-1, True)})
        if r is not NotImplemented:
            return r
    if out is not None:       # torch's out= (ember/ops/_out.py), here rather than a wrapper frame
        from ._out import call_with_out
        return call_with_out("topk", topk, (input, k, dim, largest, sorted), {}, out)
    return _topk_t(*_topk.binding(input, k, dim, largest, sorted))


# ---------------------------------------------------------------------- entry points
for _fn in (max, min, var, std, norm, sort, topk):   # torch has no Tensor.var_mean / std_mean
    _fn.__module__ = "ember"
    setattr(Tensor, _fn.__name__, _fn)
for _fn in (max, min, var, std, var_mean, std_mean, norm, sort, topk):
    setattr(api, _fn.__name__, _fn)


# ---------------------------------------------------------------------- meta functions
# Output metadata from input metadata (see ember/ops/_meta.py). Argument checks
# reuse the kernels' own helpers on ``_meta.info(t)`` so fake tensors raise the
# kernels' errors. Layouts follow PyTorch's (the kernels convert numpy's where the
# two differ): reductions, cumulative ops and softmax are row-major; sort and
# argsort keep the input's layout (``_meta.preserve_strides``); argmax and fancy
# indexing (take_along_axis, take) give C order.
from . import _meta as _M  # noqa: E402


def _k_full(a, dtype):
    return _M.k_out(tuple(a.shape), dtype, a)


def _cast(a, dt):
    """The operand ``a.astype(dt, copy=False)`` as numpy lays it out (a 'K' copy when the dtype changes)."""
    return _M.cast_layout(a, a.dtype is not dt)


def _c_out(shape, dtype):
    return _M.out(tuple(shape), dtype)


def _reduced_c(a, dims, keepdim, dtype):
    """A reduction's result: row-major, as PyTorch's (the kernels make numpy's result so)."""
    return _c_out(_M.reduced_shape(tuple(a.shape), dims, keepdim), dtype)


def _whole(dim):
    return dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)


@_reduction_gather.meta_fn
def _reduction_gather_meta(a, index, dim):
    if a.ndim == 0:
        return _c_out((), a.dtype)
    # fancy indexing allocates in the 'K' order of its index arrays (the aranges never vote)
    return _M.k_out(tuple(index.shape), a.dtype, _cast(index, _t.int64))


@_reduction_scatter.meta_fn
def _reduction_scatter_meta(src, index, dim, size):
    return _c_out(tuple(size), src.dtype)


@sum.meta_fn
def _sum_meta(a, dim=None, keepdim=False, dtype=None):
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    dt = _sum_dtype(a.dtype, dtype)
    return _reduced_c(a, dims, keepdim, dt)


@mean.meta_fn
def _mean_meta(a, dim=None, keepdim=False, dtype=None):
    dt = a.dtype if dtype is None else _t.as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {dt.legacy_name}")
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    return _reduced_c(a, dims, keepdim, dt)


@prod.meta_fn
def _prod_meta(a, dim=None, keepdim=False, dtype=None):
    if dim is not None:
        dim = wrap_dim(dim, a.ndim)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    dt = _sum_dtype(a.dtype, dtype)
    return _reduced_c(a, dims, keepdim, dt)


def _amaxmin_meta(name):
    def meta(a, dim=(), keepdim=False):
        dims = reduce_dims(dim, a.ndim)
        _nonempty(name, _M.info(a), _axes(dims, a.ndim), _whole(dim), RuntimeError)
        return _reduced_c(a, _axes(dims, a.ndim), keepdim, a.dtype)
    return meta


amax.meta = _amaxmin_meta("amax")
amin.meta = _amaxmin_meta("amin")


def _full_maxmin_meta(name):
    def meta(a):
        _nonempty(name, _M.info(a), (), True, RuntimeError)
        return _c_out((), a.dtype)
    return meta


_max_full.meta = _full_maxmin_meta("max")
_min_full.meta = _full_maxmin_meta("min")


def _dim_maxmin_meta(name):
    def meta(a, dim, keepdim=False):
        d = wrap_dim(dim, a.ndim)
        if a.ndim == 0:
            return _c_out((), a.dtype), _c_out((), _t.int64)
        _nonempty(name, _M.info(a), (d,), False)
        shape = _M.reduced_shape(a.shape, (d,), keepdim)
        # values: take_along_axis (fancy indexing, C order); indices: argmax (C order)
        return _c_out(shape, a.dtype), _c_out(shape, _t.int64)
    return meta


_max_dim.meta = _dim_maxmin_meta("max")
_min_dim.meta = _dim_maxmin_meta("min")


def _argmaxmin_meta(name):
    def meta(a, dim=None, keepdim=False):
        if a.dtype is _t.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            _nonempty(name, _M.info(a), (), True)
            return _c_out((1,) * a.ndim if keepdim else (), _t.int64)
        d = wrap_dim(dim, a.ndim)
        if a.ndim == 0:
            return _c_out((), _t.int64)
        _nonempty(name, _M.info(a), (d,), False)
        return _c_out(_M.reduced_shape(a.shape, (d,), keepdim), _t.int64)
    return meta


argmax.meta = _argmaxmin_meta("argmax")
argmin.meta = _argmaxmin_meta("argmin")


def _var_core_meta(a, dim, correction, keepdim, name):
    """(var, mean) metadata, with the kernel's dtype error and degrees-of-freedom warning."""
    _check_float_var(_M.info(a), name)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    n = _M._hint(_numel_of(tuple(a.shape), dims))     # the warning is advice: decide it without a guard
    c = 1 if correction is None else correction
    if n - c <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      f"reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
    return (_reduced_c(a, dims, keepdim, a.dtype), _reduced_c(a, dims, keepdim, a.dtype))


_var.meta = lambda a, dim=None, correction=None, keepdim=False: _var_core_meta(a, dim, correction, keepdim,
                                                                               "var")[0]
_std.meta = lambda a, dim=None, correction=None, keepdim=False: _var_core_meta(a, dim, correction, keepdim,
                                                                               "std")[0]
_var_mean.meta = lambda a, dim=None, correction=None, keepdim=False: _var_core_meta(a, dim, correction,
                                                                                    keepdim, "var_mean")
_std_mean.meta = lambda a, dim=None, correction=None, keepdim=False: _var_core_meta(a, dim, correction,
                                                                                    keepdim, "std_mean")


@linalg_vector_norm.meta_fn
def _linalg_vector_norm_meta(a, ord=2, dim=None, keepdim=False, dtype=None):
    _check_float_norm(_M.info(a), dtype)
    out_dt = a.dtype if dtype is None else _t.as_dtype(dtype)
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    p = float(ord)
    if math.isinf(p):
        for d in dims:
            if _M.is_empty((a.shape[d],)):
                raise RuntimeError(f"linalg.vector_norm cannot compute the {'' if p > 0 else '-'}inf norm "
                                   f"on the dimension {d} because this dimension is empty and the "
                                   f"operation does not have an identity")
    return _reduced_c(a, dims, keepdim, out_dt)


@logsumexp.meta_fn
def _logsumexp_meta(a, dim, keepdim=False):
    dt = a.dtype if a.dtype.is_floating_point or a.dtype.is_complex else _t.get_default_dtype()
    dims = _axes(reduce_dims(dim, a.ndim), a.ndim)
    return _reduced_c(a, dims, keepdim, dt)


@_reverse_cumsum.meta_fn
def _reverse_cumsum_meta(a, dim):
    if a.ndim == 0:
        return _c_out((), a.dtype)
    wrap_dim(dim, a.ndim)
    return _c_out(a.shape, a.dtype)


def _cum_meta(a, dim, dtype=None):
    wrap_dim(dim, a.ndim)
    out_dt = _sum_dtype(a.dtype, dtype)
    if a.ndim == 0:
        return _c_out((), out_dt)
    return _c_out(tuple(a.shape), out_dt)        # row-major, as the kernel's (and PyTorch's)


cumsum.meta = _cum_meta
cumprod.meta = _cum_meta


def _allany_meta(a, dim=None, keepdim=False):
    dims = _allany_dims(dim, a.ndim)
    return _reduced_c(a, dims, keepdim, _t.uint8 if a.dtype is _t.uint8 else _t.bool_)


all.meta = _allany_meta
any.meta = _allany_meta


def _softmax_meta(name):
    def meta(a, dim, half_to_float=False):
        if not a.dtype.is_floating_point:
            d = wrap_dim(dim, a.ndim)
            impl = f"{name}_lastdim_kernel_impl" if d == builtins.max(a.ndim, 1) - 1 else f"{name}_kernel_impl"
            raise NotImplementedError(f'"{impl}" not implemented for \'{a.dtype.legacy_name}\'')
        d = wrap_dim(dim, a.ndim)
        dt = _t.float32 if half_to_float else a.dtype
        return _c_out(tuple(a.shape), dt)         # row-major, as the kernel's (and PyTorch's)
    return meta


_softmax.meta = _softmax_meta("softmax")
_log_softmax.meta = _softmax_meta("log_softmax")


@_sort.meta_fn
def _sort_meta(a, dim=-1, descending=False, stable=False):
    wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return _c_out((), a.dtype), _c_out((), _t.int64)
    return _M.preserve_out(a), _M.preserve_out(a, _t.int64)


@argsort.meta_fn
def _argsort_meta(a, dim=-1, descending=False, stable=False):
    wrap_dim(dim, a.ndim)
    return _M.preserve_out(a, _t.int64) if a.ndim else _c_out((), _t.int64)


@_topk.meta_fn
def _topk_meta(a, k, dim=-1, largest=True, sorted=True):
    d = wrap_dim(dim, a.ndim)
    if a.dtype is _t.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = a.shape[d] if a.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if a.ndim == 0:
        return _c_out((), a.dtype), _c_out((), _t.int64)
    shape = tuple(k if i == d else s for i, s in enumerate(a.shape))
    return _c_out(shape, a.dtype), _c_out(shape, _t.int64)
