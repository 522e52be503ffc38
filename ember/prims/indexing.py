"""Indexing prims: gather, scatter, scatter_add, scatter_amax/amin, index_select, index_put.

Index tensors are int64. ``gather``/``scatter``/``index_select`` take indices
in ``[0, size)`` (decompositions wrap negative ones explicitly); ``index_put``
wraps negative indices like PyTorch's advanced indexing, because its callers
(``x[idx] = v``) pass user indices straight through. An out-of-range index is
an ``IndexError`` at run time (a data-dependent check only the kernel can do).
All of them return new tensors; ``dim`` is canonical.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import check_dim, defprim, dtype_of, fail, fmt_shape, is_scalar, scalar_array

__all__: list = []   # prim names defined here (bound in ember.prims)


def _export(b):
    """Prims are exported by ``ember.prims`` (from ``PRIMS``), not as module globals here:
    names like ``slice``, ``sum``, ``abs``, ``round`` would shadow builtins."""
    __all__.append(b.__name__)
    return b


def _le(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return bool(a <= b)


def _check_index(prim, index, name="index"):
    if is_scalar(index) or dtype_of(index) is not _t.int64:
        fail(prim, f"argument '{name}' must be an int64 tensor, got "
                   f"{type(index).__name__ if is_scalar(index) else dtype_of(index).name}")


def _bounds(xp, prim, index, size):
    if index.size and (int(index.min()) < 0 or int(index.max()) >= size):
        bad = int(index.min()) if int(index.min()) < 0 else int(index.max())
        raise IndexError(f"prims.{prim}: index {bad} is out of bounds for a dim of size {size}")


def _rank(a):
    return max(a.ndim, 1)


def _as1(a):
    return a.reshape(1) if a.ndim == 0 else a


# ---------------------------------------------------------------------- gather
def _gather_check(a, dim, index):
    check_dim("gather", "dim", dim, a.ndim)
    _check_index("gather", index)
    if _rank(index) != _rank(a):
        fail("gather", f"argument 'index' has rank {index.ndim} but 'a' has rank {a.ndim} (they must match)")
    ish, ash = tuple(index.shape) or (1,), tuple(a.shape) or (1,)
    for d, (i, s) in enumerate(zip(ish, ash)):
        if d != dim and not _le(i, s):
            fail("gather", f"argument 'index' {fmt_shape(index.shape)} is larger than 'a' "
                           f"{fmt_shape(a.shape)} in dim {d}")


@defprim("gather(Tensor a, int dim, Tensor index) -> Tensor", check=_gather_check,
         meta=lambda a, dim, index: _meta.out(tuple(index.shape), a.dtype))
def _gather(xp, a, dim, index):
    """``out[i][j][k] = a[index[i][j][k]][j][k]`` (for dim 0; likewise for other dims): ``index``
    has ``a``'s rank, sizes <= ``a``'s outside ``dim``, values in ``[0, a.shape[dim])``.
    The result has ``index``'s shape and ``a``'s dtype."""
    shp = index.shape
    a1, i1 = _as1(a), _as1(index)
    dim = int(dim)
    _bounds(xp, "gather", i1, a1.shape[dim])
    src = a1[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(i1.shape))]
    return xp.take_along_axis(src, i1, axis=dim).reshape(shp)


_export(_gather)


# ---------------------------------------------------------------------- scatter / scatter_add
def _scatter_check(prim):
    def check(a, dim, index, src):
        check_dim(prim, "dim", dim, a.ndim)
        _check_index(prim, index)
        if _rank(index) != _rank(a):
            fail(prim, f"argument 'index' has rank {index.ndim} but 'a' has rank {a.ndim} (they must match)")
        if not is_scalar(src):
            if dtype_of(src) is not dtype_of(a):
                fail(prim, f"argument 'src' has dtype {dtype_of(src).name} but 'a' has {dtype_of(a).name} — "
                           f"prims do no type promotion")
            if _rank(src) != _rank(a):
                fail(prim, f"argument 'src' has rank {src.ndim} but 'a' has rank {a.ndim}")
            for d in range(index.ndim):
                if not _le(index.shape[d], src.shape[d]):
                    fail(prim, f"argument 'index' {fmt_shape(index.shape)} is larger than 'src' "
                               f"{fmt_shape(src.shape)} in dim {d}")
        elif _t.scalar_category(src) > dtype_of(a).category:
            fail(prim, f"argument 'src' is a Python {type(src).__name__} but 'a' has dtype {dtype_of(a).name}")
        for d in range(index.ndim):
            if d != dim and not _le(index.shape[d], a.shape[d]):
                fail(prim, f"argument 'index' {fmt_shape(index.shape)} is larger than 'a' "
                           f"{fmt_shape(a.shape)} in dim {d}")
    return check


def _coords(xp, index, dim):
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _scatter_kernel(prim, combine):
    """``combine``: None (the write wins) or the numpy ufunc name that folds each value into its
    slot in index order (add; maximum/minimum propagate NaN, like PyTorch's amax/amin)."""
    def kernel(xp, a, dim, index, src):
        dt = dtype_of(a)
        out = _as1(a).copy()
        i1 = _as1(index)
        dim = int(dim)
        _bounds(xp, prim, i1, out.shape[dim])
        if is_scalar(src):
            vals = xp.broadcast_to(scalar_array(xp, src, dt), i1.shape)
        else:
            s1 = _as1(src)
            vals = s1[tuple(slice(0, n) for n in i1.shape)]
        c = _coords(xp, i1, dim)
        if combine:
            getattr(np, combine).at(out, c, vals)
        else:
            out[c] = vals
        return out.reshape(a.shape)
    kernel.__name__ = prim
    return kernel


_export(defprim("scatter(Tensor a, int dim, Tensor index, Tensor|Scalar src) -> Tensor",
                check=_scatter_check("scatter"), meta=lambda a, dim, index, src: _meta.out(tuple(a.shape), a.dtype),
                doc="A copy of ``a`` with ``out[index[i][j]][j] = src[i][j]`` (for dim 0; likewise for "
                    "other dims). ``index`` has ``a``'s rank, is no larger than ``src`` anywhere and no "
                    "larger than ``a`` outside ``dim``; values in [0, a.shape[dim]). ``src`` has ``a``'s "
                    "dtype (or is a Python number). Where indices repeat, one of the writes wins "
                    "(unspecified which, as in PyTorch).")(_scatter_kernel("scatter", None)))
_export(defprim("scatter_add(Tensor a, int dim, Tensor index, Tensor|Scalar src) -> Tensor",
                check=_scatter_check("scatter_add"),
                meta=lambda a, dim, index, src: _meta.out(tuple(a.shape), a.dtype),
                doc="Like ``scatter`` but adds: ``out[index[i][j]][j] += src[i][j]``, every repeated index "
                    "accumulating (in an unspecified order for floats).")(_scatter_kernel("scatter_add", "add")))
# max/min into a scatter target: scatter_reduce(reduce='amax'/'amin') and what is built on it
# (EmbeddingBag mode='max', segment_reduce) compile instead of running their graph eagerly
_export(defprim("scatter_amax(Tensor a, int dim, Tensor index, Tensor|Scalar src) -> Tensor",
                check=_scatter_check("scatter_amax"),
                meta=lambda a, dim, index, src: _meta.out(tuple(a.shape), a.dtype),
                doc="Like ``scatter`` but keeps the larger: ``out[index[i][j]][j] = max(out[...], src[i][j])``, "
                    "every repeated index folding in; a NaN (either side) wins, as in PyTorch.")(
    _scatter_kernel("scatter_amax", "maximum")))
_export(defprim("scatter_amin(Tensor a, int dim, Tensor index, Tensor|Scalar src) -> Tensor",
                check=_scatter_check("scatter_amin"),
                meta=lambda a, dim, index, src: _meta.out(tuple(a.shape), a.dtype),
                doc="Like ``scatter_amax`` but keeps the smaller (a NaN wins).")(
    _scatter_kernel("scatter_amin", "minimum")))


# ---------------------------------------------------------------------- index_select
def _is_check(a, dim, index):
    check_dim("index_select", "dim", dim, a.ndim)
    _check_index("index_select", index)
    if index.ndim > 1:
        fail("index_select", f"argument 'index' must be 0-d or 1-d, got rank {index.ndim}")


def _is_meta(a, dim, index):
    shape = list(a.shape) if a.ndim else []
    n = index.shape[0] if index.ndim else 1
    if a.ndim:
        shape[dim] = n
    return _meta.out(tuple(shape), a.dtype)


@defprim("index_select(Tensor a, int dim, Tensor index) -> Tensor", check=_is_check, meta=_is_meta)
def _index_select(xp, a, dim, index):
    """``a``'s slices ``index[k]`` along ``dim``, stacked in that order along ``dim`` (a 0-d or
    1-d int64 ``index``, values in [0, a.shape[dim])). A 0-d ``a`` takes a 0-d result."""
    dim = int(dim)
    i1 = _as1(index)
    _bounds(xp, "index_select", i1, _as1(a).shape[dim])
    if a.ndim == 0:
        return a.copy()
    return xp.ascontiguousarray(xp.take(a, i1, axis=dim))


_export(_index_select)


# ---------------------------------------------------------------------- index_put
def _ip_check(a, indices, values, accumulate=False):
    if len(indices) > a.ndim:
        fail("index_put", f"argument 'indices' has {len(indices)} index tensors but 'a' has rank {a.ndim}")
    for k, i in enumerate(indices):
        _check_index("index_put", i, f"indices[{k}]")
    if is_scalar(values) or dtype_of(values) is not dtype_of(a):
        fail("index_put", f"argument 'values' has dtype "
                          f"{type(values).__name__ if is_scalar(values) else dtype_of(values).name} but 'a' has "
                          f"{dtype_of(a).name} — prims do no type promotion")
    bshape = _meta.broadcast_shapes(*[tuple(i.shape) for i in indices]) if indices else ()
    target = tuple(bshape) + tuple(a.shape[len(indices):])
    try:
        _meta.broadcast_shapes(tuple(values.shape), target)
    except RuntimeError:
        fail("index_put", f"argument 'values' {fmt_shape(values.shape)} does not broadcast to the indexed "
                          f"shape {fmt_shape(target)}")
    if len(values.shape) > len(target) and not all(_le(s, 1) for s in values.shape[:len(values.shape) - len(target)]):
        fail("index_put", f"argument 'values' {fmt_shape(values.shape)} has more dims than the indexed shape "
                          f"{fmt_shape(target)}")


@defprim("index_put(Tensor a, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor",
         check=_ip_check, meta=lambda a, indices, values, accumulate=False: _meta.out(tuple(a.shape), a.dtype))
def _index_put(xp, a, indices, values, accumulate=False):
    """A copy of ``a`` with ``out[indices[0], indices[1], ...] = values`` (numpy advanced
    indexing): one int64 index tensor per leading dim, broadcast together; negative indices
    count from the end; ``values`` broadcasts to the indexed shape (broadcast(indices) +
    the remaining dims of ``a``). ``accumulate`` adds instead (repeated indices all count);
    otherwise one of the repeated writes wins."""
    out = a.copy()
    idx = []
    for d, i in enumerate(indices):
        n = a.shape[d]
        if i.size and (int(i.min()) < -n or int(i.max()) >= n):
            bad = int(i.min()) if int(i.min()) < -n else int(i.max())
            raise IndexError(f"prims.index_put: index {bad} is out of bounds for dim {d} with size {n}")
        idx.append(i)
    idx = tuple(idx)
    target = out[idx].shape
    vals = values.reshape(values.shape[values.ndim - len(target):]) if values.ndim > len(target) else values
    vals = xp.broadcast_to(vals, target)
    if accumulate:
        np.add.at(out, idx, vals)
    else:
        out[idx] = vals
    return out


_export(_index_put)
