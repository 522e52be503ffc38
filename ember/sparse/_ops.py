"""The operations on sparse tensors.

Each one finds positions with numpy on the index arrays (sorting linearised
indices, ``np.unique``, ``searchsorted``, ``intersect1d``) and computes the
values with dense ember ops (``segment_sum`` for sums by index, ``index_select``
for gathers), so that autograd follows through the values (see _tensor.py).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import types as _t
from .._state import STATE
from ..autograd.function import Function
from ..tensor import Tensor, _make
from ._tensor import (COMPRESSED, COO, CSC, CSR, SparseTensor, Structure, _api, _itensor, _layout_word, _named,
                      from_values, gather_values, values_of)
from ._convert import dense_to_coo, to_coo, to_csc, to_csr


def _is_sparse(x):
    return isinstance(x, SparseTensor)


def _wrapdim(d, n):
    if not -max(n, 1) <= d < max(n, 1):
        lo, hi = -max(n, 1), max(n, 1) - 1
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d % max(n, 1)


def _unravel(lin, sparse_shape):
    if not sparse_shape:
        return np.zeros((0, lin.shape[0]), dtype=np.int64)
    return np.stack([np.asarray(a, dtype=np.int64) for a in np.unravel_index(lin, sparse_shape)])


def _relayout(s, layout, like=None):
    """``s`` (COO) in ``layout`` (batch dims and blocksize as ``like``'s, a tensor of ``layout``)."""
    if layout in COMPRESSED and like is not None and not like._st.is_plain_2d:
        from ._compressed import from_coo
        return from_coo(s, layout, like._st.blocksize, like._st.nbatch)
    if layout is CSR:
        return to_csr(s)
    if layout is CSC:
        return to_csc(s)
    return s


class _SegmentSum(Function):
    """out[r] = sum of src[k] over k with index[k] == r (``zeros(n).index_add(0, index, src)``):
    a sort (skipped when ``index`` is already sorted, as a coalesced tensor's rows are) and
    ``np.add.reduceat`` -- numpy's ``add.at`` behind ``index_add`` is several times slower. The
    gradient is ``g[index]``, an ember op, so double backward works."""

    @staticmethod
    def forward(ctx, src, index, n):
        ctx.set_materialize_grads(False)
        ctx.index = index
        x = np.asarray(src._data)
        out = np.zeros((n,) + x.shape[1:], dtype=x.dtype)
        if index.shape[0]:
            if np.all(index[1:] >= index[:-1]):
                idx, xs = index, x
            else:
                order = np.argsort(index, kind="stable")
                idx, xs = index[order], x[order]
            starts = np.flatnonzero(np.concatenate([[True], idx[1:] != idx[:-1]]))
            out[idx[starts]] = np.add.reduceat(xs, starts, axis=0)
        return _make(out, src.device, src.dtype)

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None, None, None
        return g.index_select(0, _itensor(ctx.index, g.device)), None, None


_named(_SegmentSum, "IndexAddBackward0")


def segment_sum(src, index, n):
    """Rows of ``src`` added up by ``index`` (int64 numpy) into ``n`` rows; differentiable in ``src``."""
    return _SegmentSum.apply(src, np.ascontiguousarray(index, dtype=np.int64), int(n))


# ---------------------------------------------------------------------- structure ops
def coalesce(s):
    """Sorted, duplicate-free indices; duplicates' values summed (``Tensor.coalesce``)."""
    st = s._st
    if st.layout is not COO:
        raise RuntimeError(f"coalesce expected sparse coordinate tensor layout but got {_layout_word(st.layout)}")
    if st.coalesced:
        return s
    lin = st.lin()
    uniq, inv = np.unique(lin, return_inverse=True)
    idx = _unravel(uniq, st.sparse_shape)
    vals = values_of(s)
    newv = segment_sum(vals, inv.reshape(-1), uniq.shape[0])
    return from_values(Structure(COO, st.shape, st.sdim, indices=idx, coalesced=True), newv)


def to_dense(s, dtype=None, *, masked_grad=None):
    """The dense tensor (duplicates add up); its gradient is sparse, with ``s``'s pattern."""
    if not _is_sparse(s):
        return s if dtype is None else s.to(dtype)
    if s._st.layout in COMPRESSED:
        s = to_coo(s)
    st = s._st
    P = int(math.prod(st.sparse_shape))
    out = segment_sum(values_of(s), st.lin(), P).reshape(st.shape)
    return out if dtype is None else out.to(dtype)


def transpose(s, dim0, dim1):
    st = s._st
    n = len(st.shape)
    d0, d1 = _wrapdim(dim0, n), _wrapdim(dim1, n)
    if d0 == d1:
        return from_values(st, values_of(s))
    shape = list(st.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    if st.layout in COMPRESSED and not st.is_plain_2d:
        from ._compressed import transpose_last
        nb = st.nbatch
        if {d0, d1} != {nb, nb + 1}:
            raise NotImplementedError(f"ember.sparse: transpose of a {st.layout} tensor supports its two "
                                      f"compressed dims ({nb}, {nb + 1}) only, got ({d0}, {d1})")
        return transpose_last(s)
    if st.layout in COMPRESSED:
        # the transpose of a CSR matrix is the CSC matrix of the same arrays (and back)
        new = Structure(CSC if st.layout is CSR else CSR, shape, 2, compressed=st.compressed, plain=st.plain,
                        idx32=st.idx32)
        return from_values(new, values_of(s))
    sd = st.sdim
    if d0 < sd and d1 < sd:
        idx = st.indices.copy()
        idx[[d0, d1]] = idx[[d1, d0]]
        return from_values(Structure(COO, shape, sd, indices=idx, coalesced=False), values_of(s))
    raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got sparse_dim: {sd}, "
                       f"d0: {d0}, d1: {d1}")


def t(s):
    if s._st.layout in COMPRESSED and not s._st.is_plain_2d:
        if len(s._st.shape) > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {len(s._st.shape)}D")
        return transpose(s, 0, 1)
    n, sd = len(s._st.shape), s._st.sdim
    if sd > 2 or n > sd:
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got {sd} sparse "
                           f"and {n - sd} dense dimensions")
    if n < 2:
        return from_values(s._st, values_of(s))
    return transpose(s, 0, 1)


def map_values(s, fn):
    """``fn`` applied to the values (an op that keeps zero at zero), same structure."""
    return from_values(s._st, fn(values_of(s)))


def sparse_mask(x, mask):
    """``x`` read at the positions of ``mask``'s values, as a tensor of ``mask``'s structure."""
    if not _is_sparse(mask):
        raise RuntimeError(f"sparse_mask expects mask to be sparse, got layout {mask.layout}")
    if tuple(x.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(x.shape)} "
                           f"but mask has size {list(mask.shape)}")
    return from_values(mask._st, gather_values(x, mask._st))


# ---------------------------------------------------------------------- arithmetic
def _size_match(a, b, op):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"{op}: expected sizes of 'self' and 'other' to match, but {list(a.shape)} != "
                           f"{list(b.shape)}")


def _scaled(v, alpha):
    return v if alpha is None or (isinstance(alpha, numbers.Number) and alpha == 1) else v * alpha


class _Add(Function):
    """PyTorch's AddBackward0 for sparse operands: the output's gradient passes to both inputs
    unchanged (``alpha`` times for ``other``) -- not masked to an input's pattern, so an input
    of ``s1 + s2`` receives gradient at the union of the patterns, and a sparse input of
    ``dense + sparse`` a dense gradient, as in PyTorch."""

    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.set_materialize_grads(False)
        ctx.alpha = alpha
        return _add(a, b, alpha)

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None, None, None
        ga = g if ctx.needs_input_grad[0] else None
        gb = _scaled(g, ctx.alpha) if ctx.needs_input_grad[1] else None
        return ga, gb, None


def add(a, b, *, alpha=1):
    """sparse + sparse (sparse), dense + sparse (dense); sparse + dense raises, as in PyTorch."""
    if STATE.grad_enabled and any(isinstance(x, Tensor) and x._requires_grad for x in (a, b)):
        if _is_sparse(a) and not _is_sparse(b):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        return _Add.apply(a, b, alpha)
    return _add(a, b, alpha)


def _add(a, b, alpha):
    api = _api()
    if _is_sparse(a) and _is_sparse(b):
        _size_match(a, b, "add")
        layout = a._st.layout if a._st.layout is b._st.layout else COO
        if a is b and alpha == 1:
            return map_values(a, lambda v: v * 2)
        ca, cb = to_coo(a), to_coo(b)
        if ca._st.sdim != cb._st.sdim:
            raise RuntimeError(f"add: expected 'self' and 'other' to have same sparse_dim, but got "
                               f"{ca._st.sdim} and {cb._st.sdim}")
        va, vb = values_of(ca), _scaled(values_of(cb), alpha)
        rt = _t.promote_types(va.dtype, vb.dtype)
        vals = api.cat([va.to(rt), vb.to(rt)])
        idx = np.concatenate([ca._st.indices, cb._st.indices], axis=1)
        both = ca._st.coalesced and cb._st.coalesced
        out = from_values(Structure(COO, a.shape, ca._st.sdim, indices=idx), vals)
        if both:
            out = coalesce(out)
        return _relayout(out, layout, a)
    if _is_sparse(a):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if not isinstance(a, Tensor):
        a = api.tensor(a, dtype=b.dtype)
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has size "
                           f"{list(a.shape)} while other has size {list(b.shape)} (FYI: dense-sparse addition "
                           f"does not currently support broadcasting)")
    c = to_coo(b)
    st = c._st
    rt = _t.promote_types(a.dtype, b.dtype)
    P = int(math.prod(st.sparse_shape))
    v = _scaled(values_of(c), alpha).to(rt)
    return a.to(rt) + segment_sum(v, st.lin(), P).reshape(st.shape)


def add_any(a, b):
    """a + b for the autograd engine's gradient sums (either side, or neither, may be sparse)."""
    if not _is_sparse(a) and not _is_sparse(b):
        return a + b
    if _is_sparse(a) and not _is_sparse(b):
        a, b = b, a
    return add(a, b)


def accumulated(old, g, create_graph):
    """The new ``.grad`` when a sparse gradient meets ``old`` (PyTorch's AccumulateGrad: a first
    sparse gradient is kept as is; sparse + sparse concatenates; with a dense one the sum is dense)."""
    if old is None:
        return g if create_graph and g._requires_grad else g.detach()
    prev = STATE.grad_enabled
    STATE.grad_enabled = bool(create_graph)
    try:
        return add_any(old, g)
    finally:
        STATE.grad_enabled = prev


def sub(a, b, *, alpha=1):
    return add(a, b, alpha=-alpha)


def _is_scalar(x):
    return isinstance(x, numbers.Number) or (isinstance(x, Tensor) and not _is_sparse(x) and x.ndim == 0)


def mul(a, b):
    """sparse * scalar, sparse * dense (same shape), sparse * sparse (the common positions)."""
    if not _is_sparse(a):
        a, b = b, a
    if _is_scalar(b):
        return map_values(a, lambda v: v * b)
    if not isinstance(b, Tensor):
        b = _api().tensor(b)
    _size_match(a, b, "mul")
    if not _is_sparse(b):
        return map_values(a, lambda v: v * gather_values(b, a._st))
    layout = a._st.layout if a._st.layout is b._st.layout else COO
    ca, cb = coalesce(to_coo(a)), coalesce(to_coo(b))
    if ca._st.sdim != cb._st.sdim:
        raise RuntimeError("mul: sparse tensors with different sparse_dim are not supported")
    common, ia, ib = np.intersect1d(ca._st.lin(), cb._st.lin(), assume_unique=True, return_indices=True)
    va = values_of(ca).index_select(0, _itensor(ia, a.device))
    vb = values_of(cb).index_select(0, _itensor(ib, a.device))
    st = Structure(COO, a.shape, ca._st.sdim, indices=ca._st.indices[:, ia], coalesced=True)
    return _relayout(from_values(st, va * vb), layout, a)


def div(a, b, *, rounding_mode=None):
    if not _is_sparse(a) or not _is_scalar(b):
        raise NotImplementedError("ember.sparse: div supports a sparse tensor divided by a scalar only "
                                  "(dividing by a tensor with zeros would make the result dense)")
    return map_values(a, lambda v: v.div(b, rounding_mode=rounding_mode))


def pow(a, exponent):
    if not _is_sparse(a) or not isinstance(exponent, numbers.Number):
        raise NotImplementedError("ember.sparse: pow supports a sparse base and a number exponent only")
    if exponent <= 0:
        raise RuntimeError(f"pow: ember.sparse requires a positive exponent (0 ** {exponent} is not 0, the "
                           f"result would be dense), got {exponent}")
    if a._st.layout is COO:
        a = coalesce(a)      # (a + b) ** p, not a ** p + b ** p
    return map_values(a, lambda v: v.pow(exponent))


# ---------------------------------------------------------------------- reductions
def sum(s, dim=None, keepdim=False, dtype=None):
    """``torch.sparse.sum`` / ``Tensor.sum`` of a sparse tensor: all dims -> a dense scalar;
    some sparse dims -> a coalesced sparse tensor over the rest; all sparse dims -> dense."""
    if s._st.layout in COMPRESSED:
        s = to_coo(s)
    st = s._st
    v = values_of(s)
    if dtype is not None:
        v = v.to(dtype)
    n = len(st.shape)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        if s._requires_grad and STATE.grad_enabled and dtype is None and not keepdim:
            return _SumAll.apply(s)
        return v.sum(dtype=dtype) if not keepdim else v.sum(dtype=dtype).reshape((1,) * n)
    dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    dims = sorted({_wrapdim(int(d), n) for d in dims})
    sd = st.sdim
    sparse_red = [d for d in dims if d < sd]
    dense_red = [d for d in dims if d >= sd]
    if dense_red:
        v = v.sum(dim=[d - sd + 1 for d in dense_red], keepdim=keepdim)
    new_shape = [st.shape[d] if d not in dims else 1 for d in range(n)]
    if len(sparse_red) == sd and not keepdim:
        return v.sum(0)
    idx = st.indices.copy()
    if keepdim:
        idx[sparse_red] = 0
        new_sd = sd
    else:
        keep = [d for d in range(sd) if d not in sparse_red]
        idx = idx[keep]
        new_shape = [new_shape[d] for d in range(n) if d not in dims]
        new_sd = len(keep)
    out = from_values(Structure(COO, new_shape, new_sd, indices=idx,
                                coalesced=st.coalesced and not sparse_red), v)
    return coalesce(out)


class _SumAll(Function):
    """The sum of every element; its gradient is the output's gradient at each specified
    position, on the coalesced pattern and marked coalesced (PyTorch's SumBackward0)."""

    @staticmethod
    def forward(ctx, s):
        ctx.set_materialize_grads(False)
        ctx.st = coalesce(s)._st
        return s._vals.sum()

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None
        st = ctx.st
        return from_values(st, g.expand((st.nnz,) + tuple(st.dense_shape)).clone())


_named(_SumAll, "SumBackward0")


def _softmax(s, dim, dtype, log):
    if s._st.layout is not COO:
        from ._storage import backend_name
        raise NotImplementedError(f"Could not run 'aten::_sparse_{'log_' if log else ''}softmax' with "
                                  f"arguments from the '{backend_name(s.layout, s.device)}' backend "
                                  f"(ember.sparse: softmax supports the sparse_coo layout only)")
    c = coalesce(s)
    st = c._st
    v = values_of(c)
    if dtype is not None:
        v = v.to(dtype)
    n = len(st.shape)
    d = _wrapdim(dim, n)
    sd = st.sdim
    if d >= sd:
        out = v.log_softmax(d - sd + 1) if log else v.softmax(d - sd + 1)
        return from_values(st, out)
    if st.nnz == 0:
        return from_values(st, v)
    key = np.zeros(st.nnz, dtype=np.int64)
    for k in range(sd):
        if k != d:
            key = key * st.shape[k] + st.indices[k]
    groups, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    G = groups.shape[0]
    vn = np.asarray(v._data)
    m = np.full((G,) + vn.shape[1:], -np.inf, dtype=vn.dtype)
    np.maximum.at(m, inv, vn)
    it = _itensor(inv, s.device)
    shifted = v - _make(m[inv], v.device, v.dtype)     # a constant shift: softmax does not change
    e = shifted.exp()
    den = segment_sum(e, inv, G)
    out = shifted - den.log().index_select(0, it) if log else e / den.index_select(0, it)
    return from_values(st, out)


def softmax(s, dim, dtype=None):
    """Softmax over ``dim`` among the specified entries (unspecified ones count as -inf)."""
    return _softmax(s, dim, dtype, log=False)


def log_softmax(s, dim, dtype=None):
    return _softmax(s, dim, dtype, log=True)


# ---------------------------------------------------------------------- products
def _legacy(dt):
    return getattr(dt, "legacy_name", str(dt))


def _spmm(a, b):
    """sparse (2-d, no dense dims) @ dense (2-d) -> dense."""
    if b.ndim != 2:
        if b.ndim == 1:
            raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
        raise RuntimeError(f"mm: ember.sparse expects a 2-d dense matrix, got {b.ndim}-d")
    if a.ndim != 2 or a._st.sdim != 2:
        raise RuntimeError(f"mm: ember.sparse expects a 2-d sparse matrix without dense dimensions, got shape "
                           f"{list(a.shape)} with sparse_dim {a._st.sdim}")
    if a.shape[1] != b.shape[0]:
        if a._st.layout in COMPRESSED:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                               f"{b.shape[0]}x{b.shape[1]})")
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {a.shape[1]}, got {b.shape[0]}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {_legacy(a.dtype)} but found {_legacy(b.dtype)}")
    if a._st.blocksize is not None:
        from ._compressed import blocked_spmm
        return blocked_spmm(a, b)
    c = coalesce(to_coo(a))
    st = c._st
    prod = values_of(c).unsqueeze(1) * b.index_select(0, _itensor(st.indices[1], b.device))
    return segment_sum(prod, st.indices[0], a.shape[0])


class _Mm(Function):
    """PyTorch's MmBackward0 (``torch.mm`` / ``matmul`` / ``@`` with a sparse operand): unlike
    ``torch.sparse.mm``, the gradient of the sparse operand is the full dense ``G @ B^T``."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(a, b)
        return sparse_mm(a, b)

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None, None
        a, b = ctx.saved_tensors
        ga = sparse_mm(g, t(b) if _is_sparse(b) else b.t()) if ctx.needs_input_grad[0] else None
        gb = sparse_mm(t(a) if _is_sparse(a) else a.t(), g) if ctx.needs_input_grad[1] else None
        return ga, gb


_named(_Mm, "MmBackward0")
_named(_Add, "AddBackward0")


def mm(a, b):
    """``torch.mm`` with a sparse operand (``ember.mm``, ``matmul``, ``@``, ``Tensor.mm``): as
    ``sparse_mm``, but a sparse operand that requires grad gets PyTorch's dense gradient."""
    if STATE.grad_enabled and any(_is_sparse(x) and x._requires_grad for x in (a, b)) and \
            not (_is_sparse(a) and _is_sparse(b)):
        return _Mm.apply(a, b)
    return sparse_mm(a, b)


def sparse_mm(a, b):
    """``torch.sparse.mm``: sparse @ dense and dense @ sparse give dense; sparse @ sparse gives
    sparse (COO). The gradient of a sparse operand is sparse, with its (coalesced) pattern."""
    if _is_sparse(a) and not _is_sparse(b):
        return _spmm(a, b)
    if _is_sparse(b) and not _is_sparse(a):
        if a.ndim != 2:
            raise RuntimeError(f"mm: expected a 2-d matrix, got {a.ndim}-d")
        return _spmm(t(b), a.t()).t()
    if _is_sparse(a) and _is_sparse(b):
        return dense_to_coo(_spmm(a, to_dense(b)))
    return _api().mm(a, b)


def matmul(a, b):
    for x in (a, b):
        if _is_sparse(x) and x._st.layout in COMPRESSED and x._st.nbatch:
            if x is b or _is_sparse(b):
                raise NotImplementedError("ember.sparse: matmul with a batched sparse tensor supports "
                                          "batched sparse @ dense only")
            from ._compressed import batched_spmm
            return batched_spmm(a, b)
    if _is_sparse(a) and not _is_sparse(b) and b.ndim == 1:
        return _spmm(a, b.unsqueeze(1)).squeeze(1)
    if _is_sparse(b) and not _is_sparse(a) and a.ndim == 1:
        return mm(a.unsqueeze(0), b).squeeze(0)
    if max(a.ndim, b.ndim) > 2:
        raise NotImplementedError("ember.sparse: matmul with a sparse operand supports 1-d and 2-d operands "
                                  "only (no batched matmul)")
    return mm(a, b)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, _sparse_grad=False):
    """beta * input + alpha * (mat1 @ mat2), one of them sparse (``_sparse_grad``: the gradient
    of a sparse mat1 is sparse, as ``torch.sparse.addmm``'s)."""
    r = (sparse_mm if _sparse_grad else mm)(mat1, mat2)
    if alpha != 1:
        r = r * alpha
    if beta == 0:
        return r
    inp = input * beta if beta != 1 else input
    if _is_sparse(inp):
        if _is_sparse(r):
            return add(r, inp)
        return add(r, inp)
    return inp + r


def smm(a, b):
    """``torch.smm``: sparse @ dense as a sparse (COO) tensor."""
    if not _is_sparse(a):
        raise RuntimeError("smm: expected a sparse input")
    return dense_to_coo(_spmm(a, b))


def hspmm(a, b):
    """``torch.hspmm``: sparse @ dense as a hybrid COO tensor (sparse rows, dense columns)."""
    if not _is_sparse(a) or a._st.layout is not COO:
        raise RuntimeError("hspmm: expected a sparse_coo input")
    r = _spmm(a, b)
    rows = np.unique(a._st.indices[0]) if a._st.nnz else np.zeros(0, dtype=np.int64)
    vals = r.index_select(0, _itensor(rows, b.device))
    st = Structure(COO, r.shape, 1, indices=rows.reshape(1, -1).astype(np.int64), coalesced=True)
    return from_values(st, vals)


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """``torch.sparse.sampled_addmm``: beta * input + alpha * (mat1 @ mat2) at input's (CSR) positions."""
    if out is not None:
        raise NotImplementedError("ember.sparse.sampled_addmm: out= is not supported")
    if not _is_sparse(input) or input._st.layout is not CSR:
        raise RuntimeError(f"sampled_addmm: Expected input to have sparse_csr layout, but got "
                           f"{getattr(input, 'layout', type(input).__name__)}")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    if (mat1.shape[0], mat2.shape[1]) != tuple(input.shape):
        raise RuntimeError(f"sampled_addmm: Expected input to have shape {[mat1.shape[0], mat2.shape[1]]}, "
                           f"but got {list(input.shape)}")
    st = input._st
    idx = st.coo_indices()
    rows, cols = _itensor(idx[0], mat1.device), _itensor(idx[1], mat1.device)
    prod = (mat1.index_select(0, rows) * mat2.t().index_select(0, cols)).sum(-1)
    return from_values(st, values_of(input) * beta + prod * alpha)


# ---------------------------------------------------------------------- nn.Embedding(sparse=True)
def embedding_sparse_backward(g, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The gradient of ``embedding(weight, indices, sparse=True)`` wrt weight: an uncoalesced COO
    tensor of size (num_weights, dim) with one row of ``g`` per looked-up index (entries equal to
    ``padding_idx`` left out), as PyTorch's ``embedding_sparse_backward``."""
    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
    idx = np.asarray(indices.detach()._data).reshape(-1).astype(np.int64)
    dim = g.shape[-1]
    vals = g.reshape(-1, dim)
    if padding_idx is not None and padding_idx >= 0:
        keep = np.flatnonzero(idx != padding_idx)
        if keep.shape[0] != idx.shape[0]:
            idx = idx[keep]
            vals = vals.index_select(0, _itensor(keep, g.device))
    st = Structure(COO, (num_weights, dim), 1, indices=idx.reshape(1, -1))
    return from_values(st, vals)
