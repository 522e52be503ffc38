"""The exporter's dependency graph: modules and pickles as nodes, "depends on" as edges.

Nodes carry attributes (action, source, error, ...) and remember their insertion order, so
error reports can show the first path that pulled a broken module in.
"""
from __future__ import annotations

from collections import deque

__all__ = ["DiGraph"]


class DiGraph:
    def __init__(self):
        self._node = {}
        self._succ = {}
        self._pred = {}
        self._node_order = {}

    def add_node(self, n, **attrs):
        if n in self._node:
            self._node[n].update(attrs)
            return
        self._node[n] = attrs
        self._succ[n] = {}
        self._pred[n] = {}
        self._node_order[n] = len(self._node_order)

    def add_edge(self, u, v):
        self.add_node(u)
        self.add_node(v)
        self._succ[u][v] = True
        self._pred[v][u] = True

    def successors(self, n):
        if n not in self._succ:
            raise ValueError(f"The node {n} is not in the digraph.")
        return iter(self._succ[n])

    def predecessors(self, n):
        if n not in self._pred:
            raise ValueError(f"The node {n} is not in the digraph.")
        return iter(self._pred[n])

    @property
    def edges(self):
        for u, succ in self._succ.items():
            for v in succ:
                yield u, v

    @property
    def nodes(self):
        return self._node

    def __iter__(self):
        return iter(self._node)

    def __contains__(self, n):
        try:
            return n in self._node
        except TypeError:
            return False

    def _closure(self, src, step):
        seen = {src}
        todo = deque([src])
        while todo:
            for n in step(todo.popleft()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    def forward_transitive_closure(self, src: str) -> set:
        """Every node reachable from ``src`` (``src`` included)."""
        return self._closure(src, self.successors)

    def backward_transitive_closure(self, src: str) -> set:
        """Every node from which ``src`` is reachable (``src`` included)."""
        return self._closure(src, self.predecessors)

    def all_paths(self, src: str, dst: str) -> str:
        """The dot text of the subgraph made of every path from ``src`` to ``dst``."""
        result = DiGraph()
        if src not in self or dst not in self:
            missing = src if src not in self else dst
            raise ValueError(f"The node {missing} is not in the digraph.")
        on_path = self.forward_transitive_closure(src) & self.backward_transitive_closure(dst)
        if dst in on_path:
            for u, v in self.edges:
                if u in on_path and v in on_path:
                    result.add_edge(u, v)
        return result.to_dot()

    def first_path(self, dst: str) -> list:
        """The chain of nodes that first pulled ``dst`` in (earliest-added predecessor each step)."""
        path = [dst]
        seen = {dst}
        while True:
            preds = [p for p in self._pred.get(path[-1], ()) if p not in seen]
            if not preds:
                break
            p = min(preds, key=self._node_order.__getitem__)
            path.append(p)
            seen.add(p)
        return path[::-1]

    def to_dot(self) -> str:
        edges = "\n".join(f'"{u}" -> "{v}";' for u, v in self.edges)
        return f"digraph G {{\nrankdir = LR;\nnode [shape=box];\n{edges}\n}}\n"
