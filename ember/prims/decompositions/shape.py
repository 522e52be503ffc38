"""Decompositions of the shape, view, copy and layout ops (ember/ops/shape.py) into prims.

Every view op becomes value-semantics prims (reshape, permute, slice, squeeze,
expand_dims, broadcast_in_dim): a graph is functional, so only the values of a
view matter, not whether they share memory. ``as_strided`` is the one op whose
value depends on the memory layout; it stays on ``prims.as_strided``. The
backward helpers of the views (``_embed``: zeros with a slice written in;
``_diagonal_backward``; ``_restride``: moves between two strided geometries)
become ``prims.pad`` with interior padding, or index arithmetic built from
``prims.iota`` with ``prims.index_put`` / ``prims.index_select``, so double
backward stays in prims too.

The helpers at the top (explicit broadcasting, casts, zeros, index vectors)
are shared by the other decomposition files of this family. Sizes are never
forced to ``int``: under a symbolic trace they stay SymInts, and where a size
is an operand of an elementwise prim (which takes Python numbers only) it is
computed in the graph (``size_operand``).

In-place variants (``index_put_``, ``tril_``, ...) are not decomposed: traced
with ``make_fx(..., functionalize=True)`` they are recorded as their
functional op, which is.
"""
from __future__ import annotations

import numbers

from ... import types as _t
from ...ops import shape as _shape
from ...ops._helpers import same_shape, wrap_dim, wrap_dims  # noqa: F401  (same_shape: used here and by pointwise)
from ...fx.experimental.symbolic_shapes import is_symbolic, statically_known_true
from . import register_decomposition

from ember import prims  # noqa: E402  (the package may still be initialising: resolved at call time)


# ---------------------------------------------------------------------- shared helpers
def bcast(x, shape):
    """``x`` broadcast numpy-style (trailing dims aligned) to ``shape``."""
    shape = tuple(shape)
    if same_shape(x.shape, shape):
        return x
    lead = len(shape) - x.ndim
    return prims.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def bcast_to_dims(x, shape, dims):
    """``x`` placed on ``dims`` of ``shape`` (XLA broadcast_in_dim)."""
    shape = tuple(shape)
    if same_shape(x.shape, shape) and tuple(dims) == tuple(range(len(shape))):
        return x
    return prims.broadcast_in_dim(x, shape, tuple(dims))


def to(x, dtype):
    """``x`` converted to ``dtype`` (no node when it already has it)."""
    if x.dtype is dtype:
        return x
    return prims.convert_element_type(x, dtype)


def full(shape, value, dtype, device):
    return prims.full(tuple(shape), value, dtype, device)


def zeros_like(x, shape=None, dtype=None):
    return prims.full(tuple(x.shape) if shape is None else tuple(shape), 0,
                      x.dtype if dtype is None else dtype, x.device)


def reshape(x, shape):
    shape = tuple(shape)
    if _same_shape(tuple(x.shape), shape):
        return x
    return prims.reshape(x, shape)


def flat(x):
    return reshape(x, (numel(x.shape),))


def alias(x):
    """A new tensor with ``x``'s values (a decomposition must not hand back its input object:
    autograd would then attach the op's history to the input itself)."""
    out = prims.reshape(x, tuple(x.shape))
    return prims.clone(x) if out is x else out


def iota(n, device, start=0, step=1, dtype=None):
    return prims.iota(n, start, step, dtype or _t.int64, device)


def slice_dim(x, d, start, end, step=1):
    """``x[..., start:end:step, ...]`` on dim ``d`` (bounds already normalised and in range)."""
    n = x.shape[d]
    if start == 0 and end == n and step == 1:
        return x
    starts = [0] * x.ndim
    limits = list(x.shape)
    strides = [1] * x.ndim
    starts[d], limits[d], strides[d] = start, max(end, start), step
    return prims.slice(x, starts, limits, strides)


def select_dim(x, d, i):
    return prims.squeeze(slice_dim(x, d, i, i + 1), (d,))


def movedim_last(x, d):
    """(``x`` with dim ``d`` moved to the end, the permutation used)."""
    perm = [i for i in range(x.ndim) if i != d] + [d]
    return permute(x, perm), perm


def permute(x, perm):
    perm = tuple(perm)
    if perm == tuple(range(x.ndim)):
        return x
    return prims.permute(x, perm)


def inverse_perm(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def wrap_index(idx, n):
    """Negative indices wrapped (``i + n`` where ``i < 0``), as int64."""
    idx = to(idx, _t.int64)
    return prims.where(prims.lt(idx, 0), prims.add(idx, size_operand(n, idx.shape, idx.device)), idx)


def pad(x, value, config):
    # a pad by nothing is ``x``; a symbolic amount counts as nothing only when it is zero for
    # every size (a slice's backward pads by ``n - 1 - step * ((n - 1) // step)``: asking it
    # ``== 0`` guarded on the size's parity, a recompile for the other half of the sizes)
    if all(statically_known_true(v == 0) if is_symbolic(v) else v == 0 for c in config for v in c):
        return x
    return prims.pad(x, value, tuple(tuple(c) for c in config))


def numel(shape):
    n = 1
    for s in shape:
        n = n * s
    return n


def _same_shape(a, b):
    return len(a) == len(b) and all(x is y or bool(x == y) for x, y in zip(a, b))


def size_operand(n, shape, device, dtype=None):
    """Size ``n`` as the scalar operand of an elementwise prim over ``shape``: the int itself, or,
    when it is symbolic (prims take Python numbers, not SymInts), an int64 tensor computed in the
    graph from it (a reduction over ``full((n,), 1)``), broadcast to ``shape``."""
    if type(n) is int:
        return n
    from ...fx.experimental.symbolic_shapes import signed_parts
    pos, neg = signed_parts(n)      # (a negative size counts an empty range: see signed_parts)

    def count(k):
        return prims.sum(prims.full((k,), 1, dtype or _t.int64, device), (0,))
    t = count(pos)
    if not (type(neg) is int and neg == 0):
        t = prims.sub(t, count(neg))
    return prims.broadcast_in_dim(t, tuple(shape), ())


def div_by_size(t, n):
    """``t / n`` for a size ``n``: a plain int divides as ``float(n)``; a SymInt becomes an
    operand computed in the graph (int64, then ``t``'s dtype: the value eager's
    ``dtype.type(n)`` gives), so a mean over a dynamic dim does not specialise the size."""
    if type(n) is int:
        return prims.div(t, float(n))
    count = size_operand(n, tuple(t.shape), t.device, _t.int64)
    return prims.div(t, prims.convert_element_type(count, t.dtype))


# ---------------------------------------------------------------------- view / reshape
@register_decomposition("view")
def view(x, size):
    return prims.reshape(x, _shape.infer_size(size, numel(x.shape)))


@register_decomposition("_reshape_alias")
def _reshape_alias(x, size, stride):
    return prims.reshape(x, tuple(size))


@register_decomposition("_unsafe_view")
def _unsafe_view(x, size):
    return prims.reshape(x, _shape.infer_size(size, numel(x.shape)))


@register_decomposition("alias")
def _alias(x):
    return alias(x)


# ---------------------------------------------------------------------- expand / permute / transpose
@register_decomposition("expand")
def expand(x, size):
    size = tuple(size)
    if len(size) < x.ndim:
        return NotImplemented        # the kernel raises the error
    lead = len(size) - x.ndim
    shape = []
    for i, s in enumerate(size):
        k = i - lead
        if k < 0 and s == -1:
            return NotImplemented    # -1 in a new leading dim: the kernel raises the error
        cur = x.shape[k] if k >= 0 else 1
        shape.append(cur if s == -1 else s)
    return prims.broadcast_in_dim(x, tuple(shape), tuple(range(lead, len(size))))


@register_decomposition("permute")
def _permute(x, dims):
    if len(dims) != x.ndim:
        return NotImplemented
    return prims.permute(x, tuple(wrap_dim(d, x.ndim) for d in dims))


@register_decomposition("transpose")
def transpose(x, dim0, dim1):
    if x.ndim == 0:
        return alias(x)
    d0, d1 = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.permute(x, tuple(perm))


@register_decomposition("t")
def _t_op(x):
    if x.ndim > 2:
        return NotImplemented
    return prims.permute(x, (1, 0)) if x.ndim == 2 else alias(x)


@register_decomposition("unsqueeze")
def unsqueeze(x, dim):
    return prims.expand_dims(x, (wrap_dim(dim, x.ndim + 1),))


@register_decomposition("squeeze")
def squeeze(x, dim=None):
    if x.ndim == 0:
        return alias(x)
    dims = tuple(d for d in wrap_dims(dim, x.ndim) if x.shape[d] == 1)
    return prims.squeeze(x, dims) if dims else alias(x)


# ---------------------------------------------------------------------- as_strided and its geometry moves
@register_decomposition("as_strided")
def as_strided(x, size, stride, storage_offset=None, src_stride=None):
    off = storage_offset or 0
    if off < 0 or len(size) != len(stride):
        return NotImplemented
    return prims.as_strided(x, tuple(size), tuple(stride), off)


def _geom_index(geom, device):
    """int64 tensor of ``size``: the flat storage position of every element of a strided geometry."""
    size, stride, off = geom
    size = tuple(size)
    # symbolic sizes, strides or offset (an unfold's backward under dynamic shapes) stay
    # symbolic: int() would specialise them (Eq(s0 - 1, 5), a compilation per size)
    idx = full(size, off, _t.int64, device) if type(off) is int else size_operand(off, size, device)
    for d, (n, s) in enumerate(zip(size, stride)):
        if n == 1 or s == 0:
            continue
        if type(s) is int:
            step = iota(n, device, 0, s)
        else:
            step = prims.mul(iota(n, device), size_operand(s, (n,), device))
        idx = prims.add(idx, bcast_to_dims(step, size, (d,)))
    return flat(idx)


@register_decomposition("_restride")
def _restride(a, src, dst, mode):
    n = _shape._extent(src, dst)
    store = full((n,), 0, a.dtype, a.device)
    si = _geom_index(src, a.device)
    di = _geom_index(dst, a.device)
    if mode == "scatter_add":
        store = prims.index_put(store, (si,), flat(a), True)
        return reshape(prims.index_select(store, 0, di), tuple(dst[0]))
    store = prims.index_put(store, (si,), flat(a), False)
    if mode == "gather":
        return reshape(prims.index_select(store, 0, di), tuple(dst[0]))
    if mode == "zero":
        store = prims.index_put(store, (di,), full((di.shape[0],), 0, a.dtype, a.device), False)
        return reshape(prims.index_select(store, 0, si), tuple(src[0]))
    return NotImplemented


# ---------------------------------------------------------------------- copies and casts
@register_decomposition("clone")
def _clone(x, memory_format=None):
    """prims.clone writes row-major; a clone in another layout is a row-major clone of the
    input permuted into that layout's dimension order, permuted back (a view with its strides).
    The default is preserve_format, as the kernel's (and PyTorch's)."""
    order = None
    if memory_format == "channels_last" and x.ndim == 4:
        order = (0, 2, 3, 1)
    elif memory_format == "channels_last_3d" and x.ndim == 5:
        order = (0, 2, 3, 4, 1)
    elif memory_format in (None, "preserve_format") and not x.is_contiguous():
        order = _dense_order(x)
    if order is None:
        return prims.clone(x)
    inverse = tuple(sorted(range(x.ndim), key=lambda d: order[d]))
    return prims.permute(prims.clone(prims.permute(x, order)), inverse)


def _dense_order(x):
    """The dimension order (outermost first) of the kernel's preserve_format clone of ``x``:
    its own when it is dense, else PyTorch's order for a sliced or expanded tensor
    (``ember.ops._meta.torch_dense_order``)."""
    if any(is_symbolic(v) for v in tuple(x.stride()) + tuple(x.shape)):
        # symbolic sizes or strides: row-major. (``int()`` of a SymInt does not raise, it
        # specialises: a clone of a strided view pinned every size -- a recompile per size)
        return None
    st = [int(v) for v in x.stride()]
    shape = [int(n) for n in x.shape]
    from ...ops import _meta
    return _meta.torch_dense_order(shape, st)


@register_decomposition("_to_copy")
def _to_copy(x, dtype=None, device=None):
    if device is not None and _t.as_device(device) != x.device:
        return NotImplemented        # a device move is not a prim: kept whole
    if dtype is None or _t.as_dtype(dtype) is x.dtype:
        return prims.clone(x)
    return prims.convert_element_type(x, _t.as_dtype(dtype))


# ---------------------------------------------------------------------- select / slice / basic keys
@register_decomposition("select")
def select(x, dim, index):
    if x.ndim == 0:
        return NotImplemented
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    if not -n <= index < n:
        return NotImplemented
    return select_dim(x, d, index + n if index < 0 else index)


@register_decomposition("slice")
def _slice(x, dim=0, start=None, end=None, step=1):
    d = wrap_dim(dim, x.ndim)
    s, e = _shape._slice_bounds(x.shape[d], start, end, step)
    out = slice_dim(x, d, s, e, step)
    return alias(out) if out is x else out


def _key_items(key, ndim):
    """A basic index key (ints, slices, Ellipsis) as one entry per dim: int, (start, stop, step) or None."""
    key = key if isinstance(key, tuple) else (key,)
    n_real = sum(1 for k in key if k is not Ellipsis)
    items = []
    for k in key:
        if k is Ellipsis:
            items += [None] * (ndim - n_real)
        else:
            items.append(k)
    items += [None] * (ndim - len(items))
    return items


def _norm_items(items, shape):
    out = []
    for k, n in zip(items, shape):
        if k is None:
            out.append(None)
        elif isinstance(k, slice):
            if any(is_symbolic(v) for v in (n, k.start, k.stop)):
                # slice.indices would specialise the sizes (int()): clamp as the forward does
                from ...ops.shape import _slice_bounds
                st = 1 if k.step is None else int(k.step)
                if st <= 0:
                    raise NotImplementedError("basic keys with negative steps do not occur in ember")
                s, e = _slice_bounds(n, k.start, k.stop, st)
                out.append((s, e, st))
                continue
            s, e, st = k.indices(n)
            if st <= 0:
                raise NotImplementedError("basic keys with negative steps do not occur in ember")
            out.append((s, max(e, s), st))
        elif isinstance(k, numbers.Integral):
            out.append(int(k) + n if k < 0 else int(k))
        elif is_symbolic(k):
            out.append(_sym_index(k, n))
        else:
            raise NotImplementedError(f"basic key entry {k!r}")
    return out


def _sym_index(k, n):
    """A symbolic integer key entry (select's backward under dynamic shapes passes the wrapped
    index, e.g. ``s0 - 1`` for ``x[:, -1]``) made non-negative when its sign is known from the
    shape environment's facts; an undecidable sign is refused (the graph then runs eagerly)
    rather than guessed or guarded on."""
    if statically_known_true(k >= 0):
        return k
    if statically_known_true(k < 0):
        return k + n
    raise NotImplementedError(f"basic key entry {k!r} of unknown sign")


@register_decomposition("_basic_index")
def _basic_index(x, key):
    try:
        items = _norm_items(_key_items(key, x.ndim), x.shape)
    except NotImplementedError:
        return NotImplemented
    starts, limits, strides, drop = [], [], [], []
    for d, (k, n) in enumerate(zip(items, x.shape)):
        if k is None:
            starts.append(0), limits.append(n), strides.append(1)
        elif isinstance(k, tuple):
            starts.append(k[0]), limits.append(k[1]), strides.append(k[2])
        else:
            starts.append(k), limits.append(k + 1), strides.append(1)
            drop.append(d)
    out = prims.slice(x, starts, limits, strides)
    return prims.squeeze(out, tuple(drop)) if drop else out


def _is_index(k):
    """Whether a normalized key entry selects one position (an int, or a symbolic one from
    ``_sym_index``) rather than a (start, stop, step) range or a whole dim (None)."""
    return isinstance(k, int) or is_symbolic(k)


@register_decomposition("_embed")
def _embed(g, size, key):
    size = tuple(size)
    try:
        items = _norm_items(_key_items(key, len(size)), size)
    except NotImplementedError:
        return NotImplemented
    ints = tuple(d for d, k in enumerate(items) if _is_index(k))
    if ints:
        g = prims.expand_dims(g, ints)
    config = []
    for k, n in zip(items, size):
        if k is None:
            config.append((0, 0, 0))
        elif _is_index(k):
            config.append((k, n - k - 1, 0))
        else:
            s, e, st = k
            cnt = len(range(s, e, st)) if type(s) is int and type(e) is int else (e - s + st - 1) // st
            if cnt == 0:
                return full(size, 0, g.dtype, g.device)
            last = s + (cnt - 1) * st
            config.append((s, n - last - 1, st - 1))
    out = pad(g, 0, config)
    return alias(out) if out is g else out


# ---------------------------------------------------------------------- diagonal
def _functionalizing():
    """Whether a functionalizing tracer (aot's ``make_fx(..., functionalize=True)``) records
    this decomposition: there a view op must return a view of its input, since an in-place
    write through it reaches the input only along views (plain traces want prims only)."""
    from ..._state import STATE
    return any(getattr(m, "functionalize", False) for m in STATE.modes)


def _merges_as_view(x, d1, d2):
    """Whether dims ``d1`` then ``d2`` of ``x`` flatten into one without a copy (the reshape
    below is then a view of ``x``)."""
    from ..views import _view_strides
    st = x.stride()
    n1, n2 = x.shape[d1], x.shape[d2]
    return _view_strides((n1, n2), (st[d1], st[d2]), (n1 * n2,)) is not None


def _diag_take(x, offset, d1, d2):
    n1, n2 = x.shape[d1], x.shape[d2]
    keep = [i for i in range(x.ndim) if i not in (d1, d2)]
    kshape = [x.shape[i] for i in keep]
    size = max(0, min(n1, n2 - offset)) if offset >= 0 else max(0, min(n1 + offset, n2))
    if size != 0 and not _merges_as_view(x, d1, d2) and _merges_as_view(x, d2, d1):
        # the same elements in the same order: the transposed matrix's diagonal, whose
        # flattening reshape below is a view (see ``diagonal``)
        return _diag_take(x, -offset, d2, d1)
    y = permute(x, keep + [d1, d2])
    if size == 0:       # (sliced, not a fresh tensor: autograd marks a view op's result as a view)
        return prims.reshape(prims.slice(y, [0] * y.ndim, kshape + [0, n2]), tuple(kshape + [0]))
    y = reshape(y, kshape + [n1 * n2])
    start = offset if offset >= 0 else -offset * n2
    return slice_dim(y, len(kshape), start, start + (size - 1) * (n2 + 1) + 1, n2 + 1)


def _diag_put(g, size, offset, d1, d2):
    """zeros(size) with ``g`` (shape: the other dims + [diagonal length]) on the diagonal."""
    n1, n2 = size[d1], size[d2]
    keep = [i for i in range(len(size)) if i not in (d1, d2)]
    kshape = [size[i] for i in keep]
    cnt = g.shape[-1]
    if cnt == 0 or n1 * n2 == 0:
        return full(size, 0, g.dtype, g.device)
    start = offset if offset >= 0 else -offset * n2
    last = start + (cnt - 1) * (n2 + 1)
    y = pad(g, 0, [(0, 0, 0)] * len(kshape) + [(start, n1 * n2 - last - 1, n2)])
    y = reshape(y, kshape + [n1, n2])
    return permute(y, inverse_perm(keep + [d1, d2]))


@register_decomposition("diagonal")
def diagonal(x, offset=0, dim1=0, dim2=1):
    d1, d2 = _shape._diag_dims(x.ndim, dim1, dim2)
    if _functionalizing() and not (_merges_as_view(x, d1, d2) or _merges_as_view(x, d2, d1)):
        # diagonal is a view, and functionalization follows an in-place op on it back to
        # ``x`` only through views: the flattening reshape of ``_diag_take`` would copy
        # here (``x`` sliced in both dims), taking the write away from ``x`` (a silently
        # lost mutation). The op is recorded whole: its kernel's result is a view.
        return NotImplemented
    out = _diag_take(x, offset, d1, d2)
    return alias(out) if out is x else out


@register_decomposition("unfold")
def unfold(x, dimension, size, step):
    """Recorded whole (NotImplemented), lowered by the inductor as a view reading ``x`` at
    [..., i * step + j, ..., j]. Its kernel is ``as_strided`` with ``x``'s traced strides,
    and a graph keeps those strides while the value they describe may be laid out
    otherwise: after an in-place write to ``x`` functionalization rebinds ``x`` to its new,
    contiguous value, and an ``x.unfold(...)`` taken then read that value with the old
    strides (a transposed input: other elements, silently). The whole op has value
    semantics, and its kernel's result is still a view for functionalization to write
    through. Outside functionalization (a plain trace wants prims only) the composite's
    ``as_strided`` is decomposed as before. (Under autograd the composite is traced.)"""
    return NotImplemented if _functionalizing() else _shape_extra_unfold(x, dimension, size, step)


def _shape_extra_unfold(x, dimension, size, step):
    """The composite itself: as_strided with ``x``'s strides (decomposed to ``prims.as_strided``)."""
    from ...ops.shape_extra import unfold as _unfold_op
    return _unfold_op.composite(x, dimension, size, step)


@register_decomposition("_diagonal_backward")
def _diagonal_backward(g, size, offset, dim1, dim2):
    size = tuple(size)
    d1, d2 = _shape._diag_dims(len(size), dim1, dim2)
    return _diag_put(g, size, offset, d1, d2)


@register_decomposition("diag")
def diag(x, diagonal=0):
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        return _diag_put(x, (n, n), diagonal, 0, 1)
    if x.ndim == 2:
        return prims.clone(_diag_take(x, diagonal, 0, 1))
    return NotImplemented


# ---------------------------------------------------------------------- split / unbind
def _split_at(x, sizes, d):
    out, start = [], 0
    for s in sizes:
        out.append(prims.slice(x, [0] * d + [start] + [0] * (x.ndim - d - 1),
                               list(x.shape[:d]) + [start + s] + list(x.shape[d + 1:])))
        start += s
    return tuple(out)


@register_decomposition("split")
def _split(x, split_size, dim=0):
    if x.ndim == 0:
        return NotImplemented
    d = wrap_dim(dim, x.ndim)
    return _split_at(x, _shape._split_sizes_for(x.shape[d], split_size), d)


@register_decomposition("split_with_sizes")
def split_with_sizes(x, split_sizes, dim=0):
    if x.ndim == 0:
        return NotImplemented
    d = wrap_dim(dim, x.ndim)
    sizes = [int(s) for s in split_sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[d]:
        return NotImplemented
    return _split_at(x, sizes, d)


@register_decomposition("unbind")
def unbind(x, dim=0):
    if x.ndim == 0:
        return NotImplemented
    d = wrap_dim(dim, x.ndim)
    return tuple(select_dim(x, d, i) for i in range(x.shape[d]))


# ---------------------------------------------------------------------- cat / stack
@register_decomposition("cat")
def cat(tensors, dim=0):
    if not tensors or any(x.ndim == 0 for x in tensors):
        return NotImplemented
    dt = _t.result_type_from([x.dtype for x in tensors], [], [])
    real = [x for x in tensors if not (x.ndim == 1 and x.shape[0] == 0)]
    if not real:
        return full((0,), 0, dt, tensors[0].device)
    d = wrap_dim(dim, real[0].ndim)
    for x in real[1:]:
        if x.ndim != real[0].ndim or any(x.shape[k] != real[0].shape[k] for k in range(x.ndim) if k != d):
            return NotImplemented
    return prims.cat([to(x, dt) for x in real], d)


@register_decomposition("stack")
def stack(tensors, dim=0):
    if not tensors or any(tuple(x.shape) != tuple(tensors[0].shape) for x in tensors):
        return NotImplemented
    dt = _t.result_type_from([x.dtype for x in tensors], [], [])
    d = wrap_dim(dim, tensors[0].ndim + 1)
    return prims.cat([prims.expand_dims(to(x, dt), (d,)) for x in tensors], d)


# ---------------------------------------------------------------------- flip / roll / tril / triu / repeat
@register_decomposition("flip")
def _flip(x, dims):
    ds = [wrap_dim(d, x.ndim) for d in dims]
    if len(set(ds)) != len(ds):
        return NotImplemented
    if x.ndim == 0 or not ds:
        return prims.clone(x)
    return prims.flip(x, tuple(ds))


def _roll_dim(x, shift, d):
    n = x.shape[d]
    if n == 0 or shift % n == 0:
        return x
    s = shift % n
    return prims.cat([slice_dim(x, d, n - s, n), slice_dim(x, d, 0, n - s)], d)


@register_decomposition("roll")
def _roll(x, shifts, dims=()):
    shifts, dims = list(shifts), list(dims)
    if not dims:
        if len(shifts) != 1:
            return NotImplemented
        out = reshape(_roll_dim(flat(x), shifts[0], 0), tuple(x.shape))
    else:
        if len(shifts) != len(dims):
            return NotImplemented
        out = x
        for s, d in zip(shifts, dims):
            out = _roll_dim(out, s, wrap_dim(d, x.ndim))
    return prims.clone(x) if out is x else out


def _tri(x, diagonal, lower):
    if x.ndim < 2:
        return NotImplemented
    n1, n2 = x.shape[-2], x.shape[-1]
    rows = bcast_to_dims(iota(n1, x.device), (n1, n2), (0,))
    cols = bcast_to_dims(iota(n2, x.device), (n1, n2), (1,))
    diff = prims.sub(cols, rows)
    keep = prims.le(diff, diagonal) if lower else prims.ge(diff, diagonal)
    keep = bcast_to_dims(keep, tuple(x.shape), (x.ndim - 2, x.ndim - 1))
    return prims.where(keep, x, zeros_like(x))


@register_decomposition("tril")
def tril(x, diagonal=0):
    return _tri(x, diagonal, True)


@register_decomposition("triu")
def triu(x, diagonal=0):
    return _tri(x, diagonal, False)


@register_decomposition("repeat")
def _repeat(x, repeats):
    reps = tuple(int(r) for r in repeats)
    if len(reps) < x.ndim or any(r < 0 for r in reps):
        return NotImplemented
    shp = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    y = reshape(x, shp)
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    y = prims.broadcast_in_dim(y, tuple(inter), tuple(range(1, 2 * len(reps), 2)))
    out = prims.reshape(y, tuple(r * s for r, s in zip(reps, shp)))
    return prims.clone(out) if out is y else out


def coverage_examples():
    """op name -> () -> example arguments, for ``python -m ember.prims.coverage``."""
    import ember
    r = ember.randn
    ex = {
        "_reshape_alias": lambda: (r(3, 4), [4, 3], [3, 1]),
        "_unsafe_view": lambda: (r(3, 4), [2, 6]),
        "alias": lambda: (r(3, 4),),
        "as_strided": lambda: (r(4, 5), [3, 3], [5, 1], 2),
        "_restride": lambda: (r(3, 3), ((3, 3), (5, 1), 2), ((4, 5), (5, 1), 0), "scatter_add"),
        "_to_copy": lambda: (r(3, 4),),        # (dtype is keyword-only)
        "slice": lambda: (r(3, 5), 1, 1, 5, 2),
        "_basic_index": lambda: (r(3, 4, 5), (1, slice(0, 3, 2), Ellipsis)),
        "_embed": lambda: (r(3, 5), [3, 4, 5], (slice(None), 1, Ellipsis)),
        "diagonal": lambda: (r(3, 4, 5), 1, 0, 2),
        "_diagonal_backward": lambda: (r(4, 3), [3, 4, 5], 1, 0, 2),
        "diag": lambda: (r(4), 1),
        "split": lambda: (r(5, 3), 2, 0),
        "split_with_sizes": lambda: (r(5, 3), [1, 4], 0),
        "unbind": lambda: (r(3, 4), 1),
        "roll": lambda: (r(3, 4), [1, -1], [0, 1]),
        "repeat": lambda: (r(3, 4), [2, 1, 3]),
    }
    return ex
