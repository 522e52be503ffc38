"""Greedy partitioning by backend capability (``torch.fx.passes.infra.partitioner``).

Why this algorithm: a backend wants the largest groups of supported nodes it
can take over, but a group may only be fused if doing so creates no cycle (no
path may leave the group and come back into it). Nodes are visited from the
graph's end to its start; each supported node opens a partition, and all
partitions are then tried pairwise for merging, a merge being refused when
some user outside the pair reaches back into it. The visiting order, the
partition numbering and the merge order follow torch's, so the same model gives
the same partitions (and the same ``fused_<i>`` submodules).
"""

from __future__ import annotations

import collections
import itertools
import operator
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ...node import Node
from ..operator_support import OperatorSupportBase
from ..tools_common import target_qualified_name
from ..utils.fuser_utils import fuse_by_partitions

__all__ = ["Partition", "CapabilityBasedPartitioner"]


class Partition:
    """A set of nodes (ordered dict ``node -> order``) with an ``id``."""

    def __init__(
        self,
        id: Optional[int] = None,
        nodes: Optional[Iterable[Node]] = None,
        node_orders: Optional[Iterable[int]] = None,
    ) -> None:
        self.id = id
        self.nodes: Dict[Node, Optional[int]] = {}
        if nodes is not None:
            if node_orders is None:
                self.nodes = dict.fromkeys(nodes, None)
            else:
                nodes, node_orders = list(nodes), list(node_orders)
                if len(nodes) != len(node_orders):
                    raise AssertionError("nodes and node_orders must have the same length")
                self.nodes = dict(zip(nodes, node_orders))

    def __repr__(self) -> str:
        return str(self.nodes)

    def add_node(self, node: Node, node_order: Optional[int] = None) -> None:
        self.nodes[node] = node_order

    def remove_node(self, node: Node) -> None:
        del self.nodes[node]

    def size(self) -> int:
        return len(self.nodes)


class _DependencyViewer:
    """Every node's transitive users, computed once."""

    def __init__(self, graph_module) -> None:
        self.downstreams: Dict[Node, Set[Node]] = collections.defaultdict(set)
        for node in reversed(graph_module.graph.nodes):
            for user in node.users:
                self.downstreams[node].add(user)
                self.downstreams[node].update(self.downstreams[user])

    def downstreams_of(self, node: Node) -> Set[Node]:
        return self.downstreams[node]


def _is_getitem(node: Node) -> bool:
    return node.op == "call_function" and node.target is operator.getitem


class CapabilityBasedPartitioner:
    """Partition ``graph_module`` into maximal cycle-free groups of nodes that
    ``operator_support`` accepts.

    ``allows_single_node_partition``: keep partitions with at most one
    compute node (dropped by default); ``non_compute_ops``: qualified names
    not counted as compute (besides ``_operator.getitem`` and view);
    ``allowed_single_node_partition_ops``: names that count twice, so a
    partition of one such node survives; ``skip_horizontal_fusion``: only
    merge a new partition with its users' partitions.
    """

    def __init__(
        self,
        graph_module,
        operator_support: OperatorSupportBase,
        allows_single_node_partition: bool = False,
        non_compute_ops: Optional[Sequence[str]] = None,
        allowed_single_node_partition_ops: Optional[Sequence[str]] = None,
        skip_horizontal_fusion: bool = False,
    ) -> None:
        if not isinstance(operator_support, OperatorSupportBase):
            raise TypeError(
                "CapabilityBasedPartitioner: operator_support must be an OperatorSupportBase, "
                f"got {type(operator_support).__name__}"
            )
        self.graph_module = graph_module
        self.operator_support = operator_support
        self.allows_single_node_partition = allows_single_node_partition
        self.non_compute_ops = list(non_compute_ops) if non_compute_ops is not None else []
        self.allowed_single_node_partition_ops = (
            list(allowed_single_node_partition_ops) if allowed_single_node_partition_ops is not None else []
        )
        self.skip_horizontal_fusion = skip_horizontal_fusion
        self.dependency_viewer = _DependencyViewer(graph_module)

    def _is_node_supported(self, node: Node) -> bool:
        return self.operator_support.is_node_supported(dict(self.graph_module.named_modules()), node)

    def propose_partitions(self) -> List[Partition]:
        """The partitions, as :class:`Partition` objects (nodes in graph order)."""
        # partition id -> ids of partitions downstream of it
        downstream_of: Dict[int, Set[int]] = collections.defaultdict(set)
        assignment: Dict[Node, int] = {}
        by_id: Dict[int, Partition] = {}
        order_of: Dict[int, int] = {}
        users_of: Dict[int, Set[Node]] = {}
        new_id = itertools.count()
        viewer = self.dependency_viewer

        def downstream_partitions(user_nodes: Iterable[Node], exclude: Iterable[int]) -> Set[int]:
            found: Set[int] = set()
            for user in user_nodes:
                for n in itertools.chain((user,), viewer.downstreams_of(user)):
                    pid = assignment.get(n)
                    if pid is None:
                        continue
                    found.add(pid)
                    found.update(downstream_of[pid])
            found.difference_update(exclude)
            return found

        def reaches_back(start: Set[Node], a_nodes, b_nodes, a: int, b: int) -> bool:
            # Does some path from the pair's outside users re-enter a or b?
            for user in start:
                seen: Set[int] = set()
                for n in itertools.chain((user,), viewer.downstreams_of(user)):
                    if n in a_nodes or n in b_nodes:
                        return True
                    pid = assignment.get(n)
                    if pid is None or pid in seen:
                        continue
                    if a in downstream_of[pid] or b in downstream_of[pid]:
                        return True
                    seen.add(pid)
            return False

        def maybe_merge(a: int, b: int) -> Tuple[int, bool]:
            a_nodes, b_nodes = by_id[a].nodes, by_id[b].nodes
            users = users_of[a] | users_of[b]
            users.difference_update(b_nodes, a_nodes)
            if reaches_back(users, a_nodes, b_nodes, a, b):
                return a, False
            keep, drop = (b, a) if len(a_nodes) < len(b_nodes) else (a, b)
            by_id[keep].nodes.update(by_id[drop].nodes)
            for n in by_id[drop].nodes:
                assignment[n] = keep
            del by_id[drop]
            order_of[keep] = min(order_of[keep], order_of[drop])
            del order_of[drop]
            downstream_of[keep] = downstream_of[keep] | downstream_of[drop]
            del downstream_of[drop]
            users_of[keep] = users
            del users_of[drop]
            downstream_of[keep].update(downstream_partitions(users, (keep, drop)))
            downstream_of[keep].discard(keep)
            downstream_of[keep].discard(drop)
            return keep, True

        def move_node(node: Node, node_order: Optional[int], pid: Optional[int]) -> None:
            if node in assignment:
                by_id[assignment[node]].remove_node(node)
            if pid is None:
                assignment.pop(node)
            elif pid not in by_id:
                assignment[node] = pid
                by_id[pid] = Partition(id=pid, nodes=[node], node_orders=[node_order])
                users_of[pid] = set(node.users)
                downstream_of[pid].update(downstream_partitions(node.users, (pid,)))
            else:
                assignment[node] = pid
                by_id[pid].add_node(node, node_order)

        for node_order, node in enumerate(reversed(self.graph_module.graph.nodes)):
            candidates: Dict[int, None] = {}
            created = False
            if self._is_node_supported(node) and node not in assignment:
                pid = next(new_id)
                order_of[pid] = pid
                move_node(node, node_order, pid)
                candidates[pid] = None
                created = True
            if self.skip_horizontal_fusion:
                if created:
                    for user in node.users:
                        if user in assignment:
                            candidates[assignment[user]] = None
            else:
                for pid, _ in sorted(order_of.items(), key=operator.itemgetter(1)):
                    candidates[pid] = None
            ids = list(candidates)
            if len(ids) > 1:
                cur = ids[0]
                for other in ids[1:]:
                    cur, _ = maybe_merge(cur, other)

        # nodes were added back to front: restore graph order
        for p in by_id.values():
            p.nodes = dict(sorted(p.nodes.items(), key=operator.itemgetter(1), reverse=True))

        # a node returning a tuple goes with all of its getitem users
        while True:
            moves: Dict[Node, Optional[int]] = {}
            for node in self.graph_module.graph.nodes:
                if all(_is_getitem(u) for u in node.users):
                    pid = assignment.get(node)
                    for user in node.users:
                        if assignment.get(user) != pid:
                            moves[user] = pid
            if not moves:
                break
            for n, pid in moves.items():
                move_node(n, None, pid)

        if not self.allows_single_node_partition:
            non_compute = {"ember.ops.aten.view.default", "ember.ops.aten.view", "_operator.getitem"}
            non_compute.update(self.non_compute_ops)
            doomed = []
            for pid, p in by_id.items():
                compute = 0
                for n in p.nodes:
                    if n.op != "call_function":
                        continue
                    name = target_qualified_name(n.target)
                    if name not in non_compute:
                        compute += 1
                    if name in self.allowed_single_node_partition_ops:
                        compute += 1
                if compute <= 1:
                    doomed.append(pid)
            for pid in doomed:
                del by_id[pid]

        return [p for p in by_id.values() if p.size() > 0]

    def fuse_partitions(self, partitions: List[Partition], prefix: str = "fused_"):
        """Fuse each partition into a submodule ``<prefix><i>`` of the graph module."""
        return fuse_by_partitions(self.graph_module, [p.nodes for p in partitions], prefix=prefix)

    def remove_bookend_non_compute_ops(self, partitions: List[Partition]) -> None:
        """Drop ``non_compute_ops`` nodes sitting on a partition's boundary (all
        of whose inputs, or all of whose users, are outside it)."""
        non_compute = set(self.non_compute_ops)

        def is_non_compute(node: Node) -> bool:
            return node.op == "call_function" and target_qualified_name(node.target) in non_compute

        in_cache: Dict[Node, bool] = {}
        out_cache: Dict[Node, bool] = {}

        def transparent(node: Node, inside: Set[Node], removed: Set[Node], cache, neighbours) -> bool:
            if node.op == "placeholder" or node not in inside or node in removed:
                return True
            if node in cache:
                return cache[node]
            result = is_non_compute(node) and all(
                transparent(m, inside, removed, cache, neighbours) for m in neighbours(node)
            )
            cache[node] = result
            return result

        for p in partitions:
            inside = set(p.nodes)
            removed: Set[Node] = set()
            for node in p.nodes:
                if is_non_compute(node) and (
                    transparent(node, inside, removed, in_cache, lambda n: n.all_input_nodes)
                    or transparent(node, inside, removed, out_cache, lambda n: list(n.users))
                ):
                    removed.add(node)
            for node in removed:
                p.nodes.pop(node, None)

    def partition_and_fuse(self, prefix: str = "fused_"):
        """:meth:`propose_partitions` then :meth:`fuse_partitions`."""
        return self.fuse_partitions(self.propose_partitions(), prefix=prefix)
