"""``ember.ops.aten``: ember's registered ops under torch's ``torch.ops.aten`` spelling.

Why. Code written against torch's dispatcher names ops as ``torch.ops.aten.mm.default``: a
``TorchDispatchMode`` handler compares ``func`` with them, reads ``func.overloadpacket`` or
``func.__name__``. ember's ops have one overload each (their schema), so ``ember.ops.aten.mm``
is an :class:`OpOverloadPacket` whose only overload is ``.default``; calling either runs the op
(``ember.mm``'s binding). An ember op's name is mostly ATen's (``mm``, ``addmm``, ``relu``,
``_softmax``); where ATen splits an op into overloads (``add.Tensor`` / ``add.Scalar``) ember has
the one ``default``.
"""
from __future__ import annotations

from typing import Dict

from .registry import OPS


class OpOverload:
    """One overload of an op (ember's: ``default``): callable, named ``aten.<op>.default``."""

    __slots__ = ("op", "overloadpacket", "__name__", "_overloadname")

    def __init__(self, op, packet):
        self.op = op
        self.overloadpacket = packet
        self.__name__ = f"{op.name}.default"
        self._overloadname = "default"

    @property
    def _schema(self):
        return self.op.schema

    def name(self) -> str:
        return f"aten::{self.op.name}"

    def __call__(self, *args, **kwargs):
        return self.op.binding(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='aten.{self.op.name}', overload='default')>"

    def __str__(self):
        return f"aten.{self.op.name}.default"


class OpOverloadPacket:
    """An op with its overloads (``.default``): ``ember.ops.aten.mm``."""

    __slots__ = ("op", "default", "__name__", "_qualified_op_name")

    def __init__(self, op):
        self.op = op
        self.__name__ = op.name
        self._qualified_op_name = f"aten::{op.name}"
        self.default = OpOverload(op, self)

    def overloads(self):
        return ["default"]

    @property
    def _schema(self):
        return self.op.schema

    def __call__(self, *args, **kwargs):
        return self.op.binding(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverloadPacket(op='aten.{self.op.name}')>"

    def __str__(self):
        return f"aten.{self.op.name}"


class PythonOverload:
    """``aten.<name>.default`` for what torch dispatches as an op but ember runs as Python over its
    ops (``Tensor.item()`` -- torch's ``_local_scalar_dense`` --, ``zeros_like``, ``uniform_`` ...):
    not an op record, so no dispatcher path reaches it; it exists for ``__torch_dispatch__``
    wrapper subclasses, whose handler gets it (``ops/registry._python_dispatch``). Calling it runs
    the Python function."""

    _overloadname = "default"

    def __init__(self, name: str, fn):
        self.__name__ = f"{name}.default"
        self._fn = fn
        self.overloadpacket = _PythonPacket(name, self)

    def name(self) -> str:
        return f"aten::{self.overloadpacket.__name__}"

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='aten.{self.overloadpacket.__name__}', overload='default')>"

    def __str__(self):
        return f"aten.{self.overloadpacket.__name__}.default"


class _PythonPacket:
    def __init__(self, name, default):
        self.__name__ = name
        self.default = default

    def __call__(self, *args, **kwargs):
        return self.default(*args, **kwargs)

    def __str__(self):
        return f"aten.{self.__name__}"


_PYTHON_OVERLOADS: Dict[str, PythonOverload] = {}


def python_overload(name: str, fn) -> PythonOverload:
    """The one :class:`PythonOverload` named ``name`` (made on first use, running ``fn``)."""
    o = _PYTHON_OVERLOADS.get(name)
    if o is None:
        o = _PYTHON_OVERLOADS[name] = PythonOverload(name, fn)
    return o


local_scalar_dense = python_overload("_local_scalar_dense", lambda t: t.item())

_PACKETS: Dict[str, OpOverloadPacket] = {}


def packet(op) -> OpOverloadPacket:
    p = _PACKETS.get(op.name)
    if p is None or p.op is not op:
        p = _PACKETS[op.name] = OpOverloadPacket(op)
    return p


class AtenNamespace:
    """``ember.ops.aten``: ``ember.ops.aten.<op>`` for every registered op with a binding."""

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name in _PYTHON_OVERLOADS:
            return _PYTHON_OVERLOADS[name].overloadpacket
        op = OPS.get(name)
        if op is None or getattr(op, "binding", None) is None or name.startswith("__"):
            raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
        return packet(op)

    def __dir__(self):
        return sorted(n for n, op in OPS.items() if "::" not in n and getattr(op, "binding", None) is not None)

    def __repr__(self):
        return "<ember.ops.aten>"


aten = AtenNamespace()
