"""``ember.utils._python_dispatch.TorchDispatchMode``: torch's dispatch-level mode for ember.

A ``TorchDispatchMode`` sees every op *below autograd* -- the backward's ops included, after
composite ops have decomposed -- as ``__torch_dispatch__(func, types, args, kwargs)`` with
``func`` an ``ember.ops.aten`` overload (``ember.ops.aten.mm.default``; see
ops/_aten_namespace.py). It rides on ember's dispatch-mode stack (the one fake tensors, the
profiler and forward AD use): while the handler runs the mode is off, so ``func(*args,
**kwargs)`` runs the op. ``__torch_dispatch__`` on Tensor subclasses (wrapper subclasses made with
``Tensor._make_wrapper_subclass``) is ember/ops/registry.py's ``_subclass_dispatch``, below the
modes. Not implemented: ``supports_higher_order_operators``.
"""
from __future__ import annotations

from .._state import STATE
from .._torch_function import args_as_called

__all__ = ["TorchDispatchMode", "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack",
           "is_traceable_wrapper_subclass"]


class TorchDispatchMode:
    """Subclass and define ``__torch_dispatch__(self, func, types, args=(), kwargs=None)``; use as
    a context manager."""

    def __init__(self, _dispatch_key=None):
        if _dispatch_key is not None:
            raise NotImplementedError("ember: TorchDispatchMode(_dispatch_key=...) is not supported")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{type(self).__name__} must define __torch_dispatch__")

    def __ember_dispatch__(self, op, args):
        from ..ops._aten_namespace import packet
        from ..ops.registry import _REQUIRED
        from .._torch_function import DISPATCH_CLASSES, PLAIN_CLASSES
        from ..tensor import Tensor
        pos, kw = args_as_called(op.params, args, _REQUIRED)
        types = []            # as torch: the tensor subclasses among the arguments (plain ones are not)
        for a in args:
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(x, Tensor) and (type(x) not in PLAIN_CLASSES or type(x) in DISPATCH_CLASSES) \
                        and type(x) not in types:
                    types.append(type(x))
        hook = getattr(op, "_torch_dispatch", None)   # a custom op (ember.library): its own overload and rules
        if hook is not None:
            return hook(self, tuple(types), pos, kw)
        return self.__torch_dispatch__(packet(op).default, tuple(types), pos, kw)

    def __enter__(self):
        STATE.modes.append(self)
        return self

    def __exit__(self, *exc):
        modes = STATE.modes
        if not modes or modes[-1] is not self:
            if self in modes:
                modes.remove(self)
            raise RuntimeError(f"{type(self).__name__}.__exit__: this mode is not the innermost active mode")
        modes.pop()
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        import warnings
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`")
        return cls(*args, **kwargs)


def _get_current_dispatch_mode():
    """The innermost active TorchDispatchMode, or None."""
    for m in reversed(STATE.modes):
        if isinstance(m, TorchDispatchMode):
            return m
    return None


def _get_current_dispatch_mode_stack():
    return [m for m in STATE.modes if isinstance(m, TorchDispatchMode)]


def is_traceable_wrapper_subclass(t) -> bool:
    """Whether ``t`` is an instance of a ``__torch_dispatch__`` subclass that can say what it is made
    of (``__tensor_flatten__`` / ``__tensor_unflatten__``), as torch's."""
    from .._torch_function import DISPATCH_CLASSES
    return type(t) in DISPATCH_CLASSES and hasattr(t, "__tensor_flatten__") and \
        hasattr(type(t), "__tensor_unflatten__")
