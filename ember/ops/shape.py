"""Shape and view ops, copies and casts.

View ops (tag ``view``) return backend views: the output shares storage and
the version counter with its input's base. ``view`` never copies (it raises
PyTorch's error when strides don't allow it); ``reshape`` views when it can
and copies otherwise.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._helpers import wrap_dim, wrap_dims
from .registry import defcomposite, defop, xp_of


# ---------------------------------------------------------------------- size helpers
def infer_size(shape, numel):
    """Resolve one -1 in ``shape`` for a tensor of ``numel`` elements."""
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def view_strides(oldshape, oldstride, newshape):
    """Strides for viewing (oldshape, oldstride) as newshape without a copy, or None."""
    if int(np.prod(oldshape)) == 0 or tuple(oldshape) == tuple(newshape):
        if tuple(oldshape) == tuple(newshape):
            return tuple(oldstride)
        st, acc = [], 1
        for s in reversed(newshape):
            st.append(acc)
            acc *= max(s, 1)
        return tuple(reversed(st))
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1] if oldstride else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def _size_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = []
    for s in shape:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, numbers.Integral):
            raise TypeError(f"size must be tuple of ints, but found element of type {type(s).__name__}")
        out.append(int(s))
    return tuple(out)


def _strided(xp, a, shape, strides_elems, offset_elems=0):
    isz = a.itemsize
    if xp is np:
        base = a if offset_elems == 0 else _offset_array(a, offset_elems)
        return np.lib.stride_tricks.as_strided(base, shape=tuple(shape),
                                               strides=tuple(s * isz for s in strides_elems))
    return xp.lib.stride_tricks.as_strided(a.ravel()[offset_elems:] if offset_elems else a, shape=tuple(shape),
                                           strides=tuple(s * isz for s in strides_elems))


def _offset_array(a, off):
    """A 1-element-shaped view of ``a``'s memory starting ``off`` elements in."""
    return np.lib.stride_tricks.as_strided(a, shape=(1,), strides=(a.itemsize,))[:1] if off == 0 else \
        np.lib.stride_tricks.as_strided(a, shape=(off + 1,), strides=(a.itemsize,))[off:]


# ---------------------------------------------------------------------- view / reshape
@defop("view(Tensor self, int[] size) -> Tensor", view=True, save=(), method=False)
def _view(xp, a, size):
    size = infer_size(size, a.size)
    if a.flags.c_contiguous:
        return a.reshape(size)  # always a view for a C-contiguous array
    st = view_strides(a.shape, tuple(s // a.itemsize for s in a.strides), size)
    if st is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _strided(xp, a, size, st)


@_view.derivative
def _view_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (_t.dtype, type, str, np.dtype)) and not isinstance(
            shape[0], (tuple, list)):
        raise RuntimeError("view(dtype) is not supported by ember; use .to(dtype) to convert values")
    return _view.binding(self, _size_arg(shape))


@defcomposite("reshape(Tensor self, int[] shape) -> Tensor", method=False)
def _reshape(self, shape):
    shape = infer_size(shape, self.numel())
    if view_strides(tuple(self.shape), self.stride(), shape) is not None:
        return _view.binding(self, shape)
    return _unsafe_view.binding(_clone.binding(self), shape)


@defop("_unsafe_view(Tensor self, int[] size) -> Tensor", save=(), method=False, function=False)
def _unsafe_view(xp, a, size):
    return xp.reshape(a, infer_size(size, a.size))


@_unsafe_view.derivative
def _unsafe_view_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


def reshape(self, *shape):
    return _reshape.binding(self, _size_arg(shape))


def view_as(self, other):
    return view(self, tuple(other.shape))


def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


# ---------------------------------------------------------------------- expand / permute
@defop("expand(Tensor self, int[] size) -> Tensor", view=True, save=(), method=False)
def _expand(xp, a, size):
    size = tuple(size)
    if len(size) < a.ndim:
        raise RuntimeError(f"expand(ember.{_t.from_numpy_dtype(a.dtype).legacy_name}Tensor{{{list(a.shape)}}}, "
                           f"size={list(size)}): the number of sizes provided ({len(size)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({a.ndim})")
    lead = len(size) - a.ndim
    shape, strides = [], []
    isz = a.itemsize
    for i, s in enumerate(size):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            shape.append(s)
            strides.append(0)
            continue
        cur = a.shape[i - lead]
        st = a.strides[i - lead] // isz
        if s == -1:
            s = cur
        if cur == s:
            shape.append(s)
            strides.append(st)
        elif cur == 1:
            shape.append(s)
            strides.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({cur}) at "
                               f"non-singleton dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: "
                               f"{list(a.shape)}")
    return _strided(xp, a, shape, strides)


@_expand.derivative
def _expand_bw(ctx, g):
    from ._helpers import sum_to
    return (sum_to(g, ctx.args[0].shape),)


def expand(self, *size):
    return _expand.binding(self, _size_arg(size))


def expand_as(self, other):
    return _expand.binding(self, tuple(other.shape))


@defop("permute(Tensor self, int[] dims) -> Tensor", view=True, save=(), method=False)
def _permute(xp, a, dims):
    dims = tuple(dims)
    if len(dims) != a.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {a.ndim} is not "
                           f"equal to len(dims) = {len(dims)}".replace("(sparse_coo)", ""))
    w = tuple(wrap_dim(d, a.ndim) for d in dims)
    if len(set(w)) != len(w):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return xp.transpose(a, w)


@_permute.derivative
def _permute_bw(ctx, g):
    dims = [wrap_dim(d, len(ctx.args[0].shape)) for d in ctx.args[1]]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return (g.permute(inv),)


def permute(self, *dims):
    return _permute.binding(self, _size_arg(dims))


@defop("transpose(Tensor self, int dim0, int dim1) -> Tensor", view=True, save=())
def transpose(xp, a, dim0, dim1):
    if a.ndim == 0:
        return a.view()
    return xp.swapaxes(a, wrap_dim(dim0, a.ndim), wrap_dim(dim1, a.ndim))


@transpose.derivative
def _transpose_bw(ctx, g):
    _, d0, d1 = ctx.args
    return (g.transpose(d0, d1),)


@defop("t(Tensor self) -> Tensor", view=True, save=())
def t(xp, a):
    if a.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return a.T if a.ndim == 2 else a.view()


@t.derivative
def _t_bw(ctx, g):
    return (g.t(),)


@defop("unsqueeze(Tensor self, int dim) -> Tensor", view=True, save=())
def unsqueeze(xp, a, dim):
    d = wrap_dim(dim, a.ndim + 1)
    return a[(slice(None),) * d + (None,)]


@unsqueeze.derivative
def _unsqueeze_bw(ctx, g):
    return (g.squeeze(ctx.args[1]),)


@defop("squeeze(Tensor self, int[]? dim=None) -> Tensor", view=True, save=(),
       grad_fn_name=lambda a: "SqueezeBackward0" if a[1] is None else "SqueezeBackward1")
def squeeze(xp, a, dim=None):
    if a.ndim == 0:
        return a.view()
    dims = wrap_dims(dim, a.ndim)
    dims = tuple(d for d in dims if a.shape[d] == 1)
    return xp.squeeze(a, axis=dims) if dims else a.view()


@squeeze.derivative
def _squeeze_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


# ---------------------------------------------------------------------- as_strided + geometry remaps
def _geom_indices(geom):
    size, stride, off = geom
    idx = np.full(tuple(size), off, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shp = [1] * len(size)
        shp[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shp)
    return idx


def _extent(*geoms):
    e = 1
    for size, stride, off in geoms:
        if 0 in tuple(size):
            continue
        e = max(e, off + 1 + builtin_sum((n - 1) * s for n, s in zip(size, stride)))
    return e


builtin_sum = sum


@defop("_restride(Tensor self, Any src, Any dst, str mode) -> Tensor", method=False, function=False, save=())
def _restride(xp, a, src, dst, mode):
    """Move values between two geometries over one flat storage.

    gather:       storage[src] = a; return storage[dst]
    scatter_add:  storage += a at src (accumulating overlaps); return storage[dst]
    zero:         storage[src] = a; storage[dst] = 0; return storage[src]
    """
    n = _extent(src, dst)
    store = xp.zeros(n, dtype=a.dtype)
    si = xp.asarray(_geom_indices(src))
    di = xp.asarray(_geom_indices(dst))
    if mode == "scatter_add":
        if xp is np:
            np.add.at(store, si.reshape(-1), a.reshape(-1))
        else:
            xp.add.at(store, si.reshape(-1), a.reshape(-1))
        return store[di]
    store[si] = a
    if mode == "gather":
        return store[di]
    if mode == "zero":
        store[di] = 0
        return store[si]
    raise ValueError(mode)


@_restride.derivative
def _restride_bw(ctx, g):
    _, src, dst, mode = ctx.args
    if mode == "gather":
        return (_restride.binding(g, dst, src, "scatter_add"),)
    if mode == "scatter_add":
        return (_restride.binding(g, dst, src, "gather"),)
    return (_restride.binding(g, src, dst, "zero"),)


def _rel(geom, base_off):
    size, stride, off = geom
    return (tuple(size), tuple(stride), off - base_off)


def _as_strided_from_geometry(g, base_geom, view_geom):
    off = min(base_geom[2], view_geom[2])
    return _restride.binding(g, _rel(base_geom, off), _rel(view_geom, off), "gather")


def _as_strided_zero_region(g, base_geom, view_geom):
    off = min(base_geom[2], view_geom[2])
    return _restride.binding(g, _rel(base_geom, off), _rel(view_geom, off), "zero")


def _as_strided_scatter_grad(g, base_geom, view_geom):
    off = min(base_geom[2], view_geom[2])
    return _restride.binding(g, _rel(view_geom, off), _rel(base_geom, off), "scatter_add")


@defop("as_strided(Tensor self, int[] size, int[] stride, int? storage_offset=None) -> Tensor", view=True,
       save=(), method=False)
def _as_strided_rel(xp, a, size, stride, storage_offset=None):
    """(storage_offset here is relative to ``a``'s first element; the public
    entry point converts from PyTorch's absolute offsets.)"""
    off = storage_offset or 0
    if off < 0:
        raise RuntimeError("as_strided: a storage_offset before the tensor's own offset is not supported by "
                           "ember; call as_strided on the base tensor instead")
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape")
    return _strided(xp, a, size, stride, off)


@_as_strided_rel.derivative
def _as_strided_bw(ctx, g):
    a, size, stride, off = ctx.args
    st = tuple(int(s) for s in _contig_strides(a.shape))
    return (_restride.binding(g, (tuple(size), tuple(stride), off or 0), (tuple(a.shape), st, 0),
                              "scatter_add"),)


def _contig_strides(shape):
    st, acc = [], 1
    for s in reversed(tuple(shape)):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def as_strided(self, size, stride, storage_offset=None):
    rel = None if storage_offset is None else storage_offset - self.storage_offset()
    if not self.is_contiguous() and self._base is None:
        raise RuntimeError("as_strided on a non-contiguous tensor that owns its storage is not supported")
    return _as_strided_rel.binding(self, tuple(size), tuple(stride), rel)


# ---------------------------------------------------------------------- copies and casts
@defop("clone(Tensor self, *, Any memory_format=None) -> Tensor", save=())
def _clone(xp, a, memory_format=None):
    return xp.array(a, copy=True, order="C" if memory_format is None else "K")


@_clone.derivative
def _clone_bw(ctx, g):
    return (g,)


@defcomposite("contiguous(Tensor self, *, Any memory_format=None) -> Tensor")
def contiguous(self, memory_format=None):
    if self.is_contiguous():
        return self
    return _clone.binding(self)


@defop("_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor", save=(),
       method=False, function=False, grad_fn_name="ToCopyBackward0")
def _to_copy(xp, a, dtype=None, device=None):
    dt = _t.as_dtype(dtype) if dtype is not None else _t.from_numpy_dtype(a.dtype)
    if device is not None:
        target = xp_of(device)
        if target is not np and isinstance(a, np.ndarray):
            return target.asarray(a.astype(dt.np))
        if target is np and not isinstance(a, np.ndarray):
            return a.get().astype(dt.np)
    return a.astype(dt.np, copy=True)


@_to_copy.derivative
def _to_copy_bw(ctx, g):
    a = ctx.args[0]
    return (g.to(dtype=a.dtype, device=a.device),)


def _to_copy_if_needed(self, dtype=None, device=None, copy=False):
    same_dt = dtype is None or dtype is self.dtype
    same_dev = device is None or device == self.device
    if same_dt and same_dev and not copy:
        return self
    return _to_copy.binding(self, dtype=dtype, device=device if not same_dev else None)


# ---------------------------------------------------------------------- entry points
for _name, _fn in dict(view=view, reshape=reshape, view_as=view_as, reshape_as=reshape_as, expand=expand,
                       expand_as=expand_as, permute=permute, as_strided=as_strided).items():
    setattr(Tensor, _name, _fn)
for _name, _fn in dict(reshape=reshape, permute=permute, as_strided=as_strided,
                       _to_copy_if_needed=_to_copy_if_needed,
                       _as_strided_from_geometry=_as_strided_from_geometry,
                       _as_strided_zero_region=_as_strided_zero_region,
                       _as_strided_scatter_grad=_as_strided_scatter_grad,
                       clone=_clone.binding).items():
    setattr(api, _name, _fn)
