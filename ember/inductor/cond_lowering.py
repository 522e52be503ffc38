"""The ``cond`` node (``ember.ops.higher_order.cond``) in inductor: an extern call that picks a branch.

The node's predicate and operands are realized buffers handed to one extern kernel; at run time
it reads the predicate and calls the chosen branch -- a GraphModule of prims, as aot left it --
compiled through inductor itself (``compile_fx.CompiledFunction``: C++ kernels, one variant per
input layout, compiled the first time that branch runs; a branch inductor cannot compile runs
its graph eagerly, as any graph inductor gives up on). The outputs' layouts are the node's traced
metadata (both branches' outputs have the same shapes and dtypes: checked when traced), in the
graph's size expressions when sizes are symbolic (as a custom op's extern call; each branch is
then compiled once per input shape it meets). The
predicate's value is read at run time, never guarded: one compiled graph serves both values.
"""
from __future__ import annotations

from . import ir
from .graph import LoweringError
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
        key = (which,) + tuple(tuple(t._data.shape) for t in tensors)     # (static: one per shape)
        c = compiled.get(key)
        if c is None:
            c = compiled[key] = CompiledFunction(_specialized(gm, tensors), tensors)
        return c(*tensors)

    def cond(pred, *arrays):
        tensors = [_make(a, dtype=dt) for a, dt in zip(arrays, dtypes[1:])]
        taken = bool(pred.reshape(-1)[0])
        with no_grad():
            out = branch("true", tgm, tensors) if taken else branch("false", fgm, tensors)
        out = out if isinstance(out, (tuple, list)) else (out,)
        if len(out) != n_out:
            raise RuntimeError(f"cond: the branch returned {len(out)} outputs, {n_out} expected")
        # (an extern with one output layout takes one array: a 1-tuple would be read as an
        # array with a leading dim of 1)
        return out[0]._data if n_out == 1 else tuple(o._data for o in out)
    cond.__name__ = "cond"
    return cond


def _specialized(gm, tensors):
    """``gm`` for these inputs' sizes: a branch traced with symbolic sizes reads them off its
    placeholders (``sym_size`` nodes), which a static compile cannot lower; traced again on fake
    tensors of these sizes, they become constants."""
    from ..fx.experimental.proxy_tensor import make_fx, sym_size
    if not any(n.op == "call_function" and n.target is sym_size for n in gm.graph.nodes):
        return gm
    return make_fx(gm, tracing_mode="fake")(*tensors)
