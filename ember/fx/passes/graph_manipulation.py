"""Whole-graph retargeting and size accounting (``torch.fx.passes.graph_manipulation``).

Why: partitioners for devices with limited memory need each node's footprint
(its output plus, for a submodule call, its parameters), and backends swap
one op for another across a graph; both are simple walks kept here.
"""

from __future__ import annotations

import math
from typing import Any, List, NamedTuple, Optional

from ..graph import Graph
from ..node import Node, Target, map_arg
from .shape_prop import ShapeProp, TensorMetadata

__all__ = ["replace_target_nodes_with", "size_bytes", "get_size_of_all_nodes", "get_tensor_meta", "get_size_of_node"]


def replace_target_nodes_with(fx_module: Any, old_op: str, old_target: Target, new_op: str, new_target: Target) -> None:
    """Rebuild ``fx_module``'s graph with every ``old_op`` node calling
    ``old_target`` turned into a ``new_op`` node calling ``new_target`` (same
    name, arguments and position)."""
    new_graph = Graph()
    val_map = {}
    for node in fx_module.graph.nodes:
        if node.op == old_op and node.target == old_target:
            args = map_arg(node.args, lambda n: val_map[n])
            kwargs = map_arg(node.kwargs, lambda n: val_map[n])
            val_map[node] = new_graph.create_node(new_op, new_target, args, kwargs, node.name)
        else:
            val_map[node] = new_graph.node_copy(node, lambda n: val_map[n])
    fx_module.graph = new_graph


class size_bytes(NamedTuple):
    """A node's output size and total size (output + parameters) in bytes."""

    output_size: int
    total_size: int


def get_tensor_meta(node: Node) -> TensorMetadata:
    """``node.meta['tensor_meta']``; RuntimeError if shape propagation has not run."""
    tensor_meta = node.meta.get("tensor_meta")
    if not tensor_meta:
        raise RuntimeError(
            f"Node {node} has no tensor metadata associated with it! Check that shape propagation has run."
        )
    return tensor_meta


def _element_size(dtype: Any) -> int:
    itemsize = getattr(dtype, "itemsize", None)
    if isinstance(itemsize, int):
        return itemsize
    from ... import tensor as _make

    return _make([], dtype=dtype).element_size()


def get_size_of_node(fx_module: Any, node: Node) -> size_bytes:
    """:class:`size_bytes` of ``node``: its output's bytes, and those plus
    the parameters of the submodule it calls (``call_module``)."""
    total = 0
    if node.op == "call_module":
        submodule = dict(fx_module.named_modules())[node.target]
        total += sum(p.numel() for _, p in submodule.named_parameters())
    tm = get_tensor_meta(node)
    out_elems = math.prod(tuple(tm.shape))
    total += out_elems
    per_elem = _element_size(tm.dtype)
    return size_bytes(per_elem * out_elems, per_elem * total)


def get_size_of_all_nodes(fx_module: Any, args: Optional[List[Any]] = None) -> None:
    """Set ``node.size_bytes`` on every node before the output (running
    ShapeProp on ``args`` first when given)."""
    if args is not None:
        ShapeProp(fx_module).propagate(*args)
    for node in fx_module.graph.nodes:
        if node.op == "output":
            break
        node.size_bytes = get_size_of_node(fx_module, node)
