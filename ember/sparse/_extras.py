"""The rest of ``torch.sparse``: ``spdiags``, ``spsolve``, ``as_sparse_gradcheck`` and the
semi-structured (2:4) entry points.

Each is built on the public sparse tensors of this package, computing values with
ember ops so that gradients follow.
"""
from __future__ import annotations

import numpy as np

from .. import _layout as L
from ..tensor import Tensor
from ._tensor import COO, CSC, CSR, SparseTensor, Structure, _itensor, _layout_word, from_values


# ---------------------------------------------------------------------- spdiags
def spdiags(diagonals, offsets, shape, layout=None):
    """``torch.sparse.spdiags``: a ``shape`` matrix whose diagonal ``offsets[k]`` holds row ``k``
    of ``diagonals``; element ``(j - offsets[k], j)`` is ``diagonals[k, j]`` (scipy's
    convention: diagonals are indexed by column), for the columns inside the matrix and
    inside ``diagonals``. COO by default (diagonal by diagonal, so not coalesced), or CSR/CSC."""
    if not isinstance(offsets, Tensor):
        raise TypeError(f"_spdiags(): argument 'offsets' (position 2) must be Tensor, not "
                        f"{type(offsets).__name__}")
    if not isinstance(diagonals, Tensor):
        raise TypeError(f"_spdiags(): argument 'diagonals' (position 1) must be Tensor, not "
                        f"{type(diagonals).__name__}")
    for what in (diagonals, offsets):
        if isinstance(what, SparseTensor):
            from ._storage import backend_name
            raise NotImplementedError(f"Could not run 'aten::_spdiags' with arguments from the "
                                      f"'{backend_name(what.layout, what.device)}' backend (ember.sparse: "
                                      f"spdiags takes strided diagonals and offsets)")
    lay = COO if layout is None else L.as_layout(layout)
    if lay not in (COO, CSR, CSC):
        raise RuntimeError(f"Only output layouts (Sparse, SparseCsc, SparseCsr) are supported, got "
                           f"{'Strided' if lay is L.strided else _layout_word(lay)}")
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise RuntimeError("Output shape must be 2d")
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}")
    if diagonals.ndim not in (1, 2):
        raise RuntimeError("Diagonals must be vector or matrix")
    if offsets.ndim > 1:
        raise RuntimeError("Offsets must be scalar or vector")
    offs = np.asarray(offsets.detach()._data).reshape(-1).astype(np.int64)
    diags = diagonals.reshape(1, -1) if diagonals.ndim == 1 else diagonals
    if diags.shape[0] != offs.shape[0]:
        raise RuntimeError(f"Number of diagonals ({diags.shape[0]}) does not match the number of offsets "
                           f"({offs.shape[0]})")
    if np.unique(offs).shape[0] != offs.shape[0]:
        raise RuntimeError("Offset tensor contains duplicate values")
    rows, cols = shape
    length = diags.shape[1]
    rr, cc, src = [], [], []
    for k, off in enumerate(offs.tolist()):
        start, stop = max(0, off), min(cols, rows + off, length)
        if stop <= start:
            continue
        j = np.arange(start, stop, dtype=np.int64)
        rr.append(j - off)
        cc.append(j)
        src.append(k * length + j)
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
    idx = np.stack([cat(rr), cat(cc)])
    vals = diags.reshape(-1).index_select(0, _itensor(cat(src), diagonals.device))
    out = from_values(Structure(COO, shape, 2, indices=idx, coalesced=offs.shape[0] <= 1), vals)
    if lay is CSR:
        return out.to_sparse_csr()
    if lay is CSC:
        return out.to_sparse_csc()
    return out


# ---------------------------------------------------------------------- spsolve
def spsolve(input, other, *, left=True):
    """``torch.sparse.spsolve``: the solution ``x`` of ``input @ x = other`` for a square CSR
    ``input``. PyTorch runs it on CUDA only (its CPU build raises "Could not run 'aten::_spsolve'
    ... 'SparseCsrCPU'"); ember solves on the CPU through a dense LU factorisation of ``input``
    (``linalg.solve`` of ``input.to_dense()``), differentiable in the values and in ``other``."""
    if not left:
        raise RuntimeError("Only left=True is supported")
    if not isinstance(input, SparseTensor) or input.layout is not CSR:
        from ._storage import backend_name
        backend = "CPU" if not isinstance(input, SparseTensor) else backend_name(input.layout, input.device)
        raise NotImplementedError(f"Could not run 'aten::_spsolve' with arguments from the '{backend}' backend "
                                  f"(ember.sparse.spsolve: input must be a sparse_csr matrix, got layout "
                                  f"{getattr(input, 'layout', type(input).__name__)})")
    if isinstance(other, SparseTensor):
        raise RuntimeError(f"ember.sparse.spsolve: other must be a strided (dense) tensor, got layout {other.layout}")
    if input.ndim != 2 or input.shape[0] != input.shape[1]:
        raise RuntimeError(f"spsolve: input must be a square matrix, got shape {list(input.shape)}")
    if other.ndim not in (1, 2) or other.shape[0] != input.shape[0]:
        raise RuntimeError(f"spsolve: other must have shape ({input.shape[0]},) or ({input.shape[0]}, k), got "
                           f"{list(other.shape)}")
    if other.dtype is not input.dtype:
        raise RuntimeError(f"spsolve: expected input and other to have the same dtype, but got {input.dtype} and "
                           f"{other.dtype}")
    from .. import linalg
    return linalg.solve(input.to_dense(), other)


# ---------------------------------------------------------------------- as_sparse_gradcheck
def as_sparse_gradcheck(gradcheck):
    """``torch.sparse.as_sparse_gradcheck``: ``gradcheck`` extended to functions of sparse tensors.
    Each sparse input that requires grad is handed to ``gradcheck`` as its (strided) values --
    with every element specified, unless ``masked=True`` -- and rebuilt around them inside the
    checked function; sparse outputs are compared as dense tensors."""

    def gradcheck_with_sparse_support(func, inputs, **kwargs):
        masked = kwargs.pop("masked", False)
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        rebuild = {}
        flat = []
        for i, x in enumerate(inputs):
            if isinstance(x, SparseTensor) and x.requires_grad:
                s = x.detach() if masked else _fully_specified(x)
                rebuild[i] = _rebuilder(s)
                flat.append(s._values().clone().requires_grad_(True))
            else:
                flat.append(x)

        def func_wrapper(*args):
            restored = [rebuild[i](a) if i in rebuild else a for i, a in enumerate(args)]
            outputs = func(*restored)
            outs = tuple(outputs) if isinstance(outputs, (list, tuple)) else (outputs,)
            outs = tuple(o.to_dense() if isinstance(o, SparseTensor) else o for o in outs)
            return outs if isinstance(outputs, (list, tuple)) else outs[0]

        return gradcheck(func_wrapper, tuple(flat), **kwargs)

    gradcheck_with_sparse_support.__doc__ = gradcheck.__doc__
    return gradcheck_with_sparse_support


def _fully_specified(x):
    """``x`` with every element specified (unspecified ones as explicit zeros), same layout."""
    from ..ops import api
    st = x._st
    full = api.ones(tuple(x.shape), dtype=x.dtype)
    dense_dim = len(st.shape) - st.sdim
    if x.layout is COO:
        pattern = full.to_sparse(st.sdim)
    else:
        pattern = full.to_sparse(layout=x.layout, blocksize=st.blocksize, dense_dim=dense_dim or None)
    return x.detach().to_dense().sparse_mask(pattern)


def _rebuilder(s):
    """A function: values -> a sparse tensor with ``s``'s structure holding them."""
    st = s._st

    def rebuild(values):
        return from_values(st, values)
    return rebuild


# ---------------------------------------------------------------------- semi-structured (2:4)
_SEMI = ("ember.sparse: semi-structured (2:4) sparsity needs NVIDIA's sparse tensor cores (cuSPARSELt / "
         "CUTLASS kernels), which ember does not have")


def to_sparse_semi_structured(original_tensor, transposed=False):
    """``torch.sparse.to_sparse_semi_structured``: PyTorch supports CUDA tensors only and raises
    its error for CPU ones; ember has no 2:4 kernels on any device."""
    dev = getattr(getattr(original_tensor, "device", None), "type", "cpu")
    if dev == "cpu":
        raise RuntimeError(f"Error original_tensor.device= cpu is not supported! Only CUDA tensors are "
                           f"currently supported.")
    raise NotImplementedError(_SEMI)


class SparseSemiStructuredTensor:
    """``torch.sparse.SparseSemiStructuredTensor``: a name for ``isinstance`` checks; no tensor is
    ever one (see ``to_sparse_semi_structured``)."""

    _FORCE_CUTLASS = False

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(_SEMI)


class SparseSemiStructuredTensorCUTLASS(SparseSemiStructuredTensor):
    """``torch.sparse.SparseSemiStructuredTensorCUTLASS`` (not constructible, as the base)."""


class SparseSemiStructuredTensorCUSPARSELT(SparseSemiStructuredTensor):
    """``torch.sparse.SparseSemiStructuredTensorCUSPARSELT`` (not constructible, as the base)."""

