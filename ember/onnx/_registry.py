"""The table of op translations: FX target key -> handler ``(ctx, args, kwargs) -> output(s)``.

A handler gets the node's arguments with FX nodes replaced by their ONNX values (see
``_context``), emits ONNX nodes through ``ctx`` and returns an ONNX name (one output), a list
(multi-output ops), or a ``SymValue`` (size arithmetic)."""
from __future__ import annotations

from typing import Callable, Dict

HANDLERS: Dict[str, Callable] = {}


def target_key(target) -> str:
    """``"add"`` for ember's ops, ``"operator.mul"`` for Python's operators on sizes."""
    op = getattr(target, "op", None) if hasattr(target, "_overloadname") else None
    if op is not None and getattr(op, "binding", None) is not None:
        target = op.binding             # an aten overload (``aten.sum.dim_IntList``): ember's op
    mod = getattr(target, "__module__", "") or ""
    name = getattr(target, "__name__", None) or str(target)
    if mod in ("_operator", "operator"):
        return "operator." + name
    if mod == "math":
        return "math." + name
    return name


def register(*keys: str):
    def deco(fn):
        for k in keys:
            HANDLERS[k] = fn
        return fn
    return deco


def arg(args, kwargs, i: int, name: str, default=None):
    """Argument ``i`` (positional) or ``name`` (keyword), else ``default``."""
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def load_all():
    """Import the modules that fill ``HANDLERS`` (once)."""
    from . import _ops_elementwise, _ops_nn, _ops_shape  # noqa: F401
