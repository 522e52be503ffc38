"""View and layout prims: broadcast_in_dim, reshape, permute, squeeze,
expand_dims, slice, as_strided (views sharing storage), and cat, pad, flip,
clone (new contiguous buffers).

Why views are prims: a code generator turns them into index arithmetic
(strides), so they cost nothing. All dims are canonical (``0 <= d < ndim``);
prims never wrap negative dims or infer ``-1`` sizes — the decompositions do.
The views' strides are computed here once (``_view_strides`` and friends)
and used by both the kernel (``as_strided`` over the input's memory) and the
meta, so real and fake results have the same layout.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import (as_int_list, check_dims, defprim, dtype_of, fail, fmt_shape, is_scalar, same_shape)

__all__: list = []   # prim names defined here (bound in ember.prims)


def _export(b):
    """Prims are exported by ``ember.prims`` (from ``PRIMS``), not as module globals here:
    names like ``slice``, ``sum``, ``abs``, ``round`` would shadow builtins."""
    __all__.append(b.__name__)
    return b


def _tensor(prim, a, name="a"):
    if is_scalar(a) or not hasattr(a, "shape"):
        fail(prim, f"argument '{name}' must be a tensor, not {type(a).__name__}")


def _estrides(a):
    """Strides in elements of an array or a Tensor."""
    if isinstance(a, np.ndarray) or not hasattr(a, "stride"):
        isz = a.itemsize
        return tuple(s // isz for s in a.strides)
    return tuple(a.stride())


def _strided_view(xp, a, shape, estrides, offset=0):
    """A view of ``a``'s memory (``offset`` elements from its first element)."""
    from ..ops.shape import _strided
    return _strided(xp, a, tuple(int(s) for s in shape), tuple(int(s) for s in estrides), int(offset))


def _sizes(prim, name, shape):
    out = as_int_list(prim, name, shape)
    for s in out:
        if isinstance(s, int) and s < 0:
            fail(prim, f"argument '{name}' has a negative size: {fmt_shape(out)}")
    return tuple(out)


# ---------------------------------------------------------------------- broadcast_in_dim
def _bid_check(a, shape, broadcast_dimensions):
    _tensor("broadcast_in_dim", a)
    shape = _sizes("broadcast_in_dim", "shape", shape)
    bd = as_int_list("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    if len(bd) != a.ndim:
        fail("broadcast_in_dim", f"argument 'broadcast_dimensions' has {len(bd)} entries but 'a' has rank "
                                 f"{a.ndim} (one output dim per input dim)")
    for i, d in enumerate(bd):
        if not 0 <= d < len(shape):
            fail("broadcast_in_dim", f"argument 'broadcast_dimensions' holds {d}, out of range for the "
                                     f"output rank {len(shape)}")
        if i and d <= bd[i - 1]:
            fail("broadcast_in_dim", f"argument 'broadcast_dimensions' must be strictly increasing, got {bd}")
        s = a.shape[i]
        if not (isinstance(s, int) and s == 1) and not same_shape((s,), (shape[d],)):
            fail("broadcast_in_dim", f"input dim {i} of 'a' has size {s}, which is neither 1 nor the size "
                                     f"{shape[d]} of output dim {d} (argument 'shape' {fmt_shape(shape)})")


def _bid_strides(a, shape, bd):
    st = _estrides(a)
    out = [0] * len(shape)
    for i, d in enumerate(bd):
        s = a.shape[i]
        if not (isinstance(s, int) and s == 1) or (isinstance(shape[d], int) and shape[d] == 1):
            out[d] = st[i]
    return tuple(out)


def _bid_meta(a, shape, broadcast_dimensions):
    return _meta.view_of(a, tuple(shape), _bid_strides(a, tuple(shape), tuple(broadcast_dimensions)))


@defprim("broadcast_in_dim(Tensor a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor", meta=_bid_meta,
         tags=("view",), check=_bid_check)
def _broadcast_in_dim(xp, a, shape, broadcast_dimensions):
    """XLA's BroadcastInDim: input dim ``i`` becomes output dim ``broadcast_dimensions[i]``
    (strictly increasing, one entry per input dim); its size must be 1 (then it is
    broadcast) or equal ``shape[broadcast_dimensions[i]]``. The other output dims are new,
    broadcast (stride 0). A view of ``a``."""
    return _strided_view(xp, a, shape, _bid_strides(a, tuple(shape), tuple(broadcast_dimensions)))


_export(_broadcast_in_dim)


# ---------------------------------------------------------------------- reshape
def _view_strides(oldshape, oldstride, newshape):
    """The strides that make ``newshape`` a view of a tensor with ``oldshape``/``oldstride``,
    or None when no strides can (PyTorch's computeStride rule; SymInt-safe)."""
    oldshape, oldstride, newshape = tuple(oldshape), tuple(oldstride), tuple(newshape)
    numel = _meta.numel(oldshape)
    if isinstance(numel, int) and numel == 0 or not oldshape:
        return _meta.contiguous_strides(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel = tensor_numel * oldshape[tensor_d]
        if tensor_d == 0 or (not _is1(oldshape[tensor_d - 1])
                             and not _eq(oldstride[tensor_d - 1], tensor_numel * chunk_base_stride)):
            while view_d >= 0 and (_lt(view_numel, tensor_numel) or _is1(newshape[view_d])):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * newshape[view_d]
                view_d -= 1
            if not _eq(view_numel, tensor_numel):
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def _is1(s):
    return isinstance(s, int) and s == 1


def _eq(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return bool(a == b)


def _lt(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return bool(a < b)


def _reshape_check(a, shape):
    _tensor("reshape", a)
    shape = _sizes("reshape", "shape", shape)
    if not _eq(_meta.numel(shape), _meta.numel(tuple(a.shape))):
        fail("reshape", f"argument 'shape' {fmt_shape(shape)} has {_meta.numel(shape)} elements but 'a' "
                        f"{fmt_shape(a.shape)} has {_meta.numel(tuple(a.shape))} (prims infer no -1)")


def _reshape_meta(a, shape):
    st = _view_strides(a.shape, a.stride(), shape)
    if st is None:
        return _meta.out(tuple(shape), a.dtype)
    return _meta.view_of(a, tuple(shape), st)


@defprim("reshape(Tensor a, SymInt[] shape) -> Tensor", meta=_reshape_meta, check=_reshape_check)
def _reshape(xp, a, shape):
    """``a``'s elements in row-major order, laid out as ``shape`` (same number of elements;
    no -1). It shares ``a``'s memory when ``a``'s strides allow (PyTorch's ``view`` rule),
    else it is a new contiguous tensor; value semantics are numpy's ``reshape``. (Not tagged
    ``view``: whether it aliases depends on the layout, and graphs of prims are functional.)"""
    st = _view_strides(a.shape, _estrides(a), shape)
    if st is None:
        return xp.ascontiguousarray(a).reshape(tuple(shape))
    return _strided_view(xp, a, shape, st)


_export(_reshape)


# ---------------------------------------------------------------------- permute / squeeze / expand_dims
def _permute_check(a, dims):
    _tensor("permute", a)
    d = check_dims("permute", "dims", dims, a.ndim)
    if len(d) != a.ndim:
        fail("permute", f"argument 'dims' must be a permutation of range({a.ndim}), got {list(dims)}")


def _permute_meta(a, dims):
    st = a.stride()
    return _meta.view_of(a, tuple(a.shape[d] for d in dims), tuple(st[d] for d in dims))


@defprim("permute(Tensor a, int[] dims) -> Tensor", meta=_permute_meta, tags=("view",), check=_permute_check)
def _permute(xp, a, dims):
    """Output dim ``i`` is input dim ``dims[i]`` (a permutation of range(ndim)). A view."""
    return xp.transpose(a, tuple(int(d) for d in dims))


_export(_permute)


def _squeeze_check(a, dims):
    _tensor("squeeze", a)
    for d in check_dims("squeeze", "dims", dims, a.ndim):
        if not _is1(a.shape[d]):
            fail("squeeze", f"argument 'dims' names dim {d} of size {a.shape[d]}; only size-1 dims can be "
                            f"squeezed")


def _squeeze_meta(a, dims):
    st = a.stride()
    keep = [i for i in range(a.ndim) if i not in set(dims)]
    return _meta.view_of(a, tuple(a.shape[i] for i in keep), tuple(st[i] for i in keep))


@defprim("squeeze(Tensor a, int[] dims) -> Tensor", meta=_squeeze_meta, tags=("view",), check=_squeeze_check)
def _squeeze(xp, a, dims):
    """``a`` without the size-1 dims ``dims`` (each must have size 1). A view."""
    return a.reshape(tuple(s for i, s in enumerate(a.shape) if i not in set(int(d) for d in dims))) \
        if dims else a.view()


_export(_squeeze)


def _ed_check(a, dims):
    _tensor("expand_dims", a)
    check_dims("expand_dims", "dims", dims, a.ndim + len(as_int_list("expand_dims", "dims", dims)))


def _ed_layout(a, dims):
    n = a.ndim + len(dims)
    dims = set(dims)
    src = iter(zip(tuple(a.shape), _estrides(a)))
    shape, st = [None] * n, [None] * n
    for i in range(n):
        if i not in dims:
            shape[i], st[i] = next(src)
    nxt = 1
    for i in range(n - 1, -1, -1):
        if i in dims:
            shape[i], st[i] = 1, nxt
        else:
            nxt = st[i] * shape[i]
    return tuple(shape), tuple(st)


def _ed_meta(a, dims):
    shape, st = _ed_layout(a, dims)
    return _meta.view_of(a, shape, st)


@defprim("expand_dims(Tensor a, int[] dims) -> Tensor", meta=_ed_meta, tags=("view",), check=_ed_check)
def _expand_dims(xp, a, dims):
    """``a`` with new size-1 dims inserted so that they sit at positions ``dims`` of the
    output (canonical in [0, a.ndim + len(dims))). A view."""
    shape, st = _ed_layout(a, tuple(int(d) for d in dims))
    return _strided_view(xp, a, shape, st)


_export(_expand_dims)


# ---------------------------------------------------------------------- slice
def _slice_args(a, start, limit, strides):
    start = as_int_list("slice", "start_indices", start)
    limit = as_int_list("slice", "limit_indices", limit)
    strides = [1] * a.ndim if strides is None else as_int_list("slice", "strides", strides)
    return start, limit, strides


def _slice_check(a, start_indices, limit_indices, strides=None):
    _tensor("slice", a)
    start, limit, steps = _slice_args(a, start_indices, limit_indices, strides)
    for nm, v in (("start_indices", start), ("limit_indices", limit), ("strides", steps)):
        if len(v) != a.ndim:
            fail("slice", f"argument '{nm}' has {len(v)} entries but 'a' has rank {a.ndim} (one per dim)")
    for d, (s, l, k) in enumerate(zip(start, limit, steps)):
        if isinstance(k, int) and k < 1:
            fail("slice", f"argument 'strides' holds {k} for dim {d}; strides must be >= 1")
        if not (_le(0, s) and _le(s, l) and _le(l, a.shape[d])):
            fail("slice", f"dim {d}: need 0 <= start ({s}) <= limit ({l}) <= size ({a.shape[d]})")


def _le(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    return bool(a <= b)


def _slice_layout(a, start, limit, steps, st):
    shape = tuple((l - s + k - 1) // k for s, l, k in zip(start, limit, steps))
    estr = tuple(x * k for x, k in zip(st, steps))
    off = 0
    for s, x in zip(start, st):
        off = off + s * x
    return shape, estr, off


def _slice_meta(a, start_indices, limit_indices, strides=None):
    start, limit, steps = _slice_args(a, start_indices, limit_indices, strides)
    shape, estr, off = _slice_layout(a, start, limit, steps, a.stride())
    return _meta.view_of(a, shape, estr, a.storage_offset() + off)


@defprim("slice(Tensor a, SymInt[] start_indices, SymInt[] limit_indices, int[]? strides=None) -> Tensor",
         meta=_slice_meta, tags=("view",), check=_slice_check)
def _slice(xp, a, start_indices, limit_indices, strides=None):
    """Elements ``start_indices[d] <= i < limit_indices[d]`` stepping by ``strides[d]`` (default 1)
    in every dim (one entry per dim; 0 <= start <= limit <= size; step >= 1). A view."""
    start, limit, steps = _slice_args(a, start_indices, limit_indices, strides)
    return a[tuple(slice(int(s), int(l), int(k)) for s, l, k in zip(start, limit, steps))]


_export(_slice)


# ---------------------------------------------------------------------- as_strided
def _as_strided_check(a, size, stride, storage_offset=0):
    _tensor("as_strided", a)
    size = _sizes("as_strided", "size", size)
    stride = as_int_list("as_strided", "stride", stride)
    if len(size) != len(stride):
        fail("as_strided", f"argument 'stride' has {len(stride)} entries but 'size' has {len(size)}")
    if isinstance(storage_offset, int) and storage_offset < 0:
        fail("as_strided", f"argument 'storage_offset' is {storage_offset}; it is relative to 'a' and must "
                           f"be >= 0")
    for s in stride:
        if isinstance(s, int) and s < 0:
            fail("as_strided", f"argument 'stride' has a negative stride: {list(stride)}")


def _as_strided_meta(a, size, stride, storage_offset=0):
    return _meta.view_of(a, tuple(size), tuple(stride), a.storage_offset() + storage_offset)


@defprim("as_strided(Tensor a, SymInt[] size, SymInt[] stride, SymInt storage_offset=0) -> Tensor",
         meta=_as_strided_meta, tags=("view",), check=_as_strided_check)
def _as_strided(xp, a, size, stride, storage_offset=0):
    """A view of ``a``'s storage with ``size`` and ``stride`` (in elements), starting
    ``storage_offset`` elements after ``a``'s first element (relative, unlike PyTorch's
    absolute offset, so a graph input's own offset never leaks in). The caller guarantees
    every addressed element lies inside the storage."""
    return _strided_view(xp, a, size, stride, storage_offset)


_export(_as_strided)


# ---------------------------------------------------------------------- cat
def _cat_check(tensors, dim):
    if not tensors:
        fail("cat", "argument 'tensors' is empty")
    t0 = tensors[0]
    if not 0 <= dim < max(t0.ndim, 1) or t0.ndim == 0:
        fail("cat", f"argument 'dim' is {dim}, out of range for tensors of rank {t0.ndim} (prims take "
                    f"canonical dims; 0-d tensors cannot be concatenated)")
    for i, t in enumerate(tensors[1:], 1):
        if dtype_of(t) is not dtype_of(t0):
            fail("cat", f"argument 'tensors' element {i} has dtype {dtype_of(t).name} but element 0 has "
                        f"{dtype_of(t0).name} — prims do no type promotion")
        if t.ndim != t0.ndim or not same_shape([s for d, s in enumerate(t.shape) if d != dim],
                                               [s for d, s in enumerate(t0.shape) if d != dim]):
            fail("cat", f"argument 'tensors' element {i} has shape {fmt_shape(t.shape)}, incompatible with "
                        f"element 0's {fmt_shape(t0.shape)} outside dim {dim}")


def _cat_meta(tensors, dim):
    shape = list(tensors[0].shape)
    tot = 0
    for t in tensors:
        tot = tot + t.shape[dim]
    shape[dim] = tot
    return _meta.out(tuple(shape), tensors[0].dtype)


@defprim("cat(Tensor[] tensors, int dim) -> Tensor", meta=_cat_meta, check=_cat_check)
def _cat(xp, tensors, dim):
    """The tensors joined along ``dim`` (same rank and dtype; equal sizes outside ``dim``;
    no skipping of empty 1-D tensors). A new contiguous tensor."""
    return xp.ascontiguousarray(xp.concatenate(list(tensors), axis=int(dim)))


_export(_cat)


# ---------------------------------------------------------------------- pad
def _pad_cfg(cfg):
    out = []
    for c in cfg:
        c = list(c)
        if len(c) != 3:
            fail("pad", f"argument 'padding_config' entries are (lo, hi, interior) triples, got {c}")
        out.append(tuple(c))
    return out


def _pad_check(a, padding_value, padding_config):
    _tensor("pad", a)
    cfg = _pad_cfg(padding_config)
    if len(cfg) != a.ndim:
        fail("pad", f"argument 'padding_config' has {len(cfg)} entries but 'a' has rank {a.ndim}")
    if not is_scalar(padding_value):
        fail("pad", "argument 'padding_value' must be a Python number")
    if _t.scalar_category(padding_value) > dtype_of(a).category:
        fail("pad", f"argument 'padding_value' is a Python {type(padding_value).__name__} but 'a' has dtype "
                    f"{dtype_of(a).name} — prims do no type promotion")
    for d, ((lo, hi, it), n) in enumerate(zip(cfg, a.shape)):
        if isinstance(it, int) and it < 0:
            fail("pad", f"dim {d}: interior padding must be >= 0, got {it}")
        size = lo + hi + n + (n - 1) * it if not (isinstance(n, int) and n == 0) else lo + hi
        if isinstance(size, int) and size < 0:
            fail("pad", f"dim {d}: the padded size {size} is negative")


def _pad_shape(shape, cfg):
    out = []
    for (lo, hi, it), n in zip(cfg, shape):
        out.append(lo + hi + n + (n - 1) * it if not (isinstance(n, int) and n == 0) else lo + hi)
    return tuple(out)


def _pad_meta(a, padding_value, padding_config):
    return _meta.out(_pad_shape(tuple(a.shape), _pad_cfg(padding_config)), a.dtype)


@defprim("pad(Tensor a, Scalar padding_value, int[][] padding_config) -> Tensor", meta=_pad_meta,
         check=_pad_check)
def _pad(xp, a, padding_value, padding_config):
    """XLA's Pad: per dim a ``(lo, hi, interior)`` triple: ``interior`` copies of
    ``padding_value`` between neighbouring elements, ``lo`` before and ``hi`` after; a
    negative ``lo``/``hi`` removes that many elements from the (interior-padded) edge.
    A new contiguous tensor."""
    cfg = [(int(lo), int(hi), int(it)) for lo, hi, it in _pad_cfg(padding_config)]
    dt = dtype_of(a)
    full = [max(lo, 0) + max(hi, 0) + (n + (n - 1) * it if n else 0) for (lo, hi, it), n in zip(cfg, a.shape)]
    out = xp.full(tuple(full), padding_value, dtype=dt.np) if dt.category != 1 else \
        xp.full(tuple(full), np.asarray(int(padding_value)).astype(dt.np), dtype=dt.np)
    inner = tuple(slice(max(lo, 0), max(lo, 0) + (n + (n - 1) * it if n else 0), it + 1)
                  for (lo, hi, it), n in zip(cfg, a.shape))
    out[inner] = a
    crop = tuple(slice(-min(lo, 0), f + min(hi, 0)) for (lo, hi, it), f in zip(cfg, full))
    return xp.ascontiguousarray(out[crop])


_export(_pad)


# ---------------------------------------------------------------------- flip / clone
def _flip_check(a, dims):
    _tensor("flip", a)
    check_dims("flip", "dims", dims, a.ndim)


@defprim("flip(Tensor a, int[] dims) -> Tensor", meta=lambda a, dims: _meta.out(tuple(a.shape), a.dtype),
         check=_flip_check)
def _flip(xp, a, dims):
    """``a`` reversed along each of ``dims``. A new contiguous tensor."""
    return xp.ascontiguousarray(xp.flip(a, axis=tuple(int(d) for d in dims)) if dims else a)


_export(_flip)


def _clone_check(a):
    _tensor("clone", a)


@defprim("clone(Tensor a) -> Tensor", meta=lambda a: _meta.out(tuple(a.shape), a.dtype), check=_clone_check)
def _clone(xp, a):
    """A contiguous (row-major) copy of ``a``."""
    return xp.array(a, copy=True, order="C")


_export(_clone)
