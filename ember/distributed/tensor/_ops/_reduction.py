"""Reductions: reducing a sharded dim leaves a pending reduction (Partial) where the op
decomposes over pieces (sum, amax, amin, mean over even pieces); otherwise that mesh dim is
gathered first. Dims kept by the reduction keep their sharding."""
from __future__ import annotations

from .._dispatch import Plan, register
from ..placement_types import Partial, Replicate, Shard

# op -> the Partial its per-piece results combine with (None: the reduced dim must be whole)
_COMBINE = {"sum": "sum", "mean": "avg", "amax": "max", "amin": "min", "max": "max", "min": "min",
            "all": None, "any": None, "prod": None, "max_dim": None, "min_dim": None, "argmax": None,
            "argmin": None, "var": None, "std": None, "var_mean": None, "std_mean": None, "logsumexp": None,
            "linalg_vector_norm": None}
# ops whose value is linear in the input: a Partial(sum) input stays Partial(sum)
_LINEAR = {"sum"}


def _reduced_dims(call, ndim):
    name = call.name
    if name in ("max", "min") or (len(call.args) == 1 and not call.kwargs and name not in ("amax", "amin")):
        return list(range(ndim)), False
    if name == "linalg_vector_norm":
        dim, keep = call.get(2, "dim"), call.get(3, "keepdim", False)
    else:
        dim, keep = call.get(1, "dim"), call.get(2, "keepdim", False)
    if name in ("max_dim", "min_dim", "argmax", "argmin") and dim is None:
        return list(range(ndim)), False
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0 and name not in ("amax", "amin")):
        return list(range(ndim)), bool(keep)
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return list(range(ndim)), bool(keep)
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % ndim if ndim else 0 for d in dims}), bool(keep)


def reduction_rule(call):
    x = call.args[0]
    mesh = call.mesh
    ndim = x.ndim
    reduced, keep = _reduced_dims(call, ndim)
    combine = _COMBINE.get(call.name)
    want, out = [], []
    for i, p in enumerate(call.placements_of(x)):
        n = mesh.size(i)
        if isinstance(p, Shard) and p.dim in reduced:
            even = x.shape[p.dim] % n == 0
            nested = sum(1 for q in call.placements_of(x) if q == p) > 1
            empty_piece = Shard.chunk_bounds(x.shape[p.dim], n, n - 1)[1] == 0
            if combine == "sum" or (combine in ("max", "min") and not empty_piece) or (
                    combine == "avg" and even and not nested):
                want.append(p)
                out.append(Partial(combine))
                continue
            want.append(Replicate())
            out.append(Replicate())
        elif isinstance(p, Shard):
            want.append(p)
            shift = 0 if keep else sum(1 for d in reduced if d < p.dim)
            out.append(Shard(p.dim - shift))
        elif isinstance(p, Partial) and call.name in _LINEAR and p.reduce_op in ("sum", "avg"):
            want.append(p)
            out.append(p)
        else:
            want.append(Replicate())
            out.append(Replicate())
    args = list(call.args)
    args[0] = call.local(x, want)
    out = tuple(out)
    if call.name in ("var_mean", "std_mean", "max_dim", "min_dim"):
        return Plan(args, call.kwargs, out=[out, out])
    return Plan(args, call.kwargs, out=out)


register(*_COMBINE)(reduction_rule)
