"""Is this value an instance of that typing annotation? (for ``runtime_validation``)

``issubinstance(value, hint)`` understands ``Any``, ``Union``/``Optional``, ``TypeVar`` bounds
and constraints, and looks inside ``tuple[...]``, ``list[...]``, ``set[...]``, ``dict[k, v]``
(and ``typing.List`` etc.); ``int`` accepts ``bool`` only where Python's isinstance does. Other
generic aliases are checked on their origin class only.
"""
from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin


def _alternatives(hint):
    """The types a hint stands for (a Union's members, a TypeVar's bound / constraints), or None."""
    if isinstance(hint, TypeVar):
        if hint.__bound__ is not None:
            return [hint.__bound__]
        return list(hint.__constraints__) or [Any]
    if get_origin(hint) in (Union, types.UnionType):
        return list(get_args(hint))
    return None


def issubinstance(value, hint) -> bool:
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    alts = _alternatives(hint)
    if alts is not None:
        return any(issubinstance(value, h) for h in alts)
    origin = get_origin(hint)
    if origin is None:
        if isinstance(hint, type):
            return isinstance(value, hint)
        return True               # a forward reference or special form: not checked
    if origin is typing.Literal:
        return value in get_args(hint)
    if isinstance(origin, type) and not isinstance(value, origin):
        return False
    args = get_args(hint)
    if not args:
        return True
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(issubinstance(v, args[0]) for v in value)
        return len(args) == len(value) and all(issubinstance(v, t) for v, t in zip(value, args))
    if origin in (list, set, frozenset, collections.abc.Sequence, collections.abc.Iterable):
        return all(issubinstance(v, args[0]) for v in value) if not isinstance(value, (str, bytes)) else True
    if origin in (dict, collections.abc.Mapping):
        kt, vt = args
        return all(issubinstance(k, kt) and issubinstance(v, vt) for k, v in value.items())
    return True


def iter_element_hint(iter_fn):
    """The ``T`` of an ``__iter__`` annotated ``-> Iterator[T]``; None when not annotated so."""
    try:
        hints = typing.get_type_hints(iter_fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: nothing to validate against
        return None
    ret = hints.get("return")
    if ret is None or get_origin(ret) not in (collections.abc.Iterator, collections.abc.Generator,
                                               collections.abc.Iterable):
        return None
    args = get_args(ret)
    return args[0] if args else None
