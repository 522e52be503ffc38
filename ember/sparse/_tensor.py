"""The sparse tensor: a structure (where the values sit) plus a dense values tensor.

A ``SparseTensor`` is an ``ember.Tensor`` subclass (PyTorch's sparse tensors
are ``torch.Tensor`` too) with

* ``_st``: a ``Structure`` -- the layout, the full shape, the number of sparse
  dimensions and the index arrays (int64 numpy): COO ``indices`` of shape
  ``(sparse_dim, nnz)``; CSR/BSR ``compressed`` = crow_indices and ``plain`` =
  col_indices; CSC/BSC ``compressed`` = ccol_indices and ``plain`` =
  row_indices; and whether a COO tensor is known to be coalesced (sorted, no
  duplicates). Compressed layouts may have leading batch dimensions
  (``nbatch``: the index arrays then have shape ``(*batch, n + 1)`` and
  ``(*batch, nnz)``) and the blocked ones a ``blocksize``; their ``sdim`` counts
  the batch dimensions too (what ``lin()`` linearises), while
  ``Tensor.sparse_dim()`` reports PyTorch's 2;
* ``_vals``: a dense ember tensor of shape ``(nnz, *dense_shape)`` (compressed:
  ``(*batch, nnz, *blocksize, *dense_shape)``, PyTorch's ``values()``) that
  never carries autograd history itself;
* ``_data``: a ``SparseStorage``, so that dense kernels refuse it (see there).

Autograd never looks inside: every differentiable sparse op is written as
"take the values (``values_of``), compute with ordinary dense ember ops
(``index_select``, ``exp``, a segment sum ...), put the result into a structure
(``from_values``)". Two ``autograd.Function``s make the boundary
differentiable -- the values of a sparse tensor, and a sparse tensor made from
values -- so gradients of sparse tensors are sparse tensors with the sparsity
pattern the values sit in, and gradients of the dense operands come from the
dense ops' own formulas (double backward included).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _layout as L
from .. import types as _t
from .._state import STATE
from ..autograd.function import Function
from ..tensor import Tensor, _make, to_target
from ._storage import SparseStorage

COO, CSR, CSC, BSR, BSC = L.sparse_coo, L.sparse_csr, L.sparse_csc, L.sparse_bsr, L.sparse_bsc
COMPRESSED = (CSR, CSC, BSR, BSC)
ROW_COMPRESSED = (CSR, BSR)          # compressed over rows: crow_indices / col_indices
BLOCKED = (BSR, BSC)
SPARSE_LAYOUTS = (COO, CSR, CSC, BSR, BSC)


def _api():
    from ..ops import api
    return api


def _itensor(arr, device):
    """An int64 ember tensor over the numpy index array ``arr`` (no copy)."""
    return _make(np.ascontiguousarray(arr, dtype=np.int64), device, _t.int64)


# ---------------------------------------------------------------------- structure
class Structure:
    """Where the values of a sparse tensor sit (layout, shape, index arrays); no values."""

    __slots__ = ("layout", "shape", "sdim", "indices", "compressed", "plain", "coalesced", "_lin",
                 "nbatch", "blocksize", "idx32")

    def __init__(self, layout, shape, sdim, *, indices=None, compressed=None, plain=None, coalesced=False,
                 nbatch=0, blocksize=None, idx32=False):
        self.layout = layout
        self.shape = tuple(int(s) for s in shape)
        self.sdim = int(sdim)
        self.indices = indices
        self.compressed = compressed
        self.plain = plain
        self.coalesced = bool(coalesced)
        self._lin = None
        self.nbatch = int(nbatch)
        self.blocksize = None if blocksize is None else (int(blocksize[0]), int(blocksize[1]))
        # compressed indices made from int32 tensors: kept int64 here, reported as int32 by
        # crow_indices() & co. (PyTorch keeps the index dtype through compressed conversions)
        self.idx32 = bool(idx32)

    def copy(self, *, coalesced=None, deep=False):
        """The same structure (index arrays shared, or copied with ``deep``), optionally with
        another coalesced flag (structures are shared between tensors: never change one)."""
        c = (lambda a: None if a is None else a.copy()) if deep else (lambda a: a)
        return Structure(self.layout, self.shape, self.sdim, indices=c(self.indices),
                         compressed=c(self.compressed), plain=c(self.plain),
                         coalesced=self.coalesced if coalesced is None else coalesced,
                         nbatch=self.nbatch, blocksize=self.blocksize, idx32=self.idx32)

    def with_index_dtype_of(self, other):
        """This structure, reporting int32 indices when ``other`` (the source of a conversion) does."""
        if self.idx32 == other.idx32:
            return self
        c = self.copy()
        c.idx32 = other.idx32
        return c

    @property
    def nnz(self):
        return int(self.indices.shape[1] if self.layout is COO else self.plain.shape[-1])

    @property
    def is_plain_2d(self):
        """A 2-d CSR/CSC matrix without batch, block or dense dims (the original fast paths)."""
        return (self.layout in (CSR, CSC) and self.nbatch == 0 and self.sdim == 2
                and len(self.shape) == 2)

    def values_shape(self):
        """PyTorch's ``values()`` shape: ``(nnz, *dense)``; compressed ``(*batch, nnz, *block, *dense)``."""
        if self.layout is COO:
            return (self.nnz,) + self.dense_shape
        return (self.shape[:self.nbatch] + (self.nnz,) + (self.blocksize or ()) + self.dense_shape)

    @property
    def dense_shape(self):
        return self.shape[self.sdim:]

    @property
    def sparse_shape(self):
        return self.shape[:self.sdim]

    def coo_indices(self):
        """The COO indices ``(sparse_dim, nnz)`` of the values, in the values' order."""
        if self.layout is COO:
            return self.indices
        if self.is_plain_2d:
            counts = np.diff(self.compressed)
            outer = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
            if self.layout is CSR:
                return np.stack([outer, self.plain])
            return np.stack([self.plain, outer])
        from ._compressed import element_indices
        return element_indices(self)

    def lin(self):
        """Row-major linear position of each value over the sparse dims (bounds checked)."""
        if self._lin is None:
            idx = self.coo_indices()
            check_bounds(idx, self.sparse_shape)
            lin = np.zeros(idx.shape[1], dtype=np.int64)
            for d, n in enumerate(self.sparse_shape):
                lin = lin * n + idx[d]
            self._lin = lin
        return self._lin


def check_bounds(indices, sparse_shape):
    """PyTorch's invariant errors for COO indices outside ``sparse_shape``."""
    if indices.shape[1] == 0:
        return
    lo, hi = indices.min(axis=1), indices.max(axis=1)
    for d, n in enumerate(sparse_shape):
        if lo[d] < 0:
            raise RuntimeError(f"found negative index {int(lo[d])} for dim {d}")
        if hi[d] >= n:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {n} but found "
                               f"index {int(hi[d])}")


# ---------------------------------------------------------------------- the tensor
class SparseTensor(Tensor):
    """A tensor with layout ``sparse_coo``, ``sparse_csr`` or ``sparse_csc`` (see the module doc)."""

    _sparse_layout = True

    @classmethod
    def __ember_route__(cls, op, args):
        """The dispatcher's slow path hands a call with a sparse argument here
        (ember/_torch_function.py ``route``): the products have sparse kernels; any other op
        returns NotImplemented and then fails reading the placeholder storage, with torch's
        "Could not run 'aten::op' with arguments from the 'SparseCPU' backend"."""
        impl = _ROUTED_OPS.get(op.name)
        return NotImplemented if impl is None else impl(*args)

    @property
    def layout(self):
        return self._st.layout

    @property
    def is_sparse(self):
        return self._st.layout is COO

    @property
    def is_sparse_csr(self):
        return self._st.layout is CSR

    def numel(self):
        return int(math.prod(self._st.shape))

    nelement = numel

    @property
    def nbytes(self):
        raise NotImplementedError(f"ember.sparse: nbytes of a tensor with layout {self.layout}")

    def stride(self, dim=None):
        raise RuntimeError(f"ember.sparse: tensors with layout {self.layout} do not have strides")

    def is_contiguous(self, memory_format=None):
        return False

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def storage_offset(self):
        raise RuntimeError(f"ember.sparse: tensors with layout {self.layout} do not have storage_offset")

    def untyped_storage(self):
        raise NotImplementedError("Cannot access storage of SparseTensorImpl")

    storage = untyped_storage

    def numpy(self, *, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, *args, **kwargs):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def share_memory_(self):
        raise NotImplementedError(f"ember.sparse: share_memory_ of a tensor with layout {self.layout}")

    def __repr__(self, *, tensor_contents=None):
        from ._print import sparse_repr
        return sparse_repr(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        out = self.clone()
        if self._requires_grad and self.is_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        raise NotImplementedError(f"ember.sparse: pickling (ember.save) a tensor with layout {self.layout} "
                                  f"is not supported; save .to_dense() or its indices and values")

    # -- structure accessors --------------------------------------------------
    def sparse_dim(self):
        return self._st.sdim if self._st.layout is COO else 2

    def dense_dim(self):
        return len(self._st.shape) - self._st.sdim

    def _nnz(self):
        return self._st.nnz

    def is_coalesced(self):
        if self._st.layout is not COO:
            raise RuntimeError(f"is_coalesced expected sparse coordinate tensor layout but got "
                               f"{_layout_word(self._st.layout)}")
        return self._st.coalesced

    def _coalesced_(self, coalesced):
        st = self._st      # (structures are shared between tensors: change a copy)
        self._st = st.copy(coalesced=bool(coalesced))
        return self

    def _need(self, layout, what):
        if self._st.layout is not layout:
            word = {COO: "sparse coordinate", CSR: "sparse row compressed",
                    CSC: "sparse column compressed"}[layout]
            if layout is CSR and self._st.layout is BSR or layout is CSC and self._st.layout is BSC:
                return
            raise RuntimeError(f"{what} expected {word} tensor layout but got {_layout_word(self._st.layout)}")

    def _indices(self):
        self._need(COO, what="_indices")
        return _itensor(self._st.indices, self.device)

    def indices(self):
        self._need(COO, what="indices")
        if not self._st.coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return _itensor(self._st.indices, self.device)

    def _values(self):
        return _make(self._vals._data, self.device, self.dtype)

    def values(self):
        if self._st.layout is COO and not self._st.coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return values_of(self, alias=True)

    def _compressed_index(self, arr):
        t = _itensor(arr, self.device)
        return t.to(_t.int32) if self._st.idx32 else t

    def crow_indices(self):
        self._need(CSR, what="crow_indices")
        return self._compressed_index(self._st.compressed)

    def col_indices(self):
        self._need(CSR, what="col_indices")
        return self._compressed_index(self._st.plain)

    def ccol_indices(self):
        self._need(CSC, what="ccol_indices")
        return self._compressed_index(self._st.compressed)

    def row_indices(self):
        self._need(CSC, what="row_indices")
        return self._compressed_index(self._st.plain)

    # -- copies and no-grad aliases ---------------------------------------------
    def detach(self):
        return wrap(self._st, self._vals)

    def detach_(self):
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self):
        return wrap(self._st, self._vals)

    @data.setter
    def data(self, value):
        raise NotImplementedError(f"ember.sparse: assigning .data of a tensor with layout {self.layout}")

    def clone(self, *, memory_format=None):
        return from_values(self._st.copy(deep=True), values_of(self).clone())

    def to(self, *args, **kwargs):
        dtype, device = to_target(args, kwargs)
        out = self
        if device is not None and _t.as_device(device) != self.device:
            raise NotImplementedError(f"ember.sparse: moving a tensor with layout {self.layout} to "
                                      f"{device} is not supported (sparse tensors are CPU only)")
        if dtype is not None and dtype is not self.dtype:
            out = from_values(self._st, values_of(self).to(dtype))
        return out

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            return f"torch.sparse.{self.dtype.legacy_name}"
        return self.to(dtype)

    def cpu(self, memory_format=None):
        return self

    def cuda(self, *args, **kwargs):
        raise NotImplementedError(f"ember.sparse: tensors with layout {self.layout} are CPU only")

    def double(self, memory_format=None):
        return self.to(_t.float64)

    def float(self, memory_format=None):
        return self.to(_t.float32)

    def half(self, memory_format=None):
        return self.to(_t.float16)

    def bfloat16(self, memory_format=None):
        return self.to(_t.bfloat16)

    def long(self, memory_format=None):
        return self.to(_t.int64)

    def int(self, memory_format=None):
        return self.to(_t.int32)

    def bool(self, memory_format=None):
        return self.to(_t.bool_)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self


def _layout_word(layout):
    return {COO: "Sparse", CSR: "SparseCsr", CSC: "SparseCsc", BSR: "SparseBsr",
            BSC: "SparseBsc"}.get(layout, str(layout))


def _backend(t):
    from ._storage import backend_name
    return backend_name(t.layout, t.device)




def wrap(st, vals):
    """A sparse tensor over structure ``st`` and dense values ``vals`` (no autograd recorded)."""
    if vals._requires_grad or vals._grad_fn is not None:
        vals = _make(vals._data, vals.device, vals.dtype)
    if vals.device.type != "cpu":
        raise NotImplementedError("ember.sparse: sparse tensors are CPU only")
    t = object.__new__(SparseTensor)
    t._data = SparseStorage(st.shape, st.layout, vals.device)
    t.dtype = vals.dtype
    t.device = vals.device
    t._vc = None
    t._st = st
    t._vals = vals
    return t


# ---------------------------------------------------------------------- the autograd boundary
def _node_repr(self):
    return f"<{type(self).__name__} object at {hex(id(self))}>"


def _named(cls, name):
    """Give a Function's backward node PyTorch's node name and repr (``<MmBackward0 object at ...>``)."""
    b = cls._backward_cls
    b.__name__ = b.__qualname__ = name
    b.__repr__ = _node_repr
    return cls


class _FromValues(Function):
    """values -> a sparse tensor of structure ``st``; the gradient of the values is the
    incoming gradient (sparse or dense) read at the structure's positions."""

    @staticmethod
    def forward(ctx, values, st):
        ctx.set_materialize_grads(False)
        ctx.st = st
        return wrap(st, values)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None
        return gather_values(grad, ctx.st), None


class _Values(Function):
    """A sparse tensor -> its values; the gradient is a sparse tensor of the same structure."""

    @staticmethod
    def forward(ctx, s):
        ctx.set_materialize_grads(False)
        ctx.st = s._st
        return _make(s._vals._data, s._vals.device, s._vals.dtype)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None
        st = ctx.st
        if st.layout is COO and not st.coalesced and st.nnz:
            # Every sparse op is a function of the dense tensor the values add up to, so the
            # duplicates of one position receive the same gradient: PyTorch reports it once, at
            # the coalesced pattern (the gradient of the dense tensor, masked to its support),
            # and -- as PyTorch -- does not mark the gradient coalesced.
            uniq, first = np.unique(st.lin(), return_index=True)
            cst = Structure(COO, st.shape, st.sdim, indices=st.indices[:, first], coalesced=False)
            return from_values(cst, grad.index_select(0, _itensor(first, grad.device)))
        if st.layout is COO and st.coalesced:
            st = Structure(COO, st.shape, st.sdim, indices=st.indices, coalesced=False)
        return from_values(st, grad)


_named(_FromValues, "SparseCooTensorWithDimsAndTensorsBackward0")
_named(_Values, "ValuesBackward0")


def _keep(self):
    """These nodes save no tensors (only index structures), so nothing is freed: backward may
    run through them again (PyTorch's SparseCooTensorWithDimsAndTensorsBackward0 refuses)."""


_FromValues._backward_cls.release = _keep
_Values._backward_cls.release = _keep


class _Relabel(Function):
    """A sparse tensor -> the same tensor, gradient passed through: the last node of a layout
    conversion, so that ``grad_fn`` shows PyTorch's name for it (``ToSparseCsrBackward0`` ...)
    rather than the values-level node the conversion ends with."""

    @staticmethod
    def forward(ctx, s):
        ctx.set_materialize_grads(False)
        return wrap(s._st, s._vals)

    @staticmethod
    def backward(ctx, grad):
        return grad


_RELABELS = {}


def relabel(s, name):
    """``s`` with grad_fn named ``name`` (an identity node) when it carries autograd history."""
    if not (s._requires_grad and STATE.grad_enabled and s._grad_fn is not None):
        return s
    cls = _RELABELS.get(name)
    if cls is None:
        cls = _named(type(name, (_Relabel,), {}), name)
        cls._backward_cls.release = _keep
        _RELABELS[name] = cls
    return cls.apply(s)


def values_of(s, alias=False):
    """The values of ``s`` as a dense tensor, differentiable when ``s`` requires grad."""
    if s._requires_grad and STATE.grad_enabled:
        return _Values.apply(s)
    if alias:
        return _make(s._vals._data, s._vals.device, s._vals.dtype)
    return s._vals


def from_values(st, vals):
    """A sparse tensor of structure ``st`` holding ``vals``, differentiable in ``vals``."""
    if vals._requires_grad and STATE.grad_enabled:
        return _FromValues.apply(vals, st)
    return wrap(st, vals)


def _same_positions(a, b):
    """Whether two structures place their values at the same positions in the same order (the
    same index arrays: a structure and its copy with another coalesced flag)."""
    if a.layout is not b.layout or a.shape != b.shape or a.sdim != b.sdim:
        return False
    if a.layout is COO:
        return a.indices is b.indices
    return a.compressed is b.compressed and a.plain is b.plain and a.blocksize == b.blocksize


def gather_values(g, st):
    """``g`` (dense, or sparse of the same shape) read at the positions of ``st``'s values:
    a dense ``(nnz, *dense_shape)`` tensor, in ember ops (so differentiable again)."""
    api = _api()
    dense_shape = st.dense_shape
    if isinstance(g, SparseTensor):
        if g._st is st or _same_positions(g._st, st):
            return values_of(g)
        if g._st.layout is not COO:
            from ._convert import to_coo
            g = to_coo(g)
        from ._ops import coalesce
        gc = coalesce(g)
        glin, lin = gc._st.lin(), st.lin()
        if glin.shape[0] == 0:
            return api.zeros(st.values_shape(), dtype=g.dtype, device=g.device)
        pos = np.minimum(np.searchsorted(glin, lin), glin.shape[0] - 1)
        hit = glin[pos] == lin
        v = values_of(gc).index_select(0, _itensor(pos, g.device))
        if not hit.all():
            mask = hit.reshape((-1,) + (1,) * len(dense_shape)).astype(gc._vals._data.dtype)
            v = v * _make(mask, g.device, g.dtype)
        return _as_values_shape(v, st)
    flat = g.reshape((int(math.prod(st.sparse_shape)),) + tuple(dense_shape))
    return _as_values_shape(flat.index_select(0, _itensor(st.lin(), g.device)), st)


def _as_values_shape(v, st):
    """Element-wise values ``(n_elements, *dense)`` in the shape of ``st``'s values (batched or
    blocked compressed structures hold several elements per nnz)."""
    if st.layout is COO or st.is_plain_2d:
        return v
    return v.reshape(st.values_shape())


def _routed_mm(input, mat2):
    from . import _ops
    return _ops.mm(input, mat2)


def _routed_matmul(input, other):
    from . import _ops
    return _ops.matmul(input, other)


def _routed_addmm(input, mat1, mat2, beta=1, alpha=1):
    from . import _ops
    return _ops.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


# op name -> the sparse implementation, called with the op's arguments in schema order
_ROUTED_OPS = {"mm": _routed_mm, "matmul": _routed_matmul, "addmm": _routed_addmm}
