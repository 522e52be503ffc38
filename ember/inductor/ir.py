"""The loop-level IR.

A value during lowering is one of:

* :class:`Pointwise` -- ``size``, ``dtype`` and a body ``inner_fn(index)``
  (``index`` a list of sympy expressions, one per dimension) returning an
  "ops" value. Not materialised: consumers call its loader and so inline it.
  Views (broadcast, permute, slice, reshape of contiguous data, flip, pad,
  cat ...) are Pointwise nodes whose body calls the source's loader with a
  rewritten index -- never a copy.
* :class:`Reduction` -- output ``size``, ``reduction_ranges`` and a body
  ``inner_fn(index, rindex)``; always materialised into a buffer.
* :class:`Scatter` (scatter, scatter_add, index_put: a copy of the input
  with data-dependent stores) and :class:`Scan` (cumsum, cumprod) -- always
  materialised, kernels of their own;
* a :class:`Buffer` -- memory: :class:`InputBuffer` (a graph input or
  constant, with its real strides), :class:`ComputedBuffer` (one of the above
  written out, contiguous) or the output of an :class:`ExternKernel`
  (matmul via numpy's BLAS; convolution, sort, topk and any prim without a
  lowering run as the prim's numpy reference).

The ops language a body may use is listed in ``UNARY_OPS``, ``BINARY_OPS``
and the handler methods ``load(name, index)``, ``constant(value, dtype)``,
``index_expr(expr, dtype)``, ``to_dtype(x, dtype)``, ``where(c, a, b)``,
``indirect_indexing(x, size)`` (a data-dependent index: returns a sympy symbol
standing for the run-time value, wrapped into ``[0, size)`` when negative).
Binary ops take operands of one dtype (prims do no promotion), comparisons
and ``is*`` tests give bool.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import sympy

from .. import types as _t
from .sizevars import contiguous_strides, loop_var, product, simplify_index, sympify
from .virtualized import V, ops, set_ops_handler

UNARY_OPS = ("abs neg sign exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan "
             "asin acos atan sinh cosh tanh asinh acosh atanh erf erfc erfinv lgamma floor ceil round "
             "trunc bitwise_not").split()
UNARY_BOOL_OPS = "isnan isinf isfinite signbit logical_not".split()
BINARY_OPS = ("add sub mul div floor_divide remainder fmod pow atan2 maximum minimum copysign "
              "bitwise_and bitwise_or bitwise_xor shift_left shift_right").split()
BINARY_BOOL_OPS = "logical_and logical_or logical_xor eq ne lt le gt ge".split()
# ops whose cost is well above a load or an add (used by the inlining heuristic)
EXPENSIVE_OPS = set(UNARY_OPS) - {"abs", "neg", "sign", "floor", "ceil", "round", "trunc",
                                  "bitwise_not"} | {"pow", "atan2", "fmod", "remainder", "div",
                                                    "floor_divide"}

REDUCTION_TYPES = ("sum", "prod", "amax", "amin", "argmax", "argmin", "any", "all", "var")


class IRNode:
    def get_size(self) -> List[sympy.Expr]:
        raise NotImplementedError

    def get_dtype(self):
        raise NotImplementedError

    def make_loader(self) -> Callable:
        raise NotImplementedError

    def get_numel(self):
        return product(self.get_size())

    def is_realized(self) -> bool:
        return False


# ----------------------------------------------------------------------- layout
class Layout:
    """Strided memory: ``element(index) = offset + sum(index[d] * stride[d])``."""

    def __init__(self, size, stride=None, offset=0, dtype=None):
        self.size = [sympify(s) for s in size]
        self.stride = [sympify(s) for s in (stride if stride is not None else contiguous_strides(self.size))]
        self.offset = sympify(offset)
        self.dtype = dtype

    def index(self, idx) -> sympy.Expr:
        assert len(idx) == len(self.size), (idx, self.size)
        e = self.offset
        for i, s, n in zip(idx, self.stride, self.size):
            if n != 1:  # size-1 dims may carry any stride
                e = e + i * s
        return e

    def is_contiguous(self) -> bool:
        return all(n == 1 or sympy.expand(a - b) == 0
                   for a, b, n in zip(self.stride, contiguous_strides(self.size), self.size)) \
            and self.offset == 0

    def __repr__(self):
        return f"Layout(size={self.size}, stride={self.stride}, offset={self.offset}, dtype={self.dtype})"


# ----------------------------------------------------------------------- buffers
class Buffer(IRNode):
    def __init__(self, name: str, layout: Layout):
        self.name = name
        self.layout = layout

    def get_size(self):
        return self.layout.size

    def get_dtype(self):
        return self.layout.dtype

    def is_realized(self):
        return True

    def make_loader(self):
        name, layout = self.name, self.layout

        def loader(index):
            return ops.load(name, layout.index(index))

        return loader

    def __repr__(self):
        return f"{type(self).__name__}({self.name}, {self.layout})"


class InputBuffer(Buffer):
    """A graph input (or lifted constant) with the strides of its example tensor."""


class ComputedBuffer(Buffer):
    """A Pointwise or Reduction written out contiguously."""

    def __init__(self, name: str, data: "Loops"):
        super().__init__(name, Layout(data.get_size(), dtype=data.get_dtype()))
        self.data = data


class ExternKernel(IRNode):
    """A call outside the generated C++ (numpy matmul/BLAS, convolution, sort,
    a prim's numpy reference). ``fn(*arrays_and_args)`` runs on numpy arrays
    in the Python wrapper; ``inputs`` are realized buffers; ``args`` is the
    argument list with tensors replaced by indices into ``inputs`` (as
    ``ExternArg(i)``); ``outputs`` are the result buffers (contiguous)."""

    def __init__(self, name: str, kind: str, fn: Callable, inputs: List[Buffer], args: Sequence,
                 kwargs: Dict[str, Any], out_layouts: List[Layout], reason: str = ""):
        self.name = name
        self.kind = kind
        self.fn = fn
        self.inputs = inputs
        self.args = list(args)
        self.kwargs = dict(kwargs)
        self.reason = reason
        self.size_args: List[Any] = []    # the sympy expressions ``ExternSize(i)`` in ``args`` stand for
        self.origins = _claim_origins()
        self.outputs = [ExternOutput(f"{name}_{i}" if len(out_layouts) > 1 else name, lay, self, i)
                        for i, lay in enumerate(out_layouts)]


class ExternOutput(Buffer):
    def __init__(self, name, layout, kernel, index):
        super().__init__(name, layout)
        self.kernel = kernel
        self.index = index


from .runtime import ExternArg, ExternSize  # noqa: E402,F401  (sympy-free: the wrapper's run time needs them)


# ----------------------------------------------------------------------- loops
# ----------------------------------------------------------------------- origins
# The FX nodes a loop body computes (for the kernel profiler and the schedule log):
# the node being lowered, plus the origins of every unrealized Pointwise whose
# loader it took (those bodies get inlined into it). A lowering takes its inputs'
# loaders before it builds its own Loops, so the loaders taken while one FX node is
# lowered are collected here and claimed by the Loops that node creates.
_pending_origins: Dict[str, Any] = {"node": None, "set": set()}


def _current_fx_node():
    g = V.graph
    return getattr(g, "_current_node", None) if g is not None else None


def _note_inlined(origins):
    node = _current_fx_node()
    if node is None:
        return
    if _pending_origins["node"] is not node:
        _pending_origins["node"], _pending_origins["set"] = node, set()
    _pending_origins["set"] |= origins


def _claim_origins():
    node = _current_fx_node()
    if node is None:
        return frozenset()
    out = {node.name}
    if _pending_origins["node"] is node:
        out |= _pending_origins["set"]
    return frozenset(out)


class Loops(IRNode):
    def __init__(self, size, dtype, inner_fn):
        self.size = [sympify(s) for s in size]
        self.dtype = dtype
        self.inner_fn = inner_fn
        self.origins = _claim_origins()

    def get_size(self):
        return self.size

    def get_dtype(self):
        return self.dtype


class Pointwise(Loops):
    """``view_of``: for a view (``is_view``) of an unrealized computation, ``(base, reindex)``
    -- the base Loops and the index map from this node's index to the base's -- so that a
    graph output which is a reshape or permute of a computed value can be written out as
    the base and returned as a strided view of it (:meth:`GraphLowering._lower_output`)."""

    def __init__(self, size, dtype, inner_fn, is_view=False, view_of=None):
        super().__init__(size, dtype, inner_fn)
        self.is_view = is_view
        self.view_of = view_of

    def make_loader(self):
        _note_inlined(self.origins)
        return self.inner_fn

    def __repr__(self):
        return f"Pointwise(size={self.size}, dtype={self.dtype})"


class Scatter(Loops):
    """A copy of ``init`` (a Pointwise of ``size``) with elements overwritten (or
    accumulated, ``mode='add'``; folded by a NaN-propagating max/min, ``'amax'``/``'amin'``)
    at data-dependent places: for every index ``j`` of
    ``iter_size``, ``out[target_fn(j)] (op)= value_fn(j)``. Always materialised,
    never fused; the scatter loop runs sequentially in index order, so repeated
    indices behave like numpy (the last write wins; additions in order)."""

    def __init__(self, size, dtype, init_fn, iter_size, target_fn, value_fn, mode=None):
        super().__init__(size, dtype, init_fn)
        self.iter_size = [sympify(s) for s in iter_size]
        self.target_fn = target_fn
        self.value_fn = value_fn
        self.mode = mode

    def make_loader(self):
        raise AssertionError("a Scatter is read through its buffer")


class Scan(Loops):
    """Inclusive prefix ``op`` ("sum" or "prod") of ``inner_fn`` along ``dim``; always
    materialised, never fused. The scan dim runs sequentially; the dims after it
    are a SIMD loop carrying one accumulator each (in the compute dtype, so
    float16/bfloat16 round once per element like the reference)."""

    def __init__(self, size, dtype, inner_fn, dim, op):
        super().__init__(size, dtype, inner_fn)
        self.dim = dim
        self.op = op

    def make_loader(self):
        raise AssertionError("a Scan is read through its buffer")


class Reduction(Loops):
    """``size`` is the output size; ``inner_fn(index, rindex)`` gives the
    element to combine. argmax/argmin reduce one dimension and produce int64;
    ``var`` carries ``correction`` and is computed two-pass (mean, then the
    sum of squared deviations), which is stable and vectorises."""

    def __init__(self, size, reduction_ranges, reduction_type, src_dtype, inner_fn, dtype=None,
                 correction=0):
        if reduction_type not in REDUCTION_TYPES:
            raise NotImplementedError(f"inductor: reduction type {reduction_type!r}")
        if dtype is None:
            dtype = _t.int64 if reduction_type in ("argmax", "argmin") else src_dtype
        super().__init__(size, dtype, inner_fn)
        self.reduction_ranges = [sympify(s) for s in reduction_ranges]
        self.reduction_type = reduction_type
        self.src_dtype = src_dtype
        self.correction = correction

    def make_loader(self):
        raise AssertionError("a Reduction is read through its buffer")

    def __repr__(self):
        return (f"Reduction({self.reduction_type}, size={self.size}, ranges={self.reduction_ranges}, "
                f"dtype={self.dtype})")


# ----------------------------------------------------------------------- analysis
class _Value:
    """Placeholder value of the analysis handlers."""
    __slots__ = ()


_VAL = _Value()


class ReadRecorder:
    """Records every ``load(name, index)`` a body makes; counts ops."""

    def __init__(self):
        self.reads: List[Tuple[str, sympy.Expr]] = []
        self.op_count = 0
        self.expensive = 0
        self._indirect = itertools.count()

    def load(self, name, index):
        self.reads.append((name, sympify(index)))
        return _VAL

    def indirect_indexing(self, x, size, wrap_negative=False):
        return sympy.Symbol(f"indirect{next(self._indirect)}", integer=True)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def op(*args, **kwargs):
            self.op_count += 1
            if name in EXPENSIVE_OPS:
                self.expensive += 1
            return _VAL

        return op


def extract_reads(fn, *index_lists) -> ReadRecorder:
    rec = ReadRecorder()
    with set_ops_handler(rec):
        fn(*index_lists)
    return rec


def index_vars(prefix: str, n: int) -> List[sympy.Symbol]:
    return [loop_var(prefix, i) for i in range(n)]


def is_cheap(node: Loops, max_ops: int = 8) -> bool:
    """Cheap enough to recompute in every consumer rather than write out."""
    if isinstance(node, Pointwise) and node.is_view and as_strided_view(node) is not None:
        return True     # a view of a buffer; a view of an unrealized computation is as dear as it
    xs = index_vars("x", len(node.size))
    rec = extract_reads(node.inner_fn, xs)
    # what recomputing costs is re-reading the full-size inputs; a read of a broadcast
    # operand (BatchNorm's per-channel mean and scale in x_hat = (x - mean) * rstd) stays in
    # cache. Writing x_hat out instead cost a 4 MB store and reload per BatchNorm backward.
    full = {x for x, n in zip(xs, node.size) if n != 1}
    big = {name for name, idx in rec.reads if not full or full <= idx.free_symbols}
    return rec.expensive == 0 and rec.op_count <= max_ops and len(big) <= 2 and len(rec.reads) <= 6


def as_strided_view(node: IRNode):
    """If ``node`` reads one buffer at an index linear in its loop variables
    (a pure view), return ``(buffer_name, size, stride, offset)``; else None.
    Externs use this to take views of buffers without a copy."""
    if isinstance(node, Buffer):
        lay = node.layout
        return node.name, lay.size, lay.stride, lay.offset
    if not isinstance(node, Pointwise):
        return None
    xs = index_vars("x", len(node.size))
    rec = ReadRecorder()
    try:
        with set_ops_handler(_PureLoadChecker(rec)):
            out = node.inner_fn(xs)
    except _NotPure:
        return None
    if not isinstance(out, _Load):
        return None
    # a reshape that merges dims of a permuted view indexes through floor/mod terms that the
    # loop ranges make affine again (``65536*(x0//4) + 16384*(x0%4)`` is ``16384*x0``)
    ranges = {x: (0, int(n)) for x, n in zip(xs, node.size) if sympify(n).is_Integer}
    name, index = out.name, sympy.expand(simplify_index(out.index, ranges, dict(zip(xs, node.size))))
    strides = []
    for x, n in zip(xs, node.size):
        c = index.coeff(x)
        if c.has(*xs):
            return None
        strides.append(c if n != 1 else sympy.Integer(0))
    offset = sympy.expand(index.subs({x: 0 for x in xs}))
    if sympy.expand(index - offset - sum(c * x for c, x in zip(strides, xs) if True)) != 0:
        # a size-1 dim contributed nothing anyway; any other remainder is non-linear
        rest = sympy.expand(index - offset - sum(index.coeff(x) * x for x in xs))
        if rest != 0:
            return None
    if offset.free_symbols & set(xs):
        return None
    return name, node.size, strides, offset


class _NotPure(Exception):
    pass


class _Load:
    __slots__ = ("name", "index")

    def __init__(self, name, index):
        self.name, self.index = name, index


class _PureLoadChecker:
    def __init__(self, rec):
        self.rec = rec

    def load(self, name, index):
        return _Load(name, sympify(index))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def op(*a, **k):
            raise _NotPure(name)

        return op
