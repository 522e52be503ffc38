"""Meta functions: what an op's output looks like, computed from its inputs' metadata.

Every kernel op has a meta function (``@op.meta_fn``). Fake tensors run it
instead of the kernel (``ember.fx.fake_tensor``); dynamo and inductor read
shapes and dtypes from it. The contract:

* it takes the op's arguments exactly as the kernel does, minus ``xp``, with
  tensor arguments left as ember ``Tensor`` objects (real or fake; use
  ``t.shape``, ``t.dtype``, ``t.stride()``, ``t.storage_offset()``, ``t.ndim``);
* it returns a :class:`FakeArray` (or a tuple of them, mirroring the kernel's
  tuple) made with :func:`out` (a fresh buffer), :func:`out_like` or
  :func:`view_of` (a view sharing the input's storage, for view ops);
* it never touches data. Sizes may be :class:`~ember.fx.experimental.symbolic_shapes.SymInt`:
  write size arithmetic in plain Python (``+ - * //``, comparisons, ``max``),
  never through numpy (``np.prod``/``np.broadcast_shapes`` would force them to
  ints), and use the helpers here, which are symbolic-safe;
* it raises the same error type and message the kernel raises for bad input
  where practical (a fake trace should fail where eager fails);
* an op whose output shape depends on data is tagged ``data_dependent`` and
  needs no meta: fake tensors raise :class:`DataDependentOutputError` for it.
"""
from __future__ import annotations

import operator
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import types as _t



from .._fake import DataDependentOutputError, FakeArray, FakeStorage, _FakePtr  # noqa: E402,F401


# ---------------------------------------------------------------------- sizes
def numel(shape: Sequence[Any]) -> Any:
    n = 1
    for s in shape:
        n = n * s
    return n


def contiguous_strides(shape: Sequence[Any]) -> Tuple[Any, ...]:
    """Row-major strides in elements (a size-1 dim gets the stride it would have)."""
    strides = []
    acc = 1
    for s in reversed(tuple(shape)):
        strides.append(acc)
        acc = acc * (s if _known_ne(s, 0) else 1) if not isinstance(s, int) else acc * max(s, 1)
    return tuple(reversed(strides))


def _known_ne(s, v):
    return s != v if isinstance(s, int) else True


def canonical_dim(dim: int, ndim: int, wrap_scalar: bool = True) -> int:
    """``dim`` wrapped into ``[0, ndim)`` with PyTorch's IndexError for out-of-range dims."""
    n = ndim if ndim > 0 or not wrap_scalar else 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim + n if dim < 0 else dim


def canonical_dims(dims, ndim: int) -> Tuple[int, ...]:
    """A dim argument (None, int, or sequence) as a sorted tuple of wrapped dims; None = all."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(canonical_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {next(d for d in out if out.count(d) > 1)} appears multiple times "
                           f"in the list of dims")
    return tuple(sorted(out)) if out else tuple(range(ndim))


def broadcast_shapes(*shapes: Sequence[Any]) -> Tuple[Any, ...]:
    """NumPy/PyTorch broadcasting of shapes that may hold SymInts.

    A size-1 dim is always a plain int (0/1 are specialised), so ``== 1`` tests
    decide statically; two symbolic sizes are assumed equal under a guard."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        off = ndim - len(shape)
        for i, s in enumerate(shape):
            cur = out[off + i]
            if isinstance(s, int) and s == 1:
                continue
            if isinstance(cur, int) and cur == 1:
                out[off + i] = s
                continue
            if cur is s or (not isinstance(cur, int) and not isinstance(s, int) and cur.expr == s.expr):
                continue
            if not bool(cur == s):
                raise RuntimeError(
                    f"The size of tensor a ({cur}) must match the size of tensor b ({s}) at "
                    f"non-singleton dimension {off + i}")
    return tuple(out)


def reduced_shape(shape: Sequence[Any], dims: Sequence[int], keepdim: bool) -> Tuple[Any, ...]:
    """The shape after reducing ``dims`` (already canonical)."""
    dims = set(dims)
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def is_contiguous(shape, estrides) -> bool:
    expected = 1
    for n, s in zip(reversed(tuple(shape)), reversed(tuple(estrides))):
        if isinstance(n, int) and n == 1:
            continue
        if not _same(s, expected):
            return False
        expected = expected * n
    return True


def _same(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        return bool(a == b)
    except Exception:   # noqa: BLE001 - undecidable comparisons count as different
        return False


def dense_permutation(shape, estrides) -> Optional[Tuple[int, ...]]:
    """The dim order (outermost first) in which a tensor is dense, or None if it is not."""
    nd = len(shape)
    if nd == 0:
        return ()
    order = sorted(range(nd), key=lambda d: (_hint(estrides[d]), _hint(shape[d])), reverse=True)
    expected = 1
    for d in reversed(order):
        n = shape[d]
        if isinstance(n, int) and n == 1:
            continue
        if not _same(estrides[d], expected):
            return None
        expected = expected * n
    return tuple(order)


def _hint(x):
    if isinstance(x, int):
        return x
    return x.hint()


def strides_for_permutation(shape, order) -> Tuple[Any, ...]:
    """Dense strides laying out dims in ``order`` (outermost first)."""
    st = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        st[d] = acc
        n = shape[d]
        acc = acc * (max(n, 1) if isinstance(n, int) else n)
    return tuple(st)


# ---------------------------------------------------------------------- outputs
def out(shape, dtype, estrides=None) -> FakeArray:
    """A fresh (contiguous unless ``estrides`` given) output buffer."""
    return FakeArray(shape, dtype, estrides)


def out_like(t, dtype=None, shape=None) -> FakeArray:
    """A fresh buffer shaped like tensor ``t``; keeps ``t``'s dim order when dense (like numpy)."""
    shape = tuple(t.shape) if shape is None else tuple(shape)
    return pointwise_out(shape, dtype if dtype is not None else t.dtype, t)


def pointwise_out(shape, dtype, *inputs) -> FakeArray:
    """The output of an elementwise op: the layout numpy's kernels produce (order 'K').

    If the first tensor input with the output's full shape is dense in some
    dim order, the output uses that order; otherwise it is contiguous."""
    shape = tuple(shape)
    for t in inputs:
        if t is None or not hasattr(t, "_data") or t.ndim != len(shape) or t.ndim < 2:
            continue
        if tuple(t.shape) != shape and not all(_same(a, b) for a, b in zip(t.shape, shape)):
            continue
        st = t.stride()
        if is_contiguous(shape, st):
            break
        order = dense_permutation(shape, st)
        if order is not None:
            return FakeArray(shape, dtype, strides_for_permutation(shape, order))
        break
    return FakeArray(shape, dtype)


def view_of(t, shape, estrides, offset=None) -> FakeArray:
    """A view of tensor ``t``: same storage, given shape/strides (elements) and storage offset."""
    data = t._data
    storage = data.storage if isinstance(data, FakeArray) else FakeStorage(t.numel() * t.dtype.itemsize)
    if offset is None:
        offset = t.storage_offset()
    return FakeArray(shape, t.dtype, estrides, offset, storage)


def result_dtype(*args) -> "_t.dtype":
    """PyTorch's type promotion over tensors and Python scalars (None is skipped)."""
    from ..tensor import Tensor
    dims, zero_dims, scalars = [], [], []
    for a in args:
        if a is None:
            continue
        if isinstance(a, Tensor):
            (dims if a.ndim > 0 else zero_dims).append(a.dtype)
        else:
            scalars.append(a)
    return _t.result_type_from(dims, zero_dims, scalars)


def tensor_args(*args):
    from ..tensor import Tensor
    return [a for a in args if isinstance(a, Tensor)]
