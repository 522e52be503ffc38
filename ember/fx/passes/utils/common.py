"""Building a GraphModule around a subgraph of another one
(``torch.fx.passes.utils.common``).

Why: a fused or split-out subgraph still calls the parent's submodules and
reads its parameters by dotted path; :func:`lift_subgraph_as_module` gives it a
root holding exactly those objects (shared, not copied) under the same paths.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ....nn import Module
from ...graph import Graph

__all__ = ["HolderModule", "lift_subgraph_as_module", "compare_graphs"]


class HolderModule(Module):
    """A plain container module: holds the attributes a lifted subgraph
    reads, under their original names (``d``'s items become submodules)."""

    def __init__(self, d: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        for k, v in (d or {}).items():
            self.add_module(k, v)


def lift_subgraph_as_module(
    gm: Any, subgraph: Graph, comp_name: str = "", class_name: str = "GraphModule"
) -> Tuple[Any, Dict[str, str]]:
    """A GraphModule running ``subgraph`` (whose nodes were copied from ``gm``),
    with every submodule/attribute it uses taken from ``gm`` at the same path.
    Also returns ``{original path: f"{comp_name}.{path}"}``."""
    from ...graph_module import GraphModule

    submodule = HolderModule({})
    mapping: Dict[str, str] = {}
    for n in subgraph.nodes:
        if n.op not in ("call_module", "get_attr"):
            continue
        parts = n.target.split(".")
        cur, orig = submodule, gm
        for name in parts[:-1]:
            if not hasattr(cur, name):
                cur.add_module(name, HolderModule({}))
            cur = getattr(cur, name)
            orig = getattr(orig, name)
        setattr(cur, parts[-1], getattr(orig, parts[-1]))
        mapping[n.target] = f"{comp_name}.{n.target}"
    return GraphModule(submodule, subgraph, class_name), mapping


def compare_graphs(left: Graph, right: Graph) -> bool:
    """True if the graphs have the same inputs, outputs and connectivity."""
    from .matcher_utils import SubgraphMatcher

    matcher = SubgraphMatcher(left, match_output=True, match_placeholder=True)
    return len(matcher.match(right)) > 0
