"""The ``cond`` node (``ember.ops.higher_order.cond``) in inductor: an extern call that picks a branch.

The node's predicate and operands are realized buffers handed to one extern kernel; at run time
it reads the predicate and calls the chosen branch -- a GraphModule of prims, as aot left it --
compiled through inductor itself (``compile_fx.CompiledFunction``: C++ kernels, one variant per
input layout, compiled the first time that branch runs; a branch inductor cannot compile runs
its graph eagerly, as any graph inductor gives up on). The outputs' layouts are the node's traced
metadata (both branches' outputs have the same shapes and dtypes: checked when traced). The
predicate's value is read at run time, never guarded: one compiled graph serves both values.
"""
from __future__ import annotations

from . import ir
from .graph import LoweringError, _symbolic_in
from .sizevars import sympify


def is_cond(target) -> bool:
    return getattr(target, "_ember_hop", None) == "cond_op"


def lower_cond(graph, node, lookup):
    pred, tgm, fgm, operands = node.args
    pred = lookup(pred)
    tgm, fgm = lookup(tgm), lookup(fgm)
    ops = [lookup(a) for a in operands]
    if not all(isinstance(x, ir.IRNode) for x in [pred] + ops):
        raise LoweringError("cond: the predicate and operands must be tensors")
    meta = node.meta.get("tensor_meta")
    if not isinstance(meta, (list, tuple)) or any(m is None for m in meta):
        raise LoweringError("cond: no output metadata for its extern call")
    layouts = [ir.Layout([sympify(s) for s in m.shape], dtype=m.dtype) for m in meta]
    if any(not n.is_Integer for lay in layouts for n in lay.size) or _symbolic_in([], {}):
        raise LoweringError("cond with symbolic output sizes has no extern lowering yet; the graph runs eagerly")
    dtypes = [x.get_dtype() for x in [pred] + ops]
    fn = _runner(tgm, fgm, dtypes, len(layouts))
    res = graph.make_extern("cond", fn, [pred] + ops, [ir.ExternArg(i) for i in range(len(ops) + 1)], {},
                            layouts, reason="cond: the chosen branch runs as its own compiled graph")
    return res if isinstance(res, tuple) else (res,)


def _runner(tgm, fgm, dtypes, n_out):
    from ..autograd.grad_mode import no_grad
    from ..inductor.compile_fx import CompiledFunction
    from ..tensor import _make
    compiled = {}

    def branch(which, gm, tensors):
        c = compiled.get(which)
        if c is None:
            c = compiled[which] = CompiledFunction(gm, tensors)
        return c(*tensors)

    def cond(pred, *arrays):
        tensors = [_make(a, dtype=dt) for a, dt in zip(arrays, dtypes[1:])]
        taken = bool(pred.reshape(-1)[0])
        with no_grad():
            out = branch("true", tgm, tensors) if taken else branch("false", fgm, tensors)
        out = out if isinstance(out, (tuple, list)) else (out,)
        if len(out) != n_out:
            raise RuntimeError(f"cond: the branch returned {len(out)} outputs, {n_out} expected")
        return tuple(o._data for o in out)
    cond.__name__ = "cond"
    return cond
