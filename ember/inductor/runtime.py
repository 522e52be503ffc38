"""What a compiled graph's generated wrapper calls at run time, kept free of sympy.

The wrapper (``codegen/wrapper.py`` generates it) needs only these helpers and
``ExternArg``; the compiler proper -- lowering, scheduling, codegen -- is built on
sympy, whose import alone (0.2-0.4 s) exceeds what a warm compile may take. A
graph-cache hit (``fx_graph_cache.py``) rebuilds a wrapper from this module and
numpy, so a process that only reuses compiled graphs never imports sympy.
"""
from __future__ import annotations

import numpy as np


class ExternArg:
    """The i-th tensor input of an extern call, in its argument list (``ir.ExternKernel``)."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"ExternArg({self.i})"


class ExternSize:
    """The i-th symbolic size argument of an extern call (``topk(x, s1 // 2)``'s ``k``): the
    wrapper evaluates the size's expression per call, from the size symbols it read off the
    inputs, and passes the values to ``_run_extern`` (``sizes``)."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f"ExternSize({self.i})"


def _strided_view(arr, offset, shape, strides):
    flat = arr.reshape(-1)
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=shape,
                                           strides=tuple(s * arr.itemsize for s in strides))


def _as_view(arr, shape, strides, offset):
    """A view of a contiguous buffer with byte ``strides`` at byte ``offset``: the
    ``ndarray`` constructor over the buffer (bounds-checked, ~0.15 us).

    A view with no elements of an empty buffer (a ``select`` or slice of a size-0 tensor) has
    an offset past the buffer's end, which the constructor refuses; it holds no data, so it is
    made at offset 0."""
    try:
        return np.ndarray(shape, arr.dtype, arr, offset, strides)
    except ValueError:
        if 0 not in shape:
            raise
        return np.ndarray(shape, arr.dtype, arr, 0, strides)


def _contig(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _index_error(kname, code=1):
    """Raise the error kernel ``kname`` flagged (``ember_flag_error`` in the C++ prelude)."""
    if code == 2:
        raise RuntimeError("ZeroDivisionError")     # (eager's and PyTorch's message)
    raise IndexError(f"inductor: an index is out of bounds (kernel {kname}); the eager prim raises here too")


def _run_extern(fn, args, kwargs, arrays, sizes=()):
    """Call a fallback on numpy arrays (and this call's values of its symbolic size arguments).
    Its results are made contiguous and never alias its inputs (a reference may return a
    view), so the wrapper's buffer lifetimes and reuse stay valid."""
    def sub(a):
        if isinstance(a, ExternArg):
            return arrays[a.i]
        if isinstance(a, ExternSize):
            return sizes[a.i]
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        return a
    res = fn(*[sub(a) for a in args], **{k: sub(v) for k, v in kwargs.items()})

    def own(x):
        x = np.asarray(x)
        if not x.flags.c_contiguous or any(np.may_share_memory(x, a) for a in arrays):
            x = np.array(x, order="C")
        return x
    if isinstance(res, (tuple, list)):
        return tuple(own(r) for r in res)
    return own(res)


def concat_into(dim: int):
    """The ``cat`` extern: numpy's concatenate of the pieces into the preallocated output
    (made here, not in ``lowering``, so a graph-cache hit that rebuilds it stays sympy-free)."""
    def concat(*arrays):
        np.concatenate(arrays[:-1], axis=dim, out=arrays[-1])
        return arrays[-1]
    return concat
