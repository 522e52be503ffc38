"""Give ``getitem`` nodes the element type of their sequence
(``torch.fx.passes.annotate_getitem_nodes``).

Why: annotations on local names inside a traced function are lost, but the
sequence a node indexes may carry one (``Tuple[Tensor, int]``, ``List[int]``,
``tuple[int, ...]``, a NamedTuple class); this pass copies the element's type
onto each ``operator.getitem`` node reading it, so generated code and
consumers of ``node.type`` see it again.
"""

from __future__ import annotations

import operator
import typing
from typing import Any

from ..graph import Graph

__all__ = ["annotate_getitem_nodes"]


def _element_type(seq_type: Any, index: Any, origin_tuple: bool) -> Any:
    params = typing.get_args(seq_type)
    if origin_tuple:
        if len(params) == 2 and params[1] is Ellipsis:
            return params[0]
        if len(params) <= index:
            raise AssertionError(f"Index {index} out of range for parameterized_types (len={len(params)})")
        return params[index]
    if len(params) != 1:
        raise AssertionError(f"Expected 1 parameterized type, got {len(params)}")
    return params[0]


def annotate_getitem_nodes(graph: Graph) -> None:
    """Set ``node.type`` of each ``operator.getitem`` node whose sequence node
    has a tuple, list or NamedTuple type (others are left alone)."""
    from ...tensor import Tensor

    for node in graph.nodes:
        if node.target is not operator.getitem:
            continue
        seq, index = node.args
        seq_type = getattr(seq, "type", None)
        if not seq_type:
            continue
        name = getattr(seq_type, "_name", None)
        origin = getattr(seq_type, "__origin__", None)
        if name is not None and name in ("Tuple", "List"):
            node.type = _element_type(seq_type, index, name == "Tuple")
        elif name is None and origin in (tuple, list):
            node.type = _element_type(seq_type, index, origin is tuple)
        elif name is None and origin is None and hasattr(seq_type, "__annotations__"):
            if seq_type is Tensor or not hasattr(seq_type, "_fields"):
                continue
            node.type = seq_type.__annotations__[seq_type._fields[index]]
