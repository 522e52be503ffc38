"""``nt[index]``: the indexing torch 2.13 accepts on nested tensors, with its errors elsewhere.

torch's rules, per index entry (``...`` is free, it only skips dims):

* an integer first selects one component (a dense tensor), and the rest indexes it;
* any other entry on the batch dim 0 (``nt[:, 0]``) is refused;
* an integer on a regular dim selects there (strided: non-negative and in range of every
  component; jagged: Python-style, negative allowed), the result is nested;
* a slice on a regular dim: jagged only (strided has no ``slice``), and not on a transposed
  jagged tensor; never on the ragged dim (``select`` neither);
* ``None`` adds a dim of size 1 anywhere after the batch dim;
* tensors, lists and booleans as indices are refused (torch has no nested ``index``).

Selecting / slicing a regular dim stored as a buffer dim runs once on the buffer (a view:
gradients and in-place writes reach it), otherwise per component.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import _layout as L
from ..tensor import Tensor
from ._tensor import NestedTensor, pack_like, wrap


def _strided_missing(op):
    return NotImplementedError(
        f"Could not run 'aten::{op}' with arguments from the 'NestedTensorCPU' backend. ember.nested has no "
        f"implementation of '{op}' for strided nested tensors; use .unbind() or ember.nested.to_padded_tensor() "
        f"first.")


def _refuse_advanced(nt, item):
    if nt._nlayout is L.jagged:
        return NotImplementedError("aten.index.Tensor")
    return _strided_missing("index.Tensor")


def _is_int(x):
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def getitem(nt, index):
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if isinstance(it, (bool, np.bool_, list, Tensor, np.ndarray)):
            raise _refuse_advanced(nt, it)
        if not (_is_int(it) or it is None or it is Ellipsis or isinstance(it, slice)):
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                             f"are valid indices (got {type(it).__name__})")
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > nt.dim():
        raise IndexError(f"too many indices for tensor of dimension {nt.dim()}")
    if items and _is_int(items[0]):
        comp = nt._component_at(int(items[0]))
        rest = items[1:]
        _check_component_bounds(comp, rest)
        return comp[rest] if rest else comp
    if sum(it is Ellipsis for it in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out, d = nt, 0
    for it in items:
        if it is Ellipsis:
            d += nt.dim() - used
        elif it is None:
            out = unsqueeze(out, d)
            d += 1
        elif _is_int(it):
            out = select(out, d, int(it))
        else:
            out = slice_dim(out, d, it)
            d += 1
    return out


def _check_component_bounds(comp, rest):
    """torch numbers the dims of ``nt[i, ...]``'s errors as the nested tensor's (one more than
    the component's): integers up to the first ``...`` are checked here with that numbering."""
    d = 0
    for it in rest:
        if it is Ellipsis:
            return
        if it is None:
            continue
        if _is_int(it):
            n = comp.shape[d]
            if not -n <= it < n:
                raise IndexError(f"index {it} is out of bounds for dimension {d + 1} with size {n}")
        d += 1


def _refuse_dim0(nt, op):
    if nt._nlayout is L.jagged:
        return RuntimeError(f"{op}(): not supported for NestedTensor on dim=0")
    return _strided_missing("slice.Tensor" if op == "slice" else op)


def select(nt, dim, index):
    """``nt.select(dim, index)`` on a regular dim (a nested tensor one dim smaller)."""
    if not isinstance(nt, NestedTensor):
        return nt.select(dim, index)
    if dim == 0:
        return nt._component_at(index)
    c = dim - 1
    if nt._nlayout is L.jagged and dim == nt._ragged_idx:
        raise RuntimeError("select(): not supported for NestedTensor on ragged dim")
    shapes = nt._comp_shapes()
    if nt._nlayout is L.strided:
        for i, s in enumerate(shapes):
            if not 0 <= index < s[c]:
                raise IndexError(f"index {index} is out of bounds for dimension {c} of the {i}th constituent "
                                 f"tensor with size {s[c]}")
    else:
        size = shapes[0][c] if shapes else nt._vals.shape[nt._perm_stored(c)]
        if not -size <= index < size:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(nt._vals.shape)} at dimension {nt._perm_stored(c)}")
        index %= size
    s = nt._perm_stored(c)
    if nt._packed and s >= 1:
        vals = nt._vals.select(s, index)
        stored = [st[:s] + st[s + 1:] for st in nt._stored]
        perm = None if nt._perm is None else tuple(p - (p > s) for p in nt._perm if p != s)
        return wrap(vals, nt._starts, nt._lens, stored, perm, nt._nlayout, packed=True, jid=nt._jid,
                    offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)
    return pack_like(nt, [x.select(c, index) for x in nt.unbind()])


def slice_dim(nt, dim, sl):
    """``nt[..., a:b:k, ...]`` on regular dim ``dim`` of an untransposed jagged tensor."""
    if dim == 0:
        raise _refuse_dim0(nt, "slice")
    if nt._nlayout is not L.jagged:
        raise _strided_missing("slice.Tensor")
    if dim == nt._ragged_idx:
        raise RuntimeError("slice(): not supported for NestedTensor on ragged dim")
    if nt._perm is not None:
        raise ValueError("NestedTensor slice_tensor(self: jt, dim: any?, start: any?, end: any?, step: any?): "
                         "expected self to be a contiguous jagged layout NestedTensor")
    if sl.step is not None and sl.step <= 0:
        raise ValueError("step must be greater than zero")
    s = dim - 1                           # (no permutation: the buffer dim after the rows)
    key = (slice(None),) * s + (sl,)
    vals = nt._vals[key]
    stored = [st[:s] + (vals.shape[s],) + st[s + 1:] for st in nt._stored]
    return wrap(vals, nt._starts, nt._lens, stored, nt._perm, nt._nlayout, packed=True, jid=nt._jid,
                offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)


def unsqueeze(nt, dim):
    """A size-1 dim inserted at nested dim ``dim`` (>= 1)."""
    if dim == 0:
        if nt._nlayout is L.jagged:
            raise RuntimeError("unsqueeze(): not supported for NestedTensor on dim=0")
        raise RuntimeError("unsqueeze(): For nested tensors, unsqueezing dimension 0 is not supported at the "
                           "moment if you need this feature, please open an issue on github describing your use "
                           "case.")
    c = dim - 1
    if nt._packed:
        # a new last buffer dim, put at logical position c by the permutation (the rows stay first)
        n = nt._cdim
        perm = tuple(range(n)) if nt._perm is None else nt._perm
        vals = nt._vals.unsqueeze(-1)
        stored = [st + (1,) for st in nt._stored]
        return wrap(vals, nt._starts, nt._lens, stored, perm[:c] + (n,) + perm[c:], nt._nlayout, packed=True,
                    jid=nt._jid, offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)
    return pack_like(nt, [x.unsqueeze(c) for x in nt.unbind()], keep_ragged=False)
