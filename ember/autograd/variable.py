"""``Variable``: PyTorch's pre-0.4 wrapper class, kept as an alias so old code still runs.

Tensors *are* Variables: ``isinstance(t, Variable)`` holds for every tensor, and
``Variable(t, requires_grad=True)`` returns a new tensor sharing ``t``'s data (detached from
``t``'s graph) with the requested ``requires_grad``.
"""
from __future__ import annotations

import warnings

from ..tensor import Tensor

__all__ = ["VariableMeta", "Variable"]


class VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class _ExecutionEngine:
    """``Variable._execution_engine``: the hooks torch code reaches the engine through."""

    @staticmethod
    def queue_callback(callback):
        from .engine import queue_callback
        return queue_callback(callback)

    @staticmethod
    def is_checkpoint_valid():
        from . import _is_checkpoint_valid
        return _is_checkpoint_valid()

    @staticmethod
    def run_backward(tensors, grad_tensors, keep_graph, create_graph, inputs=(), allow_unreachable=True,
                     accumulate_grad=True):
        from .engine import backward, grad
        if accumulate_grad:
            backward(tensors, grad_tensors, retain_graph=keep_graph, create_graph=create_graph,
                     inputs=inputs or None)
            return ()
        return grad(tensors, inputs, grad_tensors, retain_graph=keep_graph, create_graph=create_graph,
                    allow_unused=allow_unreachable)


class Variable(metaclass=VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: a tensor (see the module
    docstring); ``volatile`` is ignored with PyTorch's warning."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data=None, requires_grad=False, volatile=False, **kwargs):
        if kwargs:
            raise TypeError(f"Variable() got an unexpected keyword argument '{next(iter(kwargs))}'")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          stacklevel=2)
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        out.requires_grad_(bool(requires_grad))
        return out
