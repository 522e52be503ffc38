"""``Interpreter`` and ``Transformer``: run a graph node by node.

Why both exist next to generated code: generated ``forward`` is fast but
opaque to Python-level customisation. The Interpreter executes the same
semantics one node at a time through overridable methods (one per opcode),
which is what analyses (shape propagation, profiling, debugging) need. The
Transformer reuses that walk but feeds Proxies through it, so overriding a
method *rewrites* the graph instead of computing values.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import traceback as fx_traceback
from .graph import Graph
from .node import Argument, Node, Target, map_aggregate, map_arg
from .proxy import Proxy

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Executes ``module.graph`` (or ``graph``) against ``module``.

    ``env`` maps each node to its computed value. With
    ``garbage_collect_values`` values are dropped after their last use, like
    the generated code does.
    """

    def __init__(self, module: Any, garbage_collect_values: bool = True, graph: Optional[Graph] = None) -> None:
        self.module = module
        self.graph: Graph = graph if graph is not None else module.graph
        self.submodules: Dict[str, Any] = dict(module.named_modules()) if hasattr(module, "named_modules") else {}
        self.env: Dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.args_iter: Iterator[Any] = iter(())
        self.user_to_last_uses: Dict[Node, List[Node]] = {}
        if garbage_collect_values:
            seen: Dict[Node, Node] = {}
            for node in reversed(self.graph.nodes):
                for inp in node.all_input_nodes:
                    if inp not in seen:
                        seen[inp] = node
                        self.user_to_last_uses.setdefault(node, []).append(inp)

    # -- driving ---------------------------------------------------------------
    def run(self, *args: Any, initial_env: Optional[Dict[Node, Any]] = None, enable_io_processing: bool = True) -> Any:
        """Run the graph on ``args``; nodes already in ``initial_env`` are
        not re-run (their values are taken as given)."""
        self.env = dict(initial_env) if initial_env is not None else {}
        if enable_io_processing:
            args = self.graph.process_inputs(*args)
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if not getattr(e, "_fx_noted", False):
                    e.add_note(f"While executing {node.format_node()}")
                    try:
                        e._fx_noted = True  # type: ignore[attr-defined]
                    except Exception:
                        pass
                raise
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, ()):
                    self.env.pop(dead, None)
            if node.op == "output":
                out = self.env[node]
                return self.graph.process_outputs(out) if enable_io_processing else out
        return None

    def boxed_run(self, args_list: List[Any]) -> Any:
        """Like :meth:`run` but takes (and clears) a list, so inputs can be
        freed as soon as they are consumed."""
        args = list(args_list)
        args_list.clear()
        return self.run(*args)

    def run_node(self, n: Node) -> Any:
        """Run one node: fetch its argument values and dispatch on ``op``.
        While ``fx.traceback.preserve_node_meta()`` is active, nodes created
        meanwhile inherit ``n``'s metadata."""
        if fx_traceback.should_preserve_node_meta:
            with fx_traceback.set_current_meta(n, f"Interpreter_{type(self).__name__}"):
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                return getattr(self, n.op)(n.target, args, kwargs)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per opcode ----------------------------------------------------
    def placeholder(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"fx Interpreter: expected a positional argument for parameter {target!r}, but none was passed")

    def get_attr(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        return self.fetch_attr(target)

    def call_function(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        return args[0]

    # -- helpers -------------------------------------------------------------------
    def fetch_attr(self, target: str) -> Any:
        """Resolve a dotted path on ``self.module``."""
        obj = self.module
        walked = []
        for atom in target.split("."):
            if not hasattr(obj, atom):
                where = ".".join(walked) or "the root module"
                raise RuntimeError(f"fx Interpreter: {where} has no attribute {atom!r} (resolving {target!r})")
            obj = getattr(obj, atom)
            walked.append(atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return tuple(args), dict(kwargs)

    def map_nodes_to_values(self, args: Argument, n: Node) -> Any:
        def load(x: Node) -> Any:
            if x not in self.env:
                raise RuntimeError(f"fx Interpreter: node {n.name!r} reads {x.name!r}, which has no value (yet)")
            return self.env[x]

        return map_arg(args, load)


class Transformer(Interpreter):
    """Rebuilds the graph by running it on Proxies; override the opcode
    methods to rewrite. :meth:`transform` returns a new GraphModule."""

    def __init__(self, module: Any) -> None:
        super().__init__(module, garbage_collect_values=False)
        from ._symbolic_trace import Tracer

        self.new_graph = Graph()
        self.new_graph.set_codegen(self.graph._codegen)

        class TransformerTracer(Tracer):
            def __init__(self, graph: Graph, root: Any) -> None:
                super().__init__()
                self.graph = graph
                self.root = root
                self._index_root()

            def is_leaf_module(self, m: Any, qualname: str) -> bool:
                return True

        self.tracer = TransformerTracer(self.new_graph, module)

    def placeholder(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        default = args[0] if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Proxy:
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target: Target, args: Tuple[Argument, ...], kwargs: Dict[str, Any]) -> Any:
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, Proxy) and n.op != "output":
            # carry analysis results (shapes, stack traces) to the new node
            for k, v in n.meta.items():
                result.node.meta.setdefault(k, v)
        return result

    def transform(self) -> Any:
        """Run the rewrite and return a GraphModule over the new graph."""
        from .graph_module import GraphModule

        with fx_traceback.preserve_node_meta():
            result = self.run(enable_io_processing=False)
        if result is not None:
            out = map_aggregate(result, lambda a: a.node if isinstance(a, Proxy) else a)
            self.new_graph.output(self.tracer.create_arg(out))
        return GraphModule(self.module, self.new_graph)
