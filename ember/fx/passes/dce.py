"""Dead-code elimination.

Why it must ask about purity: an unused node can only be dropped if running
it has no effect besides its result. In-place ops (``add_``), random ops
(advancing the generator), asserts and ``setitem`` are kept; see
:meth:`ember.fx.Node.is_impure` for the rules (``_ember_is_impure`` on the
target, ``meta['is_impure']``, the graph's ``impure_targets`` set).
"""

from __future__ import annotations

from typing import Callable, Optional

from ..node import Node

__all__ = ["eliminate_dead_code"]


def eliminate_dead_code(graph, is_impure_node: Optional[Callable[[Node], bool]] = None) -> bool:
    """Erase unused pure nodes, back to front (so chains die in one sweep).

    ``is_impure_node`` overrides the default purity test. Returns True if
    anything was erased. Accepts a Graph or a GraphModule (which is then
    recompiled).
    """
    gm = None
    if not hasattr(graph, "nodes") or not hasattr(graph, "erase_node"):
        gm, graph = graph, graph.graph
    impure = is_impure_node or (lambda n: n.is_impure())
    changed = False
    for node in reversed(graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        if not node.users and not impure(node):
            graph.erase_node(node)
            changed = True
    if gm is not None and changed:
        gm.recompile()
    return changed
