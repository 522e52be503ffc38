"""Sharding rules, one module per family of ops; importing the package registers them."""
from __future__ import annotations

from ember.ops.registry import OPS

from .._dispatch import replicate_fallback
from . import _pointwise, _reduction, _matrix, _view, _nn, _misc  # noqa: F401 - registration


def default_rule(call):
    """An op without its own rule: pointwise ops by their tag, else the Replicate fallback."""
    op = OPS.get(call.name)
    if op is not None and "pointwise" in op.tags:
        return _pointwise.pointwise_rule
    return replicate_fallback
