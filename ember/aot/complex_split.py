"""Compile the real-valued parts of a dynamo graph that also computes complex values.

The prim decompositions and inductor's loops are real-valued, so a complex node cannot be
compiled (a complex ``mul`` decomposed to real prims would be a wrong answer). Before this
module, one complex value anywhere sent the *whole* graph to eager ops: a LLaMA-style
attention whose rotary embedding multiplies by a complex ``freqs_cis`` ran its projections,
softmax and matmuls eagerly too.

Here the graph is cut into **segments** instead: the call nodes are ordered (a topological
order that keeps running nodes of the same kind while it can, so the cut count stays small),
and each maximal run of real nodes becomes a sub-graph compiled by the same AOT pipeline
(its own joint graph, partition and graph compilers), while each run of complex nodes -- a
node is complex if it reads or produces a complex tensor, so ``view_as_complex``/``abs``/
``view_as_real`` count -- runs with eager ember ops. Gradients flow across the cuts through
ember's autograd: a compiled segment is one autograd node, the eager ones record theirs.

**Symbolic sizes** (``gm.meta["dynamic"]``: ``dynamic=True``, or a LLaMA-style model called
with a new sequence length). Dynamo's size nodes (``sym_size`` of an input, ``operator``
arithmetic on those) read only the graph's inputs, so they belong to no segment: every segment
that uses one recomputes it from the input tensors it reads (which it then takes as inputs),
and segments exchange tensors only. The real segments are traced by aot with dynamo's
ShapeEnv and fake example values (the intermediates' fakes come from the nodes' metadata) and
compiled *when the graph is*, before dynamo builds its guard function: every size guard their
trace adds lands in that ShapeEnv and so in the entry's guards, and one compilation serves
every size the guards admit (as for a graph without complex values).

Only the case where the cut provably keeps eager semantics is split; otherwise the graph runs
whole with eager ops as before (the reason is logged on ``ember.aot``):

* a symbolic real segment aot cannot trace with the caller's sizes;
* in-place ops, ``setitem``, grad-mode/autocast switches, ``call_module``/``get_attr`` nodes,
  or nodes whose values are not tensors: mutations and mode switches would have to be
  threaded across the cuts;
* fewer than ``MIN_COMPILED_OPS`` real compute ops in every segment: nothing worth compiling.

A real segment is compiled on its first call, with that call's tensors as example inputs
(static graphs: dynamo's guards fix every input's layout, so the intermediate layouts are
fixed too). If the split run fails on its first call, the graph falls back to running whole
with eager ops for good, and says why.
"""
from __future__ import annotations

import logging
import operator
from typing import Callable, List, Optional

log = logging.getLogger("ember.aot")

MIN_COMPILED_OPS = 2          # a segment with fewer non-view ops runs eagerly (not worth a compile)

_MUTATING = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
             operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
             operator.ilshift, operator.irshift, operator.imatmul}
# ops that only re-index their input: they do not make a segment worth compiling
_VIEWS = {"view", "reshape", "flatten", "unflatten", "transpose", "permute", "t", "squeeze", "unsqueeze",
          "expand", "expand_as", "contiguous", "split", "chunk", "unbind", "narrow", "select", "getitem",
          "float", "to", "type_as", "detach", "view_as", "movedim", "mT", "T", "size", "dim"}


def _tensors(v):
    from ..tensor import Tensor
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            sub = _tensors(x)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _name(n) -> str:
    t = n.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def _sym_nodes(gm) -> set:
    """Dynamo's size nodes: ``sym_size`` of an input and integer arithmetic over those (see
    ``OutputGraph._sym_node``) -- they read graph inputs only."""
    from ..fx.experimental.proxy_tensor import sym_size
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.meta.get("example_value") is not None:
            continue
        if (n.target is sym_size or getattr(n.target, "__module__", None) in ("_operator", "operator", "math")) \
                and all(a.op == "placeholder" or a in out for a in n.all_input_nodes):
            out.add(n)
    return out


def _why_not_split(gm, sym=frozenset()) -> Optional[str]:
    from ..dynamo.variables.ctx import _set_autocast, _set_grad_enabled
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output") or n in sym:
            continue
        if n.op not in ("call_function", "call_method"):
            return f"node {n.name} is a {n.op} node"
        if n.target is _set_grad_enabled or n.target is _set_autocast:
            return f"node {n.name} switches grad mode or autocast"
        name = _name(n)
        if n.target in _MUTATING or (name.endswith("_") and not name.endswith("__")) or "out" in n.kwargs:
            return f"node {n.name} ({name}) mutates a tensor"
        if _tensors(n.meta.get("example_value")) is None:
            return f"node {n.name} ({name}) produces a non-tensor value"
    return None


def _is_complex_node(n) -> bool:
    vals = list(_tensors(n.meta.get("example_value")) or [])
    for a in n.all_input_nodes:
        vals += _tensors(a.meta.get("example_value")) or []
    return any(v.dtype.is_complex for v in vals)


def _order(nodes, is_complex) -> List[list]:
    """Segments ``[(complex?, [nodes])]`` in a topological order that stays on one kind of
    node while any node of that kind is ready."""
    pending = {n: sum(1 for a in n.all_input_nodes if a in nodes) for n in nodes}
    users = {n: [u for u in n.users if u in pending] for n in nodes}
    pos = {n: i for i, n in enumerate(nodes)}
    ready = {False: [], True: []}
    for n in nodes:
        if pending[n] == 0:
            ready[is_complex[n]].append(n)
    kind = is_complex[nodes[0]] if nodes else False
    if not ready[kind]:
        kind = not kind
    segments = []
    while ready[False] or ready[True]:
        if not ready[kind]:
            kind = not kind
        run = []
        while ready[kind]:
            ready[kind].sort(key=pos.__getitem__)
            n = ready[kind].pop(0)
            run.append(n)
            for u in users[n]:
                pending[u] -= 1
                if pending[u] == 0:
                    ready[is_complex[u]].append(u)
        segments.append([kind, run])
        kind = not kind
    return segments


class _Segment:
    """One cut of the graph: a GraphModule over the values it reads, returning the values
    later segments (or the graph's output) read."""

    def __init__(self, gm, nodes, complex_, later_uses, sym=frozenset()):
        from ..fx import Graph, GraphModule
        inside = set(nodes)
        self.complex = complex_
        # the size nodes this segment uses, with those they read, in graph order: copied in
        need, stack = set(), [a for n in nodes for a in n.all_input_nodes if a in sym]
        while stack:
            a = stack.pop()
            if a not in need:
                need.add(a)
                stack += [b for b in a.all_input_nodes if b in sym]
        syms = [n for n in gm.graph.nodes if n in need]
        self.inputs = []
        for n in syms + list(nodes):
            for a in n.all_input_nodes:
                if a not in inside and a not in need and a not in self.inputs:
                    self.inputs.append(a)
        self.outputs = [n for n in nodes if any(u not in inside for u in n.users) or n in later_uses]
        g = Graph()
        env = {}
        for a in self.inputs:
            p = g.placeholder(a.name)
            p.meta = dict(a.meta)
            env[a] = p
        for n in syms + list(nodes):
            env[n] = g.node_copy(n, env.__getitem__)
        g.output(tuple(env[n] for n in self.outputs))
        self.gm = GraphModule(gm, g)
        meta = getattr(gm, "meta", {})
        if meta.get("dynamic"):
            self.gm.meta["dynamic"] = True
            self.gm.meta["shape_env"] = meta.get("shape_env")
        self.ops = [_name(n) for n in nodes]
        self.compute_ops = sum(1 for op in self.ops if op not in _VIEWS)
        self.fn: Optional[Callable] = None

    @property
    def compiled(self) -> bool:
        return not self.complex and self.compute_ops >= MIN_COMPILED_OPS

    def run(self, compile_static, args):
        if self.fn is None:
            self.fn = compile_static(self.gm, list(args)) if self.compiled else self.gm.forward
        out = self.fn(*args)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def split_complex(gm, example_inputs, why: str, compile_static: Callable, eager: Callable,
                  compile_symbolic: Optional[Callable] = None):
    """The callable for a graph with complex values: the real segments compiled by
    ``compile_static(sub_gm, example_inputs)`` (or, for a graph with symbolic sizes, now by
    ``compile_symbolic(sub_gm, fake_inputs)``), the complex ones eager (see the module
    docstring); ``eager(gm, reason)`` when the graph cannot be split."""
    dynamic = bool(getattr(gm, "meta", {}).get("dynamic"))
    sym = _sym_nodes(gm) if dynamic else frozenset()
    bad = "the graph has symbolic sizes" if dynamic and compile_symbolic is None else _why_not_split(gm, sym)
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output") and n not in sym]
    if bad is None:
        is_complex = {n: _is_complex_node(n) for n in calls}
        segs = _order(calls, is_complex)
        out_node = gm.graph.output_node
        out_uses = set(out_node.all_input_nodes)
        segments = [_Segment(gm, nodes, c, out_uses, sym) for c, nodes in segs]
        if not any(s.compiled for s in segments):
            bad = f"no real segment has {MIN_COMPILED_OPS} or more ops to compile"
    if bad is None and dynamic:
        # compiled now, on dynamo's fakes: their size guards join the entry's (module docstring)
        try:
            for s in segments:
                if s.compiled:
                    fakes = [p.meta.get("example_value") for p in s.gm.graph.nodes if p.op == "placeholder"]
                    s.fn = compile_symbolic(s.gm, fakes)
        except Exception as e:  # noqa: BLE001 - the whole graph with eager ops is always right
            bad = f"a real segment could not be compiled with symbolic sizes: {type(e).__name__}: {e}"
    if bad is not None:
        return eager(gm, f"{why} (not split: {bad})")

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    n_comp = sum(1 for s in segments if s.compiled)
    reason = (f"complex tensors are not compiled: {why}; the graph is split in {len(segments)} segments, "
              f"{n_comp} real ones compiled, the rest run with eager ops (complex: "
              f"{', '.join(sorted({op for s in segments if s.complex for op in s.ops}))})")
    log.warning("aot: %s", reason)
    if hasattr(gm, "meta"):
        gm.meta["eager_reason"] = reason
        gm.meta["complex_split"] = [("complex" if s.complex else "real", s.ops) for s in segments]
    state = {"failed": None}

    def run_split(args):
        env = dict(zip(placeholders, args))
        for s in segments:
            outs = s.run(compile_static, [env[a] for a in s.inputs])
            env.update(zip(s.outputs, outs))
        from ..fx.node import map_arg
        return map_arg(out_node.args[0], env.__getitem__)

    def run(*args):
        if state["failed"] is not None:
            return gm.forward(*args)
        if all(s.fn is not None for s in segments):
            return run_split(args)
        try:              # first call: the real segments compile now
            return run_split(args)
        except Exception as e:  # noqa: BLE001 - the whole graph with eager ops is always right
            state["failed"] = f"{type(e).__name__}: {e}"
            log.warning("aot: the split of a complex graph failed on its first call (%s); the graph runs "
                        "with eager ops", state["failed"])
            if hasattr(gm, "meta"):
                gm.meta["eager_reason"] = f"{why}; the split failed: {state['failed']}"
            return gm.forward(*args)
    run.segments = segments
    return run
