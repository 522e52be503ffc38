"""Decompositions of the indexing ops (ember/ops/indexing.py) into prims.

Integer advanced indexing (``index``, ``index_put``) becomes a permute that
brings the indexed dims to the front, one linear index computed from the
index tensors (negative indices wrapped with ``where``), and
``prims.index_select`` / ``prims.index_put``; PyTorch's placement rule for
the advanced dims (in place when the index tensors are adjacent, first
otherwise) is applied with a final permute. The ``index_*`` family and
``take``/``put`` become ``scatter``/``scatter_add``/``index_put`` with the
index vector broadcast to the source's shape.

Left whole (the decomposition returns ``NotImplemented``): boolean-mask
indices (except ``index_put`` of one value, ``x[mask] = v``, which is a
``where``), ``masked_select`` and ``nonzero`` (their output shape depends on
the data) and ``scatter(reduce='multiply')`` (no prim multiplies into a scatter target;
``amax``/``amin`` have ``prims.scatter_amax``/``scatter_amin``). ``scatter_reduce`` with
``prod`` compares every index with every slot of its dim (a one-hot block reduced by
``prims.prod``): left whole when that block would be large. Bounds errors that the kernels
raise from the index values cannot be raised by a graph: a decomposition assumes in-range
indices.
"""
from __future__ import annotations

import numpy as np

from ... import types as _t
from ...ops._helpers import broadcast_shapes, wrap_dim
from . import register_decomposition
from .shape import (bcast, bcast_to_dims, flat, full, inverse_perm, iota, numel, pad, permute, reshape, size_operand,
                    to, wrap_index)

from ember import prims  # noqa: E402


def _is_mask(t):
    return t.dtype is _t.bool_ or t.dtype is _t.uint8


def _adv_plan(x, indices):
    """Permutation bringing the indexed dims first, the index tensors (wrapped, broadcast, int64),
    their broadcast shape, and where the broadcast dims go in the result; None for masks."""
    idx_dims, tensors = [], []
    for d, ix in enumerate(indices):
        if ix is None:
            continue
        if _is_mask(ix) or d >= x.ndim:
            return None
        idx_dims.append(d)
        tensors.append(ix)
    if not tensors:
        return None
    rest = [d for d in range(x.ndim) if d not in idx_dims]
    perm = idx_dims + rest
    bshape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    wrapped = [bcast(wrap_index(t, x.shape[d]), bshape) for d, t in zip(idx_dims, tensors)]
    adjacent = idx_dims == list(range(idx_dims[0], idx_dims[-1] + 1))
    pos = idx_dims[0] if adjacent else 0
    return perm, idx_dims, rest, wrapped, tuple(bshape), pos


def _result_perm(nb, n_rest_before, n_rest_after):
    """Permutation from (broadcast dims, rest dims) to the result's dim order."""
    b = list(range(nb))
    before = list(range(nb, nb + n_rest_before))
    after = list(range(nb + n_rest_before, nb + n_rest_before + n_rest_after))
    return before + b + after


@register_decomposition("index")
def index(x, indices):
    plan = _adv_plan(x, list(indices))
    if plan is None:
        return NotImplemented        # boolean masks: data-dependent shape, kept whole
    perm, idx_dims, rest, wrapped, bshape, pos = plan
    xp = permute(x, perm)
    ishape = [x.shape[d] for d in idx_dims]
    rshape = [x.shape[d] for d in rest]
    # one linear index into the flattened indexed dims
    lin, mult = None, 1
    for t, n in zip(reversed(wrapped), reversed(ishape)):
        term = t if (type(mult) is int and mult == 1) else prims.mul(t, size_operand(mult, t.shape, t.device))
        lin = term if lin is None else prims.add(lin, term)
        mult *= n
    xf = reshape(xp, [numel(ishape)] + rshape)
    out = prims.index_select(xf, 0, flat(lin))
    out = reshape(out, list(bshape) + rshape)
    n_before = len([d for d in rest if d < pos])
    return permute(out, _result_perm(len(bshape), n_before, len(rest) - n_before))


def _mask_fill(x, indices, values, accumulate):
    """``x[mask] = v`` with one boolean mask and a one-element ``v``: a select, no data-dependent shape."""
    masks = [(d, ix) for d, ix in enumerate(indices) if ix is not None]
    if len(masks) != 1 or not _is_mask(masks[0][1]) or numel(values.shape) != 1:
        return NotImplemented
    d, m = masks[0]
    if m.ndim == 0 or d + m.ndim > x.ndim or tuple(m.shape) != tuple(x.shape[d:d + m.ndim]):
        return NotImplemented
    m = bcast_to_dims(to(m, _t.bool_), tuple(x.shape), tuple(range(d, d + m.ndim)))
    v = bcast_to_dims(reshape(values, ()), tuple(x.shape), ())
    if accumulate:
        return prims.add(x, prims.where(m, v, 0))
    return prims.where(m, v, x)


@register_decomposition("index_put")
def index_put(x, indices, values, accumulate=False):
    if values.dtype is not x.dtype:
        return NotImplemented        # the kernel raises PyTorch's dtype error
    plan = _adv_plan(x, list(indices))
    if plan is None:
        # a boolean mask: only the one-value fill is data-independent (x[mask] = 0.0)
        return _mask_fill(x, list(indices), values, accumulate)
    perm, idx_dims, rest, wrapped, bshape, pos = plan
    rshape = [x.shape[d] for d in rest]
    n_before = len([d for d in rest if d < pos])
    rperm = _result_perm(len(bshape), n_before, len(rest) - n_before)
    target = [0] * len(rperm)
    full_shape = list(bshape) + rshape
    for i, p in enumerate(rperm):
        target[i] = full_shape[p]
    v = bcast(values, target)                         # values broadcast to the indexing result
    v = permute(v, inverse_perm(rperm))               # -> (broadcast dims, rest dims)
    out = prims.index_put(permute(x, perm), tuple(wrapped), v, bool(accumulate))
    return permute(out, inverse_perm(perm))


# ---------------------------------------------------------------------- gather / scatter
def _as1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


def _src_part(src, idx):
    if tuple(src.shape) == tuple(idx.shape):
        return src
    return prims.slice(src, [0] * src.ndim, list(idx.shape))


@register_decomposition("gather")
def gather(x, dim, index, sparse_grad=False):
    if index.dtype is not _t.int64:
        return NotImplemented
    if x.ndim == 0:
        out = prims.index_select(reshape(x, (1,)), 0, flat(index))
        return reshape(out, tuple(index.shape))
    if index.ndim != x.ndim:
        return NotImplemented
    return prims.gather(x, wrap_dim(dim, x.ndim), index)


@register_decomposition("scatter")
def scatter(x, dim, index, src, reduce=None):
    scalar = not hasattr(src, "shape")
    if reduce not in (None, "add") or index.dtype is not _t.int64:
        return NotImplemented        # reduce='multiply': no prim multiplies into a scatter target
    if not scalar and src.dtype is not x.dtype:
        return NotImplemented
    out = _as1d(x)
    idx = reshape(index, (numel(index.shape),)) if x.ndim == 0 else index
    if idx.ndim != out.ndim:
        return NotImplemented
    d = wrap_dim(dim, out.ndim)
    if scalar:
        vals = full(tuple(idx.shape), src, x.dtype, x.device)
    else:
        vals = _src_part(reshape(src, (numel(src.shape),)) if x.ndim == 0 else src, idx)
    res = prims.scatter_add(out, d, idx, vals) if reduce == "add" else prims.scatter(out, d, idx, vals)
    return reshape(res, tuple(x.shape))


@register_decomposition("scatter_add")
def scatter_add(x, dim, index, src):
    if src.dtype is not x.dtype or index.dtype is not _t.int64:
        return NotImplemented
    out = _as1d(x)
    idx = reshape(index, (numel(index.shape),)) if x.ndim == 0 else index
    s = reshape(src, (numel(src.shape),)) if x.ndim == 0 else src
    if idx.ndim != out.ndim:
        return NotImplemented
    res = prims.scatter_add(out, wrap_dim(dim, out.ndim), idx, _src_part(s, idx))
    return reshape(res, tuple(x.shape))


def _maxmin_identity(dtype, reduce):
    """The value that never wins a max (amax) / min (amin) of ``dtype``: -inf/inf for floats
    (so a slot that only -inf reaches stays -inf, as in PyTorch), the integer limits, False/True."""
    if dtype is _t.bool_:
        return reduce == "amin"
    if dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    info = np.iinfo(dtype.np)
    return int(info.min) if reduce == "amax" else int(info.max)


# the most (index element, slot) pairs the one-hot block of a scatter_reduce prod may hold;
# beyond it the op stays whole (its kernel multiplies in place, with no such block)
_PROD_PAIRS_MAX = 1 << 22


def _example_size(n):
    """A size's value, or a symbolic size's example value (adding no guard)."""
    from ...fx.experimental.symbolic_shapes import has_hint, hint_int
    return hint_int(n) if has_hint(n) else 0


def _scatter_prod(out, d, idx, vals, include_self):
    """scatter_reduce(reduce='prod') without a prim that multiplies into a scatter target: a
    one-hot block ``hot[..., j, ..., t] = (idx[..., j, ...] == t)`` over the index's shape and
    the ``n`` slots of dim ``d``, the values where hot (1 elsewhere) multiplied over the index's
    dim ``d``, the slot axis moved back to ``d`` and padded with 1 to ``out``'s extent in the
    other dims (an index may be narrower there). include_self multiplies ``out`` by the slots'
    products (one rounding order: the kernel multiplies one value at a time); otherwise a
    slot any index reaches takes its product alone. None where the block would be too large
    (judged by the example sizes under dynamic shapes: no guard on them)."""
    n = out.shape[d]
    ishape = tuple(idx.shape)
    if _example_size(numel(ishape)) * _example_size(n) > _PROD_PAIRS_MAX:
        return None
    nd = out.ndim
    block = ishape + (n,)
    lead = tuple(range(nd))
    hot = prims.eq(bcast_to_dims(idx, block, lead), bcast_to_dims(iota(n, idx.device), block, (nd,)))
    picked = prims.where(hot, bcast_to_dims(vals, block, lead), 1)
    back = list(range(d)) + [nd - 1] + list(range(d, nd - 1))     # the slot axis to dim d
    prod = permute(prims.prod(picked, (d,)), back)
    grow = [(0, 0 if k == d else out.shape[k] - ishape[k], 0) for k in range(nd)]
    prod = pad(prod, 1, grow)
    if include_self:
        return prims.mul(out, prod)
    hit = pad(permute(prims.any(hot, (d,)), back), False, grow)
    return prims.where(hit, prod, out)


@register_decomposition("scatter_reduce")
def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    if reduce not in ("sum", "mean", "amax", "amin", "prod") or src.dtype is not x.dtype \
            or index.dtype is not _t.int64 or x.dtype.is_complex or (reduce == "prod" and x.dtype is _t.bool_):
        return NotImplemented
    out = _as1d(x)
    idx = reshape(index, (numel(index.shape),)) if x.ndim == 0 else index
    s = reshape(src, (numel(src.shape),)) if x.ndim == 0 else src
    if idx.ndim != out.ndim:
        return NotImplemented
    d = wrap_dim(dim, out.ndim)
    vals = _src_part(s, idx)
    if reduce == "prod":
        res = _scatter_prod(out, d, idx, vals, include_self)
        return NotImplemented if res is None else reshape(res, tuple(x.shape))
    if reduce in ("amax", "amin"):
        # include_self=False: the scattered-to slots start from the identity, so only src counts
        base = out if include_self else \
            prims.scatter(out, d, idx, full(tuple(idx.shape), _maxmin_identity(x.dtype, reduce), x.dtype, x.device))
        res = (prims.scatter_amax if reduce == "amax" else prims.scatter_amin)(base, d, idx, vals)
        return reshape(res, tuple(x.shape))
    base = out if include_self else prims.scatter(out, d, idx, full(tuple(idx.shape), 0, x.dtype, x.device))
    res = prims.scatter_add(base, d, idx, vals)
    if reduce == "mean":
        cnt = full(tuple(out.shape), 1 if include_self else 0, x.dtype, x.device)
        cnt = prims.scatter_add(cnt, d, idx, full(tuple(idx.shape), 1, x.dtype, x.device))
        cnt = prims.maximum(cnt, full(tuple(out.shape), 1, x.dtype, x.device))
        res = prims.div(res, cnt) if x.dtype.is_floating_point else prims.floor_divide(res, cnt)
    return reshape(res, tuple(x.shape))


# ---------------------------------------------------------------------- index_select & co
def _index_vec(index):
    if index.ndim > 1 or index.dtype.is_floating_point or index.dtype is _t.bool_:
        return None
    return to(reshape(index, (numel(index.shape),)), _t.int64)


def _along(idx, shape, d):
    """The index vector broadcast along dim ``d`` of ``shape`` (for scatter/gather)."""
    return bcast_to_dims(idx, tuple(shape), (d,))


@register_decomposition("index_select")
def index_select(x, dim, index):
    idx = _index_vec(index)
    if idx is None:
        return NotImplemented
    if x.ndim == 0:     # one index (the meta checked it), a 0-d result as PyTorch's
        return reshape(prims.index_select(reshape(x, (1,)), 0, idx), ())
    return prims.index_select(x, wrap_dim(dim, x.ndim), idx)


def _as1d_pair(x, source):
    """(self, source), both made 1-d when self is 0-d (the kernels' 0-d rule)."""
    out = _as1d(x)
    src = reshape(source, (numel(source.shape),)) if x.ndim == 0 else source
    return out, src


@register_decomposition("index_add")
def index_add(x, dim, index, source, alpha=1):
    idx = _index_vec(index)
    if idx is None or source.dtype is not x.dtype:
        return NotImplemented
    out, src = _as1d_pair(x, source)
    d = wrap_dim(dim, out.ndim)
    if alpha != 1:
        if not x.dtype.is_floating_point and isinstance(alpha, float):
            return NotImplemented
        src = prims.mul(src, alpha)
    res = prims.scatter_add(out, d, _along(idx, src.shape, d), src)
    return reshape(res, tuple(x.shape))


@register_decomposition("index_copy")
def index_copy(x, dim, index, source):
    idx = _index_vec(index)
    if idx is None or source.dtype is not x.dtype:
        return NotImplemented
    out, src = _as1d_pair(x, source)
    d = wrap_dim(dim, out.ndim)
    res = prims.scatter(out, d, _along(idx, src.shape, d), src)
    return reshape(res, tuple(x.shape))


@register_decomposition("index_fill")
def index_fill(x, dim, index, value):
    idx = _index_vec(index)
    if idx is None:
        return NotImplemented
    out = _as1d(x)
    d = wrap_dim(dim, out.ndim)
    idx = wrap_index(idx, out.shape[d])
    shape = list(out.shape)
    shape[d] = idx.shape[0]
    if hasattr(value, "shape"):
        if value.ndim != 0:
            return NotImplemented
        vals = bcast(to(value, x.dtype), shape)
    else:
        if not x.dtype.is_floating_point and isinstance(value, float):
            return NotImplemented
        vals = full(shape, value, x.dtype, x.device)
    res = prims.scatter(out, d, _along(idx, shape, d), vals)
    return reshape(res, tuple(x.shape))


# ---------------------------------------------------------------------- take / put
@register_decomposition("take")
def take(x, index):
    if index.dtype is not _t.int64:
        return NotImplemented
    idx = wrap_index(flat(index), numel(x.shape))
    return reshape(prims.index_select(flat(x), 0, idx), tuple(index.shape))


@register_decomposition("put")
def put(x, index, source, accumulate=False):
    if index.dtype is not _t.int64 or source.dtype is not x.dtype or numel(index.shape) != numel(source.shape):
        return NotImplemented
    idx = wrap_index(flat(index), numel(x.shape))
    out = prims.index_put(flat(x), (idx,), flat(source), bool(accumulate))
    return reshape(out, tuple(x.shape))


def coverage_examples():
    """op name -> () -> example arguments, for ``python -m ember.prims.coverage``."""
    import ember
    r = ember.randn

    def i(hi, *shape):
        return ember.randint(0, hi, shape)
    return {
        "index": lambda: (r(3, 4, 5), (None, i(4, 2, 3), i(5, 3))),
        "index_put": lambda: (r(3, 4), (i(3, 2),), r(2, 4), True),
        "scatter": lambda: (r(3, 4), 1, i(4, 3, 2), r(3, 2)),
        "scatter_add": lambda: (r(3, 4), 1, i(4, 3, 2), r(3, 2)),
        "scatter_reduce": lambda: (r(3, 4), 1, i(4, 3, 2), r(3, 2), "mean"),
        "index_add": lambda: (r(3, 4), 1, i(4, 2), r(3, 2)),
        "index_copy": lambda: (r(3, 4), 0, ember.tensor([2, 0]), r(2, 4)),
        "index_fill": lambda: (r(3, 4), 1, i(4, 2), 1.5),
        "take": lambda: (r(3, 4), i(12, 5)),
        "put": lambda: (r(3, 4), i(12, 5), r(5), True),
    }
