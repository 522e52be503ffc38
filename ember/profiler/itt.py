"""``ember.profiler.itt``: Intel ITT (VTune) range and mark annotations.

ember has no ITT binding, so ``is_available()`` is False and ``range_push``/``range_pop``/
``mark``/``range`` do nothing (they return None, as torch's do when no ITT collector is
attached): code that annotates itself for VTune runs unchanged. Note that a torch *build
without* ITT raises on these calls instead; ember keeps the annotations harmless.
"""
from __future__ import annotations

from contextlib import contextmanager

__all__ = ["is_available", "range_push", "range_pop", "mark", "range"]


def _check_msg(fn, msg):
    if not isinstance(msg, str):
        raise TypeError(f"itt.{fn}(): msg must be a str, got {type(msg).__name__}")


def is_available() -> bool:
    """False: ember has no ITT binding."""
    return False


def range_push(msg):
    """Would open a nested ITT range named ``msg``; a no-op without ITT."""
    _check_msg("range_push", msg)


def range_pop():
    """Would close the innermost ITT range; a no-op without ITT."""


def mark(msg):
    """Would mark an instant named ``msg``; a no-op without ITT."""
    _check_msg("mark", msg)


@contextmanager
def range(msg, *args, **kwargs):  # noqa: A001 - torch's name
    """A range around the block (``msg.format(*args, **kwargs)``); a no-op without ITT."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
