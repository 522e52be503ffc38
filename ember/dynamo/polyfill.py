"""Polyfills: Python stand-ins dynamo inlines in place of functions it cannot trace.

``ember.compiler.substitute_in_graph(original)(traceable)`` registers ``traceable`` (a Python
function computing what ``original`` computes) for ``original`` -- typically a C function
(``operator.indexOf``, a function of a C extension) that a compiled frame calls: instead of a
graph break at the call, dynamo traces ``traceable``'s body. Run eagerly, nothing changes:
``original`` is called. The registry is by identity (C functions take no attributes)."""
from __future__ import annotations

import functools
import inspect
import types

_POLYFILLS: dict = {}          # id(original) -> (original, traceable)

_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                   types.WrapperDescriptorType, types.MethodWrapperType, types.BuiltinMethodType)


def lookup(value):
    """The traceable stand-in registered for ``value``, or None."""
    hit = _POLYFILLS.get(id(value))
    return hit[1] if hit is not None and hit[0] is value else None


def _sig_ident(sig):
    """A signature's shape, ignoring annotations and the names of ``*args``/``**kwargs``."""
    ps = sig.parameters.values()
    positional = tuple(p.name for p in ps if p.kind not in (p.KEYWORD_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD))
    kwonly = {p.name for p in ps if p.kind == p.KEYWORD_ONLY}
    defaults = {p.name: p.default for p in ps if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return positional, kwonly, defaults


def substitute_in_graph(original_fn, *, can_constant_fold_through: bool = False, skip_signature_check: bool = False):
    """Decorator registering a traceable polyfill for ``original_fn`` (see the module docstring).
    The signatures must agree (parameter names, keyword-only names, defaults) unless either is
    ``(*args, **kwargs)`` or ``skip_signature_check=True``. Returns a function that calls
    ``original_fn`` eagerly. ``can_constant_fold_through`` is accepted for torch compatibility:
    ember inlines the polyfill either way (a call on constants folds as the body does)."""
    if not isinstance(original_fn, _FUNCTION_TYPES):
        raise TypeError(f"substitute_in_graph expects a function but got {type(original_fn)!r}")

    def register(traceable_fn):
        if not isinstance(traceable_fn, types.FunctionType):
            raise TypeError(f"@substitute_in_graph(...) expects a function but got {type(traceable_fn)!r}")
        if not skip_signature_check:
            try:
                original_sig = inspect.signature(original_fn)
            except ValueError:            # a C function without a text signature
                original_sig = None
            if original_sig is not None:
                wild = _sig_ident(inspect.signature(lambda *args, **kwargs: None))
                a, b = _sig_ident(original_sig), _sig_ident(inspect.signature(traceable_fn))
                if a != b and wild not in (a, b):
                    raise TypeError(f"Signature mismatch between {original_fn} and {traceable_fn}: "
                                    f"{original_sig} != {inspect.signature(traceable_fn)}")
        if id(original_fn) in _POLYFILLS and _POLYFILLS[id(original_fn)][0] is original_fn:
            raise ValueError(f"Duplicate polyfill handlers for {original_fn}: already handled by "
                             f"{_POLYFILLS[id(original_fn)][1]}")
        _POLYFILLS[id(original_fn)] = (original_fn, traceable_fn)

        @functools.wraps(traceable_fn)
        def eager(*args, **kwargs):
            return original_fn(*args, **kwargs)
        eager.__ember_polyfill__ = traceable_fn
        return eager
    return register
