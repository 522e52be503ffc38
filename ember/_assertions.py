"""``ember._assert`` / ``ember._assert_async``: PyTorch's assertion helpers, which model code
calls in ``forward`` (timm's ``PatchEmbed``: ``torch._assert(H == self.img_size[0], msg)``).

Plain Python: dynamo traces through this module like user code
(``dynamo.variables.builder.is_inlined_ember_module``), so a condition on sizes is decided at
trace time (guarded where it is symbolic) and costs nothing in the graph, as torch.compile
does; a condition that reads tensor data breaks the graph there, as any data-dependent branch.
"""
from __future__ import annotations

__all__ = ["_assert", "_assert_async"]


def _assert(condition, message):
    """``assert condition, message`` (a function, so it also works in code run with ``-O``
    stripped asserts, and under tracing)."""
    assert condition, message


def _assert_async(tensor, msg=None):
    """Raise unless the one-element ``tensor`` is nonzero (PyTorch runs the check on the device,
    asynchronously; ember's CPU tensors check at once)."""
    from .tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"_assert_async(): argument 'tensor' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    if tensor.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    if not bool(tensor.item()):
        raise RuntimeError(msg if msg is not None else "Expected Tensor with single nonzero value, but got zero")
