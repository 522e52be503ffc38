"""``ember.compiler.set_stance``: how compiled functions behave for a while (PyTorch's stances).

* ``"default"``: compile on a cache miss (``force_backend=`` compiles with that backend
  instead, in entries of its own);
* ``"force_eager"``: every ``ember.compile`` directive is ignored, the code runs eagerly;
* ``"eager_on_recompile"``: cached compiled code is used when its guards pass, anything
  that would need a compile runs eagerly instead;
* ``"fail_on_recompile"``: anything that would need a compile raises (a warmed-up serving
  loop asserting it never recompiles);
* ``"eager_then_compile"``: a function's first call runs eagerly, later calls compile;
* ``"aot_eager_then_compile"``: its first call runs through the ``aot_eager`` backend (not
  cached), later calls compile with the real backend.

``set_stance(...)`` works as a call (it sets the stance at once), a ``with`` block and a
decorator, and refuses to run inside a compiled region. ``skip_guard_eval_unsafe`` is
accepted and ignored: ember always evaluates every guard (never less safe, only slower).
``convert_frame.Compiler.__call__`` reads ``current()`` on each frame it is offered.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

__all__ = ["DynamoStance", "set_stance", "current", "STANCES"]

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
           "aot_eager_then_compile")


@dataclasses.dataclass(frozen=True)
class DynamoStance:
    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: Optional[Any] = None


_current = DynamoStance()


def current() -> DynamoStance:
    return _current


def _in_compiled_region() -> bool:
    from .eval_frame import set_eval_frame
    prev = set_eval_frame(None)
    set_eval_frame(prev)
    return prev is not None


def _set(stance: DynamoStance) -> DynamoStance:
    global _current
    if _in_compiled_region():
        raise RuntimeError("attempted to set_stance in an ember.compile region (set it around the call of the "
                           "compiled function, not inside it)")
    prior, _current = _current, stance
    return prior


class set_stance:  # noqa: N801 - PyTorch's name; a class so it is a call, a with block and a decorator
    """Set the compiler's stance (see the module docstring) now; as a ``with`` block or a
    decorator it is restored afterwards."""

    _ember_forbidden_in_graph = True

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False, force_backend=None):
        if stance not in STANCES:
            raise ValueError(f"invalid ember.compile stance {stance!r}; expected one of {', '.join(STANCES)}")
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        if force_backend is not None:
            from .backends import lookup
            lookup(force_backend)          # an unknown backend name raises now
        self.stance = DynamoStance(stance, bool(skip_guard_eval_unsafe), force_backend)
        self.prev = _set(self.stance)

    def __enter__(self):
        _set(self.stance)

    def __exit__(self, *exc):
        _set(self.prev)
        return False

    def __call__(self, fn):
        _set(self.prev)          # as a decorator the stance applies only while fn runs
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            prior = _set(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(prior)
        with_stance._ember_forbidden_in_graph = True
        return with_stance
