"""``ember.overrides``: the public side of PyTorch's ``__torch_function__`` protocol.

The protocol itself (which arguments override a call, in what order handlers run, the default
``Tensor.__torch_function__``) lives in ``ember/_torch_function.py``, where the dispatcher
reaches it. This module is what user code imports, with torch's names: ``TorchFunctionMode``,
``has_torch_function*``, ``handle_torch_function`` for Python functions that want to be
overridable, ``is_tensor_like``, and the catalogues (``get_overridable_functions``,
``get_ignored_functions``, ``get_testing_overrides``) built from ember's own op registry.

Not covered: factory functions with no tensor argument (``ember.zeros(3)``, ``ember.arange``)
do not reach a ``TorchFunctionMode`` (torch's modes see them); ``__torch_dispatch__`` (the
lower-level protocol) is not implemented.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Iterable, List, Set

from . import _torch_function as _tf
from ._state import STATE
from ._torch_function import (DisableTorchFunction, DisableTorchFunctionSubclass,  # noqa: F401
                              _disabled_torch_function_impl, resolve_name)

__all__ = ["get_ignored_functions", "get_overridable_functions", "get_testing_overrides",
           "handle_torch_function", "has_torch_function", "TorchFunctionMode", "is_tensor_like",
           "is_tensor_method_or_property", "wrap_torch_function", "resolve_name",
           "has_torch_function_unary", "has_torch_function_variadic", "BaseTorchFunctionMode"]


class TorchFunctionMode:
    """A context manager whose ``__torch_function__(func, types, args=(), kwargs=None)`` sees
    every overridable ember call made inside it (innermost mode first; while its handler runs
    the mode is off, so the calls it makes run normally). Subclass and define
    ``__torch_function__``."""

    inner: "TorchFunctionMode"

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{type(self).__name__} must define __torch_function__")

    def __enter__(self):
        _tf.push_mode(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        top = _tf.pop_mode()
        if top is not self:           # exited out of order: put the stack back and say so
            _tf.push_mode(top)
            raise RuntimeError(f"{type(self).__name__}.__exit__: this mode is not the innermost active "
                               f"TorchFunctionMode ({type(top).__name__} is)")
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        """Deprecated in torch: ``with cls(*args, **kwargs):`` instead."""
        import warnings
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`")
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs every call unchanged (a base for modes that observe)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        return func(*args, **kwargs)


def _get_current_function_mode():
    stack = STATE.tf_modes
    return stack[-1] if stack else None


def _get_current_function_mode_stack() -> list:
    return _tf.mode_stack()


def _is_torch_function_mode_enabled() -> bool:
    return bool(STATE.tf_modes) and not STATE.tf_off


def _relevant(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(a)
        else:
            out.append(a)
    return out


def has_torch_function(relevant_args: Iterable[Any]) -> bool:
    """Whether a call with these arguments must go through the protocol: one of them is an
    overriding type (a Tensor subclass with ``__torch_function__``, a Tensor-like), or a mode
    is active."""
    if _is_torch_function_mode_enabled():
        return True
    if STATE.tf_subclass_off:
        return False
    return any(_tf.overridable(a) for a in _relevant(relevant_args))


def has_torch_function_unary(arg) -> bool:
    return has_torch_function((arg,))


def has_torch_function_variadic(*args) -> bool:
    return has_torch_function(args)


def handle_torch_function(public_api: Callable, relevant_args: Iterable[Any], *args, **kwargs):
    """Run ``public_api``'s overrides (for a Python function that checked ``has_torch_function``
    on ``relevant_args``): the modes, then the overloaded types' handlers, with ``args`` and
    ``kwargs`` as the call received them."""
    types = _tf.collect_overloaded(_relevant(relevant_args))
    return _tf.handle(public_api, types, args, kwargs)


def wrap_torch_function(dispatcher: Callable):
    """Decorator: the wrapped function runs its overrides when ``dispatcher(*args, **kwargs)``
    (which returns the relevant arguments) holds an overriding one."""
    def decorator(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return decorator


def is_tensor_like(inp) -> bool:
    """A Tensor (or subclass), or an object whose type defines ``__torch_function__``."""
    from .tensor import Tensor
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def is_tensor_method_or_property(func: Callable) -> bool:
    """Whether ``func`` is a method of ``ember.Tensor`` or a property's getter (these get the
    tensor as their first argument)."""
    from .tensor import Tensor
    for name, value in Tensor.__dict__.items():
        if value is func or (isinstance(value, property) and value.fget is func):
            return True
    return getattr(func, "__name__", None) == "__get__"


# ---------------------------------------------------------------------- catalogues
def _namespaces():
    import ember
    import ember.fft
    import ember.linalg
    import ember.nn.functional
    import ember.special
    from .tensor import Tensor
    return {ember: ember, ember.Tensor: Tensor, ember.nn.functional: ember.nn.functional,
            ember.linalg: ember.linalg, ember.fft: ember.fft, ember.special: ember.special}


def _op_bindings() -> Set[Callable]:
    from .ops.registry import OPS
    return {op.binding for op in OPS.values() if getattr(op, "binding", None) is not None}


@functools.lru_cache(None)
def _catalogue():
    """(overridable by namespace, ignored): a public callable of a namespace is overridable when
    it is an op binding whose schema has tensor arguments, or a Tensor method; the registry's
    ops with no tensor argument (factories) are the ignored ones."""
    from .ops.registry import OPS
    tensor_ops = {op.binding for op in OPS.values() if getattr(op, "binding", None) is not None
                  and (op.tensor_pos or op.list_pos)}
    no_tensor_ops = _op_bindings() - tensor_ops
    overridable: Dict[Any, List[Callable]] = {}
    ignored: Set[Callable] = set()
    for ns, obj in _namespaces().items():
        funcs = []
        for name in dir(obj):
            if name.startswith("_") and not (obj is ns and name.startswith("__") and isinstance(ns, type)):
                continue
            try:
                value = inspect.getattr_static(obj, name)
            except AttributeError:
                continue
            if isinstance(value, property):
                if value.fget is not None:
                    funcs.append(value.fget)
                continue
            if not callable(value) or isinstance(value, type):
                continue
            if value in tensor_ops or isinstance(ns, type):
                funcs.append(value)
            elif value in no_tensor_ops:
                ignored.add(value)
        overridable[ns] = funcs
    return overridable, frozenset(ignored)


def get_overridable_functions() -> Dict[Any, List[Callable]]:
    """Namespace -> the functions in it that a ``__torch_function__`` handler can see."""
    return {k: list(v) for k, v in _catalogue()[0].items()}


def get_ignored_functions() -> Set[Callable]:
    """Public functions that cannot be overridden (they take no tensor argument)."""
    return set(_catalogue()[1])


def get_testing_overrides() -> Dict[Callable, Callable]:
    """Every overridable function -> a dummy with the same signature returning -1 (torch's
    shape: for testing that a type's handler is reached with the right arguments)."""
    out = {}
    for funcs in _catalogue()[0].values():
        for f in funcs:
            if f in out:
                continue
            try:
                sig = inspect.signature(f)
            except (TypeError, ValueError):
                sig = None

            def dummy(*args, **kwargs):
                return -1
            if sig is not None:
                dummy.__signature__ = sig
            dummy.__name__ = getattr(f, "__name__", "dummy")
            out[f] = dummy
    return out


import contextlib as _contextlib  # noqa: E402
import functools as _functools  # noqa: E402


@_functools.lru_cache(None)
def get_default_nowrap_functions():
    """The accessors whose result ``Tensor.__torch_function__`` hands back unwrapped (field reads
    such as ``t.grad`` must keep their identity: ``a.grad is a.grad``)."""
    from .tensor import Tensor
    return {Tensor.grad.__get__}      # ember's ``_base`` is a plain attribute, not an accessor


@_contextlib.contextmanager
def enable_reentrant_dispatch():
    """Within the block, a ``__torch_dispatch__`` handler may call ops that dispatch again.
    ember's Python dispatch keeps no thread-local snapshot that re-entry would have to restore
    (modes and subclass handlers are looked up afresh at every call), so re-entry is always
    allowed and the block needs no set-up."""
    yield


__all__ += ["get_default_nowrap_functions", "enable_reentrant_dispatch"]
