"""Compressed layouts in general: batch dimensions, blocks (BSR / BSC) and dense dimensions.

A compressed tensor of shape ``(*batch, nrows, ncols, *dense)`` stores, per
batch element, ``compressed`` indices (``crow_indices`` for CSR/BSR,
``ccol_indices`` for CSC/BSC: where each row's / column's entries start),
``plain`` indices (the column / row of each entry) and values of shape
``(*batch, nnz, *blocksize, *dense)``; every batch element holds the same
``nnz`` (PyTorch's rule). For BSR/BSC an entry is a ``blocksize`` block and
the indices count blocks.

Everything else in ember.sparse computes on element-wise COO indices, so this
module's core is ``element_indices``: the ``(nbatch + 2, n_elements)`` index
of every element of ``values`` flattened to ``(-1, *dense)``. With it,
``to_dense``, the conversions to COO, the gradients (``gather_values``) and
the products work for every compressed layout. The other direction
(``to_compressed``) builds a structure from a dense tensor or from COO.
The 2-d CSR/CSC matrices without batch or dense dims keep their own faster
paths in ``_convert``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _layout as L
from ..tensor import Tensor
from ._tensor import (BLOCKED, COO, CSC, CSR, BSC, BSR, ROW_COMPRESSED, SparseTensor, Structure, _api,
                      _itensor, _layout_word, from_values, values_of)


def names(layout):
    """(compressed, plain) index names of ``layout``: ("crow", "col") or ("ccol", "row")."""
    return ("crow", "col") if layout in ROW_COMPRESSED else ("ccol", "row")


def element_indices(st):
    """COO indices ``(nbatch + 2, n)`` of each element of ``st``'s values flattened to
    ``(-1, *dense)``: batch-major, then entry order, then row-major inside a block."""
    nb = st.nbatch
    batch_shape = st.shape[:nb]
    B = int(math.prod(batch_shape))
    comp = st.compressed.reshape(B, -1)
    plain = st.plain.reshape(B, -1)
    nnz = plain.shape[1]
    counts = np.diff(comp, axis=1)                     # (B, nouter)
    if np.any(counts < 0):      # (unchecked invalid input: never read past the arrays)
        cn = names(st.layout)[0]
        raise RuntimeError(f"`0 <= {cn}_indices[..., 1:] - {cn}_indices[..., :-1] <= "
                           f"{'ncols' if st.layout in ROW_COMPRESSED else 'nrows'}` is not satisfied.")
    nouter = counts.shape[1]
    outer = np.repeat(np.tile(np.arange(nouter, dtype=np.int64), B), counts.reshape(-1))
    plain = plain.reshape(-1)
    if outer.shape[0] != plain.shape[0]:
        raise RuntimeError(f"`{names(st.layout)[0]}_indices[..., -1] == nnz` is not satisfied.")
    rows, cols = (outer, plain) if st.layout in ROW_COMPRESSED else (plain, outer)
    batch = np.repeat(np.arange(B, dtype=np.int64), nnz)
    if st.blocksize is not None:
        bh, bw = st.blocksize
        ii, jj = np.meshgrid(np.arange(bh, dtype=np.int64), np.arange(bw, dtype=np.int64), indexing="ij")
        rows = (rows[:, None] * bh + ii.reshape(1, -1)).reshape(-1)
        cols = (cols[:, None] * bw + jj.reshape(1, -1)).reshape(-1)
        batch = np.repeat(batch, bh * bw)
    parts = [np.asarray(a, dtype=np.int64) for a in np.unravel_index(batch, batch_shape)] if nb else []
    return np.stack(parts + [rows, cols])


def flat_values(s):
    """The values of compressed ``s`` as ``(n_elements, *dense)``, differentiable."""
    st = s._st
    return values_of(s).reshape((-1,) + st.dense_shape)


# ---------------------------------------------------------------------- the factories
def _index_dtype_name(x):
    if isinstance(x, Tensor):
        return x.dtype.legacy_name if hasattr(x.dtype, "legacy_name") else str(x.dtype)
    arr = np.asarray(x)
    return {"i": "Long", "u": "Long", "b": "Bool"}.get(arr.dtype.kind, "Float")


def check_index_dtypes(layout, cidx, pidx):
    """PyTorch's check that the two index tensors share an integer dtype."""
    c, p = names(layout)
    cn, pn = _index_dtype_name(cidx), _index_dtype_name(pidx)
    if cn != pn:
        raise RuntimeError(f"{c}_indices and {p}_indices must have the same dtype, bot got {cn} and {pn}, "
                           f"respectively")
    if cn not in ("Int", "Long"):
        raise RuntimeError(f"{c}_indices and {p}_indices must be an int32 or int64 type, but got: {cn}")
    return cn == "Int"


def infer_size(layout, c, p, vshape, nbatch, blocksize):
    """PyTorch's size of a compressed tensor made without ``size``: the outer count from the
    compressed indices, the inner one from the largest plain index, batch and dense from values."""
    bh, bw = blocksize or (1, 1)
    nouter = max(c.shape[-1] - 1, 0)
    ninner = int(p.max()) + 1 if p.size else 0
    if layout in ROW_COMPRESSED:
        base = (nouter * bh, ninner * bw)
    else:
        base = (ninner * bh, nouter * bw)
    nblock = 2 if blocksize is not None else 0
    return tuple(c.shape[:nbatch]) + base + tuple(vshape[nbatch + 1 + nblock:])


def check_shapes(layout, c, p, vshape, size):
    """PyTorch's shape checks of the compressed factories (``_validate_sparse_compressed_tensor_args``);
    returns (nbatch, blocksize, dense_dim)."""
    cn, pn = names(layout)
    if c.ndim != p.ndim:
        raise RuntimeError(f"{cn}_indices and {pn}_indices dimensionalities must be equal but got {c.ndim} and "
                           f"{p.ndim}, respectively")
    if c.ndim < 1:
        raise RuntimeError(f"{cn}_indices must have dimensionality >= 1 but got {c.ndim}")
    nbatch = c.ndim - 1
    blocked = layout in BLOCKED
    nblock = 2 if blocked else 0
    if blocked and len(vshape) <= nbatch + nblock:
        raise RuntimeError(f"values must have dimensionality > sum of batch and block dimensionalities "
                           f"(={nbatch} + {nblock}) but got {len(vshape)}")
    if not blocked and len(vshape) < nbatch + 1:
        raise RuntimeError(f"values must have dimensionality > sum of batch and block dimensionalities "
                           f"(={nbatch} + 0) but got {len(vshape)}")
    dense_dim = len(vshape) - nbatch - 1 - nblock
    blocksize = tuple(int(b) for b in vshape[nbatch + 1:nbatch + 1 + nblock]) if blocked else None
    if size is None:
        return nbatch, blocksize, dense_dim, None
    size = tuple(int(s) for s in size)
    if len(size) != nbatch + 2 + dense_dim:
        raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense dimensionalities "
                           f"(={nbatch} + 2 + {dense_dim}) but got {len(size)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(size)}")
    batch = list(size[:nbatch])
    if list(c.shape[:nbatch]) != batch or list(p.shape[:nbatch]) != batch or list(vshape[:nbatch]) != batch:
        raise RuntimeError(f"all batch dimensions of {cn}_indices (={list(c.shape[:nbatch])}), {pn}_indices "
                           f"(={list(p.shape[:nbatch])}), and values (={list(vshape[:nbatch])}) must be equal "
                           f"to tensor batch dimensions (={batch})")
    if blocked:
        for k in range(2):
            if blocksize[k] == 0 or size[nbatch + k] % blocksize[k]:
                raise RuntimeError(f"tensor shape[{nbatch + k}] (={size[nbatch + k]}) must be divisible with "
                                   f"blocksize[{k}] (={blocksize[k]}) as defined by values shape")
    bh, bw = blocksize or (1, 1)
    nrows, ncols = size[nbatch] // bh, size[nbatch + 1] // bw
    row = layout in ROW_COMPRESSED
    nouter = nrows if row else ncols
    what = ("row" if row else "column") + (" blocks" if blocked else "s")
    if c.shape[-1] != nouter + 1:
        raise RuntimeError(f"{cn}_indices.shape[-1] must be equal to the number of {what} + 1 (={nouter + 1}), "
                           f"but got {c.shape[-1]}")
    if p.shape[-1] != vshape[nbatch]:
        raise RuntimeError(f"{pn}_indices.shape[-1] must be equal to nnz (={vshape[nbatch]}) as defined by "
                           f"values.shape[{nbatch}], but got {p.shape[-1]}")
    if size[nbatch + 2:] != tuple(vshape[nbatch + 1 + (2 if blocked else 0):]):
        raise RuntimeError(f"values has incorrect size, expected dense dimensions "
                           f"{list(size[nbatch + 2:])}, got {list(vshape[nbatch + 1 + nblock:])}")
    return nbatch, blocksize, dense_dim, size


def check_invariants(layout, c, p, nbatch, size, blocksize):
    """PyTorch's value invariants (``check_invariants=True``), per batch element."""
    cn, pn = names(layout)
    bh, bw = blocksize or (1, 1)
    row = layout in ROW_COMPRESSED
    ninner = size[nbatch + 1] // bw if row else size[nbatch] // bh
    nnz = p.shape[-1]
    cc = c.reshape(-1, c.shape[-1])
    pp = p.reshape(-1, nnz)
    if cc.shape[0] and np.any(cc[:, 0] != 0):
        raise RuntimeError(f"`{cn}_indices[..., 0] == 0` is not satisfied.")
    if cc.shape[0] and np.any(cc[:, -1] != nnz):
        raise RuntimeError(f"`{cn}_indices[..., -1] == nnz` is not satisfied.")
    d = np.diff(cc, axis=1)
    limit = "ncols" if row else "nrows"
    if np.any(d < 0) or np.any(d > ninner):
        raise RuntimeError(f"`0 <= {cn}_indices[..., 1:] - {cn}_indices[..., :-1] <= {limit}` is not satisfied.")
    if pp.size and (pp.min() < 0 or pp.max() >= ninner):
        raise RuntimeError(f"`0 <= {pn}_indices < {limit}` is not satisfied.")
    if nnz > 1:
        outer = np.repeat(np.tile(np.arange(cc.shape[1] - 1), cc.shape[0]), d.reshape(-1)).reshape(pp.shape)
        if np.any((np.diff(pp, axis=1) <= 0) & (np.diff(outer, axis=1) == 0)):
            raise RuntimeError(f"`{pn}_indices[..., {cn}_indices[..., i - 1]:{cn}_indices[..., i]] for all i = 1, "
                               f"..., n{'rows' if row else 'cols'} are sorted and distinct along the last "
                               f"dimension values` is not satisfied.")


def make(layout, c, p, v, size, checking, idx32=False):
    """A compressed tensor from numpy index arrays ``c``, ``p`` and the values tensor ``v``."""
    vshape = tuple(v.shape)
    nbatch, blocksize, dense_dim, size = check_shapes(layout, c, p, vshape, size)
    if size is None:
        size = infer_size(layout, c, p, vshape, nbatch, blocksize)
        check_shapes(layout, c, p, vshape, size)
    if checking:
        check_invariants(layout, c, p, nbatch, size, blocksize)
    st = Structure(layout, size, nbatch + 2, compressed=c, plain=p, nbatch=nbatch, blocksize=blocksize,
                   idx32=idx32)
    return from_values(st, v)


# ---------------------------------------------------------------------- building from elements
def _block_of(idx, nbatch, blocksize):
    """Block coordinates of element indices (batch dims unchanged)."""
    if blocksize is None:
        return idx
    out = idx.copy()
    out[nbatch] //= blocksize[0]
    out[nbatch + 1] //= blocksize[1]
    return out


def _structure_from_entries(layout, shape, nbatch, blocksize, ent):
    """The structure holding the (unique, any order) entries ``ent`` ``(nbatch + 2, n)`` (block
    coordinates for BSR/BSC), and the order in which the entries become its values."""
    batch_shape = shape[:nbatch]
    B = int(math.prod(batch_shape))
    bh, bw = blocksize or (1, 1)
    nr, nc = shape[nbatch] // bh, shape[nbatch + 1] // bw
    row = layout in ROW_COMPRESSED
    b = np.ravel_multi_index(tuple(ent[:nbatch]), batch_shape) if nbatch else np.zeros(ent.shape[1], np.int64)
    r, col = ent[nbatch], ent[nbatch + 1]
    outer, inner = (r, col) if row else (col, r)
    nouter = nr if row else nc
    order = np.lexsort((inner, outer, b)).astype(np.int64)
    per_batch = np.bincount(b, minlength=B) if B else np.zeros(0, np.int64)
    if B and np.any(per_batch != per_batch[0]):
        raise RuntimeError("Expect the same number of specified elements per batch.")
    nnz = int(per_batch[0]) if B else 0
    ob = outer[order].reshape(B, nnz) if B else np.zeros((0, 0), np.int64)
    comp = np.zeros((B, nouter + 1), np.int64)
    if B:
        per_row = np.bincount((np.arange(B)[:, None] * nouter + ob).reshape(-1), minlength=B * nouter)
        comp[:, 1:] = np.cumsum(per_row.reshape(B, nouter), axis=1)
    plain = inner[order].reshape(B, nnz) if B else np.zeros((0, 0), np.int64)
    comp = comp.reshape(batch_shape + (nouter + 1,))
    plain = np.ascontiguousarray(plain.reshape(batch_shape + (nnz,)))
    st = Structure(layout, shape, nbatch + 2, compressed=comp, plain=plain, nbatch=nbatch, blocksize=blocksize)
    return st, order


def from_dense(x, layout, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse_csr/csc/bsr/bsc`` of a dense tensor: the entries (elements, or
    blocks for BSR/BSC) with a nonzero value; leading dims beyond 2 + dense_dim are batch dims."""
    fname = "dense_to_sparse_" + layout._name.split("_")[1]
    if x._fake:
        raise NotImplementedError(f"ember.sparse: to_sparse_{layout._name[7:]} of a fake tensor (inside a traced or "
                                  f"compiled region) is not supported")
    if x.device.type != "cpu":
        raise NotImplementedError("ember.sparse: sparse tensors are CPU only; call .cpu() first")
    nd = x.ndim
    if nd < 2:
        lo, hi = -max(nd, 1), max(nd, 1) - 1
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got -2)")
    dd = 0 if dense_dim is None else int(dense_dim)
    if dense_dim is not None and not 0 <= dd <= nd - 2:
        raise RuntimeError(f"{fname}: dense_dim argument must be in [0,{max(nd - 2, 0)}] range, but {dd} is given")
    nbatch = nd - 2 - dd
    shape = tuple(int(s) for s in x.shape)
    base = shape[nbatch:nbatch + 2]
    if blocksize is not None:
        bh, bw = blocksize
        if bh <= 0 or bw <= 0 or base[0] % bh or base[1] % bw:
            raise RuntimeError(f"{fname}: tensor sparse size ({base[0]},{base[1]}) must be divisible by given "
                               f"blocksize ({bh},{bw})")
    else:
        bh = bw = 1
    nr, nc = base[0] // bh, base[1] // bw
    batch_shape, dense_shape = shape[:nbatch], shape[nbatch + 2:]
    B = int(math.prod(batch_shape))
    # (B, nr, bh, nc, bw, *dense) -> (B, nr, nc, bh, bw, *dense): one row per entry
    blocks = x.reshape((B, nr, bh, nc, bw) + dense_shape)
    perm = (0, 1, 3, 2, 4) + tuple(range(5, 5 + len(dense_shape)))
    blocks = blocks.permute(perm).reshape((B * nr * nc,) + ((bh, bw) if blocksize else ()) + dense_shape)
    arr = np.asarray(x.detach()._data).reshape((B, nr, bh, nc, bw, -1))
    nz = (arr != 0).any(axis=(2, 4, 5)) if arr.size else np.zeros((B, nr, nc), bool)
    bi, ri, ci = np.nonzero(nz)
    ent = np.stack([np.asarray(a, np.int64) for a in np.unravel_index(bi, batch_shape)]
                   + [ri.astype(np.int64), ci.astype(np.int64)]) if nbatch else \
        np.stack([ri.astype(np.int64), ci.astype(np.int64)])
    st, order = _structure_from_entries(layout, shape, nbatch, blocksize, ent)
    lin = (bi * nr * nc + ri * nc + ci).astype(np.int64)[order]
    vals = blocks.index_select(0, _itensor(lin, x.device)).reshape(st.values_shape())
    return from_values(st, vals)


def from_coo(s, layout, blocksize=None, nbatch=0):
    """A COO tensor (``nbatch + 2`` sparse dims) as ``layout``: the entries holding a specified
    element (for BSR/BSC each block with any; the block's other elements are zeros)."""
    from ._ops import coalesce, segment_sum
    c = coalesce(s)
    st = c._st
    shape = st.shape
    if blocksize is not None:
        bh, bw = blocksize
        base = shape[nbatch:nbatch + 2]
        if bh <= 0 or bw <= 0 or base[0] % bh or base[1] % bw:
            fname = "sparse_coo_to_sparse_" + layout._name.split("_")[1]
            raise RuntimeError(f"{fname}: tensor sparse size ({base[0]},{base[1]}) must be divisible by given "
                               f"blocksize ({bh},{bw})")
    idx = st.indices
    bidx = _block_of(idx, nbatch, blocksize)
    key_shape = shape[:nbatch] + ((shape[nbatch] // blocksize[0], shape[nbatch + 1] // blocksize[1])
                                  if blocksize else shape[nbatch:nbatch + 2])
    keys = np.ravel_multi_index(tuple(bidx), key_shape) if idx.shape[1] else np.zeros(0, np.int64)
    ukeys, inv = np.unique(keys, return_inverse=True)
    ent = np.stack([np.asarray(a, np.int64) for a in np.unravel_index(ukeys, key_shape)]) if ukeys.size \
        else np.zeros((nbatch + 2, 0), np.int64)
    new, order = _structure_from_entries(layout, shape, nbatch, blocksize, ent)
    v = values_of(c)
    if blocksize is None:
        vals = v.index_select(0, _itensor(_inverse_take(order, inv.reshape(-1)), v.device))
        return from_values(new, vals.reshape(new.values_shape()))
    bh, bw = blocksize
    pos = np.empty_like(order)
    pos[order] = np.arange(order.shape[0])
    slot = pos[inv.reshape(-1)] * (bh * bw) + (idx[nbatch] % bh) * bw + (idx[nbatch + 1] % bw)
    flat = segment_sum(v, slot, order.shape[0] * bh * bw)
    return from_values(new, flat.reshape(new.values_shape()))


def _inverse_take(order, inv):
    """Positions of the elements in the new order: element ``k`` goes to slot ``pos[inv[k]]``;
    the gather reading element values in slot order."""
    pos = np.empty_like(order)
    pos[order] = np.arange(order.shape[0])
    slots = pos[inv]
    out = np.empty_like(slots)
    out[slots] = np.arange(slots.shape[0])
    return out


def to_coo(s):
    """A compressed tensor (any batch / block / dense dims) as COO with element-wise indices
    (sparse_dim = nbatch + 2), in the order of its values, as PyTorch's ``to_sparse_coo``."""
    st = s._st
    idx = element_indices(st)
    coo = from_values(Structure(COO, st.shape, st.sdim, indices=idx, coalesced=False), flat_values(s))
    if st.layout is CSR:
        coo._st.coalesced = bool(np.all(np.diff(coo._st.lin()) > 0))
    return coo


def _layout_fn_word(layout):
    return layout._name.split("_")[1]


def convert(s, layout, blocksize=None, dense_dim=None):
    """Any sparse or dense tensor to compressed ``layout`` (PyTorch's conversion rules and errors;
    a compressed source's index dtype is kept)."""
    out = _convert(s, layout, blocksize, dense_dim)
    if isinstance(s, SparseTensor) and s._st.layout is not COO and out is not s:
        out._st = out._st.with_index_dtype_of(s._st)
    return out


def _convert(s, layout, blocksize, dense_dim):
    name = _layout_fn_word(layout)
    if blocksize is not None:
        blocksize = _blocksize_arg(blocksize, f"to_sparse_{name}")
    if not isinstance(s, SparseTensor):
        if layout in BLOCKED and blocksize is None:
            raise RuntimeError(f"dense_to_sparse: conversion from Strided to {_layout_word(layout)} without "
                               f"blocksize argument given is not supported")
        return from_dense(s, layout, blocksize, dense_dim)
    st = s._st
    src = st.layout
    if src is COO:
        if st.sdim != 2:
            raise RuntimeError(f"coo_to_sparse_{name}: conversion from Sparse to {_layout_word(layout)} for "
                               f"input tensors with sparse_dim()!=2 is not supported")
        return from_coo(s, layout, blocksize)
    if layout in BLOCKED:
        if src in BLOCKED:
            if blocksize is not None and tuple(blocksize) != st.blocksize:
                fn = f"to_sparse_{name}" if src is layout else f"sparse_compressed_to_sparse_{name}"
                raise RuntimeError(f"{fn}: conversion from {_layout_word(src)} to {_layout_word(layout)} with "
                                   f"blocksize changed from {list(st.blocksize)} to {list(blocksize)} is not "
                                   f"supported")
            if src is layout:
                return s
            return from_coo(to_coo(s), layout, st.blocksize, st.nbatch)
        if st.nbatch:
            raise RuntimeError(f"sparse_compressed_to_sparse_{name}: conversion from {_layout_word(src)} to "
                               f"{_layout_word(layout)} for batched inputs is not supported")
        if blocksize is None:
            raise RuntimeError(f"sparse_compressed_to_sparse_{name}: conversion from {_layout_word(src)} to "
                               f"{_layout_word(layout)} without blocksize argument given is not supported")
        return from_coo(to_coo(s), layout, blocksize, 0)
    # to CSR / CSC
    if blocksize is not None:
        raise RuntimeError(f"sparse_compressed_to_sparse_{name}: conversion from {_layout_word(src)} to "
                           f"{_layout_word(layout)} with blocksize argument given is not supported")
    if src in BLOCKED:
        raise RuntimeError(f"sparse_compressed_to_sparse_{name}: expected SparseCsr or SparseCsc layout but got "
                           f"{_layout_word(src)}")
    if src is layout:
        return s
    return from_coo(to_coo(s), layout, None, st.nbatch)


def _blocksize_arg(blocksize, fname):
    if isinstance(blocksize, int) and not isinstance(blocksize, bool):
        return (blocksize, blocksize)
    try:
        bs = tuple(int(b) for b in blocksize)
    except TypeError:
        raise TypeError(f"{fname}(): argument 'blocksize' (position 1) must be tuple of ints, not "
                        f"{type(blocksize).__name__}") from None
    if len(bs) != 2:
        raise RuntimeError(f"dense_to_sparse_{fname.split('_')[-1]}: blocksize needs to be a tuple of size 2, "
                           f"but got {len(bs)}")
    return bs


# ---------------------------------------------------------------------- structure ops
def transpose_last(s):
    """The transpose of the last two (non-dense) dims: CSR <-> CSC, BSR <-> BSC over the same
    index arrays (blocks transposed), batch dims kept."""
    st = s._st
    nb = st.nbatch
    shape = list(st.shape)
    shape[nb], shape[nb + 1] = shape[nb + 1], shape[nb]
    flip = {CSR: CSC, CSC: CSR, BSR: BSC, BSC: BSR}[st.layout]
    v = values_of(s)
    bs = st.blocksize
    if bs is not None:
        v = v.transpose(nb + 1, nb + 2)
        bs = (bs[1], bs[0])
    new = Structure(flip, shape, st.sdim, compressed=st.compressed, plain=st.plain, nbatch=nb, blocksize=bs,
                    idx32=st.idx32)
    return from_values(new, v)


def empty(shape, layout, dtype, blocksize=None, dense_dim=0):
    """A compressed tensor of ``shape`` (the dims before the last two non-dense ones are batch
    dims) with no entries."""
    from .. import zeros
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2 + dense_dim:
        raise RuntimeError(f"empty_{_layout_fn_word(layout)}: at least two dimensions are required, got "
                           f"{len(shape) - dense_dim}")
    nb = len(shape) - 2 - dense_dim
    bh, bw = blocksize or (1, 1)
    nouter = shape[nb] // bh if layout in ROW_COMPRESSED else shape[nb + 1] // bw
    st = Structure(layout, shape, nb + 2, compressed=np.zeros(shape[:nb] + (nouter + 1,), np.int64),
                   plain=np.zeros(shape[:nb] + (0,), np.int64), nbatch=nb, blocksize=blocksize)
    return from_values(st, zeros(st.values_shape(), dtype=dtype))


# ---------------------------------------------------------------------- products
def _entry_coords(st):
    """Per entry (not per element): flat batch index, block row, block column."""
    nb = st.nbatch
    batch_shape = st.shape[:nb]
    B = int(math.prod(batch_shape))
    comp = st.compressed.reshape(B, -1)
    counts = np.diff(comp, axis=1)
    nouter = counts.shape[1]
    outer = np.repeat(np.tile(np.arange(nouter, dtype=np.int64), B), counts.reshape(-1))
    plain = st.plain.reshape(-1)
    if outer.shape[0] != plain.shape[0]:
        raise RuntimeError(f"`{names(st.layout)[0]}_indices[..., -1] == nnz` is not satisfied.")
    rows, cols = (outer, plain) if st.layout in ROW_COMPRESSED else (plain, outer)
    return np.repeat(np.arange(B, dtype=np.int64), st.plain.shape[-1]), rows, cols


def blocked_spmm(a, b):
    """BSR/BSC ``a`` ``(*batch, M, K)`` @ dense ``b`` ``(*batch, K, N)`` or ``(K, N)``, block by
    block: each entry's ``(bh, bw)`` block times the ``(bw, N)`` row block of ``b`` it meets (one
    batched matmul), summed into the output's row blocks -- ``bh * bw`` times fewer gathers than
    going element by element. Differentiable in the values and in ``b``."""
    from ._ops import segment_sum
    st = a._st
    nb = st.nbatch
    bh, bw = st.blocksize
    M, K = st.shape[nb], st.shape[nb + 1]
    batch = st.shape[:nb]
    B = int(math.prod(batch))
    N = b.shape[-1]
    nr, nc = M // bh, K // bw
    bi, rows, cols = _entry_coords(st)
    if rows.size and (rows.min() < 0 or rows.max() >= nr or cols.min() < 0 or cols.max() >= nc):
        # (unchecked invalid input: never gather outside b)
        raise RuntimeError(f"`0 <= {names(st.layout)[1]}_indices < "
                           f"{'ncols' if st.layout in ROW_COMPRESSED else 'nrows'}` is not satisfied.")
    if b.ndim == 2:
        bblocks = b.reshape(nc, bw, N)
    else:
        bblocks = b.reshape(B * nc, bw, N)
        cols = bi * nc + cols
    vals = values_of(a).reshape(-1, bh, bw)
    prod = vals.matmul(bblocks.index_select(0, _itensor(cols, b.device)))      # (nnz_total, bh, N)
    out = segment_sum(prod, bi * nr + rows, B * nr)                             # (B * nr, bh, N)
    return out.reshape(batch + (M, N))


def batched_spmm(a, b):
    """Batched compressed ``a`` ``(*batch, M, K)`` @ dense ``b`` ``(*batch, K, N)`` or ``(K, N)``:
    the batches become one block-diagonal ``(B*M, B*K)`` COO matrix, so a single segment sum
    computes every product (differentiable in both values and ``b``)."""
    from ._ops import segment_sum
    st = a._st
    nb = st.nbatch
    if st.dense_shape:
        raise NotImplementedError("ember.sparse: matmul of a compressed tensor with dense dimensions is not "
                                  "supported")
    batch = st.shape[:nb]
    M, K = st.shape[nb], st.shape[nb + 1]
    if b.ndim not in (2, nb + 2):
        raise RuntimeError(f"matmul: expected the dense operand to be 2-d or {nb + 2}-d for a sparse operand of "
                           f"shape {list(st.shape)}, got {b.ndim}-d")
    if b.shape[-2] != K:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {b.shape[-2]}x{b.shape[-1]})")
    if b.ndim == nb + 2 and tuple(b.shape[:nb]) != batch:
        raise RuntimeError(f"matmul: batch dimensions of the sparse operand {list(batch)} and the dense operand "
                           f"{list(b.shape[:nb])} must be equal (no broadcasting with a sparse operand)")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {getattr(a.dtype, 'legacy_name', a.dtype)} but found "
                           f"{getattr(b.dtype, 'legacy_name', b.dtype)}")
    if st.blocksize is not None:
        return blocked_spmm(a, b)
    B = int(math.prod(batch))
    N = b.shape[-1]
    idx = element_indices(st)
    bflat = np.ravel_multi_index(tuple(idx[:nb]), batch) if nb else np.zeros(idx.shape[1], np.int64)
    rows = bflat * M + idx[nb]
    v = flat_values(a)
    if b.ndim == 2:
        cols = idx[nb + 1]
        bb = b
    else:
        cols = bflat * K + idx[nb + 1]
        bb = b.reshape(B * K, N)
    prod = v.unsqueeze(1) * bb.index_select(0, _itensor(cols, b.device))
    return segment_sum(prod, rows, B * M).reshape(batch + (M, N))
