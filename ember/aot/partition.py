"""Split a joint graph into a forward graph and a backward graph.

Two strategies:

* ``default_partition``: the forward computes every value that does not
  depend on a tangent; every such value the backward reads is **saved**.
* ``min_cut_partition``: the same split, except that the set of saved values
  is a minimum cut (a max-flow, ``_FlowGraph``) between the inputs and the backward's
  needs, weighted by bytes. Values downstream of the cut are **recomputed** in
  the backward from the saved ones. Only cheap ops (pointwise, views,
  broadcasts, casts, size arithmetic) may be recomputed: matmul, convolution,
  reductions and random ops are always computed in the forward, so a cut
  never goes above them; without a memory budget (the default) neither does it
  go above a transcendental op (exp, tanh, erf, ...: ``_TRANSCENDENTAL``).

``memory_budget`` (``ember.aot.config.activation_memory_budget``) is the
fraction of the save-everything bytes the backward may keep: 1.0 saves
everything (default partition, no recomputation); below 1.0 the min-cut
partitioner saves the fewest bytes it can (its cut is used only if it saves
fewer bytes than the baseline), and a warning says so when even that exceeds
the budget.

The forward graph takes the primals and returns ``(*outputs, *mutated input
values, *saved)``; the backward takes ``(*saved, *tangents)`` and returns one
gradient per input that requires grad. A :class:`PartitionReport` lists what
was saved (with bytes) and what is recomputed.

**Activation checkpointing** (``ember.utils.checkpoint`` captured by dynamo: nodes with
``meta["recompute"]``, see ``_checkpointed``): with either partitioner and any budget, the
values of a checkpointed region are never saved -- the backward recomputes them from the
region's inputs, matmul and convolution included (that is what checkpointing asks for), just
before the backward first reads them (so the recomputed activations are not all alive at once).
Random values are the exception: they are saved (with values made from them alone, such as a
dropout mask), since recomputing a draw would give other numbers than the forward used; the
report lists them.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.node import Node
from .joint import JointGraph

INF = float("inf")

_RECOMPUTABLE_TAGS = ("pointwise", "view")
_RECOMPUTABLE_NAMES = {"broadcast_in_dim", "convert_element_type", "reshape", "permute", "squeeze",
                       "expand_dims", "expand", "to", "_to_copy", "clone", "contiguous", "iota", "full",
                       "view", "transpose", "t", "unsqueeze", "slice", "select", "alias"}
_NEVER = ("random", "nondeterministic", "reduction")
# transcendental pointwise ops: under the default partitioning (no memory budget) their results
# are saved rather than recomputed -- a min-cut weighs bytes only, and recomputing tanh over a
# nanoGPT MLP's 1M-element activations (GELU(tanh)'s backward) cost more than writing and reading
# those 4 MB: the compiled training step 1.014-1.024x (interleaved A/B). With a budget (the user
# trading compute for memory) they are recomputed like other pointwise ops.
_TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log10", "log1p", "log2", "pow", "tanh", "sin", "cos", "tan",
                   "sinh", "cosh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "erf", "erfc",
                   "erfinv", "lgamma"}


@dataclass
class PartitionReport:
    strategy: str
    saved: List[Tuple[str, str, int]] = field(default_factory=list)     # (name, shape, bytes)
    recomputed: List[str] = field(default_factory=list)
    baseline_bytes: int = 0
    # random ops of checkpointed regions: saved (or their products are), not recomputed
    checkpoint_random: List[str] = field(default_factory=list)

    @property
    def saved_bytes(self) -> int:
        return sum(b for _, _, b in self.saved)

    def __str__(self) -> str:
        lines = [f"aot partition ({self.strategy}): {len(self.saved)} saved for backward, "
                 f"{self.saved_bytes} bytes (save-everything baseline: {self.baseline_bytes} bytes)",
                 f"{'saved tensor':<28}{'shape':<24}{'bytes':>12}"]
        for name, shape, nbytes in self.saved:
            lines.append(f"{name:<28}{shape:<24}{nbytes:>12}")
        if self.recomputed:
            lines.append(f"recomputed in backward ({len(self.recomputed)}): {', '.join(self.recomputed)}")
        if self.checkpoint_random:
            lines.append(f"random ops in checkpointed regions, not recomputed (a recomputation would draw other "
                         f"numbers; their draws, or values made from them alone such as a dropout mask, are "
                         f"saved): {', '.join(self.checkpoint_random)}")
        return "\n".join(lines)


def _nbytes(node: Node) -> int:
    val = node.meta.get("val")
    if val is None:
        tm = node.meta.get("tensor_meta")
        if tm is None:
            return 8      # a size (int) or other scalar
        shape, dtype = tm.shape, tm.dtype
    else:
        shape, dtype = val.shape, val.dtype
    n = 1
    for s in shape:
        n *= s.hint() if hasattr(s, "hint") else int(s)
    return n * dtype.itemsize


def _shape_str(node: Node) -> str:
    val = node.meta.get("val")
    if val is None:
        tm = node.meta.get("tensor_meta")
        return str(list(tm.shape)) if tm is not None else "scalar"
    return str([str(s) for s in val.shape]).replace("'", "")


def _recomputable(node: Node, transcendental: bool = True) -> bool:
    if node.op == "placeholder":
        return False
    if node.op == "get_attr":
        return True
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return _recomputable(node.args[0], transcendental)
    op = getattr(node.target, "_ember_op", None)
    if op is None:
        # size arithmetic (operator.mul, sym_size) is free to recompute
        return getattr(node.target, "__module__", "") in ("_operator", "operator") or \
            getattr(node.target, "__name__", "") == "sym_size"
    if any(t in op.tags for t in _NEVER) or "inplace" in op.tags:
        return False
    base = op.name.split(".")[-1]
    if not transcendental and base in _TRANSCENDENTAL:
        return False
    return any(t in op.tags for t in _RECOMPUTABLE_TAGS) or base in _RECOMPUTABLE_NAMES


def _op_of(node: Node):
    """The ember operator a call node runs (a getitem: the one making the tuple it reads)."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem and isinstance(node.args[0], Node):
        return _op_of(node.args[0])
    return getattr(node.target, "_ember_op", None)


def _checkpointed(split: "_Split") -> Tuple[Set[Node], List[Node], Set[Node]]:
    """(forward values the backward must recompute, random ops of the regions, values made from
    draws alone) for the joint graph's activation-checkpoint regions; empty without regions.

    Recomputed: the operator nodes carrying ``meta["recompute"]`` that compute on the
    primals, and the untagged ones autograd made from them for the backward only (no tangent in
    them: relu's mask, a transpose; they run in the backward at no extra cost). Not recomputed:
    random ops (and nondeterministic ones) -- recomputing a draw would give other numbers than the
    forward used, and eager ``checkpoint`` restores the RNG state for that, which a graph cannot
    -- nor values made from random ones alone (the dropout mask; they are partitioned as usual,
    so the smallest of them is what is saved), nor in-place ops."""
    if not any(n.meta.get("recompute") is not None for n in split.nodes):
        return set(), [], set()
    fwd_needed = split.ancestors(split.fwd_outs + split.mutated)
    on_primals: Set[Node] = set(split.primals)
    on_random: Set[Node] = set()
    must: Set[Node] = set()
    random_ops: List[Node] = []
    for n in split.nodes:
        if n.op != "call_function":
            continue
        op = _op_of(n)
        # (size arithmetic does not carry a dependence: a draw's shape may come from an input's)
        ins = [a for a in n.all_input_nodes if not (a.op == "call_function" and _op_of(a) is None)]
        drawn = op is not None and any(t in op.tags for t in ("random", "nondeterministic"))
        if any(a in on_primals for a in ins):
            on_primals.add(n)
        if drawn or any(a in on_random for a in ins):
            on_random.add(n)
        if op is None or n in split.backward:
            continue
        if n.meta.get("recompute") is None and (n in fwd_needed or not any(a in must for a in ins)):
            continue
        if drawn:
            random_ops.append(n)
        elif "inplace" not in op.tags and n in on_primals:
            must.add(n)
    return must, random_ops, on_random - on_primals


def _region_inputs(split: "_Split", must: Set[Node]) -> Tuple[List[Node], Set[Node]]:
    """What the backward needs saved when the nodes of ``must`` are recomputed -- its needs,
    each recomputed one replaced by its inputs (recursively), in graph order -- and which of
    those are inputs of recomputed regions."""
    saved: Set[Node] = set()
    inputs: Set[Node] = set()
    expanded: Set[Node] = set()
    stack = [(n, False) for n in split.bw_needs]
    while stack:
        n, region_input = stack.pop()
        if n in must:
            if n not in expanded:
                expanded.add(n)
                stack.extend((a, True) for a in n.all_input_nodes)
        elif n.op != "get_attr":
            saved.add(n)
            if region_input:
                inputs.add(n)
    return [n for n in split.nodes if n in saved], inputs


def _just_in_time(order: List[Node], deferred: Set[Node]) -> List[Node]:
    """``order`` with each node of ``deferred`` moved to just before its first user (its
    deferred inputs before it, recursively): the backward recomputes a checkpointed region when
    it reaches the region's gradients, not all regions before its first op."""
    members = set(order)
    out: List[Node] = []
    done: Set[Node] = set()
    for n in order:
        if n in deferred:
            continue
        stack = [(n, False)]
        while stack:
            m, ready = stack.pop()
            if m in done:
                continue
            if ready:
                done.add(m)
                out.append(m)
                continue
            stack.append((m, True))
            for a in reversed(m.all_input_nodes):
                if a in deferred and a in members and a not in done:
                    stack.append((a, False))
    return out


class _Split:
    """The joint graph's nodes sorted into forward, backward, and what the backward reads."""

    def __init__(self, joint: JointGraph):
        g = joint.gm.graph
        self.joint = joint
        self.nodes = list(g.nodes)
        phs = [n for n in self.nodes if n.op == "placeholder"]
        self.primals = phs[:joint.num_primals]
        self.tangents = phs[joint.num_primals:]
        out = next(n for n in self.nodes if n.op == "output")
        (fwd_outs, grads), mutated = out.args[0]
        self.fwd_outs = list(fwd_outs)
        self.grads = list(grads)
        self.mutated = list(mutated)
        tangent_dep: Set[Node] = set(self.tangents)
        for n in self.nodes:
            if n.op in ("call_function", "call_method", "call_module") and \
                    any(a in tangent_dep for a in n.all_input_nodes):
                tangent_dep.add(n)
        self.backward = tangent_dep
        # forward values the backward reads directly
        self.bw_needs: List[Node] = []
        seen = set()
        for n in self.nodes:
            if n in tangent_dep and n.op != "placeholder":
                for a in n.all_input_nodes:
                    if a not in tangent_dep and a not in seen:
                        seen.add(a)
                        self.bw_needs.append(a)
        for gnode in self.grads:
            if isinstance(gnode, Node) and gnode not in tangent_dep and gnode not in seen:
                seen.add(gnode)
                self.bw_needs.append(gnode)

    def ancestors(self, roots: Sequence[Node], stop: Set[Node] = frozenset()) -> Set[Node]:
        out: Set[Node] = set()
        stack = [r for r in roots if isinstance(r, Node)]
        while stack:
            n = stack.pop()
            if n in out:
                continue
            out.add(n)
            if n in stop:
                continue
            stack.extend(n.all_input_nodes)
        return out


def _order(nodes: Set[Node], all_nodes: List[Node]) -> List[Node]:
    return [n for n in all_nodes if n in nodes]


def _build(split: _Split, saved: List[Node], recompute: Set[Node],
           deferred: Set[Node] = frozenset()) -> Tuple[GraphModule, GraphModule, List[str]]:
    """The forward and backward graphs; the backward computes the nodes of ``deferred``
    (recomputed checkpoint regions) just before their first use (``_just_in_time``)."""
    joint = split.joint
    root = joint.gm
    # -- forward: the primals (all of them, in order), then what outputs and saved values need
    fwd_set = split.ancestors(split.fwd_outs + split.mutated + saved)
    fg2 = Graph()
    env2: Dict[Node, Any] = {}
    for p in split.primals:
        env2[p] = fg2.placeholder(p.name)
        env2[p].meta.update(p.meta)
    for n in _order(fwd_set, split.nodes):
        if n.op == "placeholder":
            if n not in env2:
                raise RuntimeError(f"aot partition: the forward needs tangent {n.name}")
            continue
        env2[n] = fg2.node_copy(n, lambda a: env2[a])
    fg2.output(tuple(env2[o] for o in split.fwd_outs) + tuple(env2[m] for m in split.mutated)
               + tuple(env2[s] for s in saved))
    fw = GraphModule(root, fg2, class_name="ForwardGraph")
    # -- backward
    bg = Graph()
    benv: Dict[Node, Any] = {}
    for s in saved:
        benv[s] = bg.placeholder(s.name if s.op != "placeholder" else f"{s.name}")
        benv[s].meta.update(s.meta)
    for t in split.tangents:
        benv[t] = bg.placeholder(t.name)
        benv[t].meta.update(t.meta)
    saved_set = set(saved)
    bw_set = split.ancestors([g for g in split.grads if isinstance(g, Node)], stop=saved_set)
    bw_order = _order(bw_set, split.nodes)
    if deferred:
        bw_order = _just_in_time(bw_order, deferred - saved_set)
    for n in bw_order:
        if n in benv:
            continue
        if n.op == "placeholder":
            raise RuntimeError(f"aot partition: backward needs {n.name}, which was not saved")
        if n not in split.backward and n not in recompute and n.op != "get_attr":
            raise RuntimeError(f"aot partition: backward needs forward value {n.name}, which is neither "
                               f"saved nor recomputable")
        benv[n] = bg.node_copy(n, lambda a: benv[a])
    bg.output(tuple(benv[g] if isinstance(g, Node) else g for g in split.grads))
    bw = GraphModule(root, bg, class_name="BackwardGraph")
    recomputed = [n.name for n in _order(bw_set, split.nodes) if n in recompute and n not in saved_set]
    return fw, bw, recomputed


def default_partition(joint: JointGraph):
    """Save every forward value the backward reads (a checkpointed region's: its inputs)."""
    split = _Split(joint)
    saved = [n for n in split.bw_needs if n.op != "get_attr"]
    base_bytes = sum(_nbytes(n) for n in saved)
    must, random_ops, _ = _checkpointed(split)
    if not must:
        fw, bw, _ = _build(split, saved, set())
        report = PartitionReport("default", [(n.name, _shape_str(n), _nbytes(n)) for n in saved], [], base_bytes)
        return fw, bw, saved, report
    saved, _ = _region_inputs(split, must)
    fw, bw, recomputed = _build(split, saved, must, must)
    report = PartitionReport("default, checkpointed regions recomputed",
                             [(n.name, _shape_str(n), _nbytes(n)) for n in saved], recomputed, base_bytes,
                             [n.name for n in random_ops])
    return fw, bw, saved, report


class _FlowGraph:
    """A flow network for the min-cut partitioner (Dinic's max-flow, pure Python).

    Replaces networkx here: importing networkx costs 0.2-0.4 s, paid by every training
    compile in a new process -- more than a warm compile is allowed in all. The cut it
    returns is the one ``networkx.minimum_cut`` returns: the source side is every node
    that cannot reach the sink in the residual network of a maximum flow, which is the
    same set for every maximum flow (so the partition does not depend on the algorithm).
    Edges without a capacity are unbounded."""

    def __init__(self):
        self.ids: Dict[Any, int] = {}
        self.to: List[int] = []
        self.cap: List[float] = []
        self.adj: List[List[int]] = []

    def __contains__(self, node) -> bool:
        return node in self.ids

    def _id(self, node) -> int:
        i = self.ids.get(node)
        if i is None:
            i = self.ids[node] = len(self.adj)
            self.adj.append([])
        return i

    def add_edge(self, u, v, capacity: Optional[float] = None) -> None:
        a, b = self._id(u), self._id(v)
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(INF if capacity is None else capacity)
        self.adj[b].append(len(self.to))        # the residual twin (index ^ 1)
        self.to.append(a)
        self.cap.append(0)

    def min_cut_source_side(self, source, sink) -> Set[Any]:
        s, t = self.ids[source], self.ids[sink]
        to, cap, adj = self.to, self.cap, self.adj
        finite = sum(c for c in cap if c != INF)
        big = 3 * finite + 1                     # larger than any finite cut
        cap[:] = [big if c == INF else c for c in cap]
        n = len(adj)
        while True:
            level = [-1] * n                     # BFS levels in the residual network
            level[s] = 0
            frontier = [s]
            while frontier and level[t] < 0:
                nxt = []
                for u in frontier:
                    for e in adj[u]:
                        v = to[e]
                        if cap[e] > 0 and level[v] < 0:
                            level[v] = level[u] + 1
                            nxt.append(v)
                frontier = nxt
            if level[t] < 0:
                break
            it = [0] * n                         # blocking flow by iterative DFS
            while True:
                path, u = [], s
                while u != t:
                    edges = adj[u]
                    while it[u] < len(edges):
                        e = edges[it[u]]
                        if cap[e] > 0 and level[to[e]] == level[u] + 1:
                            break
                        it[u] += 1
                    if it[u] < len(edges):
                        e = edges[it[u]]
                        path.append(e)
                        u = to[e]
                    elif u == s:
                        break
                    else:                        # dead end: prune it and step back
                        level[u] = -1
                        e = path.pop()
                        u = to[e ^ 1]
                        it[u] += 1
                if u != t:
                    break
                f = min(cap[e] for e in path)
                if f >= big:
                    raise RuntimeError("aot partition: unbounded cut (an uncuttable path from source to sink)")
                for e in path:
                    cap[e] -= f
                    cap[e ^ 1] += f
        # the sink side: nodes with a residual path to the sink
        reaches_sink = [False] * n
        reaches_sink[t] = True
        stack = [t]
        while stack:
            v = stack.pop()
            for e in adj[v]:                     # e: v -> w, its twin w -> v
                w = to[e]
                if not reaches_sink[w] and cap[e ^ 1] > 0:
                    reaches_sink[w] = True
                    stack.append(w)
        return {node for node, i in self.ids.items() if not reaches_sink[i]}


def min_cut_partition(joint: JointGraph, memory_budget: float = 0.0, transcendental: bool = True):
    """Save a minimum-bytes set of forward values; recompute cheap ones (see the module docstring).
    ``transcendental``: whether exp, tanh, erf, ... count among them (``_TRANSCENDENTAL``)."""
    split = _Split(joint)
    baseline = [n for n in split.bw_needs if n.op != "get_attr"]
    base_bytes = sum(_nbytes(n) for n in baseline)
    fwd_region = split.ancestors(split.bw_needs) - split.backward
    # checkpointed regions: their values can never be saved (an unbounded node edge), and they are
    # recomputable whatever their op (no edge from the source); their inputs are always saved
    # (what checkpointing promises: recomputing those too, from further up, would rebuild the
    # whole forward at the backward's first region), except values made from random draws alone,
    # of which the cut picks the smallest (a dropout mask rather than its float draw)
    must, random_ops, drawn = _checkpointed(split)
    region_saved, region_inputs = _region_inputs(split, must) if must else ([], set())
    G = _FlowGraph()
    needs = set(split.bw_needs)
    for n in split.nodes:                 # graph order: a deterministic flow network
        if n not in fwd_region or n.op == "get_attr":
            continue
        G.add_edge(("in", n), ("out", n), None if n in must else _nbytes(n))
        pinned = n in region_inputs and n not in drawn
        if n.op == "placeholder" or (not _recomputable(n, transcendental) and n not in must) or pinned:
            G.add_edge("source", ("in", n))
        if pinned:
            G.add_edge(("out", n), "sink")
        if n in needs:
            G.add_edge(("out", n), "sink")
        for a in n.all_input_nodes:
            if a in fwd_region and a.op != "get_attr":
                G.add_edge(("out", a), ("in", n))
    if "sink" not in G or "source" not in G:
        return default_partition(joint)
    reach = G.min_cut_source_side("source", "sink")
    saved_set = {n for n in fwd_region if n.op != "get_attr" and ("in", n) in reach and ("out", n) not in reach}
    saved = [n for n in split.nodes if n in saved_set]
    cut_bytes = sum(_nbytes(n) for n in saved)
    # (the baseline with checkpointed regions: their inputs instead of their values)
    if cut_bytes >= (sum(_nbytes(n) for n in region_saved) if must else base_bytes):
        fw, bw, saved, report = default_partition(joint)
        report.strategy = "min_cut (no gain: kept the baseline" + (", checkpointed regions recomputed)" if must
                                                                   else ")")
        return fw, bw, saved, report
    recompute = {n for n in fwd_region if ("in", n) not in reach and n.op != "get_attr"}
    # with checkpointed regions every recomputed value is made just in time (a cheap value made
    # early would pull the regions it reads to the start of the backward)
    fw, bw, recomputed_names = _build(split, saved, recompute, recompute if must else frozenset())
    report = PartitionReport("min_cut", [(n.name, _shape_str(n), _nbytes(n)) for n in saved],
                             recomputed_names, base_bytes, [n.name for n in random_ops])
    return fw, bw, saved, report


def partition(joint: JointGraph, memory_budget: Optional[float] = None):
    """Pick the partitioner by ``memory_budget`` (see the module docstring)."""
    from . import config
    budget = config.activation_memory_budget if memory_budget is None else memory_budget
    if budget is None:
        return min_cut_partition(joint, transcendental=False)
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"aot: memory_budget must be in [0, 1], got {budget}")
    if budget >= 1.0:
        return default_partition(joint)
    fw, bw, saved, report = min_cut_partition(joint, budget)
    if report.saved_bytes > budget * report.baseline_bytes:
        import logging
        logging.getLogger("ember.aot").warning(
            "aot: the activation memory budget %.2f cannot be met: the minimum that must be saved is "
            "%d bytes of a %d-byte baseline (matmul/conv/reduction/random results are never recomputed)",
            budget, report.saved_bytes, report.baseline_bytes)
    return fw, bw, saved, report
