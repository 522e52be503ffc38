"""What an op translation sees: the values of the FX graph already in ONNX, and helpers.

Each FX value becomes one of:

* ``Value``: an ONNX tensor (name, ember dtype, shape from the node's ``meta["val"]``);
* ``SymValue``: a symbolic size (``sym_size`` and arithmetic on it): a 1-element int64 ONNX
  tensor, so it can be concatenated straight into a shape operand;
* ``Unavailable``: an output of a multi-output op that has no ONNX counterpart (BatchNorm's
  saved statistics, MaxPool's indices); using it is an error, ignoring it is fine;
* a list of these, for multi-output ops (read by ``getitem``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ._builder import GraphBuilder
from ._dtypes import is_float, numpy_dtype, onnx_type
from .errors import UnsupportedOperatorError


@dataclass
class Value:
    name: str
    dtype: Any
    shape: tuple = field(default=())

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class SymValue:
    name: str      # an int64 tensor of shape [1]
    hint: int = 0


@dataclass
class Unavailable:
    what: str


def is_static(d) -> bool:
    return not hasattr(d, "expr") and not isinstance(d, SymValue)


class Ctx:
    """Translation state shared by the op handlers: the builder and the current FX node."""

    def __init__(self, builder: GraphBuilder):
        self.b = builder
        self.node = None       # the FX node being translated (for messages and names)
        self.transposed_of = {}  # output of a 2-D Transpose -> its input (Gemm reads it with transB)

    @property
    def opset(self) -> int:
        return self.b.opset

    @property
    def out_dtype(self):
        v = self.node.meta.get("val")
        return getattr(v, "dtype", None)

    @property
    def out_shape(self):
        v = self.node.meta.get("val")
        return tuple(v.shape) if hasattr(v, "shape") else None

    def unsupported(self, what: str):
        from ._translate import describe_node
        return UnsupportedOperatorError(f"ember.onnx.export: {what} ({describe_node(self.node)})")

    def op(self, op_type, inputs, **kw):
        kw.setdefault("name", self.node.name if self.node is not None else op_type.lower())
        return self.b.op(op_type, inputs, **kw)

    # ---- operands
    def tensor(self, x, dtype=None) -> str:
        """ONNX name for operand ``x`` (a Value, a symbolic size or a Python scalar) as ``dtype``
        (default: its own dtype; a scalar without one takes float32/int64/bool from its type)."""
        if isinstance(x, Unavailable):
            raise self.unsupported(f"uses {x.what}, which the ONNX translation does not produce")
        if isinstance(x, Value):
            if dtype is None or x.dtype == dtype:
                return x.name
            return self.op("Cast", [x.name], to=onnx_type(dtype), name=f"{x.name}_cast")
        if isinstance(x, SymValue) or hasattr(x, "expr"):
            s = self.int_tensor(x)
            s = self.op("Squeeze", [s, self.b.int64s([0])], name="sym_scalar")
            if dtype is not None and str(dtype) != "ember.int64":
                s = self.op("Cast", [s], to=onnx_type(dtype), name="sym_scalar_cast")
            return s
        if isinstance(x, (bool, int, float)):
            if dtype is None:
                import ember
                dtype = ember.bool if isinstance(x, bool) else ember.int64 if isinstance(x, int) else ember.float32
            return self.b.const(x, numpy_dtype(dtype), "scalar")
        raise self.unsupported(f"an operand of type {type(x).__name__} ({x!r}) cannot be an ONNX tensor")

    def int_tensor(self, x) -> str:
        """A 1-element int64 tensor for an int or a symbolic size."""
        if isinstance(x, SymValue):
            return x.name
        if hasattr(x, "expr"):
            raise self.unsupported(f"the symbolic size {x} is not computed by a node of the graph")
        return self.b.int64s([int(x)])

    def ints(self, seq: Sequence) -> str:
        """A 1-D int64 tensor for a list of ints and symbolic sizes (a constant when all static)."""
        seq = list(seq)
        if all(isinstance(s, (int, np.integer)) for s in seq):
            return self.b.int64s(seq)
        parts, run = [], []
        for s in seq:
            if isinstance(s, (int, np.integer)):
                run.append(int(s))
                continue
            if run:
                parts.append(self.b.int64s(run))
                run = []
            parts.append(self.int_tensor(s))
        if run:
            parts.append(self.b.int64s(run))
        return self.op("Concat", parts, axis=0, name="shape")

    def common_dtype(self, *operands):
        """torch's promotion for mixed tensor/scalar operands (the category of the highest
        operand wins; within it, tensors with dims over 0-d tensors over Python scalars)."""
        import ember
        vals = [o for o in operands if isinstance(o, Value)]
        cats = lambda dt: 2 if is_float(dt) else (0 if dt == ember.bool else 1)  # noqa: E731
        py = [o for o in operands if isinstance(o, (bool, int, float)) or isinstance(o, SymValue)]
        best = None
        for v in vals:              # tensors with dims: ordinary promotion
            if v.rank > 0:
                best = v.dtype if best is None else ember.promote_types(best, v.dtype)
        for v in vals:              # 0-d tensors count only when of a higher category
            if v.rank == 0 and (best is None or cats(v.dtype) > cats(best)):
                best = v.dtype
        pycat = max((2 if isinstance(p, float) else 0 if isinstance(p, bool) else 1 for p in py), default=-1)
        if best is None:
            return ember.float32 if pycat == 2 else ember.bool if pycat == 0 else ember.int64
        if pycat > cats(best):
            return ember.float32 if pycat == 2 else ember.int64
        return best

    def norm_dim(self, d: int, rank: int) -> int:
        return d + rank if d < 0 else d
