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
from . import _meta, api
from ._helpers import _canonical_c, as_contiguous, copy_preserve, empty_strided, estrides, half_source, wrap_dim, wrap_dims
from .registry import defcomposite, defop, xp_of


# ---------------------------------------------------------------------- size helpers
def infer_size(shape, numel):
    """Resolve one -1 in ``shape`` for a tensor of ``numel`` elements.

    Symbolic-safe (meta functions call it with SymInt sizes): the -1 dim is
    ``numel // known`` and divisibility is decided by a guard."""
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if _const(s, -1)]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for i, s in enumerate(shape):
        if not (neg and i == neg[0]):
            if not _meta.is_symint(s) and s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known = known * s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _const(x, v):
    """``x == v`` for a concrete size; False for a SymInt (asked only about 0 and -1,
    which a symbolic size never is), so no guard is recorded."""
    return not _meta.is_symint(x) and x == v


def view_strides(oldshape, oldstride, newshape):
    """Strides for viewing (oldshape, oldstride) as newshape without a copy, or None.

    PyTorch's computeStride, written with plain Python size arithmetic so meta
    functions can run it on SymInt sizes (decisions about symbols become guards)."""
    if _meta.numel(oldshape) == 0:
        if len(oldshape) == len(newshape) and all(a == b for a, b in zip(oldshape, newshape)):
            return tuple(oldstride)
        return _meta.contiguous_strides(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1] if oldstride else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel = tensor_numel * oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * newshape[view_d]
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
            if _meta.is_symint(s):      # a symbolic size (fake tensors): keep it symbolic
                out.append(s)
                continue
            raise TypeError(f"size must be tuple of ints, but found element of type {type(s).__name__}")
        out.append(int(s))
    return tuple(out)


def _int_list_arg(fname, pname, args, kw, options=(), empty_ok=False):
    """The int list of a method whose one parameter ``pname`` takes one (``expand(size)``,
    ``permute(dims)``, ...), given as its ints (``x.expand(2, 3)``), one tuple/list or the keyword,
    with torch's argument parser's errors (``_int_list_error``); ``options``: the keyword-only
    parameters it also has (their values are the caller's to check). ``empty_ok``: no ints at all
    is taken as ``()`` (torch's parser refuses it, and so do the public methods; ember's own code
    passes its possibly empty shapes as one tuple, ``t.expand(tuple(shape))``)."""
    if kw:
        if pname in kw:
            if args:
                raise TypeError(f"{fname}() got multiple values for argument '{pname}'")
            v = kw[pname]
            if not isinstance(v, (tuple, list)) and not _int_like(v):
                raise TypeError(f"{fname}(): argument '{pname}' must be tuple of ints, not {type(v).__name__}")
            args = (v,)
        if not args:
            raise TypeError(f'{fname}() missing 1 required positional arguments: "{pname}"')
        for k in kw:
            if k != pname and k not in options:
                raise TypeError(f"{fname}() got an unexpected keyword argument '{k}'")
    if not args:
        if empty_ok and not kw:
            return ()
        raise TypeError(f'{fname}() missing 1 required positional arguments: "{pname}"')
    if len(args) > 1 and type(args[0]) is bool:
        raise TypeError(f"{fname}() takes 1 positional argument but {len(args)} were given")
    try:
        return _size_arg(args)
    except (TypeError, ValueError, RuntimeError) as e:
        err = _int_list_error(fname, pname, args)
        if err is None:
            raise
        raise err from None


def _int_like(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Integral) or _meta.is_symint(v):
        return True
    return isinstance(v, Tensor) and v.ndim == 0 and not v.dtype.is_floating_point and not v.dtype.is_complex


def _int_list_error(fname, pname, args):
    """torch's TypeError for int-list arguments ``args`` that are not ints (None when they are)."""
    if len(args) == 1 and not isinstance(args[0], (tuple, list)):
        if _int_like(args[0]):
            return None
        return TypeError(f"{fname}(): argument '{pname}' (position 1) must be tuple of ints, not "
                         f"{type(args[0]).__name__}")
    seq = args[0] if len(args) == 1 else args
    if len(seq) and not _int_like(seq[0]):
        if len(args) == 1:
            return TypeError(f"{fname}(): argument '{pname}' (position 1) must be tuple of ints, but found element "
                             f"of type {type(seq[0]).__name__} at pos 0")
        return TypeError(f"{fname}() takes 1 positional argument but {len(args)} were given")
    for i, v in enumerate(seq):
        if not _int_like(v):
            return TypeError(f"{fname}(): argument '{pname}' failed to unpack the object at pos {i + 1} with error "
                             f"\"type must be tuple of ints,but got {type(v).__name__}\"")
    return None


def _strided(xp, a, shape, strides_elems, offset_elems=0):
    isz = a.itemsize
    if xp is np:
        base = a if offset_elems == 0 else _offset_array(a, offset_elems)
        try:
            return np.lib.stride_tricks.as_strided(base, shape=tuple(shape),
                                                   strides=tuple(s * isz for s in strides_elems))
        except TypeError:   # ml_dtypes' float8_e5m2 ('<f1'): numpy cannot rebuild it from its interface
            return np.lib.stride_tricks.as_strided(base.view(f"u{isz}"), shape=tuple(shape), strides=tuple(
                s * isz for s in strides_elems)).view(base.dtype)
    return xp.lib.stride_tricks.as_strided(a.ravel()[offset_elems:] if offset_elems else a, shape=tuple(shape),
                                           strides=tuple(s * isz for s in strides_elems))


def _offset_array(a, off):
    """A 1-element-shaped view of ``a``'s memory starting ``off`` elements in."""
    return np.lib.stride_tricks.as_strided(a, shape=(1,), strides=(a.itemsize,))[:1] if off == 0 else \
        np.lib.stride_tricks.as_strided(a, shape=(off + 1,), strides=(a.itemsize,))[off:]


# ---------------------------------------------------------------------- view / reshape
@defop("view(Tensor self, int[] size) -> Tensor", view=True, save=(), method=False)
def _view(xp, a, size):
    if type(a) is np.ndarray and a.flags.c_contiguous and (not size or min(size) >= -1):
        # fast path: numpy's reshape of a C-contiguous array is a view with PyTorch's
        # strides, and it resolves one -1 like infer_size (anything else it rejects
        # takes the checked path below, for PyTorch's error)
        try:
            out = a.reshape(size)
        except (ValueError, TypeError):
            out = None
        if out is not None and out.shape != a.shape:
            return out
    size = infer_size(size, a.size)
    if a.flags.c_contiguous and size != a.shape:
        return a.reshape(size)  # always a view for a C-contiguous array, with PyTorch's strides
    st = view_strides(a.shape, tuple(s // a.itemsize for s in a.strides), size)
    if st is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _strided(xp, a, size, st)


@_view.derivative
def _view_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


_view_binding = _view.binding


def view(self, *shape, **kwargs):
    """``view(*size)`` / ``view(size)`` (the op ``view``) or ``view(dtype)`` (the op
    ``view_dtype``, ember/ops/dtype_view.py), chosen as torch's argument parser does."""
    if kwargs:
        return _view_keywords(self, shape, kwargs)
    for s in shape:
        if type(s) is not int:
            break
    else:  # fast path: view(2, -1)
        if shape:
            return _view_binding(self, shape)
    if len(shape) == 1:
        a = shape[0]
        if isinstance(a, _t.dtype) or isinstance(a, type) and a in _VIEW_PY_TYPES:
            return _view_as_dtype(self, a)
        if not isinstance(a, (tuple, list)) and not _is_size(a):
            raise TypeError(_view_overloads(shape, {}))
    elif not shape or not all(_is_size(a) for a in shape):
        raise TypeError(_view_overloads(shape, {}))
    return _view.binding(self, _size_arg(shape))


# torch reads the Python scalar types as dtypes (float: float64); asked only about classes
_VIEW_PY_TYPES = frozenset((float, int, bool, complex))


def _is_size(a):
    return isinstance(a, (numbers.Integral, Tensor)) and not isinstance(a, bool) or _meta.is_symint(a)


def _view_as_dtype(self, dtype):
    from .dtype_view import view_as_dtype
    return view_as_dtype(self, dtype)


def _view_keywords(self, shape, kwargs):
    """``view(dtype=...)`` or ``view(size=[...])``: one keyword and nothing else, as torch."""
    if not shape and len(kwargs) == 1:
        if "dtype" in kwargs:
            d = kwargs["dtype"]
            if isinstance(d, _t.dtype) or isinstance(d, type) and d in _VIEW_PY_TYPES:
                return _view_as_dtype(self, d)
        elif "size" in kwargs and isinstance(kwargs["size"], (tuple, list)):
            return _view.binding(self, _size_arg(tuple(kwargs["size"])))
    raise TypeError(_view_overloads(shape, kwargs))


def _view_overloads(args, kwargs):
    """torch's TypeError for a ``view`` call matching neither overload (the first lines of it:
    what came, and the two signatures)."""
    def name(a):
        if isinstance(a, _t.dtype):
            return "ember.dtype"
        return type(a).__name__
    if args:    # torch's spelling: "(int, size=int)", but "(size=int, )" without positionals
        got = ", ".join([name(a) for a in args] + [f"{k}={name(v)}" for k, v in kwargs.items()])
    else:
        got = "".join(f"{k}={name(v)}, " for k, v in kwargs.items())
    return (f"view() received an invalid combination of arguments - got ({got}), but expected one of:\n"
            f" * (ember.dtype dtype)\n * (tuple of ints size)\n")


@defcomposite("reshape(Tensor self, int[] shape) -> Tensor", method=False)
def _reshape(self, shape):
    asked = shape
    shape = infer_size(shape, self._data.size)
    if self.is_contiguous():
        # the size as asked (``-1`` kept), as torch's reshape hands it to view
        return _view.binding(self, asked)
    st = view_strides(tuple(self.shape), _estrides(self), shape)
    if st is not None:
        return _reshape_alias.binding(self, shape, st)
    return _unsafe_view.binding(_clone.binding(self, memory_format="contiguous_format"), shape)


@defop("_reshape_alias(Tensor self, int[] size, int[] stride) -> Tensor", view=True, save=(), method=False,
       function=False)
def _reshape_alias(xp, a, size, stride):
    return _strided(xp, a, size, stride)


@_reshape_alias.derivative
def _reshape_alias_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


@defop("_unsafe_view(Tensor self, int[] size) -> Tensor", save=(), method=False, function=False)
def _unsafe_view(xp, a, size):
    return xp.reshape(a, infer_size(size, a.size))


@_unsafe_view.derivative
def _unsafe_view_bw(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


def reshape(self, *shape, **kw):
    return _reshape.binding(self, _int_list_arg("reshape", "shape", shape, kw))


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
    n = len(size)
    shape, strides = [0] * n, [0] * n
    isz = a.itemsize
    for i in range(n - 1, -1, -1):          # PyTorch's inferExpandGeometry, strides included
        k = i - lead
        s = size[i]
        if k >= 0:
            cur, st = a.shape[k], a.strides[k] // isz
        else:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            # (a 0-dim tensor expands with every stride 0, size-1 dims too, as torch's)
            cur, st = 1, (0 if a.ndim == 0 else 1 if i == n - 1 else shape[i + 1] * strides[i + 1])
        if s == -1:
            s = cur
        if cur != s:
            if cur != 1:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({cur}) "
                                   f"at non-singleton dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: "
                                   f"{list(a.shape)}")
            st = 0
        shape[i], strides[i] = s, st
    return _strided(xp, a, shape, strides)


@_expand.derivative
def _expand_bw(ctx, g):
    from ._helpers import sum_to
    return (sum_to(g, ctx.args[0].shape),)


def expand(self, *size, **kw):
    """``expand(*sizes)`` / ``expand(size, *, implicit=False)``, torch's parser's errors."""
    if kw or not size:
        implicit = kw.get("implicit", False)
        if not isinstance(implicit, bool):
            raise TypeError(f"expand(): argument 'implicit' must be bool, not {type(implicit).__name__}")
    return _expand.binding(self, _int_list_arg("expand", "size", size, kw, ("implicit",)))


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


def permute(self, *dims, **kw):
    return _permute.binding(self, _int_list_arg("permute", "dims", dims, kw))


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
    st = [s // a.itemsize for s in a.strides]
    new = 1 if d >= a.ndim else a.shape[d] * st[d]  # PyTorch's stride for the new size-1 dim
    return _strided(xp, a, a.shape[:d] + (1,) + a.shape[d:], st[:d] + [new] + st[d:])


@unsqueeze.derivative
def _unsqueeze_bw(ctx, g):
    return (g.squeeze(ctx.args[1]),)


def _squeeze_name(args):
    d = args[1]
    if d is None:
        return "SqueezeBackward0"
    return "SqueezeBackward1" if isinstance(d, numbers.Integral) else "SqueezeBackward2"


@defop("squeeze(Tensor self, int[]? dim=None) -> Tensor", view=True, save=(), grad_fn_name=_squeeze_name)
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


@defop("as_strided(Tensor self, int[] size, int[] stride, int? storage_offset=None, *, Any src_stride=None) "
       "-> Tensor", view=True, save=(), method=False)
def _as_strided_rel(xp, a, size, stride, storage_offset=None, src_stride=None):
    """(storage_offset here is relative to ``a``'s first element; the public
    entry point converts from PyTorch's absolute offsets. ``src_stride`` is
    ``a``'s own strides, recorded for the backward, which must gather the
    gradient back at ``a``'s element positions: an unsaved input's metadata has
    no strides, and assuming a contiguous ``a`` sent the gradient of a view of a
    transposed tensor to the wrong elements.)"""
    off = storage_offset or 0
    if off < 0:
        raise RuntimeError("as_strided: a storage_offset before the tensor's own offset is not supported by "
                           "ember; call as_strided on the base tensor instead")
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape")
    return _strided(xp, a, size, stride, off)


@_as_strided_rel.derivative
def _as_strided_bw(ctx, g):
    a, size, stride, off, src_stride = ctx.args
    st = tuple(src_stride) if src_stride is not None else tuple(int(s) for s in _contig_strides(a.shape))
    shape = tuple(a.shape)
    grad = _restride.binding(g, (tuple(size), tuple(stride), off or 0), (shape, st, 0), "scatter_add")
    if _may_overlap(shape, st):
        # ``a`` itself is a view whose elements share memory (an expanded tensor, stride 0):
        # the gradient gathered at each of its elements is the whole memory location's, so
        # each of the k elements sharing it takes 1/k (as torch's as_strided_backward); without
        # this, expand's backward summed the k copies: k times the gradient
        ones = api.ones(shape, dtype=grad.dtype, device=grad.device)
        grad = grad / _restride.binding(ones, (shape, st, 0), (shape, st, 0), "scatter_add")
    return (grad,)


def _may_overlap(shape, strides):
    """Whether two elements of the geometry (``shape``, ``strides``) can share a memory
    location: a stride-0 dimension, or strides too small for the dims nested inside them."""
    if not all(type(v) is int for v in (*shape, *strides)):
        # symbolic sizes (a dynamic trace): int() would specialise them, so only a zero stride
        # (an expanded dim) is looked for; a false "may" only costs the division by counts of 1
        return any(type(st) is int and st == 0 and not (type(n) is int and n <= 1)
                   for n, st in zip(shape, strides))
    dims = sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1)
    extent = 0                  # the span, in elements, of the dims taken so far
    for st, n in dims:
        if st <= extent:
            return True
        extent += st * (n - 1)
    return False


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
    return _as_strided_rel.binding(self, tuple(size), tuple(stride), rel, src_stride=tuple(self.stride()))


# ---------------------------------------------------------------------- copies and casts
@defop("clone(Tensor self, *, Any memory_format=None) -> Tensor", save=())
def _clone(xp, a, memory_format=None):
    """A copy. The default, ``preserve_format`` (as PyTorch), keeps the strides of a dense
    input and lays a sliced or expanded one out densely in its dim order
    (``_helpers.empty_preserve``); ``channels_last`` (4-D) gives NHWC strides;
    ``contiguous_format`` row-major (what ``contiguous()`` and ``reshape`` need)."""
    if memory_format is None or memory_format == "preserve_format":
        if a.flags.c_contiguous and (1 not in a.shape or _canonical_c(a)):
            return a.copy()                    # (the common case, tested inline: it is hot)
        return copy_preserve(xp, a)
    if memory_format == "contiguous_format":
        return xp.array(a, copy=True, order="C")
    if memory_format == "channels_last":
        if a.ndim != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        # (a copy always: ascontiguousarray would hand back an N,C,1,1 input's own memory, which
        # numpy already counts as contiguous in NHWC order)
        return xp.array(a.transpose(0, 2, 3, 1), copy=True, order="C").transpose(0, 3, 1, 2)
    if memory_format == "channels_last_3d":
        if a.ndim != 5:
            raise RuntimeError("required rank 5 tensor to use channels_last_3d format")
        return xp.array(a.transpose(0, 2, 3, 4, 1), copy=True, order="C").transpose(0, 4, 1, 2, 3)
    raise RuntimeError(f"clone(): unsupported memory_format {memory_format!r}; expected one of "
                       f"contiguous_format, preserve_format, channels_last, channels_last_3d")


@_clone.derivative
def _clone_bw(ctx, g):
    return (g,)


@defcomposite("contiguous(Tensor self, *, Any memory_format=None) -> Tensor")
def contiguous(self, memory_format=None):
    if memory_format is not None and memory_format != "contiguous_format":
        # channels_last / channels_last_3d (ember/_memory_format.py), as PyTorch's rules
        from .._memory_format import check, check_rank
        mf = check(memory_format, "contiguous")
        if self.is_contiguous(memory_format=mf):
            return self
        if mf == "preserve_format":
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
        check_rank(mf, self.ndim)
        return _clone.binding(self, memory_format=mf)
    if self.is_contiguous():
        return self
    return _clone.binding(self, memory_format="contiguous_format")


@defop("_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor", save=(),
       method=False, function=False, grad_fn_name="ToCopyBackward0")
def _to_copy(xp, a, dtype=None, device=None):
    dt = _t.as_dtype(dtype) if dtype is not None else _t.from_numpy_dtype(a.dtype)
    if dt._limited is not None:          # float8 rounding; sub-byte dtypes refuse conversions
        from .limited_dtypes import limited_source
        a = limited_source(xp, a, dt)
    elif a.dtype.names is not None:            # out of a sub-byte dtype (ember.types.SUBBYTE_DTYPES)
        from .limited_dtypes import refuse_subbyte_source
        refuse_subbyte_source(a, dt)
    a = half_source(a, dt.np)
    if device is not None:
        target = xp_of(device)
        if target is not np and isinstance(a, np.ndarray):
            return target.asarray(a.astype(dt.np))
        if target is np and not isinstance(a, np.ndarray):
            return a.get().astype(dt.np)
    if a.dtype.kind in "fc":
        # nan/inf/out-of-range floats to integers, or past a narrower float's range (3e9 to
        # float16 is inf): PyTorch converts without a word (the values are the C cast's);
        # numpy would print "invalid value" / "overflow encountered in cast"
        with np.errstate(invalid="ignore", over="ignore"):
            return _copy_as(xp, a, dt.np)
    return _copy_as(xp, a, dt.np)


def _copy_as(xp, a, npdt):
    if a.flags.c_contiguous and (1 not in a.shape or _canonical_c(a)):
        return a.astype(npdt, copy=True)
    # PyTorch converts into empty_like(self): numpy's 'K' copy would put an expanded dim innermost
    return copy_preserve(xp, a, dtype=npdt)


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


# ---------------------------------------------------------------------- basic-index views
def _dim_key(dim, k):
    return (slice(None),) * dim + (k, Ellipsis)


@defop("select(Tensor self, int dim, int index) -> Tensor", view=True, save=())
def select(xp, a, dim, index):
    if a.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, a.ndim)
    n = a.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(a.shape)} at "
                         f"dimension {dim}")
    return a[_dim_key(d, index + n if index < 0 else index)]


@select.derivative
def _select_bw(ctx, g):
    a, dim, index = ctx.args
    d = wrap_dim(dim, a.ndim)
    n = a.shape[d]
    return (_embed.binding(g, tuple(a.shape), _dim_key(d, index + n if index < 0 else index)),)


def _slice_bounds(n, start, end, step):
    """PyTorch's clamping of slice bounds to ``[0, n]`` (end clamped to ``>= start``).

    Symbolic-safe: SymInt bounds stay symbolic, and a clamp that the ShapeEnv
    cannot decide statically becomes a symbolic min/max rather than a guard."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start = 0 if start is None else _meta.as_size(start)
    end = n if end is None else _meta.as_size(end)
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = _meta.smin(_meta.smax(start, 0), n)
    end = _meta.smin(_meta.smax(end, start), n)
    return start, end


@defop("slice(Tensor self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor", view=True,
       save=(), method=False, function=False)
def _slice(xp, a, dim=0, start=None, end=None, step=1):
    d = wrap_dim(dim, a.ndim)
    s, e = _slice_bounds(a.shape[d], start, end, step)
    return _slice_view(xp, a, d, s, e, step)


def _slice_view(xp, a, d, s, e, step=1):
    if e <= s:   # numpy's empty slices keep neither PyTorch's data pointer nor its strides
        st = [x // a.itemsize for x in a.strides]
        shape = list(a.shape)
        shape[d] = 0
        return _strided(xp, a, shape, st[:d] + [st[d] * step] + st[d + 1:], s * st[d])
    return a[_dim_key(d, slice(s, e, step))]


@_slice.derivative
def _slice_bw(ctx, g):
    a, dim, start, end, step = ctx.args
    d = wrap_dim(dim, a.ndim)
    s, e = _slice_bounds(a.shape[d], start, end, step)
    return (_embed.binding(g, tuple(a.shape), _dim_key(d, slice(s, e, step))),)


@defop("alias(Tensor self) -> Tensor", view=True, save=(), method=False, function=False)
def _alias_op(xp, a):
    return a.view()


@_alias_op.derivative
def _alias_bw(ctx, g):
    return (g,)


@defop("_embed(Tensor self, int[] size, Any key) -> Tensor", save=(), method=False, function=False)
def _embed(xp, g, size, key):
    """zeros(size) with ``g`` written at the basic index ``key`` (backward of select/slice)."""
    out = xp.zeros(tuple(size), dtype=g.dtype)
    out[key] = g
    return out


@_embed.derivative
def _embed_bw(ctx, g):
    return (_basic_index.binding(g, ctx.args[2]),)


@defop("_basic_index(Tensor self, Any key) -> Tensor", view=True, save=(), method=False, function=False)
def _basic_index(xp, a, key):
    return a[key]


@_basic_index.derivative
def _basic_index_bw(ctx, g):
    return (_embed.binding(g, tuple(ctx.args[0].shape), ctx.args[1]),)


def narrow(self, dim, start, length):
    if self.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    start = int(start.item()) if isinstance(start, Tensor) else _meta.as_size(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice.binding(self, d, start, start + length, 1)


# ---------------------------------------------------------------------- diagonal
def _diag_geometry(shape, strides, offset, d1, d2):
    """(shape, strides, offset) of the diagonal view. Symbolic-safe: a symbolic
    diagonal length that may be zero is treated as non-zero for the offset (the
    offset of an empty view is immaterial), so no guard is recorded."""
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        size = _meta.smax(0, _meta.smin(n1, n2 - offset))
        off = offset * strides[d2] if _nonzero_size(size) else 0
    else:
        size = _meta.smax(0, _meta.smin(n1 + offset, n2))
        off = -offset * strides[d1] if _nonzero_size(size) else 0
    keep = [i for i in range(len(shape)) if i not in (d1, d2)]
    return ([shape[i] for i in keep] + [size], [strides[i] for i in keep] + [strides[d1] + strides[d2]], off)


def _nonzero_size(n):
    return not _const(n, 0)


def _diag_dims(ndim, dim1, dim2):
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


@defop("diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor", view=True, save=())
def diagonal(xp, a, offset=0, dim1=0, dim2=1):
    d1, d2 = _diag_dims(a.ndim, dim1, dim2)
    shape, st, off = _diag_geometry(a.shape, [s // a.itemsize for s in a.strides], offset, d1, d2)
    return _strided(xp, a, shape, st, off)


@diagonal.derivative
def _diagonal_bw(ctx, g):
    a, offset, d1, d2 = ctx.args
    return (_diagonal_backward.binding(g, tuple(a.shape), offset, d1, d2),)


@defop("_diagonal_backward(Tensor self, int[] size, int offset, int dim1, int dim2) -> Tensor", save=(),
       method=False, function=False)
def _diagonal_backward(xp, g, size, offset, dim1, dim2):
    out = xp.zeros(tuple(size), dtype=g.dtype)
    d1, d2 = _diag_dims(len(size), dim1, dim2)
    shape, st, off = _diag_geometry(out.shape, [s // out.itemsize for s in out.strides], offset, d1, d2)
    _strided(xp, out, shape, st, off)[...] = g
    return out


@_diagonal_backward.derivative
def _diagonal_backward_bw(ctx, g):
    _, size, offset, d1, d2 = ctx.args
    return (g.diagonal(offset, d1, d2),)


def _diag_name(args):
    return "DiagEmbedBackward0" if args[0].ndim == 1 else "DiagonalBackward0_copy"


@defop("diag(Tensor self, int diagonal=0) -> Tensor", save=(), grad_fn_name=_diag_name)
def diag(xp, a, diagonal=0):
    if a.ndim == 1:
        return xp.diag(a, diagonal)
    if a.ndim == 2:
        return xp.diagonal(a, diagonal).copy()
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{a.ndim}D")


@diag.derivative
def _diag_bw(ctx, g):
    a, k = ctx.args
    if a.ndim == 1:
        return (g.diagonal(k),)
    return (_diagonal_backward.binding(g, tuple(a.shape), k, 0, 1),)


# ---------------------------------------------------------------------- split / unbind / chunk
def _split_sizes_for(n, split_size):
    """The chunk sizes of ``split``. With symbolic sizes the number of chunks is
    specialised (a guard on ``n // split_size``) and the last chunk stays symbolic."""
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
    if n == 0:                 # (static for an input symbol; a guard for a derived size)
        return [0]
    if split_size == 0:
        raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension size of "
                           f"{n}")
    count = int(n // split_size)
    sizes = [split_size] * count
    if n % split_size:
        sizes.append(n - count * split_size)
    return sizes


def xp_of_array(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")


def _split_views(a, sizes, d):
    out, start = [], 0
    for s in sizes:
        out.append(_slice_view(xp_of_array(a), a, d, start, start + s))
        start += s
    return tuple(out)


def _split_bw_common(ctx, g, d):
    a = ctx.args[0]
    outs = g if isinstance(g, tuple) else (g,)
    sizes = ctx._split_sizes
    parts = []
    for gi, s in zip(outs, sizes):
        if gi is None:
            shp = list(a.shape)
            shp[d] = s
            from . import api as _api
            gi = _api.zeros(tuple(shp), dtype=a.dtype, device=a.device)
        parts.append(gi)
    return (api.cat(parts, d),)


@defop("split(Tensor self, int split_size, int dim=0) -> Tensor[]", view=True, save=(), method=False,
       function=False)
def _split(xp, a, split_size, dim=0):
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    return _split_views(a, _split_sizes_for(a.shape[d], split_size), d)


@_split.derivative
def _split_bw(ctx, g):
    a, split_size, dim = ctx.args
    d = wrap_dim(dim, a.ndim)
    ctx._split_sizes = _split_sizes_for(a.shape[d], split_size)
    return _split_bw_common(ctx, g, d)


@defop("split_with_sizes(Tensor self, int[] split_sizes, int dim=0) -> Tensor[]", view=True, save=())
def split_with_sizes(xp, a, split_sizes, dim=0):
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    sizes = [int(s) for s in split_sizes]
    if any(s < 0 for s in sizes) or builtin_sum(sizes) != a.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {a.shape[d]} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    return _split_views(a, sizes, d)


@split_with_sizes.derivative
def _split_with_sizes_bw(ctx, g):
    a, sizes, dim = ctx.args
    ctx._split_sizes = list(sizes)
    return _split_bw_common(ctx, g, wrap_dim(dim, a.ndim))


def split(self, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, (list, tuple)):
        return split_with_sizes.binding(self, [_meta.as_size(s) for s in split_size_or_sections], dim)
    if isinstance(split_size_or_sections, Tensor):
        split_size_or_sections = int(split_size_or_sections.item())
    return _split.binding(self, _meta.as_size(split_size_or_sections), dim)


def chunk(self, chunks, dim=0):
    if self.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    ss = (n + chunks - 1) // chunks
    if n == 0 and ss == 0:
        return split_with_sizes.binding(self, [0] * chunks, d)
    return _split.binding(self, ss, d)


def tensor_split(self, indices_or_sections, dim=0):
    if self.ndim == 0:
        raise RuntimeError("tensor_split expects at least a 1-dimensional tensor, but got a tensor with 0 "
                           "dims")
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, numbers.Integral):
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = n // ios, n % ios      # (not divmod: n may be a SymInt)
        bounds, start = [], 0
        for i in range(ios):
            e = start + q + (1 if i < r else 0)
            bounds.append((start, e))
            start = e
    else:
        bounds, start = [], 0
        for i in list(ios) + [None]:
            e = n if i is None else int(i)
            bounds.append((start, e))
            start = e
    out = []
    for s, e in bounds:
        s2, e2 = _slice_bounds(n, s, e, 1)
        if not (isinstance(s2, int) and isinstance(e2, int)):
            s2, e2 = s, e      # symbolic: the slice op's meta clamps (once)
        out.append(_slice.binding(self, d, s2, e2, 1))
    return tuple(out)


@defop("unbind(Tensor self, int dim=0) -> Tensor[]", view=True, save=())
def unbind(xp, a, dim=0):
    if a.ndim == 0:
        raise RuntimeError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, a.ndim)
    return tuple(a[_dim_key(d, i)] for i in range(a.shape[d]))


@unbind.derivative
def _unbind_bw(ctx, g):
    a, dim = ctx.args
    d = wrap_dim(dim, a.ndim)
    outs = g if isinstance(g, tuple) else (g,)
    shp = list(a.shape)
    del shp[d]
    parts = [gi if gi is not None else api.zeros(tuple(shp), dtype=a.dtype, device=a.device) for gi in outs]
    return (api.stack(parts, d),)


# ---------------------------------------------------------------------- cat / stack
def _cat_dtype(arrs):
    return _t.result_type_from([_t.from_numpy_dtype(x.dtype) for x in arrs], [], [])


def _is_legacy_empty(x):
    return x.ndim == 1 and x.shape[0] == 0


@defop("cat(Tensor[] tensors, int dim=0) -> Tensor", save=())
def cat(xp, tensors, dim=0):
    if len(tensors) > 1 and type(dim) is int:
        # the common case first: one dtype, the first input row-major and not empty, sizes
        # matching off ``dim`` -- what the general path below computes, without its dtype
        # promotion and per-input checks (most of a small cat's time)
        ref = tensors[0]
        nd = ref.ndim
        if type(ref) is np.ndarray and -nd <= dim < nd and ref.size and _canonical_c(ref):
            d = dim + nd if dim < 0 else dim
            dt, lo, hi = ref.dtype, ref.shape[:d], ref.shape[d + 1:]
            n = 0
            for x in tensors:
                s = x.shape
                if type(x) is not np.ndarray or x.dtype != dt or len(s) != nd or s[:d] != lo or s[d + 1:] != hi:
                    break
                n += s[d]
            else:
                return np.concatenate(tensors, axis=d, out=np.empty(lo + (n,) + hi, dtype=dt))
    if len(tensors) == 0:
        raise ValueError("ember.cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    dt = _cat_dtype(tensors)
    real = [(i, x) for i, x in enumerate(tensors) if not _is_legacy_empty(x)]
    if not real:
        return xp.zeros((0,), dtype=dt.np)
    i0, ref = real[0]
    d = wrap_dim(dim, ref.ndim)
    for i, x in real[1:]:
        if x.ndim != ref.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.ndim} and {x.ndim}")
        for k in range(ref.ndim):
            if k != d and x.shape[k] != ref.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref.shape[k]} but got size {x.shape[k]} for tensor number {i} in the "
                                   f"list.")
    parts = [x.astype(dt.np, copy=False) for _, x in real]
    shape = list(ref.shape)
    shape[d] = sum(x.shape[d] for x in parts)
    # a contiguous result whatever the inputs' layouts, as PyTorch's (numpy's concatenate
    # follows transposed inputs: cat of two .t() came out transposed, and .view() refused it),
    # except NHWC when every input is NHWC (``_cat_channels_last``), as PyTorch's too
    if len(shape) == 4 and not _canonical_c(tensors[0]) and \
            _cat_channels_last([(x.shape, estrides(x)) for x in tensors]):
        out = empty_strided(xp, shape, _meta.channels_last_strides(shape), dt.np)
    else:
        out = xp.empty(shape, dtype=dt.np)
    return xp.concatenate(parts, axis=d, out=out)


def _cat_channels_last(layouts):
    """PyTorch's cat is NHWC when every input (shape, element strides) suggests channels_last
    (a row-major, empty or mixed list gives a row-major result)."""
    return all(_meta.suggest_channels_last(sh, st) for sh, st in layouts)


@cat.derivative
def _cat_bw(ctx, g):
    tensors, dim = ctx.args
    real = [x for x in tensors if not (x.ndim == 1 and x.shape[0] == 0)]
    out = []
    if not real:
        return ([api.zeros((0,), dtype=x.dtype, device=x.device) if need else None
                 for x, need in zip(tensors, ctx.needs_input_grad)],)
    d = wrap_dim(dim, real[0].ndim)
    start = 0
    for x, need in zip(tensors, ctx.needs_input_grad):
        if x.ndim == 1 and x.shape[0] == 0 and g.ndim != 1:
            out.append(None if not need else api.zeros((0,), dtype=x.dtype, device=x.device))
            continue
        n = x.shape[d]
        if need:
            gi = _slice.binding(g, d, start, start + n, 1)
            if gi.dtype is not x.dtype:
                gi = gi.to(x.dtype)
            out.append(gi)
        else:
            out.append(None)
        start += n
    return (out,)


def _cat_entry(tensors, dim=0, *, out=None, axis=None):
    if axis is not None:
        dim = axis
    if isinstance(tensors, Tensor):
        raise TypeError("cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if out is not None:
        return cat.binding(list(tensors), dim, out=out)
    return cat.binding(list(tensors), dim)


@defop("stack(Tensor[] tensors, int dim=0) -> Tensor", save=())
def stack(xp, tensors, dim=0):
    if len(tensors) == 0:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tensors[0]
    for i, x in enumerate(tensors[1:], 1):
        if x.shape != ref.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref.shape)} at "
                               f"entry 0 and {list(x.shape)} at entry {i}")
    d = wrap_dim(dim, ref.ndim + 1)
    shape = list(ref.shape)
    shape.insert(d, len(tensors))
    rdt = ref.dtype
    if type(ref) is np.ndarray and all(x.dtype == rdt for x in tensors):   # one dtype: no promotion
        return np.stack(tensors, axis=d, out=np.empty(shape, dtype=rdt))
    dt = _cat_dtype(tensors)
    return xp.stack([x.astype(dt.np, copy=False) for x in tensors], axis=d,
                    out=xp.empty(shape, dtype=dt.np))     # contiguous, as PyTorch's (see cat)


@stack.derivative
def _stack_bw(ctx, g):
    tensors, dim = ctx.args
    d = wrap_dim(dim, tensors[0].ndim + 1)
    parts = g.unbind(d)
    out = []
    for x, gi, need in zip(tensors, parts, ctx.needs_input_grad):
        if not need:
            out.append(None)
        else:
            out.append(gi if gi.dtype is x.dtype else gi.to(x.dtype))
    return (out,)


def _stack_entry(tensors, dim=0, *, out=None):
    if out is not None:
        return stack.binding(list(tensors), dim, out=out)
    return stack.binding(list(tensors), dim)


def atleast_1d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = tuple(t.reshape(1) if t.ndim == 0 else t for t in ts)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def atleast_2d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = tuple(t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t for t in ts)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def atleast_3d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    res = []
    for t in ts:
        if t.ndim == 0:
            t = t.reshape(1, 1, 1)
        elif t.ndim == 1:
            t = t.unsqueeze(0).unsqueeze(-1)
        elif t.ndim == 2:
            t = t.unsqueeze(-1)
        res.append(t)
    out = tuple(res)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def hstack(tensors, *, out=None):
    ts = atleast_1d(list(tensors))
    return cat.binding(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors, *, out=None):
    return cat.binding(list(atleast_2d(list(tensors))), 0)


def dstack(tensors, *, out=None):
    return cat.binding(list(atleast_3d(list(tensors))), 2)


def column_stack(tensors, *, out=None):
    ts = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors]
    return cat.binding(ts, 1)


# ---------------------------------------------------------------------- flatten / movedim
def flatten(self, start_dim=0, end_dim=-1):
    nd = self.ndim
    if nd == 0:
        return reshape(self, 1)
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return self
    shp = tuple(self.shape)
    n = 1
    for k in shp[s:e + 1]:
        n *= k
    return reshape(self, shp[:s] + (n,) + shp[e + 1:])


def unflatten(self, dim, sizes):
    d = wrap_dim(dim, self.ndim)
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = self.shape[d]
    neg = [i for i, s in enumerate(sizes) if s == -1]
    known = 1
    for s in sizes:
        if s != -1:
            known *= s
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if neg:
        if known == 0 or n % known:
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {dim} "
                               f"({n}) in the input tensor")
        sizes[neg[0]] = n // known
    elif known != n:
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {dim} "
                           f"({n}) in the input tensor")
    shp = tuple(self.shape)
    return _view.binding(self, shp[:d] + tuple(sizes) + shp[d + 1:])  # splitting one dim always views


def movedim(self, source, destination):
    nd = self.ndim
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
                           f"the same number of dims as destination ({dst} dims)")
    src = [wrap_dim(s, nd) for s in src]
    dst = [wrap_dim(s, nd) for s in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    order = [-1] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    order = [o if o != -1 else next(rest) for o in order]
    return _permute.binding(self, tuple(order))


def swapaxes(self, axis0, axis1):
    return transpose.binding(self, axis0, axis1)


# ---------------------------------------------------------------------- flip / roll / tril / repeat
@defop("flip(Tensor self, int[] dims) -> Tensor", save=())
def _flip(xp, a, dims):
    ds = []
    for d in dims:
        w = wrap_dim(d, a.ndim)
        if w in ds:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        ds.append(w)
    ds = tuple(ds) if a.ndim else ()
    if a.flags.c_contiguous and (1 not in a.shape or _canonical_c(a)):
        return xp.flip(a, axis=ds).copy() if ds else a.copy()
    # PyTorch writes the flipped values into empty_like(input): a permuted input keeps its layout
    return copy_preserve(xp, a, xp.flip(a, axis=ds) if ds else a)


@_flip.derivative
def _flip_bw(ctx, g):
    return (g.flip(ctx.args[1]),)


def flip(self, *dims, **kw):
    return _flip.binding(self, _int_list_arg("flip", "dims", dims, kw))


def fliplr(self):
    if self.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return _flip.binding(self, (1,))


def flipud(self):
    if self.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return _flip.binding(self, (0,))


@defop("roll(Tensor self, int[] shifts, int[] dims=[]) -> Tensor", save=())
def _roll(xp, a, shifts, dims=()):
    shifts, dims = list(shifts), list(dims)
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"`shifts` required to be of size 1 when `dims` is empty, but got {len(shifts)}")
        return xp.roll(a.reshape(-1), shifts[0]).reshape(a.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    axes = tuple(wrap_dim(d, a.ndim) for d in dims)
    r = xp.roll(a, shifts, axis=axes)
    if a.ndim == 4 and a.size and _meta.roll_channels_last(a.shape, estrides(a), shifts, axes):
        out = empty_strided(xp, a.shape, _meta.channels_last_strides(a.shape), a.dtype)
        out[...] = r
        return out
    if a.size == 0:
        return copy_preserve(xp, a)          # PyTorch clones an empty input
    # contiguous, as PyTorch's (numpy's roll keeps a transposed input's layout)
    return xp.ascontiguousarray(r)


@_roll.derivative
def _roll_bw(ctx, g):
    _, shifts, dims = ctx.args
    return (_roll.binding(g, [-s for s in shifts], list(dims)),)


def roll(self, shifts, dims=None):
    shifts = [shifts] if isinstance(shifts, numbers.Integral) else list(shifts)
    dims = [] if dims is None else [dims] if isinstance(dims, numbers.Integral) else list(dims)
    return _roll.binding(self, shifts, dims)


def _tri(name, fn):
    @defop(f"{name}(Tensor self, int diagonal=0) -> Tensor", save=(), inplace=True)
    def op(xp, a, diagonal=0):
        if a.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        # row-major, as PyTorch's (numpy's masked copy keeps an NHWC input's layout)
        return as_contiguous(xp, getattr(xp, fn)(a, diagonal))

    @op.derivative
    def _bw(ctx, g):
        return (getattr(g, name)(ctx.args[1]),)
    return op


tril = _tri("tril", "tril")
triu = _tri("triu", "triu")


@defop("repeat(Tensor self, int[] repeats) -> Tensor", save=(), method=False)
def _repeat(xp, a, repeats):
    reps = tuple(repeats)
    if len(reps) < a.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                           "of tensor")
    if any(r < 0 for r in reps):
        _repeat_negative(a.shape, reps)
        reps = tuple(max(r, 0) for r in reps)          # (an empty dim times a negative count: empty, as torch's)
    a = a.reshape((1,) * (len(reps) - a.ndim) + a.shape)
    # row-major, as PyTorch's (np.tile with all repeats 1 copies in the input's layout)
    return as_contiguous(xp, xp.tile(a, reps))


@_repeat.derivative
def _repeat_bw(ctx, g):
    a, reps = ctx.args
    reps = tuple(reps)
    shp = (1,) * (len(reps) - a.ndim) + tuple(a.shape)
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    gg = g.reshape(tuple(inter))
    gg = gg.sum(list(range(0, 2 * len(reps), 2))) if reps else gg
    return (gg.reshape(tuple(a.shape)),)


def _repeat_negative(shape, reps):
    """torch's error for a negative count: the result's sizes (each dim times its count), unless
    every negative count multiplies an empty dim."""
    target = [s * r for s, r in zip((1,) * (len(reps) - len(shape)) + tuple(shape), reps)]
    neg = [t for t in target if t < 0]
    if neg:
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg[0]}: {target}")


def repeat(self, *repeats, **kw):
    return _repeat.binding(self, _int_list_arg("repeat", "repeats", repeats, kw))


def tile(self, *dims, **kw):
    dims = _int_list_arg("tile", "dims", dims, kw)
    if len(dims) < self.ndim:
        dims = (1,) * (self.ndim - len(dims)) + dims
    return _repeat.binding(self, dims)


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

for _name, _fn in dict(narrow=narrow, split=split, chunk=chunk, tensor_split=tensor_split, flatten=flatten,
                       unflatten=unflatten, movedim=movedim, moveaxis=movedim, swapaxes=swapaxes,
                       swapdims=swapaxes, flip=flip, fliplr=fliplr, flipud=flipud, roll=roll, repeat=repeat,
                       tile=tile).items():
    setattr(Tensor, _name, _fn)
for _name, _fn in dict(narrow=narrow, split=split, chunk=chunk, tensor_split=tensor_split, flatten=flatten,
                       unflatten=unflatten, movedim=movedim, moveaxis=movedim, swapaxes=swapaxes,
                       swapdims=swapaxes, flip=flip, fliplr=fliplr, flipud=flipud, roll=roll, tile=tile,
                       cat=_cat_entry, concat=_cat_entry, concatenate=_cat_entry, stack=_stack_entry,
                       hstack=hstack, vstack=vstack, dstack=dstack, column_stack=column_stack,
                       atleast_1d=atleast_1d, atleast_2d=atleast_2d, atleast_3d=atleast_3d,
                       ).items():
    setattr(api, _name, _fn)


# ---------------------------------------------------------------------- meta functions
# Output metadata for fake tensors (see ember/ops/_meta.py). View ops return
# ``_meta.view_of`` with exactly the geometry the numpy kernel's view has;
# copying ops return the layout numpy gives the kernel's result. Sizes may be
# SymInts: the arithmetic below is plain Python, never numpy.
def _estrides(t):
    """``t.stride()``, read directly off a fake tensor's FakeArray (see :func:`_geom`)."""
    d = t._data
    return tuple(d.estrides) if type(d) is _meta.FakeArray else tuple(t.stride())


def _geom(t):
    """(shape, strides, storage offset) in elements. For a fake tensor they are read off its
    FakeArray (``t.stride()`` would round-trip symbolic strides through bytes and a sympy
    floor division; and a fake view of a *real* base has no meaningful pointer difference)."""
    d = t._data
    if type(d) is _meta.FakeArray:
        return tuple(d.shape), tuple(d.estrides), d.offset
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _same_shape(a, b):
    """``tuple(a) == tuple(b)`` for shapes that may hold SymInts (a guard where undecided)."""
    return len(a) == len(b) and all(x is y or bool(x == y) for x, y in zip(a, b))


_VIEW_ERR = ("view size is not compatible with input tensor's size and stride (at least one dimension spans "
             "across two contiguous subspaces). Use .reshape(...) instead.")


@_view.meta_fn
def _view_meta(a, size):
    shape, st, off = _geom(a)
    size = infer_size(size, _meta.numel(shape))
    if _meta.np_c_contiguous(shape, st) and not _same_shape(size, shape):
        return _meta.view_of(a, size, _meta.contiguous_strides(size), off)
    nst = view_strides(shape, st, size)
    if nst is None:
        raise RuntimeError(_VIEW_ERR)
    return _meta.view_of(a, size, nst, off)


@_reshape_alias.meta_fn
def _reshape_alias_meta(a, size, stride):
    return _meta.view_of(a, tuple(size), tuple(stride), _geom(a)[2])


@_unsafe_view.meta_fn
def _unsafe_view_meta(a, size):
    """numpy's reshape: a view when the strides allow it (same strides as PyTorch's rule
    on every dim of size > 1), else a C-contiguous copy; either way a fresh tensor here."""
    shape, st, _ = _geom(a)
    size = infer_size(size, _meta.numel(shape))
    if _meta.np_c_contiguous(shape, st):
        return _meta.out(size, a.dtype)
    nst = view_strides(shape, st, size)
    return _meta.out(size, a.dtype, nst)


@_expand.meta_fn
def _expand_meta(a, size):
    size = tuple(size)
    shape, st, off = _geom(a)
    nd = len(shape)
    if len(size) < nd:
        raise RuntimeError(f"expand(ember.{a.dtype.legacy_name}Tensor{{{list(shape)}}}, size={list(size)}): the "
                           f"number of sizes provided ({len(size)}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({nd})")
    lead = len(size) - nd
    n = len(size)
    oshape, ostrides = [0] * n, [0] * n
    for i in range(n - 1, -1, -1):
        k = i - lead
        s = size[i]
        if k >= 0:
            cur, cst = shape[k], st[k]
        else:
            if isinstance(s, int) and s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            cur, cst = 1, (0 if nd == 0 else 1 if i == n - 1 else oshape[i + 1] * ostrides[i + 1])
        if isinstance(s, int) and s == -1:
            s = cur
        if not (cur is s) and cur != s:
            if cur != 1:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({cur}) "
                                   f"at non-singleton dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: "
                                   f"{list(shape)}")
            cst = 0
        oshape[i], ostrides[i] = s, cst
    return _meta.view_of(a, oshape, ostrides, off)


@_permute.meta_fn
def _permute_meta(a, dims):
    dims = tuple(dims)
    shape, st, off = _geom(a)
    if len(dims) != len(shape):
        raise RuntimeError(f"permute: number of dimensions in the tensor input does not match the length of "
                           f"the desired ordering of dimensions i.e. input.dim() = {len(shape)} is not equal to "
                           f"len(dims) = {len(dims)}")
    w = tuple(wrap_dim(d, len(shape)) for d in dims)
    if len(set(w)) != len(w):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _meta.view_of(a, [shape[d] for d in w], [st[d] for d in w], off)


@transpose.meta_fn
def _transpose_meta(a, dim0, dim1):
    shape, st, off = _geom(a)
    if not shape:
        return _meta.view_of(a, shape, st, off)
    d0, d1 = wrap_dim(dim0, len(shape)), wrap_dim(dim1, len(shape))
    shape, st = list(shape), list(st)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    st[d0], st[d1] = st[d1], st[d0]
    return _meta.view_of(a, shape, st, off)


@t.meta_fn
def _t_meta(a):
    shape, st, off = _geom(a)
    if len(shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {len(shape)}D")
    return _meta.view_of(a, shape[::-1], st[::-1], off)


@unsqueeze.meta_fn
def _unsqueeze_meta(a, dim):
    shape, st, off = _geom(a)
    d = wrap_dim(dim, len(shape) + 1)
    new = 1 if d >= len(shape) else shape[d] * st[d]
    return _meta.view_of(a, shape[:d] + (1,) + shape[d:], st[:d] + (new,) + st[d:], off)


@squeeze.meta_fn
def _squeeze_meta(a, dim=None):
    shape, st, off = _geom(a)
    if not shape:
        return _meta.view_of(a, shape, st, off)
    dims = set(d for d in wrap_dims(dim, len(shape)) if shape[d] == 1)   # (a guard for a derived size)
    keep = [i for i in range(len(shape)) if i not in dims]
    return _meta.view_of(a, [shape[i] for i in keep], [st[i] for i in keep], off)


@_restride.meta_fn
def _restride_meta(a, src, dst, mode):
    if mode in ("gather", "scatter_add"):
        return _meta.out(tuple(dst[0]), a.dtype)
    if mode == "zero":
        return _meta.out(tuple(src[0]), a.dtype)
    raise ValueError(mode)


@_as_strided_rel.meta_fn
def _as_strided_meta(a, size, stride, storage_offset=None, src_stride=None):
    off = storage_offset or 0
    if isinstance(off, int) and off < 0:
        raise RuntimeError("as_strided: a storage_offset before the tensor's own offset is not supported by "
                           "ember; call as_strided on the base tensor instead")
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    return _meta.view_of(a, tuple(size), tuple(stride), _geom(a)[2] + off)


@_clone.meta_fn
def _clone_meta(a, memory_format=None):
    shape, st, _ = _geom(a)
    if memory_format is None or memory_format == "preserve_format":
        return _meta.out(shape, a.dtype, _meta.preserve_strides(shape, st))
    if memory_format == "contiguous_format":
        return _meta.out(shape, a.dtype)
    if memory_format == "channels_last":
        if len(shape) != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        _, c, h, w = shape
        return _meta.out(shape, a.dtype, (h * w * c, 1, w * c, c))
    if memory_format == "channels_last_3d":
        if len(shape) != 5:
            raise RuntimeError("required rank 5 tensor to use channels_last_3d format")
        from .._memory_format import channels_last_strides
        return _meta.out(shape, a.dtype, channels_last_strides(shape))
    raise RuntimeError(f"clone(): unsupported memory_format {memory_format!r}; expected one of "
                       f"contiguous_format, preserve_format, channels_last, channels_last_3d")


@_to_copy.meta_fn
def _to_copy_meta(a, dtype=None, device=None):
    """Laid out as ``empty_like(self)`` (preserve_format), as the kernel's (and PyTorch's)."""
    dt = _t.as_dtype(dtype) if dtype is not None else a.dtype
    shape, st, _ = _geom(a)
    return _meta.out(shape, dt, _meta.preserve_strides(shape, st))


def _select_geom(shape, st, off, d, index):
    n = shape[d]
    if not -n <= index < n:
        return None
    if index < 0:
        index = index + n
    return shape[:d] + shape[d + 1:], st[:d] + st[d + 1:], off + index * st[d]


@select.meta_fn
def _select_meta(a, dim, index):
    shape, st, off = _geom(a)
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    g = _select_geom(shape, st, off, d, index)
    if g is None:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(shape)} at "
                         f"dimension {dim}")
    return _meta.view_of(a, *g)


def _slice_len(s, e, step):
    """Length of ``[s:e:step]`` for clamped bounds (``e >= s``); no division for step 1
    (a symbolic floor division costs a sympy simplification)."""
    return e - s if step == 1 else (e - s + step - 1) // step


def _slice_geom(shape, st, off, d, s, e, step):
    """Geometry of ``[s:e:step]`` on dim d with clamped bounds (``e >= s``)."""
    shape, st = list(shape), list(st)
    shape[d] = _slice_len(s, e, step)
    o = off + s * st[d]
    st[d] = st[d] * step
    return shape, st, o


@_slice.meta_fn
def _slice_meta(a, dim=0, start=None, end=None, step=1):
    shape, st, off = _geom(a)
    d = wrap_dim(dim, len(shape))
    s, e = _slice_bounds(shape[d], start, end, step)
    return _meta.view_of(a, *_slice_geom(shape, st, off, d, s, e, step))


@_alias_op.meta_fn
def _alias_meta(a):
    return _meta.view_of(a, *_geom(a))


@_embed.meta_fn
def _embed_meta(g, size, key):
    return _meta.out(tuple(size), g.dtype)


def _basic_key_geom(shape, st, off, key):
    """numpy basic indexing (ints, slices with a positive step, None, Ellipsis) on a geometry."""
    key = key if isinstance(key, tuple) else (key,)
    consumed = builtin_sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {consumed} "
                         f"were indexed")
    if builtin_sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis not in key:
        key = key + (Ellipsis,)
    oshape, ost = [], []
    d = 0
    for k in key:
        if k is None:
            oshape.append(1)
            ost.append(0)
        elif k is Ellipsis:
            for _ in range(len(shape) - consumed):
                oshape.append(shape[d])
                ost.append(st[d])
                d += 1
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if not (isinstance(step, int) and step > 0):
                raise NotImplementedError("fake tensors: _basic_index supports only slices with a positive step")
            s, e = _slice_bounds(shape[d], k.start, k.stop, step)
            ln = _slice_len(s, e, step)
            oshape.append(ln)
            ost.append(st[d] * step)
            off = off + s * st[d]
            d += 1
        elif _meta.is_size(k):
            n = shape[d]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {d} with size {n}")
            off = off + (k + n if k < 0 else k) * st[d]
            d += 1
        else:
            raise NotImplementedError(f"fake tensors: _basic_index does not support a key of type "
                                      f"{type(k).__name__}")
    return oshape, ost, off


@_basic_index.meta_fn
def _basic_index_meta(a, key):
    return _meta.view_of(a, *_basic_key_geom(*_geom(a), key))


@diagonal.meta_fn
def _diagonal_meta(a, offset=0, dim1=0, dim2=1):
    shape, st, off = _geom(a)
    d1, d2 = _diag_dims(len(shape), dim1, dim2)
    dshape, dst, doff = _diag_geometry(shape, st, offset, d1, d2)
    return _meta.view_of(a, dshape, dst, off + doff)


def _np_shape_str(shape):
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


@_diagonal_backward.meta_fn
def _diagonal_backward_meta(g, size, offset, dim1, dim2):
    size = tuple(size)
    d1, d2 = _diag_dims(len(size), dim1, dim2)
    dshape = tuple(_diag_geometry(size, _meta.contiguous_strides(size), offset, d1, d2)[0])
    gshape = tuple(g.shape)
    if len(gshape) > len(dshape) or not all(
            a is b or bool(a == 1) or bool(a == b) for a, b in zip(gshape[::-1], dshape[::-1])):
        # (numpy's error from the kernel's strided assignment)
        raise ValueError(f"could not broadcast input array from shape {_np_shape_str(gshape)} into "
                         f"shape {_np_shape_str(dshape)}")
    return _meta.out(size, g.dtype)


@diag.meta_fn
def _diag_meta(a, diagonal=0):
    shape = tuple(a.shape)
    if len(shape) == 1:
        m = shape[0] + abs(diagonal)
        return _meta.out((m, m), a.dtype)
    if len(shape) == 2:
        dshape, _, _ = _diag_geometry(shape, (0, 0), diagonal, 0, 1)
        return _meta.out(tuple(dshape), a.dtype)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{len(shape)}D")


def _split_meta_views(a, sizes, d):
    shape, st, off = _geom(a)
    outs, start = [], 0
    for s in sizes:
        g = _slice_geom(shape, st, off, d, start, start + s, 1)
        outs.append(_meta.view_of(a, *g))
        start = start + s
    return tuple(outs)


@_split.meta_fn
def _split_meta(a, split_size, dim=0):
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    return _split_meta_views(a, _split_sizes_for(a.shape[d], split_size), d)


@split_with_sizes.meta_fn
def _split_with_sizes_meta(a, split_sizes, dim=0):
    if a.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, a.ndim)
    sizes = [_meta.as_size(s) for s in split_sizes]
    n = a.shape[d]
    total = 0
    for s in sizes:
        total = total + s
    if any(s < 0 for s in sizes) or total != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    return _split_meta_views(a, sizes, d)


@unbind.meta_fn
def _unbind_meta(a, dim=0):
    if a.ndim == 0:
        raise RuntimeError("Dimension specified as 0 but tensor has no dimensions")
    shape, st, off = _geom(a)
    d = wrap_dim(dim, len(shape))
    return tuple(_meta.view_of(a, *_select_geom(shape, st, off, d, i)) for i in range(int(shape[d])))


@cat.meta_fn
def _cat_meta(tensors, dim=0):
    if len(tensors) == 0:
        raise ValueError("ember.cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    dt = _t.result_type_from([x.dtype for x in tensors], [], [])
    real = [(i, x) for i, x in enumerate(tensors) if not (x.ndim == 1 and x.shape[0] == 0)]
    if not real:
        return _meta.out((0,), dt)
    _, ref = real[0]
    rshape = tuple(ref.shape)
    d = wrap_dim(dim, len(rshape))
    total = 0
    for i, x in real:
        if x.ndim != len(rshape):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(rshape)} and {x.ndim}")
        for k in range(len(rshape)):
            if k != d and not (x.shape[k] is rshape[k]) and x.shape[k] != rshape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{rshape[k]} but got size {x.shape[k]} for tensor number {i} in the "
                                   f"list.")
        total = total + x.shape[d]
    oshape = rshape[:d] + (total,) + rshape[d + 1:]
    if len(oshape) == 4 and _cat_channels_last([_meta.layout(x) for x in tensors]):
        return _meta.out(oshape, dt, _meta.channels_last_strides(oshape))
    return _meta.out(oshape, dt)          # contiguous otherwise (see cat)


@stack.meta_fn
def _stack_meta(tensors, dim=0):
    if len(tensors) == 0:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tuple(tensors[0].shape)
    for i, x in enumerate(tensors[1:], 1):
        if not _same_shape(tuple(x.shape), ref):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} at "
                               f"entry 0 and {list(x.shape)} at entry {i}")
    dt = _t.result_type_from([x.dtype for x in tensors], [], [])
    d = wrap_dim(dim, len(ref) + 1)
    oshape = ref[:d] + (len(tensors),) + ref[d:]
    return _meta.out(oshape, dt)          # contiguous (see stack)


@_flip.meta_fn
def _flip_meta(a, dims):
    ds = []
    for d in dims:
        w = wrap_dim(d, a.ndim)
        if w in ds:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        ds.append(w)
    return _meta.preserve_out(a)


@_roll.meta_fn
def _roll_meta(a, shifts, dims=()):
    """Contiguous, as the kernel's result (and PyTorch's), except NHWC where PyTorch's
    concatenation of NHWC pieces keeps it (``_meta.roll_channels_last``)."""
    shifts, dims = list(shifts), list(dims)
    shape, st, _ = _geom(a)
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"`shifts` required to be of size 1 when `dims` is empty, but got {len(shifts)}")
        return _meta.out(shape, a.dtype)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    axes = tuple(wrap_dim(d, a.ndim) for d in dims)
    if _meta.is_empty(shape):
        return _meta.preserve_out(a)
    if len(shape) == 4 and _meta.roll_channels_last(shape, st, shifts, axes):
        return _meta.out(shape, a.dtype, _meta.channels_last_strides(shape))
    return _meta.out(shape, a.dtype)


def _tri_meta(name):
    def meta(a, diagonal=0):
        """Row-major, as PyTorch's (the kernel makes numpy's result row-major)."""
        if a.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return _meta.out(tuple(a.shape), a.dtype)
    return meta


tril.meta = _tri_meta("tril")
triu.meta = _tri_meta("triu")


@_repeat.meta_fn
def _repeat_meta(a, repeats):
    """Row-major, as PyTorch's (the kernel makes ``np.tile``'s result row-major)."""
    reps = tuple(repeats)
    if len(reps) < a.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                           "of tensor")
    if any(isinstance(r, int) and r < 0 for r in reps) and all(isinstance(s, int) for s in a.shape):
        _repeat_negative(tuple(a.shape), reps)
    shape, st, _ = _geom(a)
    lead = len(reps) - len(shape)
    shape = (1,) * lead + shape
    oshape = tuple(r * s for r, s in zip(reps, shape))
    return _meta.out(oshape, a.dtype)          # row-major, as the kernel's (and PyTorch's)
