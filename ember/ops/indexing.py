"""Op family: indexing.

Kernel ops: ``index`` (advanced indexing, IndexBackward0), ``index_put``
(and ``index_put_``), gather/scatter/scatter_add/scatter_reduce,
index_select/index_add/index_copy/index_fill, take/put, masked_select,
nonzero.

Python indexing: ``Tensor.__getitem__`` calls :func:`getitem`, which applies
the basic part of the index (ints, slices, None, Ellipsis) as view ops
(select / slice / unsqueeze / alias, so the result shares memory) and then,
if any integer or boolean tensors remain, one ``index`` op on that view.
Advanced dims follow PyTorch's rule: where the index tensors are adjacent
their broadcast dims replace them in place, otherwise they go first.
``__setitem__`` calls :func:`setitem`, an in-place write (``copy_`` into
the basic view, or ``index_put_``) that bumps the version counter and is
recorded by autograd (through CopySlices when the target is a view).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from .._state import STATE
from ..tensor import Tensor, _make
from . import _meta, api
from .checked_scalar import check_fits, checked_array
from ._helpers import _canonical_c, copy_preserve, np_finfo, np_is_float, sum_to, wrap_dim
from .reduction import unrecorded as _unrecorded
from .registry import OPS, defop
from . import shape as _shape

_INT_KINDS = "iu"


# ---------------------------------------------------------------------- advanced-index keys
def _arr(x):
    return x._data if isinstance(x, Tensor) else x


def _is_mask(arr):
    return arr.dtype == np.bool_ or arr.dtype == np.uint8


def _fmt_shapes(shapes):
    return ", ".join(str(list(s)) for s in shapes)


def _adv_key(xp, a, indices):
    """The backend (numpy-style) index tuple for a list of index tensors / None, one per dim
    (a boolean mask spans as many dims as it has)."""
    key, arrays, bounds = [], [], []
    dim = 0
    for ix in indices:
        if ix is None:
            key.append(slice(None))
            dim += 1
            continue
        arr = _arr(ix)
        if _is_mask(arr):
            arr = arr.astype(bool, copy=False)
            if arr.ndim == 0:
                raise IndexError("a 0-dim boolean index is only supported through Python indexing (x[True])")
            if dim + arr.ndim > a.ndim:
                raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
            for j in range(arr.ndim):
                if arr.shape[j] != a.shape[dim + j]:
                    raise IndexError(f"The shape of the mask {list(arr.shape)} at index {j} does not match "
                                     f"the shape of the indexed tensor {list(a.shape)} at index {dim + j}")
            nz = xp.nonzero(arr)
            key.extend(nz)
            arrays.extend(nz)
            dim += arr.ndim
        elif arr.dtype.kind in _INT_KINDS:
            if dim >= a.ndim:
                raise IndexError(f"too many indices for tensor of dimension {a.ndim}")
            bounds.append((arr, a.shape[dim], dim))
            arr = arr.astype(np.int64, copy=False)
            key.append(arr)
            arrays.append(arr)
            dim += 1
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    shape = ()
    if len(arrays) > 1:
        try:
            shape = np.broadcast_shapes(*[x.shape for x in arrays])
        except ValueError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                             f"{_fmt_shapes([x.shape for x in arrays])}") from None
    # an index that broadcasts to nothing selects nothing: torch (and numpy) do not check its
    # bounds then (``x[..., False, [1]]`` on a [2, 1] tensor is [2, 0], not an error)
    if 0 not in shape:
        for arr, n, d in bounds:
            _check_bounds(xp, arr, n, d, IndexError)
    return tuple(key)


def _check_bounds(xp, arr, n, dim, exc=IndexError):
    if arr.size == 0:
        return
    mx, mn = int(arr.max()), int(arr.min())
    if mx >= n:
        raise exc(f"index {mx} is out of bounds for dimension {dim} with size {n}")
    if mn < -n:
        raise exc(f"index {mn} is out of bounds for dimension {dim} with size {n}")


def _zeros_like_meta(m):
    return api.zeros(tuple(m.shape), dtype=m.dtype, device=m.device)


# ---------------------------------------------------------------------- index / index_put
@defop("index(Tensor self, Any indices) -> Tensor", save=(), method=False, function=False)
def _index(xp, a, indices):
    return xp.ascontiguousarray(a[_adv_key(xp, a, indices)])


@_index.derivative
def _index_bw(ctx, g):
    a, indices = ctx.args
    return (index_put.binding(_zeros_like_meta(a), indices, g, True),)


@defop("index_put(Tensor self, Any indices, Tensor values, bool accumulate=False) -> Tensor", inplace=True,
       save=())
def index_put(xp, a, indices, values, accumulate=False):
    indices = tuple(indices)
    if values.dtype != a.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_t.from_numpy_dtype(a.dtype).legacy_name} for the destination and "
                           f"{_t.from_numpy_dtype(values.dtype).legacy_name} for the source.")
    key = _adv_key(xp, a, indices)
    # PyTorch writes into clone(self): a permuted input keeps its layout
    out = a.copy() if _canonical_c(a) else copy_preserve(xp, a)
    tshape = out[key].shape
    try:
        vb = xp.broadcast_to(values, tshape)
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
                           f"to indexing result of shape {list(tshape)}") from None
    if accumulate:
        xp.add.at(out, key, vb)
    else:
        out[key] = vb
    return out


@index_put.derivative
def _index_put_bw(ctx, g):
    a, indices, values, accumulate = ctx.args
    n = ctx.needs_input_grad
    gs = gv = None
    if n[0]:
        gs = g if accumulate else index_put.binding(g, indices, api.zeros((), dtype=g.dtype, device=g.device))
    if n[1]:
        gv = sum_to(_index.binding(g, tuple(indices)), values.shape)
    return gs, gv


def _index_put_entry(self, indices, values, accumulate=False):
    return index_put.binding(self, _norm_indices(indices, self.device), values, accumulate)


def _index_put__entry(self, indices, values, accumulate=False):
    return index_put.inplace_variant.binding(self, _norm_indices(indices, self.device), values, accumulate)


def _norm_indices(indices, device):
    if isinstance(indices, Tensor):
        indices = (indices,)
    out = []
    for ix in indices:
        if ix is None or isinstance(ix, Tensor):
            out.append(ix)
        else:
            out.append(_as_index_tensor(ix, device))
    return tuple(out)


def _copy_inplace(dst, src):
    """``dst.copy_(src)`` (the ``copy`` record lives in ops/copy.py, imported after this module)."""
    return OPS["copy_"].binding(dst, src)


# ---------------------------------------------------------------------- gather / scatter
def _check_same_ndim(a, idx, fn):
    if idx.ndim != a.ndim and not (idx.ndim <= 1 and a.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as "
                           f"{'input' if fn == 'gather' else 'self'} tensor")


def _check_index_dtype(idx, fn):
    if idx.dtype != np.int64 and idx.dtype != np.int32:      # (torch 2.13 takes int32 indices too)
        raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index")


_GRIDS = {}      # (index shape, dim) -> the numpy arange grids of _along_key (read only)


def _along_key(xp, idx, d):
    """Index tuple addressing, for every position of ``idx``, (..., idx[pos], ...) at dim d."""
    if xp is np:
        # the same aranges, made once per geometry (read-only index arrays: numpy never writes an index)
        ck = (idx.shape, d)
        grids = _GRIDS.get(ck)
        if grids is None:
            grids = []
            for k, n in enumerate(idx.shape):
                if k != d:
                    shp = [1] * idx.ndim
                    shp[k] = n
                    gk = np.arange(n).reshape(shp)
                    gk.flags.writeable = False
                    grids.append(gk)
                else:
                    grids.append(None)
            if len(_GRIDS) >= 256:
                _GRIDS.clear()
            _GRIDS[ck] = grids
        return tuple(idx if k == d else g for k, g in enumerate(grids))
    key = []
    for k, n in enumerate(idx.shape):
        if k == d:
            key.append(idx)
        else:
            shp = [1] * idx.ndim
            shp[k] = n
            key.append(xp.arange(n).reshape(shp))
    return tuple(key)


def _scatter_checks(xp, a, idx, src, d, fn):
    _check_index_dtype(idx, fn)
    _check_same_ndim(a, idx, fn)
    for k in range(idx.ndim):
        if k != d and idx.shape[k] > a.shape[k]:
            raise RuntimeError(f"Expected index {list(idx.shape)} to be no larger than self {list(a.shape)} "
                               f"apart from dimension {d} and to be no larger size than src "
                               f"{list(src.shape) if src is not None else list(idx.shape)}")
        if src is not None and src.ndim and idx.shape[k] > src.shape[k]:
            raise RuntimeError(f"Expected index {list(idx.shape)} to be no larger than self {list(a.shape)} "
                               f"apart from dimension {d} and to be no larger size than src "
                               f"{list(src.shape)}")
    _check_bounds(xp, idx, a.shape[d] if a.ndim else 1, d, RuntimeError)


def _src_part(src, idx):
    return src[tuple(slice(0, n) for n in idx.shape)]


def _pad_to(gpart, shape):
    """Gradient of ``src[:idx.shape]``: ``gpart`` padded with zeros to ``shape``."""
    if tuple(gpart.shape) == tuple(shape):
        return gpart
    key = tuple(slice(0, n) for n in gpart.shape)
    return _shape._embed.binding(gpart, tuple(shape), key)


@defop("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", save=("index",))
def gather(xp, a, dim, index, sparse_grad=False):
    _check_index_dtype(index, "gather")
    if a.ndim == 0:
        a = a.reshape(1)
        idx0 = index.reshape(-1) if index.ndim else index.reshape(1)
        _check_bounds(xp, idx0, 1, 0, RuntimeError)
        return a[idx0].reshape(index.shape)
    d = wrap_dim(dim, a.ndim)
    _check_same_ndim(a, index, "gather")
    for k in range(a.ndim):
        if k != d and index.shape[k] > a.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                               f"no larger than self {list(a.shape)} apart from dimension {d}")
    _check_bounds(xp, index, a.shape[d], d, RuntimeError)
    return a[_along_key(xp, index, d)]


@gather.derivative
def _gather_bw(ctx, g):
    a, dim, index, _ = ctx.args
    if a.ndim == 0:
        return (g.sum().reshape(()) if index.numel() else api.zeros((), dtype=g.dtype, device=g.device), None)
    if a.device is g.device and _unrecorded(g, index):
        # (the ops' kernels without their dispatcher rounds: zeros -- full's +0.0 fill -- then
        # scatter_add's, which copies them and adds g at the index)
        z = np.zeros(tuple(a.shape), dtype=a.dtype.np)
        return (_make(scatter_add.kernel(np, z, dim, index._data, g._data), g.device), None)
    return (scatter_add.binding(_zeros_like_meta(a), dim, index, g), None)


def _scatter_name(args):
    return "ScatterBackward1" if not isinstance(args[3], Tensor) else "ScatterBackward0"


@defop("scatter(Tensor self, int dim, Tensor index, Tensor|Scalar src, *, str? reduce=None) -> Tensor",
       inplace=True, save=("index",), grad_fn_name=_scatter_name, scalar_overload=("src",))
def scatter(xp, a, dim, index, src, reduce=None):
    scalar = not hasattr(src, "dtype") or (isinstance(src, (np.generic,)))
    out = a.copy()
    if a.ndim == 0:
        out = out.reshape(1)
        index = index.reshape(-1)
        if not scalar:
            src = src.reshape(-1)
    d = wrap_dim(dim, out.ndim)
    if not scalar and src.dtype != a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _scatter_checks(xp, out, index, None if scalar else src, d, "scatter")
    key = _along_key(xp, index, d)
    vals = checked_array(xp, src, _t.from_numpy_dtype(a.dtype)) if scalar else _src_part(src, index)
    if scalar:
        vals = xp.broadcast_to(vals, index.shape)
    if reduce is None:
        out[key] = vals
    elif reduce == "add":
        xp.add.at(out, key, vals)
    elif reduce == "multiply":
        xp.multiply.at(out, key, vals)
    else:
        raise RuntimeError(f"reduce argument must be either add or multiply. Got {reduce}")
    return out.reshape(a.shape)


@scatter.derivative
def _scatter_bw(ctx, g):
    a, dim, index, src, reduce = ctx.args
    if reduce is not None:
        raise RuntimeError("the derivative for 'scatter' with a reduce argument is not implemented; use "
                           "scatter_reduce")
    n = ctx.needs_input_grad
    gs = g.scatter(dim, index, 0.0) if n[0] else None
    gsrc = None
    if n[2] and hasattr(src, "shape"):
        gsrc = _pad_to(g.gather(dim, index), src.shape)
    return gs, None, gsrc


def _scatter_entry(name):
    op = OPS[name]

    def fn(self, dim, index, src=None, *, value=None, reduce=None):
        if src is None:
            src = value
        if src is None:
            raise TypeError(f"{name}() missing required argument 'src' or 'value'")
        return op.binding(self, dim, index, src, reduce=reduce)
    fn.__name__ = fn.__qualname__ = name
    return fn


@defop("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", inplace=True,
       save=("index",))
def scatter_add(xp, a, dim, index, src):
    if src.dtype != a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    out = a.copy()
    if a.ndim == 0:
        out, index, src = out.reshape(1), index.reshape(-1), src.reshape(-1)
    d = wrap_dim(dim, out.ndim)
    _scatter_checks(xp, out, index, src, d, "scatter_add")
    xp.add.at(out, _along_key(xp, index, d), _src_part(src, index))
    return out.reshape(a.shape)


@scatter_add.derivative
def _scatter_add_bw(ctx, g):
    a, dim, index, src = ctx.args
    n = ctx.needs_input_grad
    return (g if n[0] else None, None, _pad_to(g.gather(dim, index), src.shape) if n[2] else None)


_REDUCE_UFUNC = {"sum": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum", "mean": "add"}


@defop("scatter_reduce(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) "
       "-> Tensor", inplace=True, save=("self", "index", "src"), save_result=True)
def scatter_reduce(xp, a, dim, index, src, reduce, include_self=True):
    if reduce not in _REDUCE_UFUNC:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if src.dtype != a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    out = a.copy()
    if a.ndim == 0:
        out, index, src = out.reshape(1), index.reshape(-1), src.reshape(-1)
    d = wrap_dim(dim, out.ndim)
    _scatter_checks(xp, out, index, src, d, "scatter_reduce")
    key = _along_key(xp, index, d)
    vals = _src_part(src, index)
    if not include_self:
        init = {"sum": 0, "mean": 0, "prod": 1}
        if reduce in init:
            out[key] = init[reduce]
        else:
            # amax/amin: the first written value initialises the slot
            hit = xp.zeros(out.shape, dtype=bool)
            hit[key] = True
            # (floats from -inf / +inf, as PyTorch: a slot only -inf values reach is -inf, not
            # the finfo bound; integers from their type's bounds)
            fill = -np.inf if np_is_float(out.dtype) else np.iinfo(out.dtype).min
            if reduce == "amin":
                fill = np.inf if np_is_float(out.dtype) else np.iinfo(out.dtype).max
            out[hit] = fill
    getattr(xp, _REDUCE_UFUNC[reduce]).at(out, key, vals)
    if reduce == "mean":
        cnt = xp.zeros(out.shape, dtype=np.int64) + (1 if include_self else 0)
        xp.add.at(cnt, key, 1)
        cnt = xp.maximum(cnt, 1)
        if np_is_float(out.dtype):
            out = out / cnt.astype(out.dtype)
        else:
            out = xp.floor_divide(out, cnt).astype(out.dtype)
    return out.reshape(a.shape)


@scatter_reduce.derivative
def _scatter_reduce_bw(ctx, g):
    a, dim, index, src, reduce, include_self = ctx.args
    n = ctx.needs_input_grad
    res = ctx.result
    if reduce == "sum":
        gs = g if include_self else g.scatter(dim, index, 0.0)
        gsrc = g.gather(dim, index)
    elif reduce == "mean":
        ones = api.ones(tuple(index.shape), dtype=g.dtype, device=g.device)
        base = api.ones(tuple(a.shape), dtype=g.dtype, device=g.device) if include_self else \
            api.zeros(tuple(a.shape), dtype=g.dtype, device=g.device)
        cnt = base.scatter_add(dim, index, ones)
        cnt = cnt + (cnt == 0).to(g.dtype)
        gm = g / cnt
        gs = gm if include_self else gm.scatter(dim, index, 0.0)
        gsrc = gm.gather(dim, index)
    elif reduce in ("amax", "amin"):
        srcp = src[tuple(slice(0, k) for k in index.shape)] if tuple(src.shape) != tuple(index.shape) else src
        res_g = res.gather(dim, index)
        src_hit = (srcp == res_g).to(g.dtype)
        self_hit = (a == res).to(g.dtype) if include_self else api.zeros(tuple(a.shape), dtype=g.dtype,
                                                                          device=g.device)
        cnt = self_hit.scatter_add(dim, index, src_hit)
        gd = g / (cnt + (cnt == 0).to(g.dtype))
        gs = gd * self_hit
        if not include_self:
            gs = g.scatter(dim, index, 0.0)
            gs = gs * 1.0
        gsrc = gd.gather(dim, index) * src_hit
    elif reduce == "prod":
        srcp = src[tuple(slice(0, k) for k in index.shape)] if tuple(src.shape) != tuple(index.shape) else src
        gs, gsrc = _scatter_prod_grads(g, a, dim, index, srcp, include_self, res)
    else:
        raise RuntimeError(f"the derivative for 'scatter_reduce' with reduce='{reduce}' is not implemented")
    return (gs if n[0] else None, None, _pad_to(gsrc, src.shape) if n[2] else None)


def _scatter_prod_grads(g, a, dim, index, src, include_self, res):
    """PyTorch's scatter_reduce(reduce='prod') gradients (``src`` cut to ``index``'s shape).
    d res / d x is the product of the other factors of x's slot, which result / x gives unless x
    is 0: a zero self element takes the product with itself replaced by 1; a zero src element
    that is its slot's only zero src takes the slot's product with it replaced by 1 (two zeros
    leave every factor's gradient 0, as result / x with the zero replaced by 1 gives). Written
    in ember ops (scatter_reduce prod again), so it is itself differentiable."""
    masked_self = api.where(a == 0, 1.0, a)
    gs = g * masked_self.scatter_reduce(dim, index, src, "prod", include_self=include_self) / masked_self
    if not include_self:
        gs = gs.scatter(dim, index, 0.0)    # the slots' old values do not reach the result
    src_zero = src == 0
    zeros_in_slot = api.zeros_like(a).scatter_add(dim, index, src_zero.to(a.dtype)).gather(dim, index)
    single = src_zero & (zeros_in_slot == 1)
    without = a.scatter_reduce(dim, index, api.where(single, 1.0, src), "prod", include_self=include_self)
    gsrc = api.where(single, (g * without).gather(dim, index),
                     (g * res).gather(dim, index) / api.where(src_zero, 1.0, src))
    return gs, gsrc


# ---------------------------------------------------------------------- index_select & co
def _index_vector(index, fn):
    if index.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector")
    if index.dtype.kind not in _INT_KINDS:
        raise (RuntimeError if fn == "index_select" else IndexError)(f"{fn}(): Expected dtype int32 or int64 for index"
                                                                    if fn == "index_select" else
                                                                    f"{fn}(): Expected dtype int32/int64 for index")
    return index.reshape(-1).astype(np.int64, copy=False)


@defop("index_select(Tensor self, int dim, Tensor index) -> Tensor", save=("index",))
def index_select(xp, a, dim, index):
    idx = _index_vector(index, "index_select")
    if a.ndim == 0:
        # PyTorch: a 0-d self takes exactly one index and gives a 0-d result, whatever the
        # index's own shape ((1,) or ())
        _scalar_index_count(idx.size)
        if idx.max() >= 1 or idx.min() < 0:
            raise IndexError("index out of range in self")
        return a.reshape(1)[idx].reshape(())
    d = wrap_dim(dim, a.ndim)
    n = a.shape[d]
    if idx.size and (idx.max() >= n or idx.min() < 0):
        raise IndexError("index out of range in self")
    return xp.take(a, idx, axis=d)


@index_select.derivative
def _index_select_bw(ctx, g):
    a, dim, index = ctx.args
    return (index_add.binding(_zeros_like_meta(a), dim, index, g), None)


def _index_dim_checks(xp, a, d, idx, src, fn):
    n = a.shape[d] if a.ndim else 1
    if src is not None:
        ssz = src.shape[d] if src.ndim else 1
        if ssz != idx.size:
            raise IndexError(f"{fn}_(): Number of indices ({idx.size}) should be equal to source.size(dim) "
                             f"({ssz})")
    if idx.size:
        mx, mn = int(idx.max()), int(idx.min())
        lo = -n if fn == "index_fill" else 0       # only index_fill accepts negative indices
        bad = mx if mx >= n else mn if mn < lo else None
        if bad is not None:
            msg = f"index {bad} is out of bounds for dimension {d} with size {n}"
            if fn == "index_add":
                raise RuntimeError(msg)
            raise IndexError(f"{fn}_(): {msg}" if fn == "index_copy" else msg)


def _dim_key(d, idx):
    return (slice(None),) * d + (idx,)


@defop("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
       inplace=True, save=("index",))
def index_add(xp, a, dim, index, source, alpha=1):
    if source.dtype != a.dtype:
        raise RuntimeError(f"index_add_(): self ({_t.from_numpy_dtype(a.dtype).legacy_name}) and source "
                           f"({_t.from_numpy_dtype(source.dtype).legacy_name}) must have the same scalar type")
    idx = _index_vector(index, "index_add")
    out = a.copy()
    shp = a.shape
    if a.ndim == 0:
        out, source = out.reshape(1), source.reshape(-1)
    d = wrap_dim(dim, out.ndim)
    _index_dim_checks(xp, out, d, idx, source, "index_add")
    src = source if alpha == 1 else (source * alpha).astype(a.dtype)
    xp.add.at(out, _dim_key(d, idx), src)
    return out.reshape(shp)


@index_add.derivative
def _index_add_bw(ctx, g):
    a, dim, index, source, alpha = ctx.args
    n = ctx.needs_input_grad
    gsrc = None
    if n[2]:
        gsrc = g.index_select(dim, index) if g.ndim else g.reshape(1).index_select(0, index)
        gsrc = gsrc.reshape(tuple(source.shape))
        if alpha != 1:
            gsrc = gsrc * alpha
    return (g if n[0] else None, None, gsrc)


@defop("index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor", inplace=True,
       save=("index",))
def index_copy(xp, a, dim, index, source):
    if source.dtype != a.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_t.from_numpy_dtype(a.dtype).legacy_name} and (source) "
                           f"{_t.from_numpy_dtype(source.dtype).legacy_name}")
    idx = _index_vector(index, "index_copy")
    out = a.copy()
    shp = a.shape
    if a.ndim == 0:
        out, source = out.reshape(1), source.reshape(-1)
    d = wrap_dim(dim, out.ndim)
    _index_dim_checks(xp, out, d, idx, source, "index_copy")
    out[_dim_key(d, idx)] = source
    return out.reshape(shp)


@index_copy.derivative
def _index_copy_bw(ctx, g):
    a, dim, index, source = ctx.args
    n = ctx.needs_input_grad
    gs = g.index_fill(dim, index, 0.0) if n[0] else None
    gsrc = g.index_select(dim, index).reshape(tuple(source.shape)) if n[2] else None
    return gs, None, gsrc


def _index_fill_name(args):
    return "IndexFillBackward1" if isinstance(args[3], Tensor) else "IndexFillBackward0"


@defop("index_fill(Tensor self, int dim, Tensor index, Tensor|Scalar value) -> Tensor", inplace=True,
       save=("index",), grad_fn_name=_index_fill_name, scalar_overload=("value",))
def index_fill(xp, a, dim, index, value):
    if hasattr(value, "ndim") and not isinstance(value, np.generic) and value.ndim != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    idx = _index_vector(index, "index_fill")
    out = a.copy() if _canonical_c(a) else copy_preserve(xp, a)     # clone(self), as PyTorch
    shp = a.shape
    if a.ndim == 0:
        out = out.reshape(1)
    d = wrap_dim(dim, out.ndim)
    _index_dim_checks(xp, out, d, idx, None, "index_fill")
    dt = _t.from_numpy_dtype(a.dtype)
    out[_dim_key(d, idx)] = checked_array(xp, value, dt) if not hasattr(value, "ndim") or isinstance(
        value, np.generic) else xp.asarray(value).astype(a.dtype)
    return out.reshape(shp)


@index_fill.derivative
def _index_fill_bw(ctx, g):
    a, dim, index, value = ctx.args
    n = ctx.needs_input_grad
    gs = g.index_fill(dim, index, 0.0) if n[0] else None
    gv = None
    if n[2] and hasattr(value, "shape"):
        gv = (g - g.index_fill(dim, index, 0.0)).sum()   # each filled position once
    return gs, None, gv


# ---------------------------------------------------------------------- take / put
def _take_bounds(idx, n):
    if idx.size:
        mx, mn = int(idx.max()), int(idx.min())
        bad = mx if mx >= n else mn if mn < -n else None
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")


@defop("take(Tensor self, Tensor index) -> Tensor", save=("index",))
def take(xp, a, index):
    if index.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{_t.from_numpy_dtype(index.dtype).legacy_name}")
    _take_bounds(index, a.size)
    return xp.ascontiguousarray(a.reshape(-1)[index])


@take.derivative
def _take_bw(ctx, g):
    a, index = ctx.args
    return (put.binding(_zeros_like_meta(a), index, g, True), None)


@defop("put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor", inplace=True,
       save=("index",))
def put(xp, a, index, source, accumulate=False):
    if index.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{_t.from_numpy_dtype(index.dtype).legacy_name}")
    if source.dtype != a.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_t.from_numpy_dtype(a.dtype).legacy_name} and source.dtype = "
                           f"{_t.from_numpy_dtype(source.dtype).legacy_name}")
    if index.size != source.size:
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.size}, index.numel() = {index.size}")
    _take_bounds(index, a.size)
    out = a.copy()
    flat = out.reshape(-1)
    if accumulate:
        xp.add.at(flat, index.reshape(-1), source.reshape(-1))
    else:
        flat[index.reshape(-1)] = source.reshape(-1)
    return out


@put.derivative
def _put_bw(ctx, g):
    a, index, source, accumulate = ctx.args
    n = ctx.needs_input_grad
    gs = None
    if n[0]:
        gs = g if accumulate else put.binding(g, index, api.zeros(tuple(source.shape), dtype=g.dtype,
                                                                   device=g.device), False)
    gsrc = g.take(index).reshape(tuple(source.shape)) if n[2] else None
    return gs, None, gsrc


# ---------------------------------------------------------------------- masked_select / nonzero
@defop("masked_select(Tensor self, Tensor mask) -> Tensor", tags=("data_dependent",), save=("mask",))
def masked_select(xp, a, mask):
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask")
    try:
        ab, mb = xp.broadcast_arrays(a, mask)
    except ValueError:
        from ._helpers import broadcast_shapes
        broadcast_shapes(a.shape, mask.shape)
        raise
    return xp.ascontiguousarray(ab[mb])


@masked_select.derivative
def _masked_select_bw(ctx, g):
    a, mask = ctx.args
    from ._helpers import broadcast_shapes
    shp = broadcast_shapes(tuple(a.shape), tuple(mask.shape))
    z = api.zeros(shp, dtype=g.dtype, device=g.device)
    if len(shp) == 0:
        # a 0-d mask cannot index (index_put takes no 0-d boolean index): g holds the one
        # selected value, or nothing when the mask is False
        return (api.where(mask, g.sum(), z), None)
    full = index_put.binding(z, (mask.expand(tuple(shp)),), g, False)
    return (sum_to(full, a.shape), None)


@defop("nonzero(Tensor self) -> Tensor", tags=("nondifferentiable", "data_dependent"), save=(),
       method=False, function=False)
def _nonzero(xp, a):
    if a.ndim == 0:
        return xp.argwhere(a.reshape(1))[:, :0].astype(np.int64) if False else \
            xp.zeros((int(bool(a)), 0), dtype=np.int64)
    return xp.argwhere(a).astype(np.int64)


def nonzero(input, *, as_tuple=False, out=None):
    res = _nonzero.binding(input)
    if not as_tuple:
        return res
    if input.ndim == 0:
        return (api.zeros((res.shape[0],), dtype=_t.int64, device=input.device),)
    return tuple(c.contiguous() for c in res.unbind(1))


def argwhere(input):
    return _nonzero.binding(input)


_where3 = getattr(api, "where", None)


def where(condition, input=None, other=None, *, out=None):
    """``where(cond)`` is ``nonzero(cond, as_tuple=True)``; the 3-argument form is the pointwise op."""
    if input is None and other is None:
        if out is not None:
            raise TypeError("where(): argument 'out' is not accepted by where(condition) (it returns a tuple "
                            "of index tensors)")
        return nonzero(condition, as_tuple=True)
    if _where3 is None:
        raise RuntimeError("where(condition, input, other) is not available (the pointwise where op is not "
                           "registered)")
    if out is not None:
        return _where3(condition, input, other, out=out)
    return _where3(condition, input, other)


# ---------------------------------------------------------------------- Python indexing
_SCALAR_BOOL = (bool, np.bool_)


def _as_index_tensor(obj, device):
    if isinstance(obj, Tensor):
        return obj
    t = api.tensor(obj)
    if t.numel() == 0 and t.dtype.is_floating_point:
        t = t.to(_t.int64)
    if device is not None and t.device != device:
        t = t.to(device)
    return t


def _treat_as_tuple(index):
    if isinstance(index, tuple):
        return True
    if isinstance(index, list) and len(index) < 32:
        for it in index:
            if it is None or it is Ellipsis or isinstance(it, (slice, Tensor, list, tuple, np.ndarray)):
                return True
    return False


def _norm_items(self, index):
    items = tuple(index) if _treat_as_tuple(index) else (index,)
    out = []
    consumed = 0
    n_ell = 0
    for it in items:
        if it is None:
            out.append(("none", None))
        elif it is Ellipsis:
            n_ell += 1
            if n_ell > 1:
                raise IndexError("an index can only have a single ellipsis ('...')")
            out.append(("ell", None))
        elif isinstance(it, _SCALAR_BOOL):
            out.append(("bool", bool(it)))
        elif isinstance(it, numbers.Integral):
            out.append(("int", int(it)))
            consumed += 1
        elif _meta.is_symint(it):
            out.append(("int", it))
            consumed += 1
        elif isinstance(it, slice):
            out.append(("slice", it))
            consumed += 1
        else:
            if isinstance(it, (list, tuple, np.ndarray)):
                it = _as_index_tensor(it if not isinstance(it, np.ndarray) else it.tolist()
                                      if it.dtype != np.bool_ else it, self.device)
            elif not isinstance(it, Tensor):
                raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                                 f"are valid indices (got {type(it).__name__})")
            dt = it.dtype
            if dt is _t.bool_ or dt is _t.uint8:
                if it.ndim == 0:
                    out.append(("bool", bool(it.item())))
                else:
                    out.append(("tensor", it))
                    consumed += it.ndim
            elif dt.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            elif it.ndim == 0:
                out.append(("int", int(it.item())))
                consumed += 1
            else:
                out.append(("tensor", it))
                consumed += 1
    nd = self.ndim
    if nd == 0 and any(k in ("int", "slice") for k, _ in out):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                         "in C++ to convert a 0-dim tensor to a number")
    if consumed > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    return out, nd - consumed


def _is_int(v, k):
    return isinstance(v, numbers.Integral) and int(v) == k


def _slice_args(s, n, d):
    def conv(v):
        if v is None:
            return None
        if isinstance(v, Tensor):
            return int(v.item())
        if _meta.is_symint(v):
            return v
        if not isinstance(v, numbers.Integral):
            raise TypeError("slice indices must be integers or None or have an __index__ method")
        return int(v)
    step = conv(s.step)
    if step is None:
        step = 1
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    raw_start, raw_stop = conv(s.start), conv(s.stop)
    start, stop = _shape._slice_bounds(n, raw_start, raw_stop, step)
    if not (isinstance(start, int) and isinstance(stop, int)):
        # symbolic bounds: hand the slice op the bounds as written; its meta clamps them
        # once (clamping an already clamped Min/Max again only nests the expressions)
        start, stop = raw_start, raw_stop
    return start, stop, step


def _apply_basic(self, index, skip_full=True):
    """Apply ints/slices/None/Ellipsis as views; return (view, advanced index list or None).

    Like PyTorch, a full slice (``0:len:1``) inside a tuple index is skipped; a lone ``x[:]``
    still makes a slice view."""
    items, ell_dims = _norm_items(self, index)
    skip_full = skip_full and _treat_as_tuple(index)
    r = self
    d = 0
    adv = []
    for kind, v in items:
        if kind == "none":
            r = _shape.unsqueeze.binding(r, d)
            d += 1
        elif kind == "ell":
            d += ell_dims
        elif kind == "int":
            n = r.shape[d]
            if not -n <= v < n:
                raise IndexError(f"index {v} is out of bounds for dimension {d} with size {n}")
            r = _shape.select.binding(r, d, v)
        elif kind == "slice":
            n = r.shape[d]
            start, stop, step = _slice_args(v, n, d)
            # (with a symbolic n, "stop >= n" counts only when it holds statically: no guard)
            full = (v.start is None or _is_int(v.start, 0)) and (v.stop is None or isinstance(
                v.stop, numbers.Integral) and _meta.statically_true(v.stop >= n)) \
                and (v.step is None or _is_int(v.step, 1))
            if not (skip_full and full):
                r = _shape._slice.binding(r, d, start, stop, step)
            d += 1
        elif kind == "bool":
            r = _shape.unsqueeze.binding(r, d)
            adv.append((d, api.zeros((1 if v else 0,), dtype=_t.int64, device=self.device)))
            d += 1
        else:
            adv.append((d, v))
            d += v.ndim if v.dtype is _t.bool_ or v.dtype is _t.uint8 else 1
    if not adv:
        return r, None
    indices, pos = [], 0
    for p, t in adv:
        while pos < p:
            indices.append(None)
            pos += 1
        indices.append(t if t.device == r.device else t.to(r.device))
        pos += t.ndim if t.dtype is _t.bool_ or t.dtype is _t.uint8 else 1
    return r, tuple(indices)


def getitem(self, index):
    r, indices = _apply_basic(self, index)
    if indices is None:
        if r is self:
            return _shape._alias_op.binding(self)
        return r
    return _index.binding(r, indices)


def _strip_leading_ones(v, ndim):
    while v.ndim > ndim and v.shape[0] == 1:
        v = v.squeeze(0) if v.ndim else v
    return v


def setitem(self, index, value):
    if isinstance(value, Tensor):
        v = value
    elif isinstance(value, (numbers.Number, np.generic)):
        v = api.full((), value, dtype=self.dtype, device=self.device)
    elif isinstance(value, (list, tuple, np.ndarray)):
        v = api.tensor(value, dtype=self.dtype, device=self.device)
    else:
        raise TypeError(f"can't assign a {type(value).__name__} to a {self.type()}")
    if v.dtype is not self.dtype and not (isinstance(value, Tensor) and _has_int_advanced(self, index)):
        v = v.to(self.dtype)   # (advanced indexing keeps index_put_'s dtype check, like PyTorch)
    if v.device != self.device:
        v = v.to(self.device)
    grad_on = STATE.grad_enabled
    if grad_on and v._requires_grad and not self._requires_grad and self._base is not None \
            and not self._diff_view:
        # self is an untracked alias (detach(), a view made without grad): build the new value
        # functionally on a fresh root, then copy it in so self gets the history.
        new = self.detach().clone()
        setitem(new, index, v)
        _copy_inplace(self, new)
        return
    r, indices = _apply_basic(self, index)
    if indices is None:
        v = _strip_leading_ones(v, r.ndim)
        if r is not self and grad_on and v._requires_grad and not r._diff_view and self._base is None:
            _track_as_view(r)
        if isinstance(value, (numbers.Number, np.generic)) and "fill_" in OPS:
            OPS["fill_"].binding(r, value)      # a Python number or 0-d tensor: fill_, like PyTorch
        elif v.ndim == 0 and "fill_" in OPS:
            OPS["fill_"].binding(r, v)
        else:
            if v.shape != r.shape:
                v = v.expand(tuple(r.shape))     # torch's copy_to: expand's error for a bad shape
            _copy_inplace(r, v)
        return
    if grad_on and v._requires_grad and r is not self and not r._diff_view and self._base is None:
        _track_as_view(r)
    v = _strip_leading_ones(v, _index_result_ndim(r, indices))
    index_put.inplace_variant.binding(r, indices, v, False)


def _has_int_advanced(self, index):
    items = tuple(index) if _treat_as_tuple(index) else (index,)
    for it in items:        # integer index tensors (not masks, not Python bools) keep the dtype check
        if isinstance(it, (list, tuple, np.ndarray)):
            it = _as_index_tensor(it, None)
        if isinstance(it, Tensor) and it.ndim > 0 and it.dtype is not _t.bool_ and it.dtype is not _t.uint8:
            return True
    return False


def _track_as_view(r):
    """Mark an untracked view of a root tensor as a differentiable view, so an in-place write into it
    that needs grad rebases the root through CopySlices (what PyTorch does)."""
    vc = r._vc
    if vc is None:
        vc = r._vc = [0]
    r._diff_view = True
    r._view_version = vc[0]


def _index_result_ndim(r, indices):
    """ndim of ``r[indices]`` from metadata only: a boolean mask counts as one dim whatever
    its data, so setitem with a mask works on fake tensors too. (Bad indices are
    reported by the ``index_put_`` that follows.)"""
    nd, adv = r.ndim, 0
    for ix in indices:
        if ix is None:
            continue
        if ix.dtype is _t.bool_ or ix.dtype is _t.uint8:
            nd -= ix.ndim
            adv = max(adv, 1)
        else:
            nd -= 1
            adv = max(adv, ix.ndim)
    return max(nd, 0) + adv


# ---------------------------------------------------------------------- entry points
# one function for ember.scatter and Tensor.scatter, named where the namespace holds it: graphs
# that call it can be keyed and pickled by reference (the aot and FX graph caches refuse
# closures they cannot name)
_scatter_fn = _scatter_entry("scatter")
_scatter_fn.__module__ = "ember"
for _name, _fn in dict(index_put=_index_put_entry, index_put_=_index_put__entry, nonzero=nonzero,
                       argwhere=argwhere, scatter=_scatter_fn, scatter_=_scatter_entry("scatter_")).items():
    setattr(Tensor, _name, _fn)
for _name, _fn in dict(index_put=_index_put_entry, index_put_=_index_put__entry, nonzero=nonzero,
                       argwhere=argwhere, where=where, getitem=getitem, setitem=setitem,
                       scatter=_scatter_fn).items():
    setattr(api, _name, _fn)


# ---------------------------------------------------------------------- meta functions
# Output metadata for fake tensors (see ember/ops/_meta.py). Index *values* are
# data, so bounds checks are left to the kernel; everything decided by shapes
# and dtypes (result shapes, dtype/ndim/size checks) is done here. Boolean-mask
# indexing has a data-dependent result size: ``index`` raises
# DataDependentOutputError for it (``index_put`` with a mask is fine: its
# result has ``self``'s shape).
def _is_mask_t(ix):
    return ix.dtype is _t.bool_ or ix.dtype is _t.uint8


def _index_key_meta(a, indices):
    """Validate ``indices`` against ``a`` like ``_adv_key``; return (key, has_mask) where key
    holds, per indexed dim, ``None`` (a full slice) or the index tensor's shape (a mask of
    k dims contributes k entries of shape ``None``: its size is data-dependent)."""
    shape = tuple(a.shape)
    nd = len(shape)
    key, dim, has_mask = [], 0, False
    for ix in indices:
        if ix is None:
            key.append(None)
            dim += 1
            continue
        if _is_mask_t(ix):
            if ix.ndim == 0:
                raise IndexError("a 0-dim boolean index is only supported through Python indexing (x[True])")
            if dim + ix.ndim > nd:
                raise IndexError(f"too many indices for tensor of dimension {nd}")
            for j in range(ix.ndim):
                if ix.shape[j] != shape[dim + j]:
                    raise IndexError(f"The shape of the mask {list(ix.shape)} at index {j} does not match "
                                     f"the shape of the indexed tensor {list(shape)} at index {dim + j}")
            key.extend(["mask"] * ix.ndim)
            dim += ix.ndim
            has_mask = True
        elif ix.dtype.np.kind in _INT_KINDS:
            if dim >= nd:
                raise IndexError(f"too many indices for tensor of dimension {nd}")
            key.append(tuple(ix.shape))
            dim += 1
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return key, has_mask


def _index_out_shape(a, key):
    """numpy's advanced-indexing result shape for a mask-free key from :func:`_index_key_meta`:
    the broadcast index shape replaces the indexed dims where they are adjacent, else goes first."""
    shape = tuple(a.shape)
    adv = [i for i, k in enumerate(key) if k is not None]
    ishapes = [key[i] for i in adv]
    if len(ishapes) > 1:
        try:
            bshape = _meta.broadcast_shapes(*ishapes)
        except RuntimeError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                             f"{_fmt_shapes(ishapes)}") from None
    else:
        bshape = ishapes[0]
    if adv == list(range(adv[0], adv[-1] + 1)):
        return shape[:adv[0]] + tuple(bshape) + shape[adv[-1] + 1:]
    return tuple(bshape) + tuple(n for i, n in enumerate(shape) if i >= len(key) or key[i] is None)


@_index.meta_fn
def _index_meta(a, indices):
    key, has_mask = _index_key_meta(a, indices)
    if has_mask:
        raise _meta.DataDependentOutputError(
            "index", "boolean-mask indexing: the result has one row per True element of the mask")
    if not any(k is not None for k in key):
        return _meta.out(tuple(a.shape), a.dtype)
    return _meta.out(_index_out_shape(a, key), a.dtype)


@index_put.meta_fn
def _index_put_meta(a, indices, values, accumulate=False):
    indices = tuple(indices)
    if values.dtype is not a.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{a.dtype.legacy_name} for the destination and {values.dtype.legacy_name} for "
                           f"the source.")
    key, has_mask = _index_key_meta(a, indices)
    if not has_mask:    # (with a mask the target's length is data: the kernel checks values then)
        tshape = _index_out_shape(a, key) if any(k is not None for k in key) else tuple(a.shape)
        vshape = tuple(values.shape)
        ok = len(vshape) <= len(tshape) and all(
            v is t or bool(v == 1) or bool(v == t)
            for v, t in zip(vshape[::-1], tshape[::-1]))
        if not ok:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be broadcast "
                               f"to indexing result of shape {list(tshape)}")
    return _meta.preserve_out(a)


def _check_index_dtype_meta(idx, fn):
    if idx.dtype is not _t.int64 and idx.dtype is not _t.int32:
        raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index")


@gather.meta_fn
def _gather_meta(a, dim, index, sparse_grad=False):
    """A numpy fancy-indexing result: laid out by the iterator over the index arrays
    (the index tensor and broadcast aranges), so it follows ``index``'s dim order."""
    _check_index_dtype_meta(index, "gather")
    ishape = tuple(index.shape)
    if a.ndim == 0:
        return _meta.out(ishape, a.dtype)
    d = wrap_dim(dim, a.ndim)
    _check_same_ndim(a, index, "gather")
    ashape = tuple(a.shape)
    for k in range(a.ndim):
        if k != d and k < len(ishape) and ishape[k] > ashape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index {list(ishape)} to be "
                               f"no larger than self {list(ashape)} apart from dimension {d}")
    nd = len(ishape)
    ops = [(ishape, _shape._estrides(index))]
    for k in range(nd):
        if k != d:
            oshape = tuple(ishape[k] if j == k else 1 for j in range(nd))
            ops.append((oshape, _meta.contiguous_strides(oshape)))
    return _meta.out(ishape, a.dtype, _meta.np_iter_strides(ishape, ops))


def _scatter_checks_meta(ashape, index, src, d, fn):
    """``_scatter_checks`` without the bounds check (index values are data)."""
    _check_index_dtype_meta(index, fn)
    ishape = tuple(index.shape)
    if len(ishape) != len(ashape) and not (len(ishape) <= 1 and len(ashape) <= 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as "
                           f"{'input' if fn == 'gather' else 'self'} tensor")
    sshape = None if src is None else src
    for k in range(len(ishape)):
        if k != d and ishape[k] > ashape[k]:
            raise RuntimeError(f"Expected index {list(ishape)} to be no larger than self {list(ashape)} "
                               f"apart from dimension {d} and to be no larger size than src "
                               f"{list(sshape) if sshape is not None else list(ishape)}")
        if sshape is not None and len(sshape) and ishape[k] > sshape[k]:
            raise RuntimeError(f"Expected index {list(ishape)} to be no larger than self {list(ashape)} "
                               f"apart from dimension {d} and to be no larger size than src "
                               f"{list(sshape)}")


class _Flat:
    """Shape/dtype/ndim of ``x.reshape(-1)`` (what the kernels do to 0-d ``self``'s partners)."""

    def __init__(self, x):
        self.dtype = x.dtype
        self.shape = (_meta.numel(tuple(x.shape)),)
        self.ndim = 1

    def stride(self):
        return (1,)


def _scatter_geometry(a, index, src):
    """(self shape, index, src shape) as the kernel sees them after its 0-d reshapes, and dim count."""
    ashape = tuple(a.shape)
    sshape = None if src is None else tuple(src.shape)
    if a.ndim == 0:
        ashape = (1,)
        index = _Flat(index)
        if sshape is not None:
            sshape = (_meta.numel(sshape),)
    return ashape, index, sshape


@scatter.meta_fn
def _scatter_meta(a, dim, index, src, reduce=None):
    scalar = not isinstance(src, Tensor)
    ashape, idx, sshape = _scatter_geometry(a, index, None if scalar else src)
    d = wrap_dim(dim, len(ashape))
    if not scalar and src.dtype is not a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    _scatter_checks_meta(ashape, idx, sshape, d, "scatter")
    if scalar:
        check_fits(src, a.dtype)
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply. Got {reduce}")
    return _meta.out(tuple(a.shape), a.dtype)


@scatter_add.meta_fn
def _scatter_add_meta(a, dim, index, src):
    if src.dtype is not a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ashape, idx, sshape = _scatter_geometry(a, index, src)
    d = wrap_dim(dim, len(ashape))
    _scatter_checks_meta(ashape, idx, sshape, d, "scatter_add")
    return _meta.out(tuple(a.shape), a.dtype)


@scatter_reduce.meta_fn
def _scatter_reduce_meta(a, dim, index, src, reduce, include_self=True):
    if reduce not in _REDUCE_UFUNC:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if src.dtype is not a.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ashape, idx, sshape = _scatter_geometry(a, index, src)
    d = wrap_dim(dim, len(ashape))
    _scatter_checks_meta(ashape, idx, sshape, d, "scatter_reduce")
    return _meta.out(tuple(a.shape), a.dtype)


def _index_vector_meta(index, fn):
    if index.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector")
    if index.dtype.np.kind not in _INT_KINDS:
        raise (RuntimeError if fn == "index_select" else IndexError)(f"{fn}(): Expected dtype int32 or int64 for index"
                                                                    if fn == "index_select" else
                                                                    f"{fn}(): Expected dtype int32/int64 for index")
    return _meta.numel(tuple(index.shape))


def _scalar_index_count(n):
    """index_select of a 0-d self: the index must hold exactly one value."""
    if isinstance(n, (int, np.integer)) and n != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {n} value(s)")


@index_select.meta_fn
def _index_select_meta(a, dim, index):
    n = _index_vector_meta(index, "index_select")
    if a.ndim == 0:
        _scalar_index_count(n)
        return _meta.out((), a.dtype)
    d = wrap_dim(dim, a.ndim)
    shape = list(a.shape)
    shape[d] = n
    return _meta.out(shape, a.dtype)


def _index_source_check(a, d, n, source, fn):
    ssz = source.shape[d] if source.ndim else 1
    if a.ndim == 0 and source.ndim:
        ssz = _meta.numel(tuple(source.shape))     # the kernel flattens source for a 0-d self
    if ssz != n:
        raise IndexError(f"{fn}_(): Number of indices ({n}) should be equal to source.size(dim) ({ssz})")


@index_add.meta_fn
def _index_add_meta(a, dim, index, source, alpha=1):
    if source.dtype is not a.dtype:
        raise RuntimeError(f"index_add_(): self ({a.dtype.legacy_name}) and source ({source.dtype.legacy_name}) "
                           f"must have the same scalar type")
    n = _index_vector_meta(index, "index_add")
    d = wrap_dim(dim, max(a.ndim, 1))
    _index_source_check(a, d, n, source, "index_add")
    return _meta.out(tuple(a.shape), a.dtype)


@index_copy.meta_fn
def _index_copy_meta(a, dim, index, source):
    if source.dtype is not a.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{a.dtype.legacy_name} and (source) {source.dtype.legacy_name}")
    n = _index_vector_meta(index, "index_copy")
    d = wrap_dim(dim, max(a.ndim, 1))
    _index_source_check(a, d, n, source, "index_copy")
    return _meta.out(tuple(a.shape), a.dtype)


@index_fill.meta_fn
def _index_fill_meta(a, dim, index, value):
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    _index_vector_meta(index, "index_fill")
    wrap_dim(dim, max(a.ndim, 1))
    if not isinstance(value, Tensor):
        check_fits(value, a.dtype)
    return _meta.preserve_out(a)


@take.meta_fn
def _take_meta(a, index):
    if index.dtype is not _t.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {index.dtype.legacy_name}")
    return _meta.out(tuple(index.shape), a.dtype)


@put.meta_fn
def _put_meta(a, index, source, accumulate=False):
    if index.dtype is not _t.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {index.dtype.legacy_name}")
    if source.dtype is not a.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {a.dtype.legacy_name} and source.dtype = {source.dtype.legacy_name}")
    ni, ns = _meta.numel(tuple(index.shape)), _meta.numel(tuple(source.shape))
    if ni != ns:
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {ns}, index.numel() = {ni}")
    return _meta.out(tuple(a.shape), a.dtype)
