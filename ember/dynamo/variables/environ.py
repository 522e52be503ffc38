"""``os.environ`` reads and ``os.getenv`` inside compiled frames: folded to the value they have
when traced, with a guard that re-reads the variable on every call (a change recompiles).
Writing to ``os.environ`` stays a graph break (a side effect on the process)."""
from __future__ import annotations

import os

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _read(tx, key, default):
    if not isinstance(key, str):
        raise Unsupported("os.environ with a key that is not a string (the program raises)")
    value = os.environ.get(key, default)
    g = tx.output.guards
    g.add(f"{g.ref(os.environ)}.get({key!r}, {g.ref(_MISSING)}) == {g.ref(os.environ.get(key, _MISSING))}",
          f"environment variable {key} is {os.environ.get(key, 'unset')!r}")
    return value


class _Missing:
    def __repr__(self):
        return "<unset>"


_MISSING = _Missing()


def _const_args(args, what):
    if not all(a.is_python_constant() for a in args):
        raise Unsupported(f"{what} with non-constant arguments")
    return [a.as_python_constant() for a in args]


class EnvironVariable(VariableTracker):
    """``os.environ``: ``get``, ``[key]``, ``in``; everything else (writes, iteration) breaks."""

    def python_type(self):
        return type(os.environ)

    def var_getattr(self, tx, name):
        from .lists import ContainerMethodVariable
        if name in ("get", "__getitem__", "__contains__"):
            return ContainerMethodVariable(self, name)
        raise Unsupported(f"os.environ.{name} (only reads by key are modelled)")

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"os.environ.{name} with keyword arguments")
        vals = _const_args(args, f"os.environ.{name}")
        if name == "get" and len(vals) in (1, 2):
            return ConstantVariable(_read(tx, vals[0], vals[1] if len(vals) == 2 else None))
        if name == "__getitem__" and len(vals) == 1:
            v = _read(tx, vals[0], _MISSING)
            if v is _MISSING:
                raise Unsupported(f"os.environ[{vals[0]!r}]: KeyError (the program raises)")
            return ConstantVariable(v)
        if name == "__contains__" and len(vals) == 1:
            return ConstantVariable(_read(tx, vals[0], _MISSING) is not _MISSING)
        raise Unsupported(f"os.environ.{name}")


def getenv_call(tx, args, kwargs):
    vals = _const_args(list(args) + list(kwargs.values()), "os.getenv")
    names = ["key", "default"][:len(args)] + list(kwargs)
    bound = dict(zip(names, vals))
    if set(bound) - {"key", "default"} or "key" not in bound:
        raise Unsupported("os.getenv with unexpected arguments")
    return ConstantVariable(_read(tx, bound["key"], bound.get("default")))
