"""``torch._subclasses.fake_tensor`` on ember's fake tensors (``ember.fx.fake_tensor``).

An ember fake tensor is an ordinary ``ember.Tensor`` whose array is metadata only; it is not an
instance of a Python subclass as torch's are. ``FakeTensor`` here is the *type test*:
``isinstance(t, FakeTensor)`` is true exactly for fake tensors, and ``t.fake_mode`` is the mode
that made it.

``FakeTensorMode`` takes torch's arguments. As in torch, a real tensor reaching an operator
under the mode raises (``AssertionError``, torch's message) unless the mode was made with
``allow_non_fake_inputs=True``; use ``mode.from_tensor(t)`` to make its fake twin. Operators
whose output shape depends on data (``nonzero``, ``masked_select``, ``unique``...) raise
``DynamicOutputShapeException``; other reads of data (``.item()``, ``.tolist()``, ``bool(t)``)
raise ``DataDependentOutputException``; an operator without a meta function raises
``UnsupportedFakeTensorException``."""
from __future__ import annotations

from typing import Any, Optional

from ..fx import fake_tensor as _fake
from ..fx.fake_tensor import DataDependentOutputError, UnsupportedFakeOperator, is_fake
from ..tensor import Tensor

__all__ = ["FakeTensor", "FakeTensorMode", "DataDependentOutputException", "DynamicOutputShapeException",
           "UnsupportedFakeTensorException", "UnsupportedOperatorException", "is_fake"]

#: torch's names for the errors ember's fake tensors raise
DataDependentOutputException = DataDependentOutputError
UnsupportedOperatorException = UnsupportedFakeOperator


class UnsupportedFakeTensorException(RuntimeError):
    """Something fake tensors cannot represent was asked for (torch's exception of this name)."""


class DynamicOutputShapeException(DataDependentOutputError):
    """An operator whose output *shape* depends on the data (``nonzero``, ``unique``, ...)."""

    def __init__(self, op: str):
        RuntimeError.__init__(self, op)
        self.op = op


class _FakeTensorMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return is_fake(obj)

    def __subclasscheck__(cls, sub) -> bool:
        return sub is cls


class FakeTensor(metaclass=_FakeTensorMeta):
    """The type of fake tensors, for ``isinstance`` (see the module docstring). Make fake tensors
    with ``FakeTensorMode.from_tensor`` or by running operators under the mode."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("FakeTensor cannot be constructed directly: use FakeTensorMode().from_tensor(t), "
                        "or run factory functions under `with FakeTensorMode():`")


def _tensors(args):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def _stamp(res, mode) -> None:
    if isinstance(res, Tensor):
        if is_fake(res):
            res.fake_mode = mode
    elif isinstance(res, (list, tuple)):
        for r in res:
            _stamp(r, mode)


class FakeTensorMode(_fake.FakeTensorMode):
    """``with FakeTensorMode():`` operators compute only shapes, dtypes, strides and devices."""

    def __init__(self, *, allow_fallback_kernels: bool = True, allow_non_fake_inputs: bool = False,
                 shape_env=None, static_shapes: Optional[bool] = None, export: bool = False):
        super().__init__(shape_env=shape_env)
        self.allow_fallback_kernels = allow_fallback_kernels
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.static_shapes = shape_env is None if static_shapes is None else static_shapes
        self.export = export

    def __ember_dispatch__(self, op, args):
        if not self.allow_non_fake_inputs:
            for t in _tensors(args):
                if not is_fake(t):
                    shown = ", ".join("FakeTensor(...)" if is_fake(a) else
                                      ("tensor([...])" if isinstance(a, Tensor) else repr(a)) for a in args)
                    raise AssertionError(
                        "Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with "
                        f"'allow_non_fake_inputs'. Found in {op.public_name}({shown})")
        try:
            res = super().__ember_dispatch__(op, args)
        except DynamicOutputShapeException:
            raise
        except DataDependentOutputError as e:
            if "data_dependent" in op.tags:
                raise DynamicOutputShapeException(op.public_name) from e
            raise
        _stamp(res, self)
        return res

    def from_tensor(self, tensor: Tensor, *, static_shapes: Optional[bool] = None, source: Any = None,
                    symbolic_context: Any = None, trace: bool = True) -> Tensor:
        """The fake twin of real tensor ``tensor`` (memoised: the same real tensor gives the same
        fake). With a ShapeEnv and ``static_shapes=False``, its sizes become symbols."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"FakeTensorMode.from_tensor: expected a Tensor, got {type(tensor).__name__}")
        static = self.static_shapes if static_shapes is None else static_shapes
        if symbolic_context is not None:
            raise NotImplementedError("FakeTensorMode.from_tensor(symbolic_context=...) is not supported: "
                                      "pass static_shapes=False with a FakeTensorMode(shape_env=ShapeEnv())")
        if not static and self.shape_env is None:
            raise ValueError("FakeTensorMode.from_tensor(static_shapes=False) needs FakeTensorMode(shape_env=...)")
        fake = super().from_tensor(tensor, symbolic=not static, source=None if source is None else str(source))
        fake.fake_mode = self
        return fake
