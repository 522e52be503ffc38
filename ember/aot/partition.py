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
  never goes above them.

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


@dataclass
class PartitionReport:
    strategy: str
    saved: List[Tuple[str, str, int]] = field(default_factory=list)     # (name, shape, bytes)
    recomputed: List[str] = field(default_factory=list)
    baseline_bytes: int = 0

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


def _recomputable(node: Node) -> bool:
    if node.op == "placeholder":
        return False
    if node.op == "get_attr":
        return True
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return _recomputable(node.args[0])
    op = getattr(node.target, "_ember_op", None)
    if op is None:
        # size arithmetic (operator.mul, sym_size) is free to recompute
        return getattr(node.target, "__module__", "") in ("_operator", "operator") or \
            getattr(node.target, "__name__", "") == "sym_size"
    if any(t in op.tags for t in _NEVER) or "inplace" in op.tags:
        return False
    base = op.name.split(".")[-1]
    return any(t in op.tags for t in _RECOMPUTABLE_TAGS) or base in _RECOMPUTABLE_NAMES


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


def _build(split: _Split, saved: List[Node], recompute: Set[Node]) -> Tuple[GraphModule, GraphModule, List[str]]:
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
    for n in _order(bw_set, split.nodes):
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
    """Save every forward value the backward reads."""
    split = _Split(joint)
    saved = [n for n in split.bw_needs if n.op != "get_attr"]
    fw, bw, _ = _build(split, saved, set())
    report = PartitionReport("default", [(n.name, _shape_str(n), _nbytes(n)) for n in saved], [],
                             sum(_nbytes(n) for n in saved))
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


def min_cut_partition(joint: JointGraph, memory_budget: float = 0.0):
    """Save a minimum-bytes set of forward values; recompute cheap ones (see the module docstring)."""
    split = _Split(joint)
    baseline = [n for n in split.bw_needs if n.op != "get_attr"]
    base_bytes = sum(_nbytes(n) for n in baseline)
    fwd_region = split.ancestors(split.bw_needs) - split.backward
    G = _FlowGraph()
    needs = set(split.bw_needs)
    for n in split.nodes:                 # graph order: a deterministic flow network
        if n not in fwd_region or n.op == "get_attr":
            continue
        cap = _nbytes(n)
        G.add_edge(("in", n), ("out", n), cap)
        if n.op == "placeholder" or not _recomputable(n):
            G.add_edge("source", ("in", n))
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
    if cut_bytes >= base_bytes:
        fw, bw, saved, report = default_partition(joint)
        report.strategy = "min_cut (no gain: kept the baseline)"
        return fw, bw, saved, report
    recompute = {n for n in fwd_region if ("in", n) not in reach and n.op != "get_attr"}
    fw, bw, recomputed_names = _build(split, saved, recompute)
    report = PartitionReport("min_cut", [(n.name, _shape_str(n), _nbytes(n)) for n in saved],
                             recomputed_names, base_bytes)
    return fw, bw, saved, report


def partition(joint: JointGraph, memory_budget: Optional[float] = None):
    """Pick the partitioner by ``memory_budget`` (see the module docstring)."""
    from . import config
    budget = config.activation_memory_budget if memory_budget is None else memory_budget
    if budget is None:
        return min_cut_partition(joint)
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
