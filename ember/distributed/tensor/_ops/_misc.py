"""Factories shaped like a DTensor (``zeros_like`` ...), and ops that leave the DTensor world
(``item``, ``equal``): their answers need the whole value."""
from __future__ import annotations

from .._dispatch import Plan, register
from .._redistribute import redistribute_local
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


@register("_random", "_random_")
def random_fill_rule(call):
    """Random fills (``bernoulli_``, ``uniform_``, ... and dropout's masks) draw the *global* value
    on every rank (ranks seeded alike draw the same numbers, and the generator advances as one
    process's would) and keep this rank's piece: the result equals the single-process draw laid
    out like the input (a Partial layout becomes Replicate)."""
    import ember
    x = call.args[0]
    mesh = call.mesh
    out = tuple(Replicate() if isinstance(p, Partial) else p for p in x.placements)
    rep = tuple(Replicate() for _ in range(mesh.ndim))
    args = list(call.args)
    args[0] = ember.empty_strided(x._spec.shape, x._spec.stride, dtype=x.dtype, device=x.device)
    for i, a in enumerate(args[1:], 1):
        if call.is_dt(a):
            args[i] = call.replicated(a)
    if call.name.endswith("_"):
        call.func(*args, **call.kwargs)
        x._local_tensor.copy_(redistribute_local(args[0], x._spec.shape, mesh, rep, x.placements))
        return Plan(result=x)

    def run(*a, **kw):
        return redistribute_local(call.func(*a, **kw), x._spec.shape, mesh, rep, out)
    return Plan(args, call.kwargs, out=out, run=run)
