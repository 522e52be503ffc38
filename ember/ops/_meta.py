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
            if _simpler_size(s, cur):
                # equal under the guard just made: keep the plainer expression (``x`` over
                # ``Min(16, x)`` from a slice of a buffer), or sizes derived from the result
                # (a view's inferred dim) become fractions no kernel size can be made of
                out[off + i] = s
    return tuple(out)


def _simpler_size(a, b) -> bool:
    """Whether size ``a`` is a plainer expression than ``b`` (an int, then a lone symbol)."""
    if isinstance(b, int):
        return False
    if isinstance(a, int):
        return True
    ea, eb = getattr(a, "expr", None), getattr(b, "expr", None)
    if ea is None or eb is None:
        return False
    import sympy
    return (ea.is_Symbol and not eb.is_Symbol) or (not eb.is_Symbol and sympy.count_ops(ea) < sympy.count_ops(eb))


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

    Tensor inputs vote on the dim order exactly as numpy's iterator does (see
    :func:`k_order`); scalars and None take no part."""
    from ..tensor import Tensor
    shape = tuple(shape)
    ops = [t for t in inputs if isinstance(t, Tensor)]
    return k_out(shape, dtype, *ops) if ops else FakeArray(shape, dtype)


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


# ---------------------------------------------------------------------- numpy's 'K' layout
def _op_estrides(op, ndim):
    """An operand's element strides right-aligned to ``ndim`` dims, as numpy's iterator sees
    them: broadcast (missing or size-1) dims get stride 0, which orders nothing."""
    shape, st = layout(op)
    off = ndim - len(shape)
    out = [0] * ndim
    for i, (n, s) in enumerate(zip(shape, st)):
        if isinstance(n, int) and n == 1:
            continue
        out[off + i] = s
    return out


def k_order(ndim: int, *operands) -> Tuple[int, ...]:
    """The dim order (outermost first) in which numpy's iterator (order 'K') walks ``operands``.

    ``operands`` are Tensors, FakeArrays or ``(shape, estrides)`` pairs, broadcast
    against ``ndim`` dims. This is numpy's stable insertion sort of the axes by
    stride magnitude (``npyiter_find_best_axis_ordering``): for two axes, every
    operand with a nonzero stride on both votes; an operand saying "already in
    order" wins over one saying "swap" (C order wins conflicts), and axes no
    operand can order stay in C order. Numpy allocates its outputs dense in this
    order, which is why ufunc results, reductions and ``astype`` copies of
    permuted or sliced arrays keep the input's dim order. Strides are compared by
    their example values (symbolic strides of a dense input order the same way
    for every size the guards accept)."""
    sts = [[_hint(s) for s in _op_estrides(op, ndim)] for op in operands]
    # numpy keeps its axes innermost-first; perm holds C dims, innermost first
    perm = list(range(ndim - 1, -1, -1))
    for i0 in range(1, ndim):
        ipos = i0
        ax0 = perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            ax1 = perm[i1]
            ambig, swap = True, False
            for st in sts:
                s0, s1 = st[ax0], st[ax1]
                if s0 != 0 and s1 != 0:
                    if abs(s1) <= abs(s0):
                        swap = False
                    elif ambig:
                        swap = True
                    ambig = False
            if not ambig:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    return tuple(reversed(perm))


def k_strides(shape, *operands) -> Tuple[Any, ...]:
    """Element strides of a fresh numpy result of ``shape`` laid out in the 'K' order of ``operands``."""
    shape = tuple(shape)
    return strides_for_permutation(shape, k_order(len(shape), *operands))


def k_out(shape, dtype, *operands) -> FakeArray:
    """The output numpy's elementwise machinery allocates for ``operands`` (order 'K')."""
    shape = tuple(shape)
    return FakeArray(shape, dtype, k_strides(shape, *operands))


def k_reduced_out(t, dims, keepdim, dtype) -> FakeArray:
    """A numpy reduction's result over ``dims`` (canonical) of ``t`` (a tensor or a
    ``(shape, strides)`` operand): the input's 'K' dim order with the reduced dims
    removed (or kept as size 1)."""
    shape, st = k_reduced(t, dims, keepdim)
    return FakeArray(shape, dtype, st)


def is_empty(shape) -> bool:
    """Whether a shape has no elements (a zero size is always a plain int, never a symbol)."""
    return any(isinstance(s, int) and s == 0 for s in shape)


# ---------------------------------------------------------------------- numpy layout replay
# A numpy kernel's output strides follow from the sequence of numpy calls it
# makes, and two rules are involved: a ufunc (``np.add``, ``np.exp``,
# ``np.where``) allocates in the iterator's order (:func:`k_order`), while
# ``astype``/``asarray(dtype=)``/``empty_like`` copy in :func:`like_strides`
# order. The two differ for expanded (stride 0) inputs, so a kernel that casts
# its input before a ufunc lays out its result unlike one that does not. A
# meta that must match such a kernel replays its calls on layouts
# (``NpLayout``) with :func:`np_ufunc` and :func:`np_astype`.
class NpLayout:
    """Shape and element strides of an intermediate numpy array in a kernel."""

    __slots__ = ("shape", "estrides")

    def __init__(self, shape, estrides):
        self.shape = tuple(shape)
        self.estrides = tuple(estrides)

    def __repr__(self):
        return f"NpLayout({self.shape}, {self.estrides})"


def np_layout(x) -> Optional[NpLayout]:
    """The layout of a kernel argument: a Tensor's own, None for a Python scalar."""
    if x is None or isinstance(x, NpLayout):
        return x
    if hasattr(x, "_data"):
        return NpLayout(*layout(x))
    return None


def np_ufunc(*xs) -> NpLayout:
    """Layout of a numpy ufunc's (or ``np.where``'s) freshly allocated output.

    ``xs`` are the operands: Tensors, ``NpLayout`` s, or Python scalars and
    None, which are 0-d and take no part. Sizes may be symbolic."""
    ops = [(o.shape, o.estrides) for o in (np_layout(x) for x in xs) if o is not None]
    shape = broadcast_shapes(*(o[0] for o in ops)) if ops else ()
    return NpLayout(shape, k_strides(shape, *ops))


def np_astype(x, changes: bool = True) -> Optional[NpLayout]:
    """Layout after ``x.astype(dtype, copy=False)``: ``x`` itself unless the dtype ``changes``,
    else numpy's 'K' copy of ``x`` (also ``empty_like``/``zeros_like``/``astype(copy=True)``)."""
    lay = np_layout(x)
    if lay is None or not changes:
        return lay
    return NpLayout(lay.shape, like_strides(lay.shape, lay.estrides))


def np_contiguous(shape) -> NpLayout:
    """Layout of a C-ordered fresh array (``np.full``, ``ndarray.copy()``)."""
    return NpLayout(shape, contiguous_strides(tuple(shape)))


def np_out(lay: NpLayout, dtype) -> FakeArray:
    """A fresh output buffer with layout ``lay`` (the final ``astype`` of a dense result keeps it)."""
    return FakeArray(lay.shape, dtype, lay.estrides)


class ArrayInfo:
    """A tensor's metadata dressed as the numpy attributes kernels read (``shape``, ``ndim``,
    ``size``, ``dtype`` as a numpy dtype), so a meta function can call the kernel's own
    argument checks and raise exactly the kernel's errors. ``size`` may be symbolic."""

    __slots__ = ("shape", "ndim", "size", "dtype")

    def __init__(self, t):
        self.shape = tuple(t.shape)
        self.ndim = len(self.shape)
        self.size = numel(self.shape)
        dt = t.dtype
        self.dtype = np.dtype(dt.np if isinstance(dt, _t.dtype) else dt)


def info(t):
    """:class:`ArrayInfo` of a tensor (None stays None)."""
    return None if t is None else ArrayInfo(t)


def _np_contiguous(shape, estrides, fortran=False) -> bool:
    dims = range(len(shape)) if fortran else range(len(shape) - 1, -1, -1)
    expected = 1
    for d in dims:
        n = shape[d]
        if isinstance(n, int) and n == 0:
            return True
        if isinstance(n, int) and n == 1:
            continue
        if not _same(estrides[d], expected):
            return False
        expected = expected * n
    return True


def like_strides(shape, estrides) -> Tuple[Any, ...]:
    """Element strides of numpy's order-'K' copy of an array (``astype``, ``empty_like``,
    ``array(copy=True)``): C if the array is C-contiguous, F if F-contiguous, else dense
    with the dims sorted by decreasing ``|stride|`` (ties: earlier dim outer), which puts
    broadcast (stride-0) dims innermost -- unlike the iterator's order (:func:`k_order`)."""
    shape, estrides = tuple(shape), tuple(estrides)
    if len(shape) <= 1 or _np_contiguous(shape, estrides):
        return contiguous_strides(shape)
    if _np_contiguous(shape, estrides, fortran=True):
        return strides_for_permutation(shape, tuple(range(len(shape) - 1, -1, -1)))
    order = sorted(range(len(shape)), key=lambda d: (-abs(_hint(estrides[d])), d))
    return strides_for_permutation(shape, tuple(order))


def layout(t) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """``(shape, element strides)`` of a tensor or FakeArray, the operand form the 'K' helpers take."""
    if isinstance(t, tuple):
        return t
    data = getattr(t, "_data", t)
    if isinstance(data, FakeArray):
        # a fake tensor's element strides as they are: ``Tensor.stride()`` divides byte
        # strides, which costs a sympy simplification per symbolic stride
        return tuple(t.shape), tuple(data.estrides)
    return tuple(t.shape), tuple(t.stride())


def cast_layout(t, copies: bool):
    """The layout of ``t.astype(...)``: a numpy 'K' copy when ``copies``, else ``t``'s own."""
    shape, st = layout(t)
    return (shape, like_strides(shape, st)) if copies else (shape, st)


def k_reduced(t, dims, keepdim) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """``(shape, strides)`` of a numpy reduction of operand ``t`` over canonical ``dims``."""
    shape, _ = layout(t)
    order = k_order(len(shape), t)
    dims = set(dims)
    if keepdim:
        rshape = tuple(1 if i in dims else s for i, s in enumerate(shape))
        return rshape, strides_for_permutation(rshape, order)
    keep = [i for i in range(len(shape)) if i not in dims]
    pos = {d: j for j, d in enumerate(keep)}
    rshape = tuple(shape[i] for i in keep)
    return rshape, strides_for_permutation(rshape, tuple(pos[d] for d in order if d in pos))


# ---------------------------------------------------------------------- symbolic-safe size decisions
def is_symint(x) -> bool:
    """Is ``x`` a SymInt? (without importing sympy when no ShapeEnv was ever made)."""
    import sys
    mod = sys.modules.get("ember.fx.experimental.symbolic_shapes")
    return mod is not None and isinstance(x, mod.SymInt)


def is_size(x) -> bool:
    """An int-like size argument: a Python/numpy integer or a SymInt (bools excluded)."""
    import numbers
    if isinstance(x, bool):
        return False
    return isinstance(x, numbers.Integral) or is_symint(x)


def as_size(x):
    """``int(x)`` for integers; a SymInt stays symbolic (``int()`` would specialise it)."""
    return x if is_symint(x) else int(x)


def statically_true(cond) -> bool:
    """True when a size relation holds for every size the trace covers, decided
    without a guard (plain bools, and SymBools the ShapeEnv folds statically)."""
    return cond is True or (isinstance(cond, (bool, np.bool_)) and bool(cond))


def smin(a, b):
    """``min`` of two sizes: plain ints via ``min``; a relation decided statically
    picks one side; otherwise a symbolic ``Min`` (no guard), like PyTorch's sym_min."""
    if isinstance(a, int) and isinstance(b, int):
        return a if a <= b else b
    le = a <= b
    if isinstance(le, bool):
        return a if le else b
    from ..fx.experimental.symbolic_shapes import sym_min
    return _settled(sym_min(a, b))


def smax(a, b):
    """``max`` of two sizes; see :func:`smin`."""
    if isinstance(a, int) and isinstance(b, int):
        return a if a >= b else b
    ge = a >= b
    if isinstance(ge, bool):
        return a if ge else b
    from ..fx.experimental.symbolic_shapes import sym_max
    return _settled(sym_max(a, b))


def _settled(x):
    """A symbolic Min/Max with its numeric parts evaluated: sympy's Min/Max absorption
    rules can leave unevaluated pieces such as ``Max(1, 2)`` (``Min(n, Max(1, Min(2, n)))``
    becomes ``Min(n, Max(1, 2))``), which then never fold to an int, even for a hint."""
    if not is_symint(x):
        return x
    e = x.expr.doit()
    return x if e == x.expr else x.env._wrap_int(e)


def np_c_contiguous(shape, estrides) -> bool:
    """numpy's C_CONTIGUOUS flag: size-1 dims are ignored and an empty array always counts.

    A layout question, decided by the example values of symbolic sizes and
    strides (no guard): a derived size such as ``floor(s0/2)`` may be 1 or 0."""
    hs = [_hint(n) for n in shape]
    if 0 in hs:
        return True
    expected = 1
    for n, st in zip(reversed(hs), reversed(tuple(estrides))):
        if n == 1:
            continue
        if _hint(st) != expected:
            return False
        expected *= n
    return True


def _np_f_contiguous(shape, estrides) -> bool:
    return np_c_contiguous(tuple(reversed(tuple(shape))), tuple(reversed(tuple(estrides))))


def keep_order_strides(shape, estrides) -> Tuple[Any, ...]:
    """Strides of numpy's ``order='K'`` copy of an array (``astype``, ``np.array(copy=True,
    order='K')``, ``empty_like``): C if the source is C-contiguous, F if F-contiguous,
    else dense in the order of decreasing source stride (ties by dim index).

    Unlike :func:`pointwise_out` this also follows non-dense sources (numpy
    sorts their strides). Symbolic strides are compared by their example values:
    a layout choice, not a size, so no guard."""
    import functools
    shape, estrides = tuple(shape), tuple(estrides)
    nd = len(shape)
    if nd <= 1 or np_c_contiguous(shape, estrides):
        return contiguous_strides(shape)
    if _np_f_contiguous(shape, estrides):
        return strides_for_permutation(shape, tuple(range(nd - 1, -1, -1)))

    def cmp(i, j):
        a, b = _hint(estrides[i]), _hint(estrides[j])
        if a > b:
            return -1
        if a < b:
            return 1
        return -1 if i < j else 1
    order = sorted(range(nd), key=functools.cmp_to_key(cmp))
    return strides_for_permutation(shape, tuple(order))


def np_iter_strides(shape, operands) -> Tuple[Any, ...]:
    """Strides of an output numpy's iterator allocates in ``order='K'`` (ufunc outputs,
    ``np.where``, fancy-indexing results) for ``operands`` = [(shape, estrides), ...]
    broadcast (right-aligned) to ``shape``.

    This is numpy's ``npyiter_find_best_axis_ordering``: a stable insertion sort
    of the axes from the fastest, where a pair of axes is compared only on the
    operands that have a non-zero stride on both (broadcast and size-1 dims have
    stride 0), the first such operand deciding a swap and C order winning
    conflicts. The output is dense in the resulting order. Symbolic strides are
    compared by their example values (no guard)."""
    shape = tuple(shape)
    nd = len(shape)
    ops = []
    for oshape, ost in operands:
        oshape, ost = tuple(oshape), tuple(ost)
        lead = nd - len(oshape)
        row = []
        for d in range(nd):
            k = d - lead
            if k < 0 or _hint(shape[d]) == 1 or _hint(oshape[k]) == 1:
                row.append(0)
            else:
                row.append(ost[k])
        ops.append(row)
    perm = list(range(nd - 1, -1, -1))          # fastest axis first
    for i0 in range(1, nd):
        ipos = i0
        j0 = perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            j1 = perm[i1]
            ambig, swap = True, False
            for row in ops:
                s0, s1 = row[j0], row[j1]
                if _nonzero(s0) and _nonzero(s1):
                    if _hint(s1) <= _hint(s0):
                        swap = False
                    elif ambig:
                        swap = True
                    ambig = False
            if not ambig:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    return strides_for_permutation(shape, tuple(reversed(perm)))


def _nonzero(s) -> bool:
    return not (isinstance(s, int) and s == 0)


def check_fill_value(value, dtype) -> None:
    """Raise what the fill kernels' ``checked_array(xp, value, dtype)`` raises for a Python
    number that ``dtype`` cannot hold (PyTorch's "value cannot be converted to type int8_t
    without overflow" for 1000 into int8): it depends on the number only, never on the shape."""
    from .checked_scalar import checked_array
    dt = dtype if isinstance(dtype, _t.dtype) else _t.from_numpy_dtype(np.dtype(dtype))
    with np.errstate(all="ignore"):
        checked_array(np, value, dt)


# ---------------------------------------------------------------------- PyTorch's allocation layouts
# Most numpy kernels lay out their results as numpy does (the helpers above). A few
# PyTorch ops decide their output layout by rules of their own, which the kernels
# (through ``ember.ops._helpers``) and these metas share so eager and fake agree:
# *preserve* (``clone``, ``empty_like``, ``flip``, ``sort``: the input's strides when it
# is dense, else a dense layout in the input's dim order) and *contiguous*
# (reductions, cumulative ops, softmax, ``masked_fill``: row-major whatever the input).
# Layout decisions read the example values of symbolic sizes and strides (no guards).
def torch_is_dense(shape, estrides) -> bool:
    """PyTorch's "non-overlapping and dense": the dims of size 2 or more, taken from the
    smallest stride up, tile memory with no gap or overlap (size-0/1 dims do not count)."""
    hs = [_hint(n) for n in shape]
    st = [_hint(s) for s in estrides]
    if len(hs) == 1:
        return hs[0] < 2 or st[0] == 1
    expected = 1
    for d in sorted((d for d in range(len(hs)) if hs[d] >= 2), key=lambda d: st[d]):
        if st[d] != expected:
            return False
        expected *= hs[d]
    return True


def torch_dense_order(shape, estrides) -> Tuple[int, ...]:
    """The dim order (outermost first) of the dense tensor PyTorch allocates in place of a
    non-dense one it copies the layout of (``empty_like``'s preserve_format on a sliced or
    expanded tensor).

    An insertion sort over the dims from innermost, starting from row-major order: a dim
    with a larger stride moves outward past one with a smaller stride, and for equal
    strides the larger dim goes outside. A zero (expanded) stride orders nothing: the
    comparison is skipped without stopping the scan, so an expanded dim keeps its place
    and dims on either side of it still sort past it, as PyTorch's own scan does."""
    hs = [_hint(n) for n in shape]
    st = [_hint(s) for s in estrides]
    nd = len(hs)
    perm = list(range(nd - 1, -1, -1))          # innermost first
    for i in range(1, nd):
        cur = i
        for k in range(i - 1, -1, -1):
            inner, outer = perm[k], perm[cur]
            si, so = st[inner], st[outer]
            if si == 0 or so == 0:
                continue
            if si < so:
                break
            if si > so or hs[inner] > hs[outer]:
                perm[k], perm[cur] = perm[cur], perm[k]
                cur = k
    return tuple(reversed(perm))


def preserve_strides(shape, estrides) -> Tuple[Any, ...]:
    """Element strides of PyTorch's ``empty_like``/``clone`` of a tensor (preserve_format):
    its own strides when it is dense and non-overlapping, else dense in
    :func:`torch_dense_order`."""
    shape, estrides = tuple(shape), tuple(estrides)
    if torch_is_dense(shape, estrides):
        return estrides
    return strides_for_permutation(shape, torch_dense_order(shape, estrides))


def preserve_out(t, dtype=None, shape=None) -> FakeArray:
    """A fresh buffer laid out as PyTorch's ``empty_like(t)`` (see :func:`preserve_strides`)."""
    tshape, st = layout(t)
    return FakeArray(tshape if shape is None else tuple(shape), t.dtype if dtype is None else dtype,
                     preserve_strides(tshape, st))


def suggest_channels_last(shape, estrides) -> bool:
    """Whether PyTorch's ``suggest_memory_format`` names channels_last for a tensor: 4-D, and
    walking C, W, H, N its strides never fall below the span of the dims already walked.
    Ambiguous cases stay row-major: a zero channel stride, an empty tensor, and a batch stride
    equal to the channel span (an ``N,1,1,1`` tensor, or one sliced down to it)."""
    if len(shape) != 4:
        return False
    hs = [_hint(x) for x in shape]
    st = [_hint(s) for s in estrides]
    if st[1] == 0:
        return False
    floor = 0
    for d in (1, 3, 2, 0):
        if hs[d] == 0 or st[d] < floor:
            return False
        if d == 0 and floor == st[1]:
            return False
        floor = st[d] * hs[d] if hs[d] > 1 else st[d]
    return True


def channels_last_strides(shape) -> Tuple[Any, ...]:
    """NHWC element strides of a 4-D shape."""
    return strides_for_permutation(tuple(shape), (0, 2, 3, 1))


def roll_channels_last(shape, estrides, shifts, dims) -> bool:
    """Whether PyTorch's ``roll`` over ``dims`` (canonical, non-empty) returns NHWC strides.

    A one-dim roll is the concatenation of two slices of the input along that dim, and a
    concatenation is NHWC only when every piece suggests channels_last (an empty piece,
    which a shift of 0 leaves, never does); a roll over several dims rolls one dim at a
    time, each step starting from the layout the previous one produced."""
    shape = tuple(shape)
    st = tuple(estrides)
    cl = False
    for s, d in zip(shifts, dims):
        n = _hint(shape[d])
        start = (n - s) % n if n else 0
        pieces = []
        for size in (n - start, start):
            pshape = tuple(size if i == d else _hint(x) for i, x in enumerate(shape))
            pieces.append(suggest_channels_last(pshape, st))
        cl = all(pieces)
        st = channels_last_strides(shape) if cl else contiguous_strides(shape)
    return cl
