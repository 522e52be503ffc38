"""Matrix products: per mesh dim, (Shard rows x Replicate) -> Shard rows, (Replicate x Shard
cols) -> Shard cols, (Shard k x Shard k) -> Partial(sum), a Partial(sum) factor times a
Replicate one -> Partial(sum); anything else is made to fit the nearest of these."""
from __future__ import annotations

from .._dispatch import Plan, register
from ..placement_types import Partial, Replicate, Shard
from ._pointwise import operand_placements

_R = Replicate()
_P = Partial("sum")


def _pair(pa, pb, b0):
    """(placement of a, of b, of the product) on one mesh dim for a[..., m, k] @ b[..., k, n];
    ``b0`` is the number of leading batch dims."""
    m, k_a, k_b, n = b0, b0 + 1, b0, b0 + 1
    if b0 and (pa == Shard(0) or pb == Shard(0)):
        return Shard(0), Shard(0), Shard(0)
    if pa == Shard(m):
        return pa, _R, Shard(m)
    if pa == _P:
        return _P, _R, _P
    if pb == _P:
        return _R, _P, _P
    if pb == Shard(n):
        return _R, pb, Shard(n)
    if pa == Shard(k_a) or pb == Shard(k_b):
        return Shard(k_a), Shard(k_b), _P
    return _R, _R, _R


def _mm_plan(call, a, b, b0):
    want_a, want_b, out = [], [], []
    for i in range(call.mesh.ndim):
        pa, pb, po = _pair(call.placements_of(a)[i], call.placements_of(b)[i], b0)
        want_a.append(pa)
        want_b.append(pb)
        out.append(po)
    return tuple(want_a), tuple(want_b), tuple(out)


@register("mm", "bmm")
def mm_rule(call):
    a, b = call.args[0], call.args[1]
    wa, wb, out = _mm_plan(call, a, b, 1 if call.name == "bmm" else 0)
    args = list(call.args)
    args[0], args[1] = call.local(a, wa), call.local(b, wb)
    return Plan(args, call.kwargs, out=out)


@register("addmm", "baddbmm")
def addmm_rule(call):
    bias, a, b = call.args[0], call.args[1], call.args[2]
    b0 = 1 if call.name == "baddbmm" else 0
    wa, wb, out = _mm_plan(call, a, b, b0)
    out_shape = tuple(a.shape[:-1]) + (b.shape[-1],)
    args = list(call.args)
    args[1], args[2] = call.local(a, wa), call.local(b, wb)
    want_bias = operand_placements(bias, out, len(out_shape), out_shape) if bias.ndim else tuple(
        p if isinstance(p, Partial) else _R for p in out)
    args[0] = call.local(bias, want_bias)
    return Plan(args, call.kwargs, out=out)
