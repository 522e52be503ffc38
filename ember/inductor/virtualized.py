"""The current "ops" handler and the graph being lowered.

IR bodies are plain Python functions ``inner_fn(index)`` that call
``ops.load``, ``ops.add``, ``ops.exp`` ... on whatever handler is installed:
the C++ kernel emitter (which returns C++ variable names), the read recorder
(dependency analysis), or the op counter (cost heuristics). One body, many
interpretations; this is what keeps the IR independent of any one backend.
"""
from __future__ import annotations

import contextlib
import threading


class _Virtualized(threading.local):
    def __init__(self) -> None:
        self.handlers = []
        self.graph = None


V = _Virtualized()


@contextlib.contextmanager
def set_ops_handler(handler):
    V.handlers.append(handler)
    try:
        yield handler
    finally:
        V.handlers.pop()


@contextlib.contextmanager
def set_graph(graph):
    prev = V.graph
    V.graph = graph
    try:
        yield graph
    finally:
        V.graph = prev


class _OpsProxy:
    def __getattr__(self, name):
        if not V.handlers:
            raise RuntimeError(f"inductor: ops.{name} called with no ops handler installed")
        return getattr(V.handlers[-1], name)


ops = _OpsProxy()
