"""``ShapeProp``: run the graph on example inputs and record tensor metadata.

Why an Interpreter: shapes come from actually executing each node (or its
meta function, once fake tensors run through the same path), so the
simplest correct implementation is the Interpreter with a hook after every
node that stores ``node.meta['tensor_meta']``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["ShapeProp", "TensorMetadata", "extract_tensor_metadata"]


class TensorMetadata(NamedTuple):
    shape: Tuple[int, ...]
    dtype: Any
    stride: Optional[Tuple[int, ...]]
    requires_grad: bool


def _is_tensor(x: Any) -> bool:
    import sys

    mod = sys.modules.get("ember.tensor")
    Tensor = getattr(mod, "Tensor", None) if mod is not None else None
    return Tensor is not None and isinstance(x, Tensor)


def extract_tensor_metadata(t: Any) -> TensorMetadata:
    stride = t.stride() if callable(getattr(t, "stride", None)) else None
    return TensorMetadata(tuple(t.shape), t.dtype, tuple(stride) if stride is not None else None,
                          bool(getattr(t, "requires_grad", False)))


class ShapeProp(Interpreter):
    """``ShapeProp(gm).propagate(*args)`` fills ``node.meta['tensor_meta']``
    (a :class:`TensorMetadata`, or a matching structure of them for nodes
    returning tuples/lists of tensors) and ``node.meta['type']``."""

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        found = [False]

        def meta(x: Any) -> Any:
            if _is_tensor(x):
                found[0] = True
                return extract_tensor_metadata(x)
            return x

        tm = map_aggregate(result, meta)
        if found[0]:
            n.meta["tensor_meta"] = tm
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Run on ``args``; returns the graph's result."""
        return self.run(*args)
