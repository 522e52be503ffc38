"""``annotate(val, type)``: give a traced value a type (``torch.fx.annotate``).

Why: inside a function being traced, ``annotate(x, int)`` sets the type of the
node behind the Proxy ``x`` (printed in ``gm.code`` and the graph), where a
parameter annotation cannot be used; outside tracing it returns ``val``.
"""

from __future__ import annotations

from typing import Any

from .proxy import Proxy

__all__ = ["annotate"]


def annotate(val: Any, type: Any) -> Any:
    """``val``; a Proxy's node gets ``type`` (RuntimeError if it already has one)."""
    if not isinstance(val, Proxy):
        return val
    if val.node.type:
        raise RuntimeError(
            f"Tried to annotate a value that already had a type on it! Existing type is {val.node.type} "
            f"and new type is {type}. This could happen if you tried to annotate a function parameter "
            "value (in which case you should use the type slot on the function signature) or you called "
            "annotate on the same value twice"
        )
    val.node.type = type
    return val
