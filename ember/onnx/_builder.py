"""``GraphBuilder``: the ONNX nodes, initializers and value names of one graph being built.

Everything goes through ``onnx.helper`` / ``onnx.numpy_helper``; this class only keeps names
unique (ONNX values are one flat namespace, FX node names are reused where they are free) and
shares small constants (a model repeats ``axes=[-1]`` or a scalar ``0.5`` many times)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np


class GraphBuilder:
    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: List = []
        self.initializers: Dict[str, object] = {}   # name -> TensorProto, in creation order
        self._used: set = set()
        self._consts: Dict[tuple, str] = {}
        self._counter = 0

    # ---- names
    def reserve(self, name: str) -> str:
        """Claim ``name`` exactly (graph inputs, outputs): an error if it is taken."""
        if name in self._used:
            raise ValueError(f"ember.onnx.export: the name {name!r} is used twice in the graph (input_names / "
                             f"output_names must be distinct)")
        self._used.add(name)
        return name

    def fresh(self, base: str) -> str:
        """``base`` if free, else ``base_1``, ``base_2``, ..."""
        base = base or "v"
        if base not in self._used:
            self._used.add(base)
            return base
        while True:
            self._counter += 1
            cand = f"{base}_{self._counter}"
            if cand not in self._used:
                self._used.add(cand)
                return cand

    # ---- nodes
    def op(self, op_type: str, inputs: Sequence[Optional[str]], *, outputs: int = 1, name: str = "",
           out_names: Optional[Sequence[str]] = None, **attrs):
        """Append one node; returns its output name (or the list of names when ``outputs > 1``)."""
        from onnx import helper
        base = name or op_type.lower()
        outs = list(out_names) if out_names is not None else [self.fresh(base if outputs == 1 else f"{base}_{i}")
                                                               for i in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, ["" if i is None else i for i in inputs], outs,
                                           name=self.fresh(f"n_{base}"), **attrs))
        return outs[0] if outputs == 1 and out_names is None else outs

    # ---- constants
    def initializer(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper
        tp = numpy_helper.from_array(np.array(array, order="C"), name=name)   # (ascontiguousarray makes 0-d 1-d)
        self.initializers[name] = tp
        return name

    def const(self, value, np_dtype, hint: str = "const") -> str:
        """A constant tensor (an initializer); small ones are shared by value."""
        arr = np.asarray(value, dtype=np_dtype)
        key = None
        if arr.size <= 16:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            hit = self._consts.get(key)
            if hit is not None:
                return hit
        name = self.initializer(self.fresh(hint), arr)
        if key is not None:
            self._consts[key] = name
        return name

    def int64s(self, values: Sequence[int], hint: str = "ints") -> str:
        """A 1-D int64 constant (axes, shapes, starts/ends)."""
        return self.const(np.asarray([int(v) for v in values], dtype=np.int64).reshape(-1), np.int64, hint)
