"""One lowering per prim: prim arguments (IR values, Python scalars, lists)
-> an IR value (see ``ir.py``).

A prim with no lowering here, or whose lowering raises, becomes an
``ExternKernel`` calling the prim's own numpy reference (``graph.py`` does
that and logs the reason): slower, never wrong.

Prims do no promotion and no broadcasting, so a pointwise lowering only
checks that its operands agree and builds ``inner_fn`` from their loaders.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np
import sympy

from .. import types as _t
from . import config, gemm, ir
from .ir import ExternArg, Pointwise, Reduction
from .sizevars import FloorDiv, ModularIndexing, contiguous_strides, product, sympify
from .virtualized import V, ops

LOWERINGS: Dict[str, Callable] = {}
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def register(*names):
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


def _is_ir(x):
    return isinstance(x, ir.IRNode)


def scalar_value(v, dtype):
    """A Python number converted to ``dtype`` exactly as the prims' references do
    (integers wrap, half precision rounds once)."""
    if dtype is _t.bool_:
        return bool(v)
    with np.errstate(all="ignore"):
        if dtype.category == 1:
            return int(np.asarray(int(v)).astype(dtype.np))
        return float(np.asarray(v, dtype=np.float64).astype(dtype.np).astype(np.float64))


def _loader_or_const(a, dtype):
    if _is_ir(a):
        return a.make_loader()
    val = scalar_value(a, dtype)
    return lambda idx: ops.constant(val, dtype)


def _check_same_size(name, tensors):
    ref = tensors[0].get_size()
    for t in tensors[1:]:
        s = t.get_size()
        if len(s) != len(ref):
            raise ValueError(f"prims.{name}: operand ranks differ")
        for a, b in zip(s, ref):
            V.graph.sizevars.guard_equals(a, b)
    return ref


def make_pointwise(name, out_bool=False):
    def lower(*args):
        tensors = [a for a in args if _is_ir(a)]
        size = _check_same_size(name, tensors)
        dtype = tensors[0].get_dtype()
        loaders = [_loader_or_const(a, dtype) for a in args]
        op_name = name

        def inner_fn(idx):
            return getattr(ops, op_name)(*[ld(idx) for ld in loaders])

        return Pointwise(size, _t.bool_ if out_bool else dtype, inner_fn)
    return lower


for _n in ir.UNARY_OPS + ir.BINARY_OPS:
    LOWERINGS[_n] = make_pointwise(_n)
for _n in ir.UNARY_BOOL_OPS + ir.BINARY_BOOL_OPS:
    LOWERINGS[_n] = make_pointwise(_n, out_bool=True)


@register("where")
def _where(pred, a, b):
    tensors = [x for x in (pred, a, b) if _is_ir(x)]
    size = _check_same_size("where", tensors)
    dtype = (a if _is_ir(a) else b).get_dtype()
    lp = pred.make_loader()
    la, lb = _loader_or_const(a, dtype), _loader_or_const(b, dtype)
    return Pointwise(size, dtype, lambda idx: ops.where(lp(idx), la(idx), lb(idx)))


@register("convert_element_type")
def _convert(x, dtype):
    dtype = _t.as_dtype(dtype)
    ld = x.make_loader()
    return Pointwise(x.get_size(), dtype, lambda idx: ops.to_dtype(ld(idx), dtype))


# ---------------------------------------------------------------------- views
def _view(x, size, reindex, strides_of=None):
    """A view of ``x``: a Pointwise reading ``x`` at ``reindex(index)``. Of an unrealized
    computation it also records ``view_of = (base, reindex to the base, strides)``: the strides
    of this view over the base written out contiguously, where ``strides_of`` (the view op's
    map from its input's strides to its own) can say; None where it cannot (a slice, a
    broadcast). See ``Pointwise``."""
    ld = x.make_loader()
    view_of = None
    if isinstance(x, Pointwise) and not x.is_realized():
        if x.view_of is not None:      # a view of a view: one map to the computed base
            base, inner, inner_strides = x.view_of
            view_of = (base, lambda idx: inner(reindex(list(idx))),
                       strides_of(inner_strides) if strides_of and inner_strides is not None else None)
        elif not x.is_view:
            view_of = (x, reindex, strides_of(contiguous_strides(x.get_size())) if strides_of else None)
    return Pointwise(size, x.get_dtype(), lambda idx: ld(reindex(list(idx))), is_view=True, view_of=view_of)


@register("broadcast_in_dim")
def _broadcast_in_dim(x, shape, broadcast_dimensions):
    shape = [sympify(s) for s in shape]
    in_size = x.get_size()
    bd = [int(d) for d in broadcast_dimensions]

    def reindex(idx):
        return [sympy.Integer(0) if (n == 1 and shape[d] != 1) else idx[d] for n, d in zip(in_size, bd)]

    return _view(x, shape, reindex)


@register("permute")
def _permute(x, dims):
    dims = [int(d) for d in dims]
    size = [x.get_size()[d] for d in dims]

    def reindex(idx):
        out = [None] * len(dims)
        for i, d in enumerate(dims):
            out[d] = idx[i]
        return out

    return _view(x, size, reindex, lambda strides: [strides[d] for d in dims])


@register("squeeze")
def _squeeze(x, dims):
    dims = set(int(d) for d in dims)
    in_size = x.get_size()
    size = [s for i, s in enumerate(in_size) if i not in dims]

    def reindex(idx):
        it = iter(idx)
        return [sympy.Integer(0) if i in dims else next(it) for i in range(len(in_size))]

    return _view(x, size, reindex, lambda strides: [st for i, st in enumerate(strides) if i not in dims])


@register("expand_dims")
def _expand_dims(x, dims):
    dims = set(int(d) for d in dims)
    n = len(x.get_size()) + len(dims)
    it = iter(x.get_size())
    size = [sympy.Integer(1) if i in dims else next(it) for i in range(n)]

    def reindex(idx):
        return [idx[i] for i in range(n) if i not in dims]

    def strides_of(strides):
        it = iter(strides)
        return [sympy.Integer(0) if i in dims else next(it) for i in range(n)]

    return _view(x, size, reindex, strides_of)


@register("slice")
def _slice(x, start_indices, limit_indices, strides=None):
    n = len(x.get_size())
    steps = [1] * n if strides is None else list(strides)
    start = [sympify(s) for s in start_indices]
    limit = [sympify(s) for s in limit_indices]
    steps = [sympify(s) for s in steps]
    size = [FloorDiv(l - s + k - 1, k) for s, l, k in zip(start, limit, steps)]

    def reindex(idx):
        return [s + i * k for s, i, k in zip(start, idx, steps)]

    return _view(x, size, reindex)


@register("diagonal")
def _diagonal(x, offset=0, dim1=0, dim2=1):
    """``diagonal`` left whole by its decomposition (``prims/decompositions/shape.py``: an
    input sliced in both dims, where the decomposition's flattening reshape would copy and
    lose an in-place write). Values only here: a view reading ``x`` at [..., i, i + offset]."""
    size = list(x.get_size())
    nd = len(size)
    d1, d2 = int(dim1) % nd, int(dim2) % nd
    off = int(offset)
    n1, n2 = size[d1], size[d2]
    n = sympy.Max(0, sympy.Min(n1, n2 - off)) if off >= 0 else sympy.Max(0, sympy.Min(n1 + off, n2))
    keep = [i for i in range(nd) if i not in (d1, d2)]

    def reindex(idx):
        full = [None] * nd
        for j, d in enumerate(keep):
            full[d] = idx[j]
        k = idx[-1]
        full[d1] = k + max(0, -off)
        full[d2] = k + max(0, off)
        return full

    return _view(x, [size[i] for i in keep] + [n], reindex)


@register("unfold")
def _unfold(x, dimension, size, step):
    """``unfold`` recorded whole (``prims/decompositions/shape.py``): every window of ``size``
    elements along ``dimension``, ``step`` apart, as a new last dim -- by value, a view
    reading ``x`` at [..., i * step + j, ...]."""
    in_size = list(x.get_size())
    nd = len(in_size)
    size, step = int(size), int(step)
    if nd == 0:
        return _view(x, [sympy.Integer(size)], lambda idx: [])
    d = int(dimension) % nd
    out = list(in_size)
    out[d] = FloorDiv(in_size[d] - size, step) + 1
    out.append(sympy.Integer(size))

    def reindex(idx):
        full = list(idx[:nd])
        full[d] = idx[d] * step + idx[nd]
        return full

    return _view(x, out, reindex)


@register("flip")
def _flip(x, dims):
    dims = set(int(d) for d in dims)
    size = x.get_size()

    def reindex(idx):
        return [size[d] - 1 - i if d in dims else i for d, i in enumerate(idx)]

    return _view(x, size, reindex)


@register("clone")
def _clone(x):
    ld = x.make_loader()
    return Pointwise(x.get_size(), x.get_dtype(), ld)


@register("reshape")
def _reshape(x, shape):
    old = x.get_size()
    new = [sympify(s) for s in shape]
    V.graph.sizevars.guard_equals(product(old), product(new))
    new_strides = contiguous_strides(new)
    old_strides = contiguous_strides(old)
    sv = V.graph.sizevars

    def reindex(idx):
        ranges = {i: n for i, n in zip(idx, new) if isinstance(i, sympy.Symbol)}
        flat = sum((i * s for i, s, n in zip(idx, new_strides, new) if n != 1), sympy.Integer(0))
        out = []
        for s, n in zip(old_strides, old):
            if n == 1:
                out.append(sympy.Integer(0))
            else:
                out.append(sv.simplify_with_ranges(ModularIndexing(flat, s, n), ranges))
        return out

    def strides_of(strides):
        # a reshape of memory laid out contiguously is contiguous; of anything else, unknown
        dense = all(n == 1 or sympy.expand(a - b) == 0 for a, b, n in zip(strides, old_strides, old))
        return new_strides if dense else None

    return _view(x, new, reindex, strides_of)


@register("as_strided")
def _as_strided(x, size, stride, storage_offset=0):
    """A view of ``x``'s memory: possible when ``x`` is (a linear view of) a buffer
    whose layout is the one eager ``x`` has (checked against the FX node's strides)."""
    # a view of a buffer only through views: as_strided of a copy (clone) views the copy
    view = ir.as_strided_view(x) if not isinstance(x, Pointwise) or (x.is_view and x.view_of is None) else None
    if view is None and isinstance(x, ir.Loops):
        # a computed value (functionalization regenerates a view of a mutated tensor from
        # its new value): written out, then viewed -- the layout check below still applies
        view = ir.as_strided_view(V.graph.realize(x))
    if view is None:
        raise NotImplementedError("as_strided of a computed (non-view) value")
    name, vsize, vstride, voffset = view
    meta = V.graph.current_arg_meta(0)
    if meta is None or meta.stride is None:
        raise NotImplementedError("as_strided: the input's eager strides are unknown")
    empty = any(sympify(n) == 0 for n in vsize)   # (no element: any strides describe it)
    for n, a, b in zip(vsize, vstride, meta.stride):
        # (b: an int, or a SymInt of the caller's ShapeEnv under dynamic shapes)
        if n != 1 and not empty and sympy.expand(sympify(a) - sympify(b)) != 0:
            from .graph import LayoutError
            raise LayoutError("as_strided: the input's layout differs from its eager layout")
    buf = V.graph.buffers_by_name[name]
    size = [sympify(s) for s in size]
    stride = [sympify(s) for s in stride]
    off = voffset + sympify(storage_offset)
    dtype = x.get_dtype()

    def inner_fn(idx):
        return ops.load(buf.name, off + sum((i * s for i, s in zip(idx, stride)), sympy.Integer(0)))

    return Pointwise(size, dtype, inner_fn, is_view=True)


def _clamp(e, lo, hi):
    # unevaluated: sympy's Max/Min constructor searches for redundant arguments with
    # factor_terms on every call -- half of an LSTM training graph's cold compile (1152 calls,
    # 7 s). simplify_index removes the clamps the loop ranges decide.
    return sympy.Max(lo, sympy.Min(e, hi, evaluate=False), evaluate=False)


@register("cat")
def _cat(tensors, dim):
    dim = int(dim)
    tensors = list(tensors)
    size = list(tensors[0].get_size())
    offsets = []
    total = sympy.Integer(0)
    for t in tensors:
        offsets.append(total)
        total = total + t.get_size()[dim]
    size[dim] = total
    dtype = tensors[0].get_dtype()
    parts = [(t.make_loader(), o, t.get_size()[dim]) for t, o in zip(tensors, offsets)]
    parts = [p for p in parts if p[2] != 0]
    if len(parts) > config.cat_extern_min_inputs:
        # many pieces (the per-step operands of batched matmuls): one copy per piece into
        # the output, not a select chain per element as deep as the piece count
        return _cat_extern([t for t in tensors if t.get_size()[dim] != 0], dim, size, dtype)

    def inner_fn(idx):
        i = idx[dim]
        result = None
        for ld, o, n in reversed(parts):
            j = list(idx)
            j[dim] = _clamp(i - o, 0, n - 1)
            val = ld(j)
            if result is None:
                result = val
            else:
                result = ops.where(ops.index_expr(sympy.Lt(i, o + n), _t.bool_), val, result)
        # (every piece empty along ``dim``: so is the result, whose loop never runs)
        return ops.constant(0, dtype) if result is None else result

    return Pointwise(size, dtype, inner_fn)


def _cat_extern(tensors, dim, size, dtype):
    """``cat`` as numpy's ``concatenate`` into the preallocated output (strided views pass
    through uncopied)."""
    from .runtime import concat_into
    concat = concat_into(dim)

    def concat_on_device(xp, *arrays):
        xp.concatenate(arrays[:-1], axis=dim, out=arrays[-1])
        return arrays[-1]
    out = V.graph.make_extern("cat", concat, tensors, [ExternArg(i) for i in range(len(tensors))], {},
                              [ir.Layout(size, dtype=dtype)], out_arg=True)
    out.kernel.xp_fn = concat_on_device
    out.kernel.cat_dim = dim      # (the CPU wrapper may have the pieces written in place: WrapperGen)
    return out


@register("pad")
def _pad(x, padding_value, padding_config):
    cfg = [tuple(sympify(v) for v in c) for c in padding_config]
    in_size = x.get_size()
    dtype = x.get_dtype()
    size = []
    for n, (lo, hi, it) in zip(in_size, cfg):
        core = n + (n - 1) * it if n != 0 else sympy.Integer(0)
        size.append(sympy.Max(lo + hi + core, 0) if not (lo + hi + core).is_number else lo + hi + core)
    ld = x.make_loader()
    pad_val = scalar_value(padding_value, dtype)

    def inner_fn(idx):
        conds = []
        j = []
        for i, n, (lo, hi, it) in zip(idx, in_size, cfg):
            if lo == 0 and hi == 0 and it == 0:
                j.append(i)
                continue
            k = i - lo
            if it == 0:
                conds.append(sympy.And(sympy.Ge(k, 0), sympy.Lt(k, n)))
                j.append(_clamp(k, 0, n - 1))
            else:
                kk = _clamp(k, 0, (n - 1) * (it + 1))
                conds.append(sympy.And(sympy.Ge(k, 0), sympy.Le(k, (n - 1) * (it + 1)),
                                       sympy.Eq(ModularIndexing(kk, 1, it + 1), 0)))
                j.append(FloorDiv(kk, it + 1))
        val = ld(j)
        if not conds:
            return val
        cond = ops.index_expr(sympy.And(*conds), _t.bool_)
        return ops.where(cond, val, ops.constant(pad_val, dtype))

    return Pointwise(size, dtype, inner_fn)


# ---------------------------------------------------------------------- creation
@register("iota")
def _iota(length, start, step, dtype, device=None):
    dtype = _t.as_dtype(dtype)
    if dtype.category == 1:
        s0, st = int(start), int(step)
        return Pointwise([length], dtype, lambda idx: ops.to_dtype(
            ops.index_expr(s0 + idx[0] * st, _t.int64), dtype))
    s0, st = float(start), float(step)
    return Pointwise([length], dtype, lambda idx: ops.to_dtype(ops.add(
        ops.constant(s0, _t.float64), ops.mul(ops.index_expr(idx[0], _t.float64), ops.constant(st, _t.float64))),
        dtype))


@register("full")
def _full(shape, fill_value, dtype, device=None):
    dtype = _t.as_dtype(dtype)
    with np.errstate(all="ignore"):   # the conversion is the point (as in the reference)
        if dtype is _t.bool_:
            v = bool(fill_value != 0)
        elif dtype.category == 1:
            v = int(np.asarray(fill_value).astype(np.float64 if isinstance(fill_value, float) else np.int64)
                    .astype(dtype.np))
        else:
            v = float(np.asarray(fill_value, dtype=np.float64).astype(dtype.np))
    return Pointwise(list(shape), dtype, lambda idx: ops.constant(v, dtype))


# ---------------------------------------------------------------------- indexing
@register("gather")
def _gather(x, dim, index):
    dim = int(dim)
    lx, li = x.make_loader(), index.make_loader()
    n = x.get_size()[dim]

    def inner_fn(idx):
        j = list(idx)
        j[dim] = ops.indirect_indexing(li(idx), n)
        return lx(j)

    return Pointwise(index.get_size(), x.get_dtype(), inner_fn)


@register("index_select")
def _index_select(x, dim, index):
    dim = int(dim)
    size = list(x.get_size())
    if not size:
        raise NotImplementedError("index_select of a 0-d tensor")
    lx, li = x.make_loader(), index.make_loader()
    n = size[dim]
    one_d = len(index.get_size()) == 1
    size[dim] = index.get_size()[0] if one_d else sympy.Integer(1)

    def inner_fn(idx):
        j = list(idx)
        j[dim] = ops.indirect_indexing(li([idx[dim]] if one_d else []), n)
        return lx(j)

    if any(_may_be_zero(d) for i, d in enumerate(size) if i != dim) and \
            not any(d == 0 for d in index.get_size()):
        _check_indices(li, index.get_size(), n)
    return Pointwise(size, x.get_dtype(), inner_fn)


def _may_be_zero(d) -> bool:
    """0, or a symbolic size not known to be positive (``s1 - 2``; a size symbol itself is
    positive: dynamo guards it >= 2)."""
    d = sympify(d)
    return d == 0 or (not d.is_number and d.is_positive is not True)


def _check_indices(load_index, index_size, n):
    """A kernel that only checks ``index`` against ``n`` (its error flag raises as eager does):
    for a selection with no elements -- ``embedding`` of a zero-width table -- whose own loop
    never runs, so never reads an index. Eager raises on an out-of-range index there too. A
    width that may be zero at run time (symbolic: ``t[:, 2:]`` of a dynamic ``t``) gets the kernel
    too: the selection's own check runs only where its inner loop does."""
    def inner_fn(idx):
        ops.indirect_indexing(load_index(list(idx)), n)
        return ops.constant(0, _t.bool_)
    V.graph.realize(Pointwise(list(index_size), _t.bool_, inner_fn))


def _scatter_common(a, dim, index, src, mode):
    dim = int(dim)
    dtype = a.get_dtype()
    li = index.make_loader()
    n = a.get_size()[dim]
    lv = _loader_or_const(src, dtype)

    def target_fn(idx):
        j = list(idx)
        j[dim] = ops.indirect_indexing(li(idx), n)
        return j

    return ir.Scatter(a.get_size(), dtype, a.make_loader(), index.get_size(), target_fn, lv, mode)


@register("scatter")
def _scatter(a, dim, index, src):
    return _scatter_common(a, dim, index, src, None)


@register("scatter_add")
def _scatter_add(a, dim, index, src):
    return _scatter_common(a, dim, index, src, "add")


@register("scatter_amax")
def _scatter_amax(a, dim, index, src):
    return _scatter_common(a, dim, index, src, "amax")


@register("scatter_amin")
def _scatter_amin(a, dim, index, src):
    return _scatter_common(a, dim, index, src, "amin")


@register("index_put")
def _index_put(a, indices, values, accumulate=False):
    indices = list(indices)
    k = len(indices)
    size = a.get_size()
    ishapes = [i.get_size() for i in indices]
    nb = max((len(s) for s in ishapes), default=0)
    bshape = []
    for d in range(nb):
        dim_sizes = [s[len(s) - nb + d] for s in ishapes if len(s) - nb + d >= 0]
        non1 = [x for x in dim_sizes if x != 1]
        bshape.append(non1[0] if non1 else sympy.Integer(1))
    iter_size = bshape + list(size[k:])
    loaders = [i.make_loader() for i in indices]
    vsize = values.get_size()
    lv = values.make_loader()
    nt = len(iter_size)

    def target_fn(idx):
        bidx = idx[:nb]
        out = []
        for d, (ld, s) in enumerate(zip(loaders, ishapes)):
            sub = [sympy.Integer(0) if n == 1 else bidx[nb - len(s) + j] for j, n in enumerate(s)]
            out.append(ops.indirect_indexing(ld(sub), size[d], wrap_negative=True))
        return out + list(idx[nb:])

    def value_fn(idx):
        vs = list(vsize)
        lead = len(vs) - nt
        sub = []
        for j, n in enumerate(vs):
            if j < lead:
                sub.append(sympy.Integer(0))
            else:
                sub.append(sympy.Integer(0) if n == 1 else idx[j - lead])
        return lv(sub)

    return ir.Scatter(size, a.get_dtype(), a.make_loader(), iter_size, target_fn, value_fn,
                      "add" if accumulate else None)


def _scan(op):
    def lower(x, dim):
        if not x.get_size():
            return _clone(x)
        return ir.Scan(x.get_size(), x.get_dtype(), x.make_loader(), int(dim), op)
    return lower


LOWERINGS["cumsum"] = _scan("sum")
LOWERINGS["cumprod"] = _scan("prod")


# ---------------------------------------------------------------------- random
def _make_philox(normal):
    def lower(shape, seed, offset, dtype, device=None):
        dtype = _t.as_dtype(dtype)
        size = [sympify(s) for s in shape]
        strides = contiguous_strides(size)
        ls, lo = seed.make_loader(), offset.make_loader()

        def inner_fn(idx):
            flat = sum((i * s for i, s, n in zip(idx, strides, size) if n != 1), sympy.Integer(0))
            return ops.philox(ls([]), lo([]), ops.index_expr(flat, _t.int64), dtype, normal)

        return Pointwise(size, dtype, inner_fn)
    return lower


LOWERINGS["philox_rand"] = _make_philox(False)
LOWERINGS["philox_randn"] = _make_philox(True)


# ---------------------------------------------------------------------- reductions
def _make_reduction(x, dims, rtype, dtype=None, correction=0, bool_input=False):
    size = x.get_size()
    dims = sorted(set(int(d) for d in dims))
    out_size = [s for i, s in enumerate(size) if i not in dims]
    rranges = [size[d] for d in dims]
    ld = x.make_loader()
    src_dtype = x.get_dtype()

    def inner_fn(idx, ridx):
        full, it, rit = [], iter(idx), iter(ridx)
        for i in range(len(size)):
            full.append(next(rit) if i in dims else next(it))
        v = ld(full)
        if bool_input and src_dtype is not _t.bool_:
            v = ops.ne(v, ops.constant(scalar_value(0, src_dtype), src_dtype))
        return v

    return Reduction(out_size, rranges, rtype, _t.bool_ if bool_input else src_dtype, inner_fn,
                     dtype=dtype, correction=correction)


def _reduction(rtype, bool_out=False):
    def lower(x, dims):
        if not list(dims):
            if bool_out:
                return LOWERINGS["ne"](x, scalar_value(0, x.get_dtype()))
            dt = x.get_dtype()
            if rtype == "sum" and dt.is_floating_point:
                # 0 + x, as the reference (and PyTorch's accumulator): -0.0 sums to +0.0
                ld = x.make_loader()
                return Pointwise(x.get_size(), dt, lambda idx: ops.add(ld(idx), ops.constant(0.0, dt)))
            return _clone(x)
        if x.get_dtype() is _t.bool_ and rtype in ("amax", "amin"):
            return _make_reduction(x, dims, "any" if rtype == "amax" else "all")
        return _make_reduction(x, dims, rtype, bool_input=bool_out)
    return lower


for _n in ("sum", "prod", "amax", "amin"):
    LOWERINGS[_n] = _reduction(_n)
LOWERINGS["any"] = _reduction("any", bool_out=True)
LOWERINGS["all"] = _reduction("all", bool_out=True)


def _argreduce(rtype):
    def lower(x, dim):
        if not x.get_size():
            return Pointwise([], _t.int64, lambda idx: ops.constant(0, _t.int64))
        return _make_reduction(x, [dim], rtype)
    return lower


LOWERINGS["argmax"] = _argreduce("argmax")
LOWERINGS["argmin"] = _argreduce("argmin")


@register("var")
def _var(x, dims, correction):
    if not list(dims):
        raise NotImplementedError("var over no dims")
    return _make_reduction(x, dims, "var", correction=float(correction))


# ---------------------------------------------------------------------- externs
# the extern is ``gemm.matmul(a, b, out)``: ember's AVX-512 GEMM for float32 where it builds,
# numpy's matmul otherwise, written into the wrapper's preallocated output. Transposed operands
# arrive as views (``w.T``) and both take them as strides -- no copy.
_matmul = gemm.matmul


_NUMPY_SORT = "no C++ lowering (numpy's sort runs as an extern call)"


@register("sort")
def _sort(a, dim, descending=False, stable=False):
    """The numpy reference as an extern call (as any prim without a lowering), with its output
    layouts from ``a``'s sizes, so that it also compiles with symbolic sizes (``dynamic=True``:
    median, kthvalue, mode and argsort are built on it)."""
    size = a.get_size()
    return V.graph.fallback(V.graph._current_node, [a, dim, descending, stable], {}, _NUMPY_SORT,
                            layouts=[ir.Layout(size, dtype=a.get_dtype()), ir.Layout(size, dtype=_t.int64)])


@register("topk")
def _topk(a, k, dim, largest=True, sorted=True):
    size = list(a.get_size())
    if size:
        size[int(dim) % len(size)] = sympify(k)
    return V.graph.fallback(V.graph._current_node, [a, k, dim, largest, sorted], {}, _NUMPY_SORT,
                            layouts=[ir.Layout(size, dtype=a.get_dtype()), ir.Layout(size, dtype=_t.int64)])


@register("mm", "bmm")
def _mm(a, b):
    """A matrix product extern (``gemm.py`` says which GEMM runs and why: ember's own on an
    AVX-512 CPU, numpy's OpenBLAS otherwise)."""
    sa, sb = a.get_size(), b.get_size()
    out = list(sa[:-1]) + [sb[-1]]
    dtype = a.get_dtype()
    if dtype in (_t.float16, _t.bfloat16):
        raise NotImplementedError("half-precision matmul (numpy has no half BLAS)")
    if dtype == _t.float32:
        gemm.build_in_background()          # a fresh cache: g++ overlaps the rest of the compile
    swap = _transposed_use(getattr(V.graph, "_current_node", None), len(out))
    if swap is not None:
        # The product's only use transposes it (a weight gradient: ``(x.T @ g).T``). Compute
        # ``b.T @ a.T`` instead, into memory laid out as the transposed result: the user's
        # permute then reads it contiguously, and a graph output is C-ordered like eager's
        # (a transposed output costs a strided copy when the autograd engine adopts it).
        res = V.graph.make_extern("mm", _matmul, [_permute(b, swap), _permute(a, swap)],
                                  [ExternArg(0), ExternArg(1)], {},
                                  [ir.Layout([out[i] for i in swap], dtype=dtype)], out_arg=True)
        return _permute(res, swap)
    return V.graph.make_extern("mm", _matmul, [a, b], [ExternArg(0), ExternArg(1)], {},
                               [ir.Layout(out, dtype=dtype)], out_arg=True)


def _transposed_use(node, ndim):
    """The swap-last-two-dims permutation when the FX node's value is used only through a
    chain of such permutes of odd length (an even one, ``(g.T @ a).T.T``, reads it as is) --
    unless the chain's end is an output the caller sees (a forward or inference graph's: the
    aot runtime marks a backward graph's output node ``gradients``), which keeps eager's strides."""
    if node is None or not config.transposed_products:
        return None
    swap = list(range(ndim - 2)) + [ndim - 1, ndim - 2]
    n_swaps = 0
    while len(node.users) == 1:
        user = next(iter(node.users))
        op = getattr(user.target, "_ember_op", None)
        if user.op != "call_function" or op is None or op.name != "prims.permute" or len(user.args) < 2 \
                or [int(d) for d in user.args[1]] != swap:
            break
        n_swaps += 1
        node = user
    if any(u.op == "output" and not u.meta.get("gradients") for u in node.users):
        return None         # a value the caller sees: eager's layout (a transposed view of the product)
    return swap if n_swaps % 2 else None


@register("convolution")
def _convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution kernels eager ember runs (``nn_ops`` -> ``ops/_conv_native.py``: per image
    a C++ im2col and a matrix product, images spread over OpenMP threads), called on the
    wrapper's arrays -- strided views pass through uncopied -- writing straight into the
    preallocated output (the fallback would add a dtype cast, a contiguity copy and an aliasing
    check per call). The prims decomposition of the
    weight gradient arrives here as a forward convolution with the output gradient as kernel;
    the kernel recognises that shape (fewer output positions than kernel taps) and computes it
    as a weight gradient. Sizes may be symbolic: the extern reads the actual ones from its
    arrays. float16/bfloat16 fall back to the prim's reference (computed in float32).
    ``config.conv_winograd``: 3x3 stride-1 float32 forwards, input gradients and weight gradients
    run Winograd F(2x2, 3x3) where it applies (``ops/_conv_winograd.py``)."""
    from ..ops import nn_ops
    dtype = x.get_dtype()
    if dtype not in (_t.float32, _t.float64):
        raise NotImplementedError(f"convolution in {dtype.name} (the native path is float32/float64)")
    xs, ws = x.get_size(), weight.get_size()
    nd = len(ws) - 2
    stride, padding, dilation = [int(v) for v in stride], [int(v) for v in padding], [int(v) for v in dilation]
    output_padding, groups, transposed = [int(v) for v in output_padding], int(groups), bool(transposed)

    def div(a, s):
        return a if s == 1 else FloorDiv(a, s)
    if not transposed:
        sp = [div(xs[2 + i] + 2 * padding[i] - dilation[i] * (ws[2 + i] - 1) - 1, stride[i]) + 1 for i in range(nd)]
        out = [xs[0], ws[0]] + sp
    else:
        sp = [(xs[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1) + output_padding[i] + 1
              for i in range(nd)]
        out = [xs[0], ws[1] * groups] + sp

    winograd = bool(config.conv_winograd)

    def conv(xa, wa, *rest):
        ba, res = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        if transposed:
            nn_ops._conv_input_grad_native(xa, wa, stride, padding, dilation, groups, res.shape, out=res,
                                           winograd=winograd)
        else:
            nn_ops._conv_forward_native(xa, wa, stride, padding, dilation, groups, out=res, winograd=winograd)
        if ba is not None:
            res += ba.reshape((1, -1) + (1,) * nd)
        return res

    if nn_ops._native.lib() is None:
        raise NotImplementedError("the native convolution helpers could not be built")
    def conv_on_device(xp, xa, wa, *rest):
        """The device path (Triton wrapper, ``xp`` = cupy): the prim's own kernel, written
        against the array module, copied into the preallocated output."""
        from .. import prims
        ba, res = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        r = prims.convolution._ember_op.kernel(xp, xa, wa, ba, stride, padding, dilation, transposed, output_padding, groups)
        res[...] = r
        return res

    ins = [x, weight] + ([bias] if bias is not None else [])
    k_out = V.graph.make_extern("convolution", conv, ins, [ExternArg(i) for i in range(len(ins))], {},
                                [ir.Layout(out, dtype=dtype)], out_arg=True)
    k_out.kernel.xp_fn = conv_on_device
    return k_out


# ---------------------------------------------------------------------- ops kept whole
# Ops with no decomposition by design (``ember.prims.coverage.EXTERN``) run their eager kernel
# as an extern call. Its output layout comes from the node's recorded metadata, which holds
# concrete sizes only, so under dynamic shapes such a call needs its layout from the inputs'
# (symbolic) sizes: these functions give it, ``graph.py`` passes it to ``fallback``.
def _broadcast_sizes(sizes):
    """The numpy-style broadcast of several (symbolic) sizes: a size of 1 stretches (a symbolic
    size is never 1: dynamo specialises sizes 0 and 1), other pairs must be equal (a guard)."""
    n = max((len(s) for s in sizes), default=0)
    out = [sympy.Integer(1)] * n
    for s in sizes:
        for i, d in enumerate(s, start=n - len(s)):
            d = sympify(d)
            if d == 1:
                continue
            out[i] = d if out[i] == 1 else V.graph.sizevars.guard_equals(out[i], d)
    return out


def _pointwise_whole_layouts(args, kwargs, dtype):
    """One output of the broadcast shape of the tensor arguments (a number is 0-d), ``dtype``
    (the node's, from its promotion)."""
    sizes = [a.get_size() for a in list(args) + list(kwargs.values()) if _is_ir(a)]
    return [ir.Layout(_broadcast_sizes(sizes), dtype=dtype)]


# the pointwise ops kept whole (``prims.coverage.EXTERN``): numpy's nextafter / gcd / lcm, the
# special functions' kernels (``ops/special_extra.py``; i0 with its derivative rule since session 47)
_POINTWISE_WHOLE = (
    "nextafter", "gcd", "lcm", "i0", "igamma", "igammac", "polygamma", "special_airy_ai",
    "special_bessel_j0", "special_bessel_j1", "special_bessel_y0", "special_bessel_y1",
    "special_chebyshev_polynomial_t", "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_v",
    "special_chebyshev_polynomial_w", "special_erfcx", "special_hermite_polynomial_h",
    "special_hermite_polynomial_he", "special_i0e", "special_i1", "special_i1e",
    "special_laguerre_polynomial_l", "special_legendre_polynomial_p", "special_log_ndtr",
    "special_modified_bessel_i0", "special_modified_bessel_i1", "special_modified_bessel_k0",
    "special_modified_bessel_k1", "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1",
    "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_u",
    "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_w",
    "special_spherical_bessel_j0", "special_zeta")
WHOLE_OP_LAYOUTS: Dict[str, Callable] = {name: _pointwise_whole_layouts for name in _POINTWISE_WHOLE}


def whole_op_layouts(name, args, kwargs, dtype):
    """The output layouts of the extern call of op ``name`` (kept whole) from its arguments'
    sizes, or None when none is known (the fallback then reads the node's concrete metadata)."""
    fn = WHOLE_OP_LAYOUTS.get(name)
    return None if fn is None or dtype is None else fn(args, kwargs, dtype)
