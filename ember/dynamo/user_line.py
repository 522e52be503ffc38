"""Run the instruction at a graph break from a frame that names the user's source line.

Why. At a graph break the compiled code (``output_graph.compile``: generated Python,
``<ember.dynamo compiled f>``) makes the breaking call itself -- ``y.item()``,
``print(...)``, ``bool(t)`` -- and then calls the resume function. When that call raises,
the traceback named only the generated code, so the user could not see which of their lines
failed; ``warnings.warn(..., stacklevel=2)`` inside the call pointed at the generated code too.

How. :func:`caller_at` returns a one-line function ``(fn, *args, **kwargs) -> fn(*args,
**kwargs)`` whose code object carries the user's file name, function name and the break
instruction's positions (line and columns, from ``dis``), built by compiling an ``ast`` tree
whose nodes have those positions. A traceback through it reads as if the user's frame made
the call::

    File "model.py", line 9, in forward
        z = y.item()
            ^^^^^^^^

Its code is marked to be skipped by the frame hook (it is ours, not user code). One function
per (file, name, positions), cached: the compiled code refers to it like any other global.
"""
from __future__ import annotations

import ast
import threading
from typing import Callable, Dict, Optional, Tuple

_CACHE: Dict[Tuple, Callable] = {}
_LOCK = threading.Lock()


def _positions(inst):
    pos = getattr(inst, "positions", None)
    if pos is None or pos.lineno is None:
        return None
    end_line = pos.end_lineno if pos.end_lineno is not None else pos.lineno
    col = pos.col_offset if pos.col_offset is not None else 0
    end_col = pos.end_col_offset
    if end_col is None or (end_line == pos.lineno and end_col < col):
        end_col = col
    return pos.lineno, end_line, col, end_col


def _build(filename: str, name: str, where) -> Callable:
    line, end_line, col, end_col = where
    tree = ast.parse("def __ember_at(__fn, /, *args, **kwargs):\n    return __fn(*args, **kwargs)\n")
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno, node.end_lineno = line, end_line
            node.col_offset, node.end_col_offset = col, end_col
    ns: dict = {}
    exec(compile(tree, filename, "exec"), ns)
    fn = ns["__ember_at"]
    changes = {"co_name": name}
    if hasattr(fn.__code__, "co_qualname"):
        changes["co_qualname"] = name
    fn.__code__ = fn.__code__.replace(**changes)
    from .._C import _load_eval_frame
    _load_eval_frame().mark_skip(fn.__code__)
    return fn


def caller_at(code, inst, name: Optional[str] = None) -> Optional[Callable]:
    """A caller attributing its call to ``inst``'s line in ``code``'s file (None when the
    instruction has no line: the breaking call is then made from the generated code)."""
    where = _positions(inst)
    if where is None:
        return None
    key = (code.co_filename, name or code.co_name, where)
    fn = _CACHE.get(key)
    if fn is None:
        with _LOCK:
            fn = _CACHE.get(key)
            if fn is None:
                fn = _CACHE[key] = _build(code.co_filename, key[1], where)
    return fn
