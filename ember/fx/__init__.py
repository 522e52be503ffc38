"""ember.fx: program capture and transformation, mirroring torch.fx.

- :class:`Graph` / :class:`Node`: the IR (placeholder, get_attr,
  call_function, call_method, call_module, output);
- :class:`GraphModule`: a Module whose ``forward`` is generated Python;
- :func:`symbolic_trace`, :class:`Tracer`, :class:`Proxy`: capture by running
  code on Proxies;
- :class:`Interpreter`, :class:`Transformer`: node-by-node execution/rewrite;
- :mod:`ember.fx.passes`: DCE, CSE, ShapeProp, tabular and DOT printing.

``GraphModule`` needs ``ember.nn``; it is imported on first use so that the
IR itself works without the rest of ember.
"""

from ._symbolic_trace import Tracer, assert_specialized, symbolic_trace, wrap
from .graph import Graph, GraphLintError
from .interpreter import Interpreter, Transformer
from .node import Node, map_aggregate, map_arg
from .proxy import Attribute, Proxy, TraceError
from .subgraph_rewriter import replace_pattern

__all__ = [
    "Graph",
    "GraphLintError",
    "GraphModule",
    "Node",
    "Proxy",
    "Attribute",
    "Tracer",
    "TraceError",
    "symbolic_trace",
    "wrap",
    "Interpreter",
    "Transformer",
    "map_arg",
    "map_aggregate",
    "assert_specialized",
    "replace_pattern",
]


def __getattr__(name):
    if name == "GraphModule":
        from .graph_module import GraphModule

        return GraphModule
    raise AttributeError(f"module 'ember.fx' has no attribute {name!r}")
