"""``print_tabular``: the graph as an aligned text table.

Why not ``tabulate``: one more dependency for a debugging printout is not
worth it; a fixed-width table is a dozen lines.
"""

from __future__ import annotations

from typing import List

from .._names import pretty_target

__all__ = ["format_tabular", "print_tabular"]

_HEADERS = ["opcode", "name", "target", "args", "kwargs"]


def format_tabular(graph) -> str:
    """The rows ``opcode | name | target | args | kwargs``, one per node."""
    if not hasattr(graph, "nodes"):
        graph = graph.graph
    rows: List[List[str]] = [
        [n.op, n.name, pretty_target(n.target), str(n.args), str(dict(n.kwargs))] for n in graph.nodes
    ]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(_HEADERS)]

    def line(cells: List[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(_HEADERS), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def print_tabular(graph) -> None:
    """Print :func:`format_tabular` of a Graph or GraphModule."""
    print(format_tabular(graph))
