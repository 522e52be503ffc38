"""Draw a GraphModule with pydot (``torch.fx.passes.graph_drawer``).

Why pydot and not :mod:`.dot`: users of torch's ``FxGraphDrawer`` expect a
``pydot.Dot`` they can render (``.create_svg()``, ``.write_png()``), with one
graph per GraphModule submodule. Without pydot installed the class raises
torch's own error; :func:`ember.fx.passes.dot.to_dot` needs no dependency.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Optional

from ..node import Node
from .._names import pretty_target
from .shape_prop import TensorMetadata

try:
    import pydot

    HAS_PYDOT = True
except ModuleNotFoundError:
    pydot = None
    HAS_PYDOT = False

__all__ = ["FxGraphDrawer"]

_COLOR_MAP = {
    "placeholder": '"AliceBlue"',
    "call_module": "LemonChiffon1",
    "get_param": "Yellow2",
    "get_attr": "LightGrey",
    "output": "PowderBlue",
}
_HASH_COLORS = ["CadetBlue1", "Coral", "DarkOliveGreen1", "DarkSeaGreen1", "GhostWhite", "Khaki1",
                "LavenderBlush1", "LightSkyBlue", "MistyRose1", "MistyRose2", "PaleTurquoise2",
                "PeachPuff1", "Salmon", "Thistle1", "Thistle3", "Wheat1"]


def _escape(s: str) -> str:
    # record labels treat {}|<> as structure
    for ch in "{}|<>":
        s = s.replace(ch, "\\" + ch)
    return s.replace('"', '\\"')


class FxGraphDrawer:
    """``FxGraphDrawer(gm, name)``: pydot graphs of ``gm`` (``get_main_dot_graph``),
    of each GraphModule submodule (``get_submod_dot_graph(name)``) or all of
    them (``get_all_dot_graphs``), one record-shaped box per node listing its
    name, op, target, arguments and tensor metadata (run ShapeProp first to
    see shapes)."""

    def __init__(self, graph_module: Any, name: str, ignore_getattr: bool = False,
                 ignore_parameters_and_buffers: bool = False, skip_node_names_in_args: bool = True,
                 parse_stack_trace: bool = False, dot_graph_shape: Optional[str] = None,
                 normalize_args: bool = False) -> None:
        if not HAS_PYDOT:
            raise RuntimeError(
                "FXGraphDrawer requires the pydot package to be installed. Please install "
                "pydot through your favorite Python package manager."
            )
        from ..graph_module import GraphModule

        self._name = name
        self.dot_graph_shape = dot_graph_shape if dot_graph_shape is not None else "record"
        self._skip_node_names_in_args = skip_node_names_in_args
        self._parse_stack_trace = parse_stack_trace
        self._ignore_getattr = ignore_getattr
        self._ignore_parameters_and_buffers = ignore_parameters_and_buffers
        self._dot_graphs: Dict[str, Any] = {name: self._to_dot(graph_module, name, ignore_getattr)}
        for node in graph_module.graph.nodes:
            if node.op != "call_module":
                continue
            leaf = graph_module.get_submodule(node.target)
            if isinstance(leaf, GraphModule):
                self._dot_graphs[f"{name}_{node.target}"] = self._to_dot(leaf, f"{name}_{node.target}", ignore_getattr)

    def get_dot_graph(self, submod_name: Optional[str] = None) -> Any:
        """The main graph, or the one of submodule ``submod_name``."""
        return self.get_main_dot_graph() if submod_name is None else self.get_submod_dot_graph(submod_name)

    def get_main_dot_graph(self) -> Any:
        return self._dot_graphs[self._name]

    def get_submod_dot_graph(self, submod_name: str) -> Any:
        key = f"{self._name}_{submod_name}"
        if key not in self._dot_graphs:
            raise KeyError(f"FxGraphDrawer: no GraphModule submodule {submod_name!r} (have {sorted(self._dot_graphs)})")
        return self._dot_graphs[key]

    def get_all_dot_graphs(self) -> Dict[str, Any]:
        return self._dot_graphs

    # -- building ---------------------------------------------------------------
    def _style(self, node: Node) -> Dict[str, str]:
        style = {"shape": self.dot_graph_shape, "fillcolor": "#CAFFE3", "style": '"filled,rounded"', "fontcolor": "#000000"}
        if node.op in _COLOR_MAP:
            style["fillcolor"] = _COLOR_MAP[node.op]
        else:
            digest = hashlib.md5(pretty_target(node.target).encode(), usedforsecurity=False).hexdigest()
            style["fillcolor"] = _HASH_COLORS[int(digest[:8], 16) % len(_HASH_COLORS)]
        return style

    def _format_arg(self, arg: Any) -> str:
        if isinstance(arg, Node):
            return "" if self._skip_node_names_in_args else f"%{arg.name}"
        if isinstance(arg, (list, tuple)):
            inner = ", ".join(self._format_arg(a) for a in arg)
            return f"[{inner}]" if isinstance(arg, list) else f"({inner})"
        if isinstance(arg, dict):
            return "{" + ", ".join(f"{k}: {self._format_arg(v)}" for k, v in arg.items()) + "}"
        return str(arg)

    def _label(self, module: Any, node: Node) -> str:
        lines = [f"name=%{node.name}", f"op_code={node.op}"]
        if node.op == "call_module":
            leaf = module.get_submodule(node.target)
            lines.append(f"{type(leaf).__name__}")
        elif node.op != "placeholder" and node.op != "output":
            lines.append(f"target={pretty_target(node.target)}")
        if node.args:
            lines.append(f"args={self._format_arg(node.args)}")
        if node.kwargs:
            lines.append(f"kwargs={self._format_arg(dict(node.kwargs))}")
        tm = node.meta.get("tensor_meta")
        if isinstance(tm, TensorMetadata):
            lines.append(f"dtype={tm.dtype}")
            lines.append(f"shape={list(tm.shape)}")
            lines.append(f"stride={tm.stride}")
        if self._parse_stack_trace and node.stack_trace:
            lines.append(f"stack_trace={node.stack_trace.strip().splitlines()[-1]}")
        body = r"\n".join(_escape(line) for line in lines) + r"\l"
        return "{" + body + "}" if self.dot_graph_shape == "record" else body

    def _add_params_and_buffers(self, dot: Any, node: Node, leaf: Any) -> None:
        # one box per parameter/buffer of a called leaf module, with an edge into the call
        from ...nn import Parameter

        for pname, t in list(leaf.named_parameters()) + list(leaf.named_buffers()):
            full = f"{node.name}.{pname}"
            kind = f"{full}|op_code=get_parameter" if isinstance(t, Parameter) else "buffer\\l"
            label = "{" + kind + f"|dtype={t.dtype}\\lshape={list(t.shape)}\\l" + "}"
            dot.add_node(pydot.Node(full, label=label, fillcolor="Salmon", style='"filled,rounded"', fontcolor="#000000"))
            dot.add_edge(pydot.Edge(full, node.name))

    def _to_dot(self, module: Any, name: str, ignore_getattr: bool) -> Any:
        from ..graph_module import GraphModule

        dot = pydot.Dot(name, rankdir="TB")
        for node in module.graph.nodes:
            if ignore_getattr and node.op == "get_attr":
                continue
            dot.add_node(pydot.Node(node.name, label=self._label(module, node), **self._style(node)))
            if node.op == "call_module" and not self._ignore_parameters_and_buffers:
                leaf = module.get_submodule(node.target)
                if not isinstance(leaf, GraphModule):
                    self._add_params_and_buffers(dot, node, leaf)
        for node in module.graph.nodes:
            if ignore_getattr and node.op == "get_attr":
                continue
            for user in node.users:
                dot.add_edge(pydot.Edge(node.name, user.name))
        return dot
