"""View and shape ops: a sharded dim keeps its sharding where it maps to one output dim whose
torch.chunk pieces are the same elements; otherwise that mesh dim is gathered first. Size
arguments are global and are rewritten to this rank's local sizes."""
from __future__ import annotations

import math

import ember

from .._dispatch import Plan, register
from .._utils import local_shape
from ..placement_types import Partial, Replicate, Shard

_R = Replicate()


def _map_plan(call, x, dim_map, out_ndim, extra_ok=lambda i, p: True):
    """Input placements -> (wanted input placements, output placements) under ``dim_map`` (input dim ->
    output dim or None when that dim cannot stay sharded)."""
    want, out = [], []
    for i, p in enumerate(call.placements_of(x)):
        if isinstance(p, Shard):
            od = dim_map.get(p.dim)
            if od is None or not extra_ok(i, p):
                want.append(_R)
                out.append(_R)
            else:
                want.append(p)
                out.append(Shard(od))
        else:
            want.append(p)
            out.append(p)
    return tuple(want), tuple(out)


@register("t", "transpose")
def transpose_rule(call):
    x = call.args[0]
    nd = x.ndim
    if call.name == "t" or nd < 2:
        d0, d1 = (0, 1) if nd == 2 else (0, 0)
    else:
        d0, d1 = call.get(1, "dim0") % nd, call.get(2, "dim1") % nd
    perm = list(range(nd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _permute(call, x, perm)


@register("permute")
def permute_rule(call):
    x = call.args[0]
    dims = [d % x.ndim for d in call.get(1, "dims")]
    return _permute(call, x, dims)


def _permute(call, x, perm):
    dim_map = {src: k for k, src in enumerate(perm)}
    want, out = _map_plan(call, x, dim_map, x.ndim)
    args = list(call.args)
    args[0] = call.local(x, want)
    return Plan(args, call.kwargs, out=out)


@register("unsqueeze")
def unsqueeze_rule(call):
    x = call.args[0]
    d = call.get(1, "dim")
    d = d % (x.ndim + 1)
    dim_map = {k: (k if k < d else k + 1) for k in range(x.ndim)}
    want, out = _map_plan(call, x, dim_map, x.ndim + 1)
    args = list(call.args)
    args[0] = call.local(x, want)
    return Plan(args, call.kwargs, out=out)


@register("squeeze")
def squeeze_rule(call):
    x = call.args[0]
    dim = call.get(1, "dim")
    if dim is None:
        gone = [k for k in range(x.ndim) if x.shape[k] == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        gone = [d % x.ndim for d in dims if x.shape[d % x.ndim] == 1] if x.ndim else []
    dim_map, k2 = {}, 0
    for k in range(x.ndim):
        if k in gone:
            dim_map[k] = None
        else:
            dim_map[k] = k2
            k2 += 1
    want, out = _map_plan(call, x, dim_map, k2)
    args = list(call.args)
    args[0] = call.local(x, want)
    # a squeezed dim may be empty on this rank only if it was sharded; it is gathered above
    return Plan(args, call.kwargs, out=out)


@register("expand")
def expand_rule(call):
    x = call.args[0]
    size = list(call.get(1, "size"))
    off = len(size) - x.ndim
    size = [x.shape[k - off] if (s == -1 and k >= off) else s for k, s in enumerate(size)]
    dim_map = {k: k + off for k in range(x.ndim) if not (x.shape[k] == 1 and size[k + off] != 1)}
    want, out = _map_plan(call, x, dim_map, len(size))
    args = list(call.args)
    args[0] = call.local(x, want)
    args[1] = list(local_shape(size, call.mesh, out))
    return Plan(args, call.kwargs, out=out)


def _resolve(size, numel):
    size = list(size)
    if -1 in size:
        k = size.index(-1)
        rest = math.prod(s for j, s in enumerate(size) if j != k)
        size[k] = numel // rest if rest else 0
    return size


def _groups(ins, outs):
    """Pair up runs of input and output dims with equal products (size-1 dims join a neighbour)."""
    groups, i, j = [], 0, 0
    while i < len(ins) or j < len(outs):
        gi, gj = [], []
        pi = pj = 1
        if i < len(ins):
            gi.append(i)
            pi = ins[i]
            i += 1
        if j < len(outs):
            gj.append(j)
            pj = outs[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(ins):
                gi.append(i)
                pi *= ins[i]
                i += 1
            elif j < len(outs):
                gj.append(j)
                pj *= outs[j]
                j += 1
            else:
                break
        groups.append((gi, gj))
    return groups


def _same_pieces(in_size, in_rest, out_size, out_rest, n):
    for r in range(n):
        a = Shard.chunk_bounds(in_size, n, r)
        b = Shard.chunk_bounds(out_size, n, r)
        if (a[0] * in_rest, a[1] * in_rest) != (b[0] * out_rest, b[1] * out_rest):
            return False
    return True


@register("view", "_unsafe_view", "reshape", "_reshape_alias")
def view_rule(call):
    x = call.args[0]
    ins = list(x.shape)
    outs = _resolve(call.get(1, "size" if call.name != "reshape" else "shape"), math.prod(ins))
    dim_map = {}
    for gi, gj in _groups(ins, outs):
        if not gi or not gj:
            continue
        # the group's first non-1 input dim maps to its first non-1 output dim
        lead = next((k for k in gi if ins[k] != 1), gi[0])
        oj = next((j for j in gj if outs[j] != 1), gj[0])
        dim_map[lead] = (oj, math.prod(ins[k] for k in gi if k > lead), math.prod(outs[k] for k in gj if k > oj))
    want, out = [], []
    for i, p in enumerate(call.placements_of(x)):
        if isinstance(p, Shard):
            m = dim_map.get(p.dim)
            nested = sum(1 for q in call.placements_of(x) if q == p) > 1
            ok = m is not None and (not nested or (ins[p.dim] == outs[m[0]]))
            if ok and not nested:
                ok = _same_pieces(ins[p.dim], m[1], outs[m[0]], m[2], call.mesh.size(i))
            if ok:
                want.append(p)
                out.append(Shard(m[0]))
                continue
            want.append(_R)
            out.append(_R)
        else:
            want.append(p)
            out.append(p)
    local = call.local(x, tuple(want))
    lsize = list(local_shape(outs, call.mesh, tuple(out)))
    return Plan([local, lsize], {}, out=tuple(out), run=lambda t, s: ember.reshape(t, s))


def _dim_kept_rule(call, dim, drop_dim=False):
    """select/slice/split...: the indexed dim must be whole; the others keep their sharding."""
    x = call.args[0]
    d = dim % x.ndim
    dim_map = {k: (k if (not drop_dim or k < d) else k - 1) for k in range(x.ndim) if k != d}
    want, out = _map_plan(call, x, dim_map, x.ndim - drop_dim)
    args = list(call.args)
    args[0] = call.local(x, want)
    return args, out


@register("select")
def select_rule(call):
    args, out = _dim_kept_rule(call, call.get(1, "dim"), drop_dim=True)
    return Plan(args, call.kwargs, out=out)


@register("slice")
def slice_rule(call):
    args, out = _dim_kept_rule(call, call.get(1, "dim", 0))
    return Plan(args, call.kwargs, out=out)


@register("split", "split_with_sizes")
def split_rule(call):
    args, out = _dim_kept_rule(call, call.get(2, "dim", 0))
    return Plan(args, call.kwargs, out=out)


@register("unbind")
def unbind_rule(call):
    args, out = _dim_kept_rule(call, call.get(1, "dim", 0), drop_dim=True)
    return Plan(args, call.kwargs, out=out)


@register("cat", "stack")
def cat_rule(call):
    tensors = list(call.get(0, "tensors"))
    dim = call.get(1, "dim", 0)
    first = next(t for t in tensors if call.is_dt(t))
    nd = first.ndim + (1 if call.name == "stack" else 0)
    d = dim % nd if nd else 0
    out = []
    for i in range(call.mesh.ndim):
        p = first.placements[i]
        same = all(call.placements_of(t)[i] == p for t in tensors)
        if isinstance(p, Shard) and (p.dim != d or call.name == "stack") and same:
            out.append(Shard(p.dim + (1 if call.name == "stack" and p.dim >= d else 0)))
        elif isinstance(p, Partial) and same and p.reduce_op in ("sum", "avg"):
            out.append(p)
        else:
            out.append(_R)
    want = tuple(Shard(p.dim - (1 if call.name == "stack" and p.dim > d else 0)) if isinstance(p, Shard) else p
                 for p in out)
    locs = [call.local(t, want) for t in tensors if not (t.ndim == 1 and t.shape[0] == 0 and not call.is_dt(t))]
    args = list(call.args)
    args[0] = locs
    return Plan(args, call.kwargs, out=tuple(out))
