"""ember.fx: program capture and transformation, mirroring torch.fx.

- :class:`Graph` / :class:`Node`: the IR (placeholder, get_attr,
  call_function, call_method, call_module, output);
- :class:`GraphModule`: a Module whose ``forward`` is generated Python;
- :func:`symbolic_trace`, :class:`Tracer`, :class:`Proxy`: capture by running
  code on Proxies;
- :class:`Interpreter`, :class:`Transformer`: node-by-node execution/rewrite;
- :mod:`ember.fx.passes`: DCE, CSE, ShapeProp, tabular and DOT printing;
- :func:`replace_pattern` (:mod:`ember.fx.subgraph_rewriter`): pattern-based
  rewriting; :class:`CodeGen`: custom calling conventions for generated code;
  :mod:`ember.fx.traceback`: carrying stack traces/metadata through passes;
  :func:`has_side_effect`, :class:`ProxyableClassMeta`, :data:`PH`, and the
  modules ``immutable_collections``, ``config``, ``operator_schemas``,
  ``tensor_type`` (torch.fx's names).

``GraphModule`` needs ``ember.nn``; it is imported on first use so that the
IR itself works without the rest of ember.
"""

from . import immutable_collections, traceback
from ._codegen import CodeGen, PythonCode
from ._symbolic_trace import PH, ProxyableClassMeta, Tracer, assert_specialized, symbolic_trace, wrap
from .graph import Graph, GraphLintError
from .interpreter import Interpreter, Transformer
from .node import Node, has_side_effect, map_aggregate, map_arg
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
    "has_side_effect",
    "CodeGen",
    "PythonCode",
    "PH",
    "ProxyableClassMeta",
    "immutable_collections",
]


# torch.fx's submodules, reachable as attributes (``ember.fx.passes.shape_prop``) without an
# import of their own; imported on first access
_SUBMODULES = (
    "config", "operator_schemas", "tensor_type", "passes", "experimental", "graph_module", "annotate",
    "_compatibility", "_pytree", "lazy_graph_module",
)


def __getattr__(name):
    if name == "GraphModule":
        from .graph_module import GraphModule

        return GraphModule
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'ember.fx' has no attribute {name!r}")
