"""``FakeTensorProp``: run a graph on fake tensors and record each node's
value (``torch.fx.passes.fake_tensor_prop``).

Why next to ShapeProp: ShapeProp executes the graph for real and stores only
shapes; FakeTensorProp runs every node under a
:class:`~ember._subclasses.fake_tensor.FakeTensorMode` (meta functions, no
data) and stores the fake result itself in ``node.meta["val"]`` -- the value
graph passes and compilers read (shapes, dtypes, strides, aliasing through
shared fake storages, symbolic sizes with a ShapeEnv).
"""

from __future__ import annotations

from typing import Any, Optional

from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["FakeTensorProp"]


class FakeTensorProp(Interpreter):
    """``FakeTensorProp(gm, mode=None).propagate(*args)``: each node's result,
    a fake tensor (or a structure of them, or a Python scalar / symbolic size),
    goes to ``node.meta["val"]``. Real tensor arguments are converted with
    ``mode.from_tensor``; :meth:`propagate_dont_convert_inputs` takes fakes
    as they are. As in torch, the module's own real parameters/buffers reach
    the operators as they are: make the mode with ``allow_non_fake_inputs=True``
    for a module that has them."""

    def __init__(self, module: Any, mode: Optional[Any] = None) -> None:
        super().__init__(module)
        if mode is None:
            from ..._subclasses.fake_tensor import FakeTensorMode

            mode = FakeTensorMode()
        self._mode = mode

    def run_node(self, n: Node) -> Any:
        from ...tensor import Tensor
        from ..experimental.symbolic_shapes import SymBool, SymInt
        from ..fake_tensor import is_fake

        result = super().run_node(n)

        def extract_val(obj: Any) -> Any:
            if isinstance(obj, Tensor):
                # a snapshot without autograd history, as torch's snapshot_fake
                fake = obj if is_fake(obj) else self._mode.from_tensor(obj, static_shapes=True)
                return fake.detach()
            if isinstance(obj, (SymInt, SymBool, int, float, bool)):
                return obj
            return None

        meta = map_aggregate(result, extract_val)
        if meta is not None:
            n.meta["val"] = meta
        return result

    def propagate(self, *args: Any) -> Any:
        """Run on ``args`` (real tensors become fakes of ``mode``)."""
        from ...tensor import Tensor

        fake_args = [self._mode.from_tensor(a) if isinstance(a, Tensor) else a for a in args]
        return self.propagate_dont_convert_inputs(*fake_args)

    def propagate_dont_convert_inputs(self, *args: Any) -> Any:
        """Run on ``args`` as they are (already fake)."""
        with self._mode:
            return super().run(*args)
