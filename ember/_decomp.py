"""``torch._decomp`` on ember's decomposition table (``ember.prims.table``).

ember's core IR is its prims (``ember.prims``): every decomposition in the table rewrites an
operator into prims (and other operators, decomposed in turn), so the table
``core_aten_decompositions()`` returns takes a graph all the way to prims -- what ember's
inductor compiles. ``get_decompositions([ember.ops.aten.gelu, ...])`` picks some, for
``aot_autograd(decompositions=...)``: the other operators stay whole in the graphs a custom
compiler gets. Tables are keyed by ember's operator definitions (``OpDef``); ops may be given as
``ember.ops.aten.<name>`` packets or their ``.default`` overloads, bindings, or names."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

__all__ = ["core_aten_decompositions", "get_decompositions", "register_decomposition", "decomposition_table"]


def _table() -> Dict[Any, Callable]:
    from .prims.table import decomposition_table as full
    return full()


def _opdef(op):
    """An ``OpDef`` from what a user may name an op with."""
    from .prims.table import _as_op
    inner = getattr(op, "op", None)         # ember.ops.aten packets and overloads
    try:
        return _as_op(inner if inner is not None else op)
    except (KeyError, TypeError) as e:
        raise TypeError(f"expected an ember operator (ember.ops.aten.<op>, its .default, a binding or a "
                        f"name), got {op!r}") from e


def core_aten_decompositions() -> Dict[Any, Callable]:
    """Every decomposition ember has (operators to prims): a new dict each call."""
    return dict(_table())


def get_decompositions(aten_ops: Iterable, type: str = "post_autograd") -> Dict[Any, Callable]:
    """The decompositions of ``aten_ops`` ember has (operators without one are left out, as in
    torch's)."""
    if type not in ("post_autograd", "pre_autograd", "meta"):
        raise ValueError(f"get_decompositions: type must be 'post_autograd', 'pre_autograd' or 'meta', got {type!r}")
    table = _table()
    out = {}
    for op in aten_ops:
        d = _opdef(op)
        if d in table:
            out[d] = table[d]
    return out


def register_decomposition(aten_op, registry: Optional[dict] = None, *, type: str = "post_autograd",
                           unsafe: bool = False):
    """Decorator registering a decomposition of ``aten_op`` (one op or a list) into ``registry``,
    or into ember's own table when None (then every ember compile uses it; registering an op
    twice there raises)."""
    ops = list(aten_op) if isinstance(aten_op, (list, tuple)) else [aten_op]
    defs = [_opdef(o) for o in ops]

    def deco(fn: Callable) -> Callable:
        if registry is None:
            from .prims.table import register_decomposition as reg
            return reg(*defs)(fn)
        for d in defs:
            if d in registry and not unsafe:
                raise ValueError(f"register_decomposition: {d.name!r} is already in the registry")
            registry[d] = fn
        return fn
    return deco


def __getattr__(name):
    if name == "decomposition_table":      # ember's table, loaded on first use
        return _table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
