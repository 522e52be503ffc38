"""Moving a local tensor from one layout to another (``DTensor.redistribute``'s engine).

Three passes over the mesh dims, so nested shards of one tensor dim stay consistent:
1. unshard (all-gather), innermost first, every mesh dim cutting a tensor dim beyond the prefix
   of cuts that source and target share for it (a later cut is re-made in pass 3, in order);
2. settle Partial mesh dims: all-reduce to Replicate, or reduce-scatter straight to the target
   Shard when no other mesh dim cuts that tensor dim;
3. cut (local slice, no communication) or mark Partial the mesh dims now Replicate.
"""
from __future__ import annotations

import ember

from . import _collectives as C
from ._utils import size_before_mesh_dim
from .placement_types import Partial, Replicate, Shard


def redistribute_local(local, global_shape, mesh, src, dst, is_backward=False):
    """``local`` (this rank's piece under placements ``src``) re-laid as placements ``dst``.
    ``is_backward``: a gradient going Replicate -> Partial keeps its value on every rank (torch's
    backward rule) instead of zeroing the non-source ranks."""
    src, dst = tuple(src), tuple(dst)
    if src == dst:
        return local
    cur = list(src)
    n = len(cur)
    # pass 1: gathers
    undo = set()
    for d in {p.dim for p in cur + list(dst) if isinstance(p, Shard)}:
        # the mesh dims cutting tensor dim d, outermost first; only a common prefix can stay
        have = [i for i in range(n) if cur[i] == Shard(d)]
        want = [i for i in range(n) if dst[i] == Shard(d)]
        k = 0
        while k < min(len(have), len(want)) and have[k] == want[k]:
            k += 1
        undo.update(have[k:])
    for i in sorted(undo, reverse=True):
        d = cur[i].dim
        full = size_before_mesh_dim(global_shape, mesh, cur, i, d)
        local = C.all_gather_dim(local, mesh, i, d, full)
        cur[i] = Replicate()
    # pass 2: pending reductions
    for i in range(n):
        p = cur[i]
        if not isinstance(p, Partial) or dst[i] == p:
            continue
        t = dst[i]
        if isinstance(t, Shard) and not any(isinstance(cur[j], Shard) and cur[j].dim == t.dim for j in range(n)) \
                and not any(isinstance(dst[j], Shard) and dst[j].dim == t.dim for j in range(i)):
            local = C.reduce_scatter_dim(local, mesh, i, t.dim, p.reduce_op)
            cur[i] = t
        else:
            local = C.all_reduce(local, mesh, i, p.reduce_op)
            cur[i] = Replicate()
    # pass 3: cuts and new Partials
    for i in range(n):
        t = dst[i]
        if cur[i] == t:
            continue
        if isinstance(t, Shard):
            local = C.shard_slice(local, mesh, i, t.dim)
        elif isinstance(t, Partial):
            local = _replicate_to_partial(local, mesh, i, t.reduce_op, is_backward)
        cur[i] = t
    return local


def _replicate_to_partial(local, mesh, mesh_dim, reduce_op, is_backward):
    """A replicated value as addends: sum keeps it on the line's first rank and zeros elsewhere;
    avg/max/min keep it on every rank (their reduction of equal values is the value)."""
    if reduce_op != "sum" or is_backward:
        return local
    if mesh.get_local_rank(mesh_dim) == 0:
        return local
    return ember.zeros_like(local)
