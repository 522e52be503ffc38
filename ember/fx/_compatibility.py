"""``@compatibility(is_backward_compatible=...)``: the marker torch.fx puts on
its public API (``torch.fx._compatibility``).

Why ember has it: user passes written against torch.fx decorate their own
functions and classes with it; it records the object and appends a note on
its stability to the docstring, nothing else.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Dict, TypeVar

__all__ = ["compatibility"]

_BACK_COMPAT_OBJECTS: Dict[Any, None] = {}
_MARKED_WITH_COMPATIBILITY: Dict[Any, None] = {}

_T = TypeVar("_T")

_STABLE_NOTE = "\n\n.. note::\n    Backwards-compatibility for this API is guaranteed.\n"
_EXPERIMENTAL_NOTE = "\n\n.. warning::\n    This API is experimental and is *NOT* backward-compatible.\n"


def compatibility(is_backward_compatible: bool) -> Callable[[_T], _T]:
    """A decorator recording ``fn`` as (not) backward compatible and saying so in its docstring."""

    def mark(fn: _T) -> _T:
        doc = textwrap.dedent(getattr(fn, "__doc__", None) or "")
        fn.__doc__ = doc + (_STABLE_NOTE if is_backward_compatible else _EXPERIMENTAL_NOTE)
        if is_backward_compatible:
            _BACK_COMPAT_OBJECTS.setdefault(fn)
        _MARKED_WITH_COMPATIBILITY.setdefault(fn)
        return fn

    return mark
