"""``ember.ops.higher_order.cond``: data-dependent ``cond`` as one graph node (torch's cond HOP).

A traced graph holds ``cond(pred, true_graph_0, false_graph_0, (operands...))``: ``pred`` is a
one-element tensor node, the branches are GraphModule attributes of the graph (``get_attr``
nodes), and both take the same operands -- the ``cond``'s own operands followed by the tensors
the branches read from outside (closures, module parameters: lifted, as torch does) -- and
return flat tuples of tensors with the same shapes and dtypes. The node's value is that tuple
(``operator.getitem`` nodes read it).

What calling the operator does depends on where it runs:

* **under a make_fx trace** (``DispatchTracer`` on the mode stack: aot's joint graphs, export,
  a nested ``ember.cond`` inside a branch being traced): each branch is traced on its own with
  the same settings (decompositions, functionalization, ShapeEnv) into a subgraph, the two
  outputs are checked alike (``CondBranchMismatchError``), and one node is recorded in the outer
  graph. Its value while tracing: fresh copies of the true branch's outputs (fake tensors: only
  the metadata matters) or, tracing real tensors, of the branch the predicate picks;
* **on fake tensors** (no tracer): the true branch's outputs, copied (metadata only);
* **on real tensors**: ``pred.item()`` picks the branch, which runs (a GraphModule runs its
  generated code: ember ops, eagerly, so autograd records through it as for any eager code).

Gradients under a trace: a branch input that requires grad (grad mode on) makes the call a
``CondAutogradFunction`` (an ``ember.autograd.Function``) whose backward is again a ``cond``,
over the two branches' backward graphs (each traced from the branch with ``autograd.grad``),
so the joint graph holds a forward and a backward ``cond`` node, as torch's.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, List, Tuple

from .._state import STATE
from ..tensor import Tensor

__all__ = ["cond_op", "CondOp", "UnsupportedAliasMutationException"]


class UnsupportedAliasMutationException(RuntimeError):
    """A ``cond`` branch writes into one of its inputs (torch's exception of the same name)."""


class CondOp:
    """The operator object (``torch.ops.higher_order.cond``); one instance, ``cond_op``."""

    __name__ = "cond"
    __qualname__ = "cond"
    __module__ = "ember.ops.higher_order"
    __fx_name__ = "ember.ops.higher_order.cond"
    _ember_hop = "cond_op"

    def __repr__(self) -> str:
        return "ember.ops.higher_order.cond"

    def __call__(self, pred, true_fn: Callable, false_fn: Callable, operands=()) -> Tuple[Tensor, ...]:
        if not isinstance(operands, (tuple, list)):
            raise RuntimeError(f"cond: operands must be a tuple of tensors, got {type(operands).__name__}")
        operands = tuple(operands)
        for o in operands:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"cond: operands must be tensors, got {type(o).__name__}")
        if not isinstance(pred, Tensor):
            if not isinstance(pred, (bool, int)):
                raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
            return _flat_call(true_fn if pred else false_fn, operands, "true_fn" if pred else "false_fn")
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        tracer = active_tracer()
        if tracer is not None:
            return _traced(tracer, pred, true_fn, false_fn, operands)
        if pred._fake or any(o._fake for o in operands):
            return tuple(o.clone() for o in _flat_call(true_fn, operands, "true_fn"))
        taken = bool(pred.item())
        return _flat_call(true_fn if taken else false_fn, operands, "true_fn" if taken else "false_fn")


cond_op = CondOp()


def active_tracer():
    """The innermost make_fx tracer on the dispatch mode stack, or None."""
    from ..fx.experimental.proxy_tensor import DispatchTracer
    for m in reversed(STATE.modes):
        if isinstance(m, DispatchTracer):
            return m
    return None


def _flat_call(fn, operands, name) -> Tuple[Tensor, ...]:
    out = fn(*operands)
    if isinstance(out, Tensor):
        return (out,)
    if isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
        return tuple(out)
    raise RuntimeError(f"cond: {name} must return a tensor or a flat tuple of tensors here, got "
                       f"{type(out).__name__}")


def _check_alike(tout, fout):
    from ._control_flow import CondBranchMismatchError, describe_mismatch
    why = describe_mismatch(tuple(tout), tuple(fout))
    if why is not None:
        raise CondBranchMismatchError(f"ember.cond: Expected true_fn and false_fn to return the same structure "
                                      f"of tensors with the same metadata: {why}")


def trace_branch(fn, operands, *, decomps=None, keep=(), shape_env=None, functionalize=False, name="branch",
                 whole_ops=False):
    """``fn(*operands)`` traced by a fresh make_fx tracer into a GraphModule returning a flat tuple.

    ``whole_ops`` (dynamo's capture): every composite op is recorded whole, with grad mode off
    (``F.linear`` stays ``linear``, as in the frame's own graph; aot decomposes it later).
    Returns (graph module, the branch's output tensors, the tracer). The caller must have taken
    any outer tracer off the mode stack (its ops would be recorded there too)."""
    from ..fx.experimental.proxy_tensor import DispatchTracer
    outs: List[Tensor] = []

    def body(*args):
        res = _flat_call(fn, args, name)
        outs.extend(res)
        return res
    tracer = DispatchTracer(decomps or {}, keep, shape_env=shape_env, functionalize=functionalize)
    prev = STATE.grad_enabled
    if whole_ops:
        tracer.keep_composite = lambda op: True
        STATE.grad_enabled = False
    try:
        gm = tracer.trace(body, tuple(operands))
    finally:
        STATE.grad_enabled = prev
    out_node = gm.graph.output_node
    if functionalize:
        if gm.meta.get("mutated_inputs"):
            raise UnsupportedAliasMutationException(f"One of torch.cond branch might be modifying the input! "
                                                    f"({name} writes into operand(s) "
                                                    f"{gm.meta['mutated_inputs']})")
        out_node.args = (out_node.args[0][0],)
    if not isinstance(out_node.args[0], tuple):
        out_node.args = (tuple(out_node.args[0]),)
    gm.recompile()
    return gm, outs, tracer


def _next_index(tracer) -> int:
    k = 0
    while f"true_graph_{k}" in tracer.constants:
        k += 1
    return k


def _requires_grad(operands) -> bool:
    return STATE.grad_enabled and any(o.requires_grad for o in operands)


def _traced(outer, pred, true_fn, false_fn, operands):
    """Record one cond node in ``outer``'s graph (see the module doc)."""
    if _requires_grad(operands):
        from .cond_autograd import cond_with_autograd
        return cond_with_autograd(outer, pred, true_fn, false_fn, operands)
    return record_cond(outer, pred, true_fn, false_fn, operands)


def dedupe(operands, key=lambda t: (id(t._data), t.dtype)):
    """(the distinct operands, for each operand its position among them): the tracer knows a
    tensor by its array, so the same tensor given twice must be one placeholder."""
    uniq, pos, index = [], {}, []
    for o in operands:
        k = key(o)
        if k not in pos:
            pos[k] = len(uniq)
            uniq.append(o)
        index.append(pos[k])
    return uniq, index


def spread(fn, index):
    """``fn`` taking the distinct operands (see ``dedupe``)."""
    def call(*uniq):
        return fn(*[uniq[i] for i in index])
    return call


def record_cond(outer, pred, true_fn, false_fn, operands):
    uniq, index = dedupe(operands)
    if len(uniq) != len(operands):
        true_fn, false_fn, operands = spread(true_fn, index), spread(false_fn, index), tuple(uniq)
    modes = STATE.modes
    pos = modes.index(outer)
    del modes[pos]
    try:
        kw = dict(decomps=outer.decomps, keep=outer.keep, shape_env=outer.shape_env,
                  functionalize=outer.functionalize)
        tgm, tout, ttr = trace_branch(true_fn, operands, name="true_fn", **kw)
        fgm, fout, ftr = trace_branch(false_fn, operands, name="false_fn", **kw)
        _check_alike(tout, fout)
        # tensors the branches read from outside (a nested cond's closure over parameters):
        # lifted to operands, so the enclosing trace sees them (and lifts them in turn)
        lifted = []
        for tr in (ttr, ftr):
            for c in tr.constants.values():
                if isinstance(c, Tensor) and not any(c is x for x in lifted):
                    lifted.append(c)
        if lifted:
            n = len(operands)
            for gm, tr in ((tgm, ttr), (fgm, ftr)):
                lift_constants(gm, tr, lifted, n)
            operands = tuple(operands) + tuple(lifted)
        if pred._fake or any(o._fake for o in operands):
            chosen = tout
        else:
            chosen = tout if bool(pred.item()) else fout
        outs = tuple(o.detach().clone() if o.requires_grad else o.clone() for o in chosen)
    finally:
        modes.insert(pos, outer)
    _name_placeholders(tgm, outer, operands)
    _name_placeholders(fgm, outer, operands)
    k = _next_index(outer)
    tname, fname = f"true_graph_{k}", f"false_graph_{k}"
    outer.constants[tname], outer.constants[fname] = tgm, fgm
    g = outer.graph
    tnode, fnode = g.get_attr(tname), g.get_attr(fname)
    args = (outer._map_value(pred), tnode, fnode, tuple(outer._map_value(o) for o in operands))
    node = g.call_function(cond_op, args)
    from ..fx.passes.shape_prop import extract_tensor_metadata
    node.meta["tensor_meta"] = [extract_tensor_metadata(o) for o in outs]
    if all(o._fake for o in outs):
        node.meta["val"] = outs
    for i, o in enumerate(outs):
        item = g.call_function(operator.getitem, (node, i))
        item.meta["tensor_meta"] = extract_tensor_metadata(o)
        if o._fake:
            item.meta["val"] = o
        outer._track(o, item)
    return outs


def lift_constants(gm, tracer, lifted, n_operands) -> None:
    """The get_attr constants of ``gm`` (``tracer.constants``) that are among ``lifted`` become
    placeholders, one per ``lifted`` tensor in that order after the ``n_operands`` existing ones
    (unused where this branch does not read it)."""
    g = gm.graph
    by_id = {}
    for cname, c in tracer.constants.items():
        if isinstance(c, Tensor):
            by_id.setdefault(id(c), []).append(cname)
    getattrs = {n.target: n for n in g.nodes if n.op == "get_attr"}
    phs = [n for n in g.nodes if n.op == "placeholder"]
    anchor = phs[-1] if phs else None
    for i, c in enumerate(lifted):
        ctx = g.inserting_after(anchor) if anchor is not None else g.inserting_before(None)
        with ctx:
            ph = g.placeholder(f"lifted_{i}")
        anchor = ph
        if c._fake:
            ph.meta["val"] = c
        for cname in by_id.get(id(c), ()):
            node = getattrs.get(cname)
            if node is not None:
                node.replace_all_uses_with(ph)
                g.erase_node(node)
            if hasattr(gm, cname):
                delattr(gm, cname)
            tracer.constants.pop(cname, None)
    gm.recompile()


def _name_placeholders(gm, outer, operands):
    """A branch's placeholders named after the outer graph's operand nodes (``x``, ``p_w``), as
    torch's export prints them."""
    names = []
    for o in operands:
        n = outer._lookup(o)
        names.append(n.name if n is not None else None)
    rename_placeholders(gm, names)


def rename_placeholders(gm, names):
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    taken = {n.name for n in gm.graph.nodes if n.op != "placeholder"}
    changed = False
    for ph, want in zip(phs, names):
        if want is None or want == ph.name or want in taken:
            continue
        ph.name = want
        ph.target = want
        taken.add(want)
        changed = True
    if changed:
        gm.recompile()


from ..ops import higher_order as _higher_order_ns  # noqa: E402,F401  (ember.ops.higher_order.cond resolves)


def cond_nodes(gm):
    """The cond nodes of ``gm``'s graph with their two branch GraphModules."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is cond_op:
            subs = []
            for a in n.args[1:3]:
                v = gm
                for part in a.target.split("."):
                    v = getattr(v, part)
                subs.append(v)
            out.append((n, subs[0], subs[1]))
    return out


def export_branches(gm, aten: bool = True) -> None:
    """Export's form of the branches of ``gm``'s cond nodes (recursively): placeholders named
    after the outer operands (``x``, ``p_w``) and, with ``aten``, torch's aten overloads as
    targets with torch's node names -- as the rest of the exported graph."""
    from ..ops import _aten_convert
    convert_graph = _aten_convert.convert_graph
    rename_like_torch = getattr(_aten_convert, "rename_like_torch", lambda g: {})
    for node, tgm, fgm in cond_nodes(gm):
        names = [a.name if hasattr(a, "name") else None for a in node.args[3]]
        for sub in (tgm, fgm):
            rename_placeholders(sub, names)
            if aten:
                convert_graph(sub.graph)
                rename_like_torch(sub.graph)
            export_branches(sub, aten)
            sub.recompile()
