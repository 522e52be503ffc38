"""Making sparse tensors: the factories and the conversions between layouts.

Every conversion keeps autograd: the values of the result are the values of
the source (or of the dense tensor) read with ``index_select``, so a gradient
reaching the result flows back with the right structure.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from .. import _layout as L
from .. import types as _t
from ..tensor import Tensor
from ._tensor import (COO, CSC, CSR, SparseTensor, Structure, _api, _itensor, _layout_word, check_bounds,
                      from_values, relabel, values_of)

_CHECK = [False]


class check_sparse_tensor_invariants(contextlib.ContextDecorator):
    """``torch.sparse.check_sparse_tensor_invariants``: the default of ``check_invariants`` of
    the factories (off, as in PyTorch), as a global switch or a context manager."""

    @staticmethod
    def is_enabled():
        return _CHECK[0]

    @staticmethod
    def enable():
        _CHECK[0] = True

    @staticmethod
    def disable():
        _CHECK[0] = False

    def __init__(self, enable=True):
        self.state = bool(enable)
        self.saved = None

    def __enter__(self):
        self.saved = _CHECK[0]
        _CHECK[0] = self.state
        return self

    def __exit__(self, *exc):
        _CHECK[0] = self.saved
        return False


def _checking(flag):
    return _CHECK[0] if flag is None else bool(flag)


def _index_array(x, what):
    """An int64 numpy copy of an index argument (a tensor or array-like); PyTorch converts
    floating index tensors too."""
    if isinstance(x, Tensor):
        if getattr(x, "_sparse_layout", False):
            raise TypeError(f"{what} must be a strided (dense) tensor, got layout {x.layout}")
        if x._fake:
            raise NotImplementedError(f"ember.sparse: building a sparse tensor from fake tensors ({what}) "
                                      f"is not supported (sparse tensors cannot be traced)")
        arr = np.asarray(x.detach()._data if x.device.type == "cpu" else x.cpu()._data)
    else:
        arr = np.asarray(x)
    if arr.dtype.kind not in "iufb":
        raise TypeError(f"{what} must be an integer tensor, got {arr.dtype}")
    return np.array(arr, dtype=np.int64, copy=True)


def _values_tensor(values, dtype, device):
    api = _api()
    if isinstance(values, Tensor):
        if getattr(values, "_sparse_layout", False):
            raise TypeError(f"values must be a strided (dense) tensor, got layout {values.layout}")
        v = values
        if dtype is not None and v.dtype is not dtype:
            v = v.to(dtype)
    else:
        v = api.tensor(values, dtype=dtype)
    if device is not None and _t.as_device(device).type != "cpu" or v.device.type != "cpu":
        raise NotImplementedError("ember.sparse: sparse tensors are CPU only")
    return v


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """``torch.sparse_coo_tensor``: a COO tensor with ``values[k]`` at ``indices[:, k]``.
    Duplicate indices are allowed (the tensor is then uncoalesced; they add up)."""
    idx = _index_array(indices, "indices")
    v = _values_tensor(values, dtype, device)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if v.ndim == 0:
        raise RuntimeError("values must be at least 1-dimensional (nnz x dense dims)")
    sdim, nnz = idx.shape
    if v.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {v.shape[0]}")
    dense_shape = tuple(v.shape[1:])
    if size is None:
        sparse_shape = tuple(int(m) + 1 for m in idx.max(axis=1)) if nnz else (0,) * sdim
        if nnz and idx.min(initial=0) < 0:
            check_bounds(idx, sparse_shape)
        size = sparse_shape + dense_shape
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sdim + len(dense_shape):
            raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                               f"{len(size)}, sparse_dim = {sdim}, dense_dim = {len(dense_shape)}")
        if size[sdim:] != dense_shape:
            raise RuntimeError(f"values has incorrect size, expected {[nnz] + list(size[sdim:])}, got "
                               f"{[nnz] + list(dense_shape)}")
        if any(s < 0 for s in size):
            raise RuntimeError(f"Trying to create tensor with negative dimension: {list(size)}")
    st = Structure(COO, size, sdim, indices=idx, coalesced=bool(is_coalesced))
    if _checking(check_invariants):
        check_bounds(idx, size[:sdim])
        if is_coalesced:
            lin = st.lin()
            if np.any(np.diff(lin) <= 0):
                raise RuntimeError("cannot set is_coalesced to true if indices correspond to uncoalesced "
                                   "COO tensor")
    out = from_values(st, v)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _compressed_tensor(layout, cidx, pidx, values, size, dtype, device, requires_grad, check_invariants):
    """The compressed factories: shape checks always (PyTorch runs them only with
    ``check_invariants``, and a wrong shape would read out of bounds), value checks on request."""
    from . import _compressed
    idx32 = _compressed.check_index_dtypes(layout, cidx, pidx)
    c = _index_array(cidx, "compressed_indices")
    p = _index_array(pidx, "plain_indices")
    v = _values_tensor(values, dtype, device)
    out = relabel(_compressed.make(layout, c, p, v, size, _checking(check_invariants), idx32),
                  "SparseCompressedTensorBackward0")
    if requires_grad:
        out.requires_grad_(True)
    return out


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """``torch.sparse_csr_tensor``: ``(*batch, nrows, ncols, *dense)``, values ``(*batch, nnz, *dense)``."""
    return _compressed_tensor(CSR, crow_indices, col_indices, values, size, dtype, device, requires_grad,
                              check_invariants)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """``torch.sparse_csc_tensor``: ``(*batch, nrows, ncols, *dense)``, values ``(*batch, nnz, *dense)``."""
    return _compressed_tensor(CSC, ccol_indices, row_indices, values, size, dtype, device, requires_grad,
                              check_invariants)


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *, dtype=None,
                             layout=None, device=None, pin_memory=False, requires_grad=False,
                             check_invariants=None):
    """``torch.sparse_compressed_tensor``: CSR, CSC, BSR or BSC by ``layout``."""
    lay = L.as_layout(layout) if not isinstance(layout, str) or layout in L.layout._BY_NAME else layout
    if lay not in (CSR, CSC, L.sparse_bsr, L.sparse_bsc):
        word = "none" if lay is None else {COO: "Sparse", L.strided: "Strided"}.get(lay, str(lay))
        raise RuntimeError(f"sparse_compressed_tensor expected sparse compressed tensor layout but got {word}")
    return _compressed_tensor(lay, compressed_indices, plain_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_bsr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """``torch.sparse_bsr_tensor``: block rows; values ``(*batch, nnz, bh, bw, *dense)``, the
    blocksize is read from them."""
    return _compressed_tensor(L.sparse_bsr, crow_indices, col_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_bsc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """``torch.sparse_bsc_tensor``: block columns; values ``(*batch, nnz, bh, bw, *dense)``."""
    return _compressed_tensor(L.sparse_bsc, ccol_indices, row_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


# ---------------------------------------------------------------------- conversions
def dense_to_coo(x, sparse_dim=None):
    """A dense tensor's nonzero entries (over its first ``sparse_dim`` dims) as a coalesced COO."""
    if x._fake:
        raise NotImplementedError("ember.sparse: to_sparse of a fake tensor (inside a traced or compiled "
                                  "region) is not supported")
    if x.device.type != "cpu":
        raise NotImplementedError("ember.sparse: sparse tensors are CPU only; call .cpu() first")
    nd = x.ndim
    sd = nd if sparse_dim is None else int(sparse_dim)
    if not 0 <= sd <= nd:
        raise RuntimeError(f"sparse_dim must be in [0, {nd}], but got {sd}" if sparse_dim is not None
                           else "invalid sparse_dim")
    shape = tuple(x.shape)
    sparse_shape, dense_shape = shape[:sd], shape[sd:]
    P = int(math.prod(sparse_shape))
    arr = np.asarray(x.detach()._data).reshape((P,) + dense_shape)
    nzmask = arr != 0
    if dense_shape:
        nzmask = nzmask.reshape(P, -1).any(axis=1)
    lin = np.flatnonzero(nzmask).astype(np.int64)
    if sd:
        idx = np.stack([np.asarray(a, dtype=np.int64) for a in np.unravel_index(lin, sparse_shape)])
    else:
        idx = np.zeros((0, lin.shape[0]), dtype=np.int64)
    vals = x.reshape((P,) + dense_shape).index_select(0, _itensor(lin, x.device))
    return from_values(Structure(COO, shape, sd, indices=idx, coalesced=True), vals)


def to_coo(s):
    """A CSR/CSC tensor as COO, in the order of its values; a COO tensor as itself."""
    st = s._st
    if st.layout is COO:
        return s
    if not st.is_plain_2d:
        from ._compressed import to_coo as general_to_coo
        return general_to_coo(s)
    idx = st.coo_indices()
    coo = from_values(Structure(COO, st.shape, 2, indices=idx, coalesced=False), values_of(s))
    if st.layout is CSR:
        # row-major already; coalesced unless a row repeats a column (invalid, unchecked input)
        coo._st.coalesced = bool(np.all(np.diff(coo._st.lin()) > 0))
    return coo      # from CSC: column-major order, not coalesced (as PyTorch's)


def _two_d(s, what):
    st = s._st
    if len(st.shape) != 2 or st.sdim != 2:
        raise NotImplementedError(f"ember.sparse: {what} supports 2-d tensors without dense dimensions only "
                                  f"(got shape {list(st.shape)} with sparse_dim {st.sdim})")


def _coalesced_coo_for(s, layout, other):
    """The coalesced 2-d COO form of ``s`` (dense, COO or the ``other`` compressed layout) to
    build a ``layout`` tensor from, or None when ``s`` already is one."""
    if not isinstance(s, SparseTensor):
        s = dense_to_coo(s)
    if s._st.layout is layout:
        return None
    if s._st.layout is other:
        s = to_coo(s)
    _two_d(s, f"conversion to {layout}".replace("ember.", ""))
    from ._ops import coalesce
    return coalesce(s)


def _plain_2d_source(s):
    """Whether ``s`` (dense or sparse) converts to a plain 2-d CSR/CSC matrix by the fast path."""
    if not isinstance(s, SparseTensor):
        return s.ndim == 2
    st = s._st
    return st.is_plain_2d or (st.layout is COO and st.sdim == 2 and len(st.shape) == 2)


def to_compressed(s, layout, blocksize=None, dense_dim=None, *, via_to_sparse=False):
    """Any tensor to a compressed ``layout`` (the fast path for plain 2-d CSR/CSC). A sparse
    source takes no ``dense_dim`` (PyTorch's errors, named after the conversion it runs)."""
    if isinstance(s, SparseTensor) and dense_dim is not None:
        src, name = s.layout, layout._name[7:]
        fn = ("sparse_compressed_to_sparse" if via_to_sparse and src is not COO else
              f"coo_to_sparse_{name}" if src is COO else
              f"to_sparse_{name}" if src is layout else f"sparse_compressed_to_sparse_{name}")
        raise RuntimeError(f"{fn}: conversion from {_layout_word(src)} to {_layout_word(layout)} with dense_dim "
                           f"argument given is not supported")
    if layout in (CSR, CSC) and blocksize is None and dense_dim in (None, 0) and _plain_2d_source(s):
        out = to_csr(s) if layout is CSR else to_csc(s)
        if isinstance(s, SparseTensor) and s._st.layout is not COO and out is not s:
            out._st = out._st.with_index_dtype_of(s._st)
    else:
        from ._compressed import convert
        out = convert(s, layout, blocksize, dense_dim)
    return out if out is s else relabel(out, f"ToSparse{_layout_word(layout)[6:]}Backward0")


def to_csr(s):
    if not _plain_2d_source(s):
        return to_compressed(s, CSR)
    c = _coalesced_coo_for(s, CSR, CSC)
    if c is None:
        return s
    shape, idx = c._st.shape, c._st.indices
    crow = np.concatenate([[0], np.cumsum(np.bincount(idx[0], minlength=shape[0]))]).astype(np.int64)
    return from_values(Structure(CSR, shape, 2, compressed=crow, plain=idx[1].copy()), values_of(c))


def to_csc(s):
    if not _plain_2d_source(s):
        return to_compressed(s, CSC)
    c = _coalesced_coo_for(s, CSC, CSR)
    if c is None:
        return s
    shape, idx = c._st.shape, c._st.indices
    perm = np.lexsort((idx[0], idx[1])).astype(np.int64)
    ccol = np.concatenate([[0], np.cumsum(np.bincount(idx[1], minlength=shape[1]))]).astype(np.int64)
    vals = values_of(c).index_select(0, _itensor(perm, c.device))
    return from_values(Structure(CSC, shape, 2, compressed=ccol, plain=idx[0][perm]), vals)


def to_sparse(x, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse``: to COO (optionally with ``sparse_dim``) or to ``layout``
    (``blocksize`` for BSR/BSC, ``dense_dim`` for the compressed layouts)."""
    lay = L.as_layout(layout)
    if sparse_dim is not None and (lay is not None or blocksize is not None or dense_dim is not None):
        raise TypeError("to_sparse() takes 0 positional arguments but 1 was given")
    if lay is L.strided:
        if blocksize is not None or dense_dim is not None:
            raise RuntimeError("to_sparse: conversion to Strided with blocksize or dense_dim argument given is "
                               "not supported")
        return x.to_dense() if isinstance(x, SparseTensor) else x
    src = "Strided" if not isinstance(x, SparseTensor) else _layout_word(x.layout)
    fn = "dense_to_sparse" if not isinstance(x, SparseTensor) else "sparse_to_sparse"
    if blocksize is not None and lay not in (L.sparse_bsr, L.sparse_bsc):
        raise RuntimeError(f"{fn}: conversion from {src} to {_layout_word(lay or COO)} with blocksize argument "
                           f"given is not supported")
    if lay in (CSR, CSC, L.sparse_bsr, L.sparse_bsc):
        if lay in (L.sparse_bsr, L.sparse_bsc) and blocksize is None and not isinstance(x, SparseTensor):
            raise RuntimeError(f"{fn}: conversion from {src} to {_layout_word(lay)} without blocksize argument "
                               f"given is not supported")
        return to_compressed(x, lay, blocksize, dense_dim, via_to_sparse=True)
    if dense_dim is not None:
        if isinstance(x, SparseTensor):
            fn = "to_sparse" if x.layout is COO else "sparse_compressed_to_sparse"
            raise RuntimeError(f"{fn}: conversion from {src} to Sparse with dense_dim argument given is not "
                               f"supported")
        if not 0 <= int(dense_dim) <= x.ndim:
            raise RuntimeError(f"dense_to_sparse: dense_dim argument must be in [0, {x.ndim}] range, but "
                               f"{int(dense_dim)} is given")
        return dense_to_coo(x, x.ndim - int(dense_dim))
    if isinstance(x, SparseTensor):
        if sparse_dim is not None and int(sparse_dim) != x._st.sdim and x._st.layout is COO:
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument "
                               "!=self.sparse_dim() is not supported")
        out = to_coo(x)
        return out if out is x else relabel(out, "ToSparseBackward1")
    return relabel(dense_to_coo(x, sparse_dim), "ToSparseBackward1")
