"""Factories shaped like a DTensor (``zeros_like`` ...), and ops that leave the DTensor world
(``item``, ``equal``): their answers need the whole value."""
from __future__ import annotations

from .._dispatch import Plan, register
from ..placement_types import Partial, Replicate


@register("zeros_like", "empty_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like")
def filled_like_rule(call):
    """The fill value is the whole value on every rank: a Partial layout becomes Replicate."""
    x = call.args[0]
    out = tuple(Replicate() if isinstance(p, Partial) else p for p in x.placements)
    args = list(call.args)
    args[0] = call.local(x, out) if out != x.placements else x._local_tensor
    return Plan(args, call.kwargs, out=out)


@register("_local_scalar_dense", "equal", "is_nonzero", "allclose", "isclose_all")
def whole_value_rule(call):
    args, kwargs = call.all_replicated()
    return Plan(args, kwargs, out=None)
