"""The decomposition table: op -> Python function over prims (and other ops).

``register_decomposition(op_or_name)`` records a decomposition (and sets the
op's ``OpDef.decomp``); ``decomposition_table(keep=())`` returns the dict
``make_fx(fn, decomposition_table=...)`` accepts; ``decompose(fn, keep=())``
is ``make_fx`` with the full table.

How a decomposition runs (``ember.fx.experimental.proxy_tensor``): the tracer
calls it with the op's arguments (keyword-only ones by name) while the tracer
is still the active mode, so every op it calls is dispatched again — prims
are recorded, other ops decompose recursively. Autograd sits above the mode
stack, so a traced ``backward()`` runs the derivative formulas (ember ops)
through the same table: the joint graph is prims too.

A decomposition must reproduce the eager kernel exactly: PyTorch's type
promotion and broadcasting made explicit (``convert_element_type``,
``broadcast_in_dim``), float16/bfloat16 math in float32 where the kernel
does it, and the kernel's output dtype and shape.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable

from ..ops import registry as _reg

_TABLE: Dict[Any, Callable[..., Any]] = {}
_LOADED = []


def _as_op(key):
    if isinstance(key, _reg.OpDef):
        return key
    op = getattr(key, "_ember_op", None)
    if op is not None:
        return op
    if isinstance(key, str):
        op = _reg.OPS.get(key)
        if op is None:
            raise KeyError(f"register_decomposition: no ember op named {key!r}")
        return op
    raise TypeError(f"expected an ember op (OpDef, binding or name), got {key!r}")


def register_decomposition(*ops_or_names):
    """Decorator: ``@register_decomposition("softmax")`` (or several ops sharing one function).

    The function takes the op's arguments, positional ones in schema order and keyword-only
    ones by name, and returns exactly what the op returns."""
    ops = [_as_op(k) for k in ops_or_names]
    for op in ops:
        if "prim" in op.tags:
            raise ValueError(f"{op.name} is a prim: prims are not decomposed")

    def deco(fn):
        for op in ops:
            if op in _TABLE:
                raise ValueError(f"a decomposition for {op.name!r} is registered twice")
            _TABLE[op] = fn
            op.decomp = fn
        return fn
    return deco


def _load():
    if not _LOADED:
        from . import decompositions  # noqa: F401  (registers everything)
        _LOADED.append(True)


def decomposition_table(keep: Iterable[Any] = ()) -> Dict[Any, Callable[..., Any]]:
    """{OpDef: decomposition} of every registered decomposition, minus the ops in ``keep``
    (ops, bindings or names), which are then recorded whole."""
    _load()
    kept = {_as_op(k) for k in keep}
    return {op: fn for op, fn in _TABLE.items() if op not in kept}


def decompose(fn: Callable[..., Any], keep: Iterable[Any] = ()) -> Callable[..., Any]:
    """``make_fx(fn, decomposition_table=decomposition_table(keep))``: called with example inputs,
    traces ``fn`` into a GraphModule of prims (plus the ops in ``keep``, composites named there
    where no gradient flows, and extern prims)."""
    from ..fx.experimental.proxy_tensor import make_fx
    keep = tuple(keep)
    return make_fx(fn, decomposition_table=decomposition_table(keep),
                   keep_composites=tuple(k for k in keep if _as_op(k).composite is not None))


def registered() -> Dict[Any, Callable[..., Any]]:
    """The raw table (without loading the decomposition modules)."""
    return dict(_TABLE)
