"""Common-subexpression elimination.

Why: tracing duplicates work whenever user code recomputes the same value
(``x.relu() + x.relu()``), and later stages would otherwise compile it twice.
Two nodes are the same expression when they have the same op, target and
(already deduplicated) arguments. Impure nodes are never merged, nor are
placeholders (distinct inputs) or outputs.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict

from ..node import Node, map_arg

__all__ = ["eliminate_common_subexpressions"]


def _key(node: Node) -> Any:
    def freeze(a: Any) -> Any:
        if isinstance(a, Node):
            return ("node", id(a))
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(freeze(x) for x in a))
        if isinstance(a, dict):
            return ("dict", tuple((k, freeze(v)) for k, v in a.items()))
        if isinstance(a, slice):
            return ("slice", freeze(a.start), freeze(a.stop), freeze(a.step))
        if isinstance(a, numbers.Complex) and not isinstance(a, numbers.Rational):   # float, numpy floats, complex
            # by bits: -0.0 == 0.0 (clamp(min=-0.0) is not clamp(min=0.0)), NaN != NaN
            c = complex(a)
            return (type(a), c.real.hex(), c.imag.hex())
        # distinguish 1 from 1.0 from True: same hash/eq in Python
        hash(a)
        return (type(a), a)

    target = node.target if isinstance(node.target, str) else ("fn", id(node.target))
    return (node.op, target, freeze(node.args), freeze(node.kwargs))


def eliminate_common_subexpressions(graph, distinct_outputs: bool = False) -> bool:
    """Replace each repeated pure expression by its first occurrence and
    erase the duplicate. Works on a Graph or a GraphModule (recompiled).
    Returns True if anything changed.

    ``distinct_outputs``: a node the graph returns is never replaced (it may still be the
    first occurrence others are replaced by), so two outputs computed alike stay two values:
    a caller that gets them as separate tensors may write one in place (aot's graphs)."""
    gm = None
    if not hasattr(graph, "erase_node"):
        gm, graph = graph, graph.graph
    seen: Dict[Any, Node] = {}
    changed = False
    for node in list(graph.nodes):
        if node.op in ("placeholder", "output") or node.is_impure():
            continue
        if distinct_outputs and any(u.op == "output" for u in node.users):
            continue
        try:
            key = _key(node)
            hash(key)
        except TypeError:
            continue  # unhashable constant argument: leave it alone
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        changed = True
    if gm is not None and changed:
        gm.recompile()
    return changed
