"""Custom operators (``ember.library``) in inductor: an extern call of the user's implementation.

A custom op has no decomposition and no lowering -- it is opaque by definition -- so its
node runs as an extern kernel (``GraphLowering.fallback``): the wrapper calls the op
record's ``kernel`` (the implementation over numpy arrays, ``ember/library/_record.py``)
between the C++ kernels, with the realized input buffers. Its outputs are made contiguous
and owned by ``_run_extern``, whatever the implementation returned.

The output layouts come from the node's traced metadata, whose sizes are SymInts with
``dynamic=True``: they are the graph's size expressions, so a custom op compiles with
symbolic sizes too (the sizes its fake implementation computed from the inputs'); a symbolic
size passed as a scalar argument is computed by the wrapper per call (``ir.ExternSize``). The
kernels after it index its outputs by those layouts, so each call checks the outputs
against them first (``_checked``).
"""
from __future__ import annotations

import numpy as np

from . import ir
from .graph import LoweringError
from .sizevars import sympify


def lower_custom_op(graph, node, lookup):
    op = node.target._ember_op
    args = [lookup(a) for a in node.args]
    kwargs = {k: lookup(v) for k, v in node.kwargs.items()}
    meta = node.meta.get("tensor_meta")
    metas = meta if isinstance(meta, (list, tuple)) and not hasattr(meta, "shape") else [meta]
    if not metas or any(m is None for m in metas):
        raise LoweringError(f"{op.name}: no output metadata for its extern call")
    layouts = [ir.Layout([sympify(s) for s in m.shape], dtype=m.dtype) for m in metas]
    in_sizes = [list(x.get_size()) for x in _ir_inputs(args, kwargs)]
    res = graph.fallback(node, args, kwargs, f"custom op {op.name} (opaque: its Python implementation runs)",
                         layouts=layouts)
    kernel = (res[0] if isinstance(res, tuple) else res).kernel
    kernel.fn = _checked(kernel.fn, op.name, layouts, in_sizes)
    return res


def _leaves(args, kwargs, is_leaf):
    """The arguments (inside lists/tuples too) for which ``is_leaf`` holds, in argument order."""
    out = []

    def walk(a):
        if is_leaf(a):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for x in a:
                walk(x)
    for a in list(args) + list(kwargs.values()):
        walk(a)
    return out


def _ir_inputs(args, kwargs):
    """The tensor arguments in the order ``fallback`` numbers them (``ExternArg(i)``)."""
    return _leaves(args, kwargs, lambda a: isinstance(a, ir.IRNode))


def _arrays(args, kwargs):
    """The arrays an extern call receives, in the same order (what ``_run_extern`` put there):
    numpy, or cupy on the CUDA path."""
    return _leaves(args, kwargs, lambda a: hasattr(a, "shape") and hasattr(a, "dtype"))


def _checked(fn, name, layouts, in_sizes):
    """``fn`` checking its outputs against what the fake impl promised -- the kernels after it index
    them by those layouts -- so that a fake impl which disagrees with the implementation is an
    error naming the op, never an out-of-bounds read. Checked: the number of outputs, ranks,
    dtypes, and every size; a symbolic one is evaluated from the sizes of the call's own input
    arrays (a symbol no input dimension carries leaves that size unchecked)."""
    where = {}
    for i, size in enumerate(in_sizes):
        for d, n in enumerate(size):
            if getattr(n, "is_Symbol", False) and n not in where:
                where[n] = (i, d)
    want = [(np.dtype(lay.dtype.np), [n if n.is_Integer or n.free_symbols <= set(where) else None
                                      for n in lay.size]) for lay in layouts]
    symbolic = any(w is not None and not w.is_Integer for _, sizes in want for w in sizes)
    seen = {}

    def expected(args, kwargs):
        if not symbolic:
            return [[int(w) if w is not None else None for w in sizes] for _, sizes in want]
        arrays = _arrays(args, kwargs)
        vals = tuple((s, arrays[i].shape[d]) for s, (i, d) in where.items())
        hit = seen.get(vals)
        if hit is None:
            hit = seen[vals] = [[int(w.subs(dict(vals))) if w is not None else None for w in sizes]
                                for _, sizes in want]
        return hit

    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != len(want):
            raise RuntimeError(f"{name}: the implementation returned {len(outs)} outputs, its fake impl "
                               f"{len(want)}; fix register_fake (ember.library.opcheck finds such mismatches)")
        for k, (o, (dtype, _), sizes) in enumerate(zip(outs, want, expected(args, kwargs))):
            shape, odt = tuple(o.shape), np.dtype(o.dtype)
            if len(shape) != len(sizes) or odt != dtype or any(w is not None and w != n
                                                               for w, n in zip(sizes, shape)):
                raise RuntimeError(f"{name}: output {k} of the implementation is {list(shape)} {odt}, but its fake "
                                   f"impl said {[w if w is not None else '?' for w in sizes]} {dtype}; fix "
                                   f"register_fake (ember.library.opcheck finds such mismatches)")
        return out
    run.__name__ = getattr(fn, "__name__", name)
    return run
