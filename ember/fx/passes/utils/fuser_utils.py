"""Collapse groups of nodes into submodules (``torch.fx.passes.utils.fuser_utils``).

Why: a backend that takes over a partition of the graph wants it as one
callable. :func:`fuse_by_partitions` copies each partition into a GraphModule
(named ``<prefix><index>``), calls it where the partition was, routes the
partition's outside users to its outputs and erases the originals.
"""

from __future__ import annotations

import heapq
import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...graph import Graph
from ...node import Node
from ..tools_common import NodeList, legalize_graph, stable_topological_sort  # noqa: F401
from .common import lift_subgraph_as_module

__all__ = ["topo_sort", "validate_partition", "fuse_as_graphmodule", "insert_subgm", "erase_nodes", "fuse_by_partitions"]


def topo_sort(nodes: NodeList) -> NodeList:
    """``nodes`` in dependency order, ties broken by their order in the list."""
    indegree = dict.fromkeys(nodes, 0)
    position = {n: i for i, n in enumerate(nodes)}
    ready: List[Tuple[int, Node]] = []
    for node in nodes:
        indegree[node] = sum(1 for n in node.all_input_nodes if n in indegree)
        if indegree[node] == 0:
            heapq.heappush(ready, (position[node], node))
    out: NodeList = []
    while ready:
        _, node = heapq.heappop(ready)
        out.append(node)
        for user in node.users:
            if user in indegree:
                indegree[user] -= 1
                if indegree[user] == 0:
                    heapq.heappush(ready, (position[user], user))
    if len(out) != len(nodes):
        raise AssertionError("topological sorted nodes doesn't have same length as input nodes")
    return out


def validate_partition(partition: NodeList) -> bool:
    """False if fusing ``partition`` would create a cycle: a path leaves the
    partition and re-enters it."""
    inside = set(partition)
    stack = [u for n in inside for u in n.users if u not in inside]
    visited = set()
    while stack:
        cur = stack.pop()
        if cur in inside:
            return False
        if cur in visited:
            continue
        visited.add(cur)
        stack.extend(u for u in cur.users if u not in visited)
    return True


def fuse_as_graphmodule(
    gm: Any,
    nodes: NodeList,
    module_name: str,
    partition_lookup_table: Optional[Dict[Node, Any]] = None,
    *,
    always_return_tuple: bool = False,
) -> Tuple[Any, Tuple[Node, ...], Tuple[Node, ...]]:
    """Copy ``nodes`` (topologically sorted, all of ``gm``) into a new
    GraphModule of class ``module_name``.

    Returns ``(fused_gm, original_inputs, original_outputs)``: the outside
    nodes the fused module reads (one placeholder each, named after them) and
    the partition nodes read from outside (returned, in partition order)."""
    for node in nodes:
        if node.graph.owning_module is not gm:
            raise AssertionError(f"{node} doesn't belong to passed in graph module {type(gm).__name__}")
        if node._erased:
            raise AssertionError(f"{node} has been removed from owning graph")
    if not validate_partition(nodes):
        raise AssertionError("Invalid partition, found dependency cycles")
    lookup = partition_lookup_table if partition_lookup_table is not None else dict.fromkeys(nodes)

    subgraph = Graph()
    to_placeholder: Dict[Node, Node] = {}
    copies: Dict[Node, Node] = {}

    def remap(x: Node) -> Node:
        if x in lookup:
            return copies[x]
        if x not in to_placeholder:
            ph = subgraph.placeholder(x.name, type_expr=x.type)
            ph.meta = dict(x.meta)
            to_placeholder[x] = ph
        return to_placeholder[x]

    for node in nodes:
        copies[node] = subgraph.node_copy(node, remap)

    outputs: Dict[Node, Node] = {}
    for node in nodes:
        if any(u not in lookup for u in node.users):
            outputs[node] = copies[node]
    outs = tuple(outputs.values())
    if always_return_tuple or len(outs) != 1:
        subgraph.output(outs)
    else:
        subgraph.output(outs[0])
    subgraph.lint()
    fused_gm, _ = lift_subgraph_as_module(gm, subgraph, comp_name="", class_name=module_name)
    return fused_gm, tuple(to_placeholder), tuple(outputs)


def insert_subgm(
    gm: Any,
    sub_gm: Any,
    orig_inputs: Tuple[Node, ...],
    orig_outputs: Tuple[Node, ...],
    insertion_point: Optional[Node] = None,
) -> Any:
    """Add ``sub_gm`` to ``gm`` (under its class name), call it after
    ``insertion_point`` (default: the last of ``orig_outputs``) on
    ``orig_inputs``, and make the users of ``orig_outputs`` read its results."""
    name = type(sub_gm).__name__
    gm.add_submodule(name, sub_gm)
    if insertion_point is None:
        for node in reversed(gm.graph.nodes):
            if node in orig_outputs:
                insertion_point = node
                break
        if insertion_point is None:
            raise AssertionError(
                "Cannot determine insertion point: no insertion_point provided and orig_outputs is empty. "
                "Pass the last partition node as insertion_point."
            )
    with gm.graph.inserting_after(insertion_point):
        call = gm.graph.call_module(name, args=tuple(orig_inputs))
    returned = sub_gm.graph.output_node.args[0]
    if orig_outputs:
        with gm.graph.inserting_after(call):
            if len(orig_outputs) == 1 and not isinstance(returned, tuple):
                orig_outputs[0].replace_all_uses_with(call, propagate_meta=True)
            else:
                for i, orig in enumerate(orig_outputs):
                    item = gm.graph.call_function(operator.getitem, (call, i))
                    orig.replace_all_uses_with(item, propagate_meta=True)
                call.meta["val"] = tuple(o.meta.get("val", None) for o in orig_outputs)
    return gm


def erase_nodes(gm: Any, nodes: NodeList) -> None:
    """Erase ``nodes`` from ``gm``, last first (so users go before producers)."""
    for node in reversed(nodes):
        gm.graph.erase_node(node)


def fuse_by_partitions(
    gm: Any,
    partitions: Sequence[Any],
    prefix: str = "fused_",
    always_return_tuple: bool = False,
) -> Any:
    """Fuse each partition (a dict/list of ``gm``'s nodes) into a submodule
    ``<prefix><i>`` called in its place; ``gm`` is changed in place, then
    stably re-sorted and linted."""
    for pid, partition in enumerate(partitions):
        lookup = partition if isinstance(partition, dict) else dict.fromkeys(partition)
        sorted_nodes = topo_sort(list(lookup))
        if not sorted_nodes:
            raise ValueError(f"fuse_by_partitions: partition {pid} is empty")
        sub_gm, ins, outs = fuse_as_graphmodule(
            gm, sorted_nodes, prefix + str(pid), lookup, always_return_tuple=always_return_tuple
        )
        insert_subgm(gm, sub_gm, ins, outs, sorted_nodes[-1])
        erase_nodes(gm, sorted_nodes)
    stable_topological_sort(gm)
    gm.graph.lint()
    return gm
