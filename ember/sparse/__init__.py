"""Sparse tensors (``torch.sparse``): COO, CSR and CSC layouts on the CPU.

A GNN's adjacency matrix or a bag of sparse features is mostly zeros; a sparse
tensor stores only the specified elements: their indices and their values.

Making them
    ``ember.sparse_coo_tensor(indices, values, size=None, *, dtype, device,
    requires_grad, check_invariants, is_coalesced)`` (duplicates allowed:
    uncoalesced), ``ember.sparse_csr_tensor`` / ``sparse_csc_tensor`` /
    ``sparse_bsr_tensor`` / ``sparse_bsc_tensor`` / ``sparse_compressed_tensor``
    (leading batch dims, trailing dense dims, blocks for BSR/BSC: see
    ``_compressed.py``), and ``Tensor.to_sparse()``, ``to_sparse(sparse_dim)``
    (hybrid COO: the trailing dims stay dense), ``to_sparse(layout=...,
    blocksize=..., dense_dim=...)``, ``to_sparse_coo()``, ``to_sparse_csr(dense_dim)``,
    ``to_sparse_csc(dense_dim)``, ``to_sparse_bsr(blocksize)``, ``to_sparse_bsc(blocksize)``;
    ``ember.sparse.spdiags``; the legacy ``ember.sparse.FloatTensor(indices, values, size)``
    / ``FloatTensor(*sizes)`` (and Double, Long, ...). ``check_sparse_tensor_invariants`` switches the
    index checks on globally or in a ``with`` block.

Reading them
    ``to_dense()``, ``indices()`` / ``values()`` (coalesced COO only, as in
    PyTorch), ``_indices()`` / ``_values()``, ``crow_indices()``,
    ``col_indices()``, ``ccol_indices()``, ``row_indices()``, ``coalesce()``,
    ``is_coalesced()``, ``sparse_dim()``, ``dense_dim()``, ``_nnz()``,
    ``is_sparse``, ``is_sparse_csr``, ``layout`` (``ember.sparse_coo`` ...),
    ``shape`` / ``size()`` / ``dim()`` / ``dtype`` / ``device``; ``repr`` is
    PyTorch's (with ``torch.`` -> ``ember.``).

Computing with them
    * products: ``ember.sparse.mm`` / ``ember.mm`` / ``ember.matmul`` / ``@`` /
      ``Tensor.mm``: sparse @ dense -> dense, dense @ sparse -> dense, sparse @
      sparse -> sparse (``ember.mm``'s gradient of a sparse operand is dense, as
      ``torch.mm``'s; ``ember.sparse.mm``'s is sparse); ``ember.sparse.addmm`` / ``ember.addmm``;
      ``ember.smm`` (sparse result), ``ember.hspmm`` (hybrid result),
      ``ember.spmm``; ``ember.sparse.sampled_addmm`` (CSR input); BSR/BSC @
      dense (any block shape: PyTorch's CPU kernels take square BSR blocks
      only) and batched CSR/CSC/BSR/BSC @ dense (PyTorch has none on the CPU);
      ``ember.sparse.spsolve`` (CSR; PyTorch's is CUDA-only) through a dense
      solve; ``ember.sparse.as_sparse_gradcheck``;
    * ``ember.sparse.sum`` (all dims -> dense scalar; some dims -> sparse),
      ``ember.sparse.softmax`` / ``log_softmax`` (COO; over the specified
      entries only, unspecified ones count as -inf);
    * elementwise: sparse + sparse, dense + sparse (dense result), sparse *
      scalar / dense / sparse, sparse / scalar, ``-s``, ``pow`` (positive
      exponent), and the ops that map 0 to 0 (``abs``, ``sin``, ``tanh``,
      ``sqrt``, ``relu``, ``sign``, ``floor`` ... see ``_install``), each with
      an in-place ``_`` variant;
    * ``t()`` / ``transpose`` (COO: sparse-sparse or dense-dense dims; the
      transpose of a CSR matrix is a CSC matrix), ``sparse_mask``, ``clone``,
      ``detach``, ``to(dtype)``.

    * ``ember.zeros`` / ``empty`` / ``zeros_like`` / ``empty_like`` with
      ``layout=ember.sparse_coo`` (or csr/csc) make empty sparse tensors;
      ``zeros_like`` / ``empty_like`` of a sparse tensor keep its layout.

Embeddings
    ``nn.Embedding(sparse=True)`` / ``F.embedding(..., sparse=True)`` give the
    weight an uncoalesced COO gradient (one row per looked-up index, padding
    rows left out, as PyTorch); ``ember.optim.SparseAdam`` updates only those
    rows (PyTorch's lazy Adam, state ``step`` / ``exp_avg`` / ``exp_avg_sq``).

Autograd
    Sparse leaves may require grad. ``sparse.mm(S, D)`` gives ``D.grad``
    (dense) and ``S.grad`` (sparse, with the coalesced pattern of ``S``, as
    ``torch.sparse.mm`` documents, marked uncoalesced as PyTorch's except the
    full ``sparse.sum``'s; ``ember.mm`` / ``@`` give a dense ``S.grad``
    as ``torch.mm``); sparse + sparse and dense + sparse pass the output's
    gradient through unmasked (PyTorch's AddBackward0); ``to_dense()`` and ``sparse.sum`` give
    sparse gradients; ``sparse_coo_tensor(i, v)`` passes gradients to the dense
    ``v``; ``to_sparse()`` of a dense tensor passes them back densely. Every op
    above is differentiable because it is computed on the values with dense
    ember ops (see ``_tensor.py``); grad_fn names therefore differ from
    PyTorch's (``SparseCooTensorWithDimsAndTensorsBackward0``, ``ValuesBackward0``,
    ``IndexAddBackward0``...).

How it works
    A sparse tensor is an ``ember.Tensor`` subclass whose ``_data`` (what every
    dense kernel reads) is a ``SparseStorage`` that raises on any use, so an op
    without a sparse implementation fails instead of computing on garbage; the
    supported ops are methods of the subclass (Python asks a subclass's
    reflected operator first, so ``dense + sparse`` reaches it too), and
    ``ember.mm`` / ``matmul`` / ``addmm`` (so ``Tensor.mm`` of a dense tensor
    too) route a sparse argument here from inside the same function objects. Positions are computed with numpy on
    the int64 index arrays (sorting linearised indices), values with ember ops.

What raises
    * every other op: PyTorch's ``NotImplementedError`` "Could not run
      'aten::<op>' with arguments from the 'SparseCPU' backend" (the dense
      kernels cannot read a sparse tensor's storage: ``_storage.py``), and
      ``numpy()`` / ``stride()`` / ``data_ptr()`` / pickling errors;
    * sparse + dense (PyTorch's message: use dense + sparse), mismatched sizes
      in mm/add (PyTorch's messages), bad indices with ``check_invariants``;
    * CUDA sparse tensors, softmax of compressed layouts, BSR/BSC to CSR/CSC
      and batched CSR/CSC to BSR/BSC (PyTorch's errors), products of
      compressed tensors with dense dims, ``to_sparse_semi_structured`` (CPU:
      PyTorch's error; ember has no 2:4 kernels);
    * ``ember.compile``: a sparse tensor reaching a compiled frame is a graph
      break ("sparse tensors are not supported by ember.compile"); the frame
      runs eagerly.

    * the other top-level functions and dense methods given a sparse argument
      (``ember.add(d, s)``, ``d.add(s)``, ``ember.sum(s)``, ``ember.t(s)``)
      raise: use the operators and the sparse tensor's methods (``d + s``,
      ``s.sum()``, ``s.t()``) or ``ember.sparse.*``; (routing them too would
      slow every dense ``+``); optimizers other than SparseAdam refuse sparse
      gradients (the dense kernels raise); ``nn.EmbeddingBag(sparse=True)``.

Differences from PyTorch: layouts print as ``ember.sparse_coo`` (as dtypes
print ``ember.float32``); ``stride()`` raises for COO too (PyTorch returns
zeros); grad_fn names mostly come from the values-level ops; sparse @ sparse drops products
that are exactly zero; nonlinear elementwise ops (``sin``, ``abs``, ``pow``
...) coalesce first and are differentiable (PyTorch has no sparse derivative
for some); a second backward through ``sparse_coo_tensor(i, v)`` works;
``ember.sparse.mm`` of a 200k-nnz matrix with a 64-column dense one is about
10x slower than PyTorch's (numpy segment sums, no sparse BLAS). Compressed
layouts: where PyTorch's CPU kernels refuse (BSR with non-square blocks or BSC
@ dense, dense @ BSR, batched sparse @ dense, +, -, *, / of BSR/BSC, ``spsolve``
without CUDA, backward of ``to_dense`` of a BSR leaf) ember computes the
result; the factories always run the shape checks (PyTorch only with
``check_invariants``); ``spdiags`` reads diagonals of any length scipy's way
(PyTorch reads out of bounds unless they have ncols columns); int32 compressed
indices are stored as int64 and reported as int32.
"""
from __future__ import annotations

from ._convert import check_sparse_tensor_invariants
from ._extras import (SparseSemiStructuredTensor, SparseSemiStructuredTensorCUSPARSELT,
                      SparseSemiStructuredTensorCUTLASS, as_sparse_gradcheck, spdiags, spsolve,
                      to_sparse_semi_structured)
from ._legacy import LEGACY_SPARSE_TYPES as _LEGACY
from ._ops import addmm as _addmm
from ._ops import hspmm, log_softmax, sampled_addmm, smm, softmax
from ._ops import sparse_mm as _sparse_mm
from ._ops import sum as _sum
from ._tensor import SparseTensor
from .._layout import sparse_coo

__all__ = ["addmm", "mm", "sum", "softmax", "log_softmax", "sampled_addmm", "spmm", "smm", "hspmm",
           "check_sparse_tensor_invariants", "spdiags", "spsolve", "as_sparse_gradcheck",
           "to_sparse_semi_structured", "SparseSemiStructuredTensor", "SparseSemiStructuredTensorCUTLASS",
           "SparseSemiStructuredTensorCUSPARSELT"]

globals().update(_LEGACY)      # the legacy constructors: ember.sparse.FloatTensor(indices, values, size), ...
FloatTensor, DoubleTensor, LongTensor = _LEGACY["FloatTensor"], _LEGACY["DoubleTensor"], _LEGACY["LongTensor"]


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``torch.sparse.addmm``: beta * mat + alpha * (mat1 @ mat2), mat1 sparse."""
    return _addmm(mat, mat1, mat2, beta=beta, alpha=alpha, _sparse_grad=True)


def sum(input, dim=None, dtype=None):
    """``torch.sparse.sum``: over all dims (a dense scalar) or ``dim`` (sparse while sparse dims remain)."""
    if not isinstance(input, SparseTensor):
        raise RuntimeError(f"sparse.sum: expected a sparse tensor, got layout {input.layout}")
    if input.layout is not sparse_coo:     # PyTorch's sparse.sum coalesces first, which CSR/CSC refuse
        input.coalesce()
    return _sum(input, dim, False, dtype)


def mm(mat1, mat2, reduce="sum"):
    """``torch.sparse.mm``: sparse @ dense -> dense (the sparse operand's gradient is sparse, with
    its pattern), dense @ sparse -> dense, sparse @ sparse -> sparse. ``reduce`` other than "sum"
    (PyTorch's CSR-only "mean"/"amax"/"amin") is not supported."""
    if reduce != "sum":
        raise NotImplementedError(f"ember.sparse.mm: reduce='{reduce}' is not supported (only 'sum')")
    return _sparse_mm(mat1, mat2)


spmm = mm


import typing as _typing  # noqa: E402

DimOrDims = _typing.Optional[_typing.Union[int, _typing.Tuple[int, ...], _typing.List[int]]]   # torch.sparse's alias
