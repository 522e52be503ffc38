"""``Parameter`` (defined with Tensor in ``ember.tensor``) and ``Buffer``."""
from __future__ import annotations

from ..tensor import Parameter, Tensor

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


class _BufferMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.__dict__.get("_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """``Buffer(data, persistent=True)``: a tensor that a Module registers as a buffer on assignment."""

    def __new__(cls, data=None, *, persistent=True):
        from .. import empty
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer expects a Tensor, got {type(data).__name__}")
        t = data.detach()
        t.__dict__["_is_buffer"] = True
        t.__dict__["_buffer_persistent"] = bool(persistent)
        return t


class UninitializedParameter:
    def __new__(cls, *args, **kwargs):
        raise RuntimeError("ember.nn lazy modules (UninitializedParameter) are not supported")


class UninitializedBuffer(UninitializedParameter):
    pass


def is_lazy(param):
    return False
