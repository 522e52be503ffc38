"""``ember.library.get_ctx()``: the context object of the fake implementation being run.

torch hands a fake impl a ``FakeImplCtx`` through ``get_ctx()`` so that it can ask for a
*dynamic* output size -- one no input size determines (``nonzero``'s row count) -- which
torch models as an unbacked SymInt. ember's ShapeEnv has no unbacked symbols, so
``new_dynamic_size()`` raises ``DataDependentOutputError`` naming the op: under
``ember.compile`` that is a graph break at the call (it then runs eagerly with real data),
under a bare ``FakeTensorMode`` it is the error a data-dependent ember op gives. Outside a fake
impl ``get_ctx()`` returns None, as torch's does.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, List, Optional

from .._fake import DataDependentOutputError

class _Stack(threading.local):
    """The fake impls running in this thread, innermost last."""

    def __init__(self):
        self.items: List["FakeImplCtx"] = []


_STACK = _Stack()


class FakeImplCtx:
    """Context of one run of a fake implementation (see the module docstring)."""

    def __init__(self, qualname: str, shape_env: Any):
        self._qualname = qualname
        self._shape_env = shape_env

    def new_dynamic_size(self, *, min: int = 0, max: Optional[int] = None):  # noqa: A002 - torch's names
        if not isinstance(min, int) or min < 0:
            raise ValueError(f"new_dynamic_size(): min must be a non-negative int, got {min!r}")
        if max is not None and (not isinstance(max, int) or max < min):
            raise ValueError(f"new_dynamic_size(): max must be None or an int >= min ({min}), got {max!r}")
        raise DataDependentOutputError(
            self._qualname, "its fake impl asked for a dynamic size (get_ctx().new_dynamic_size()); ember's "
            "ShapeEnv has no unbacked sizes, so this call cannot be traced (ember.compile runs it eagerly)")

    def create_unbacked_symint(self, *, min: int = 2, max: Optional[int] = None):  # noqa: A002
        """Deprecated spelling of :meth:`new_dynamic_size`."""
        return self.new_dynamic_size(min=min, max=max)


def get_ctx() -> Optional[FakeImplCtx]:
    """The ``FakeImplCtx`` of the fake impl now running; None outside one."""
    items = _STACK.items
    return items[-1] if items else None


@contextlib.contextmanager
def running(qualname: str, shape_env: Any):
    _STACK.items.append(FakeImplCtx(qualname, shape_env))
    try:
        yield
    finally:
        _STACK.items.pop()
