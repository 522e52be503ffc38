"""Argument normalisation against operator signatures (``torch.fx.operator_schemas``).

Why: the same call can be written many ways (``add(x, y)``,
``add(x, other=y)``, ``add(x, y, alpha=1)``). Passes that compare or rewrite
calls want one canonical form: every parameter bound, defaults filled in,
positional where the call was positional (or keyword-only with
``normalize_to_only_use_kwargs``). ember's operators are Python functions
with real signatures (their schema's parameter names, e.g. ``self``/``other``
where torch's C++ schemas say ``input``/``other``), so one rule serves every
target: bind against ``inspect.signature``.
"""

from __future__ import annotations

import inspect
import numbers
import typing
import warnings
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

__all__ = [
    "ArgsKwargsPair",
    "check_for_mutable_operation",
    "get_signature_for_torch_op",
    "create_type_hint",
    "type_matches",
    "normalize_function",
    "normalize_module",
]


class ArgsKwargsPair(NamedTuple):
    """Normalised ``args`` and ``kwargs`` of a call."""

    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]


def _ember_op(fn: Any) -> Any:
    return getattr(fn, "_ember_op", None)


def get_signature_for_torch_op(op: Callable[..., Any], return_schemas: bool = False):
    """The signatures of an ember operator (one: ember ops have no overloads),
    or None for anything that is not one. With ``return_schemas``, a pair
    ``(signatures, schemas)`` where a schema is the operator's registry record."""
    rec = _ember_op(op)
    if rec is None:
        return (None, None) if return_schemas else None
    try:
        sig = inspect.signature(op)
    except (TypeError, ValueError):
        return (None, None) if return_schemas else None
    if "out" in sig.parameters:
        # as torch's two overloads: the functional one, then the out= one
        sigs = [_without_out(sig), sig]
        return (sigs, [rec, rec]) if return_schemas else sigs
    return ([sig], [rec]) if return_schemas else [sig]


def _without_out(sig):
    return sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "out"])


def check_for_mutable_operation(target: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """Raise ``RuntimeError`` if calling ``target`` this way mutates an operand
    (an in-place operator, or an ``out=`` argument), as tracing only supports
    functional code."""
    sigs, recs = get_signature_for_torch_op(target, return_schemas=True)
    if not sigs:
        return
    for sig, rec in zip(sigs, recs):
        try:
            sig.bind(*args, **kwargs)
            break
        except TypeError:
            continue
    else:
        return  # does not match: cannot tell
    mutates = "inplace" in set(getattr(rec, "tags", ())) or kwargs.get("out") is not None
    if mutates:
        name = getattr(rec, "public_name", None) or getattr(target, "__name__", repr(target))
        raise RuntimeError(
            f"Tried to trace mutable operation {name}{sig}. FX only supports functional code, so "
            "operations that mutate operands in-place (e.g. via `out` arguments) are not supported"
        )


def create_type_hint(x: Any) -> Any:
    """A type hint for ``x``: for a list/tuple of types, ``list[T]`` /
    ``tuple[T, ...]`` with ``T`` the common base class among them (``Any``
    when there is none); anything else is returned unchanged."""
    try:
        if isinstance(x, (list, tuple)):
            wrap = (lambda t: list[t]) if isinstance(x, list) else (lambda t: tuple[t, ...])  # noqa: E731
            if len(x) == 0:
                return wrap(Any)
            base = x[0]
            for t in x:
                if issubclass(t, base):
                    continue
                if issubclass(base, t):
                    base = t
                else:
                    return wrap(Any)
            return wrap(base)
    except Exception:
        warnings.warn(f"We were not able to successfully create type hint from the type {x}")
    return x


def type_matches(signature_type: Any, argument_type: Any) -> bool:
    """Whether an argument of type ``argument_type`` may be passed to a
    parameter annotated ``signature_type`` (Unions, ``list[T]`` accepting
    ``list[S]``/homogeneous tuples of subclasses and, for ``list[int]``, an
    ``int``; an ember dtype for ``int``; int/float for ``numbers.Number``)."""
    if signature_type is argument_type:
        return True
    origin = getattr(signature_type, "__origin__", signature_type)
    if origin is typing.Union and signature_type != argument_type:
        return any(type_matches(c, argument_type) for c in typing.get_args(signature_type))
    if getattr(signature_type, "__origin__", None) is list:
        el = typing.get_args(signature_type)[0]
        if argument_type is int and el is int:
            return True
        if not inspect.isclass(el):
            warnings.warn(f"Does not support nested parametric types, got {signature_type}. Please file a bug.")
            return False
        if getattr(argument_type, "__origin__", None) is list:
            return issubclass(typing.get_args(argument_type)[0], el)
        if typing.get_origin(argument_type) is not tuple:
            return False
        contained = typing.get_args(argument_type)
        if contained == ((),):
            return True
        return all(c is Ellipsis or issubclass(c, el) for c in contained)
    if signature_type is int:
        try:
            from ember.types import dtype as _dtype
        except ImportError:  # pragma: no cover
            _dtype = None
        if _dtype is not None and argument_type is _dtype:
            return True
    if signature_type is numbers.Number and argument_type in (int, float):
        return True
    if inspect.isclass(argument_type) and inspect.isclass(signature_type):
        return issubclass(argument_type, signature_type)
    return False


def _normalize(sig: inspect.Signature, args: Tuple[Any, ...], kwargs: Dict[str, Any], only_kwargs: bool) -> Optional[ArgsKwargsPair]:
    ok = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind not in ok for p in sig.parameters.values()):
        return None  # positional-only or *args/**kwargs: not normalisable
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    new_args: List[Any] = []
    new_kwargs: Dict[str, Any] = {}
    for i, name in enumerate(sig.parameters):
        if not only_kwargs and i < len(args):
            new_args.append(bound.arguments[name])
        else:
            new_kwargs[name] = bound.arguments[name]
    return ArgsKwargsPair(tuple(new_args), new_kwargs)


def normalize_function(
    target: Callable[..., Any],
    args: Tuple[Any, ...],
    kwargs: Optional[Dict[str, Any]] = None,
    arg_types: Optional[Tuple[Any, ...]] = None,
    kwarg_types: Optional[Dict[str, Any]] = None,
    normalize_to_only_use_kwargs: bool = False,
) -> Optional[ArgsKwargsPair]:
    """``args``/``kwargs`` of a call to ``target`` bound to its signature,
    defaults filled in; the arguments given positionally stay positional
    unless ``normalize_to_only_use_kwargs``. None when the signature cannot be
    read or has positional-only/variadic parameters. Binding errors
    (``TypeError``) propagate. ``arg_types``/``kwarg_types`` are accepted for
    torch's API (they disambiguate overloads, which ember ops do not have)."""
    kwargs = {} if kwargs is None else kwargs
    if not callable(target):
        raise AssertionError(f"target must be callable, got {type(target)}")
    try:
        sig = inspect.signature(inspect.unwrap(target))
    except (TypeError, ValueError):
        return None
    if "out" in sig.parameters and kwargs.get("out") is None and _ember_op(target) is not None:
        sig = _without_out(sig)       # the functional overload, as torch picks for a call without out=
    return _normalize(sig, tuple(args), dict(kwargs), normalize_to_only_use_kwargs)


def normalize_module(
    root: Any,
    target: str,
    args: Tuple[Any, ...],
    kwargs: Optional[Dict[str, Any]] = None,
    normalize_to_only_use_kwargs: bool = False,
) -> Optional[ArgsKwargsPair]:
    """Like :func:`normalize_function` for the ``forward`` of the submodule
    at ``target``; only ``ember.nn``'s own module classes are normalised
    (user modules: None, as torch)."""
    try:
        submod = root.get_submodule(target)
    except AttributeError as e:
        raise RuntimeError(
            f"Tried to normalize node with target {target} but root did not have that target!"
        ) from e
    import ember.nn as nn

    cls = type(submod)
    if getattr(nn, cls.__name__, None) is cls:
        sig = inspect.signature(inspect.unwrap(submod.forward))
        return _normalize(sig, tuple(args), dict(kwargs or {}), normalize_to_only_use_kwargs)
    return None
