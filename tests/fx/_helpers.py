"""Shared helpers for fx tests (no torch, no ember core needed)."""

import types

from ember.fx import Tracer


def compile_graph(graph, root=None):
    """Exec the graph's generated source; returns a plain function of the
    graph inputs with ``self`` bound to ``root``."""
    pc = graph.python_code("self")
    ns = dict(pc.globals)
    exec(compile(pc.src, "<fx-test>", "exec"), ns)
    fwd = ns["forward"]
    root = root if root is not None else types.SimpleNamespace()
    return lambda *a, **k: fwd(root, *a, **k)


def trace_fn(fn, **kw):
    return Tracer().trace(fn, **kw)
