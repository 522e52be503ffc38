"""The rest of ``torch.autograd.graph``'s public names, on ember's graph (``graph.py``):
gradient edges as named tuples, bumping version counters by hand, and switching
``saved_tensors_hooks`` off for a region (a library whose saved tensors must stay as they are).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ..tensor import Tensor
from . import graph

__all__ = ["GradientEdge", "get_gradient_edge", "increment_version", "disable_saved_tensors_hooks",
           "allow_mutation_on_saved_tensors"]


class GradientEdge(NamedTuple):
    """Where a gradient for a tensor flows: the node and which of its inputs."""
    node: Any
    output_nr: int
    ownership_token: Optional[Any] = None


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge a gradient for ``tensor`` flows into (its grad_fn, or the AccumulateGrad node of
    a leaf)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"get_gradient_edge(): expected a Tensor, got {type(tensor).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    node, nr = graph.gradient_edge(tensor)
    return GradientEdge(node, nr)


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable, once per
    appearance): saved tensors then treat it as modified in place."""
    tensors = (tensor,) if isinstance(tensor, Tensor) else tuple(tensor)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"increment_version(): expected tensors, got {type(t).__name__}")
        t._bump_version()


class disable_saved_tensors_hooks:
    """Within the block, entering ``saved_tensors_hooks`` (or entering this block while hooks are
    active) raises ``RuntimeError(error_message)``."""

    def __init__(self, error_message: str):
        if not isinstance(error_message, str):
            raise TypeError(f"disable_saved_tensors_hooks(): error_message must be a str, got "
                            f"{type(error_message).__name__}")
        self.error_message = error_message

    def __enter__(self):
        if graph._SavedHooks.stack:
            raise RuntimeError(self.error_message)
        self._prev = graph._SavedHooks.disabled
        graph._SavedHooks.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        graph._SavedHooks.disabled = self._prev
        return False


class allow_mutation_on_saved_tensors:
    """torch's context that lets tensors saved for backward be written in place (backward then
    sees the values at save time). Not supported by ember's engine: entering raises."""

    def __enter__(self):
        raise NotImplementedError("ember.autograd.graph.allow_mutation_on_saved_tensors is not supported: ember's "
                                  "saved tensors are not cloned on in-place writes (writing one raises the usual "
                                  "'modified by an inplace operation' error in backward)")

    def __exit__(self, *exc):
        return False
