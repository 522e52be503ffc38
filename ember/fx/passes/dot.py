"""Graphviz DOT export.

Why text and not an image: DOT needs no dependency to produce, diffs well in
tests, and ``dot -Tsvg`` renders it wherever graphviz is installed.
"""

from __future__ import annotations

from .._names import pretty_target

__all__ = ["to_dot"]

_COLORS = {
    "placeholder": "lightblue",
    "get_attr": "lightyellow",
    "call_function": "white",
    "call_method": "lavender",
    "call_module": "palegreen",
    "output": "lightgrey",
}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(graph, name: str = "fx_graph") -> str:
    """DOT source: one box per node (name, op, target, tensor shape when
    ShapeProp ran), one edge per use."""
    if not hasattr(graph, "nodes"):
        graph = graph.graph
    lines = [f'digraph "{_esc(name)}" {{', "  rankdir=TB;", '  node [shape=record, fontname="monospace"];']
    for n in graph.nodes:
        label = f"{n.name}|{n.op}"
        if n.op not in ("placeholder", "output"):
            label += f"|{pretty_target(n.target)}"
        tm = n.meta.get("tensor_meta")
        if tm is not None and hasattr(tm, "shape"):
            label += f"|{tuple(tm.shape)} {tm.dtype}"
        label = label.replace("{", "\\{").replace("}", "\\}").replace("<", "\\<").replace(">", "\\>")
        lines.append(f'  "{_esc(n.name)}" [label="{{{_esc(label)}}}", style=filled, fillcolor={_COLORS.get(n.op, "white")}];')
    for n in graph.nodes:
        for inp in n.all_input_nodes:
            lines.append(f'  "{_esc(inp.name)}" -> "{_esc(n.name)}";')
    lines.append("}")
    return "\n".join(lines) + "\n"
