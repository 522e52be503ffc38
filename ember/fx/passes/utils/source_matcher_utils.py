"""Group nodes by the source (module class or function) they were traced
from (``torch.fx.passes.utils.source_matcher_utils``).

Why: quantizers and backends want "every node that came from an
``nn.Linear``", one group per module instance, after tracing flattened the
modules away. The origin is read from node metadata: ``source_fn_stack``
(``[(name, fn or class), ...]``) when a tracer recorded it, else ``torch_fn``,
else the innermost ``nn_module_stack`` entry (``{key: (fqn, class)}``), which
ember's dynamo and export record on operator nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ...graph import Graph
from ...node import Node

__all__ = ["get_source_partitions", "check_subgraphs_connected", "SourcePartition"]


@dataclass
class SourcePartition:
    """The nodes one source instance produced: ``nodes`` (graph order),
    ``source`` (what was asked for), ``input_nodes`` (outside nodes they read,
    get_attr excluded), ``output_nodes`` (their nodes read from outside) and
    ``params`` (their get_attr nodes)."""

    nodes: List[Node]
    source: Any
    input_nodes: List[Node] = field(default_factory=list)
    output_nodes: List[Node] = field(default_factory=list)
    params: List[Node] = field(default_factory=list)


def _class_matches(src: Any, cls: Any) -> bool:
    if isinstance(src, type):
        if isinstance(cls, type):
            return issubclass(cls, src)
        if isinstance(cls, str):
            return cls == f"{src.__module__}.{src.__qualname__}"
        return False
    return cls == src


def get_source_partitions(
    graph: Graph, wanted_sources: List[Any], filter_fn: Optional[Callable[[Node], bool]] = None
) -> Dict[Any, List[SourcePartition]]:
    """``{source: [SourcePartition per instance]}`` for each wanted source (a
    function such as ``ember.nn.functional.linear`` or a module class such as
    ``ember.nn.Linear``) found in ``graph``. With ``filter_fn``, an instance is
    kept only if every one of its nodes passes."""
    if not isinstance(graph, Graph):
        raise TypeError(f"get_source_partitions: graph must be an ember.fx.Graph, got {type(graph).__name__}")
    groups: Dict[Any, Dict[str, List[Node]]] = {}

    def add(src: Any, fqn: str, node: Node) -> None:
        groups.setdefault(src, {}).setdefault(fqn, []).append(node)

    for node in graph.nodes:
        stack = node.meta.get("source_fn_stack", None)
        if stack is not None:
            name, fn = stack[-1]
            if fn in wanted_sources:
                add(fn, name, node)
            continue
        torch_fn = node.meta.get("torch_fn", None)
        if torch_fn is not None:
            fqn, fn_name = torch_fn
            short = fn_name.split(".")[1]
            if short in wanted_sources:
                add(short, fqn, node)
                continue
        if node.op == "call_function":
            module_stack = node.meta.get("nn_module_stack", None)
            if module_stack:
                fqn, cls = list(module_stack.values())[-1]
                for src in wanted_sources:
                    if _class_matches(src, cls):
                        add(src, fqn, node)
                        break

    def make_partition(nodes: List[Node], source: Any) -> SourcePartition:
        members = set(nodes)
        inputs: Dict[Node, None] = {}
        outputs: Dict[Node, None] = {}
        params: Dict[Node, None] = {}
        for node in nodes:
            for arg in node.args:
                if isinstance(arg, Node) and arg not in members and arg.op != "get_attr":
                    inputs[arg] = None
            if node.op == "get_attr":
                params[node] = None
                continue
            if any(user not in members for user in node.users):
                outputs[node] = None
        return SourcePartition(nodes, source, list(inputs), list(outputs), list(params))

    if filter_fn:
        groups = {
            src: {fqn: nodes for fqn, nodes in per_fqn.items() if all(map(filter_fn, nodes))}
            for src, per_fqn in groups.items()
        }
    return {src: [make_partition(nodes, src) for nodes in per_fqn.values()] for src, per_fqn in groups.items()}


def check_subgraphs_connected(subgraph1: SourcePartition, subgraph2: SourcePartition) -> bool:
    """True if some node of ``subgraph2`` reads a node of ``subgraph1``."""
    targets = set(subgraph2.nodes)
    return any(user in targets for node in reversed(subgraph1.nodes) for user in node.users)
