"""The collectives a redistribution needs, on plain local tensors along one mesh dimension.

Each works on contiguous copies and returns a new tensor (the inputs are never written), and
each tells the active ``CommDebugMode`` counters what ran. Uneven torch.chunk pieces are padded
to the full chunk length for the fixed-size collectives and trimmed afterwards."""
from __future__ import annotations

import ember

from .placement_types import Shard

# Active comm counters (ember.distributed.tensor.debug.CommDebugMode pushes itself here).
COUNTERS = []


class _CollectiveName:
    """A key of CommDebugMode's counts, printed like torch's functional collective ops."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"c10d_functional.{self.name}"

    __str__ = __repr__


ALL_REDUCE = _CollectiveName("all_reduce")
ALL_GATHER = _CollectiveName("all_gather_into_tensor")
REDUCE_SCATTER = _CollectiveName("reduce_scatter_tensor")
BROADCAST = _CollectiveName("broadcast")


def _record(key):
    for c in COUNTERS:
        c._count(key)


def _traced(t):
    """Whether ``t`` is being traced (a fake tensor, or a tracing mode is active: dynamo's fake
    propagation, aot's joint trace): the collectives are then the ``_c10d_functional`` ops, which
    the graph records as nodes (their kernels run through the transport when the graph runs)."""
    from ember._state import STATE
    from ember.fx.fake_tensor import is_fake
    from ember.ops.registry import _DEFERRING_MODES
    return is_fake(t) or any(m.__class__ in _DEFERRING_MODES for m in STATE.modes)


def _ops():
    from .. import _c10d_functional_ops
    return _c10d_functional_ops


def _name(mesh, mesh_dim):
    return _ops().group_name_of(mesh.get_group(mesh_dim))


def _dist():
    import ember.distributed as dist
    return dist


def _pad_dim(t, dim, length):
    have = t.shape[dim]
    if have == length:
        return t
    shape = list(t.shape)
    shape[dim] = length - have
    return ember.cat([t, ember.zeros(shape, dtype=t.dtype, device=t.device)], dim)


def all_gather_dim(local, mesh, mesh_dim, tensor_dim, full_size):
    """The whole ``full_size`` elements of ``tensor_dim`` from every rank's torch.chunk piece."""
    n = mesh.size(mesh_dim)
    if n == 1:
        return local
    chunk = -(-full_size // n) if full_size else 0
    moved = ember.movedim(local, tensor_dim, 0)
    padded = _pad_dim(moved, 0, chunk).contiguous()
    if _traced(local):
        out = _ops().all_gather_into_tensor(padded, n, _name(mesh, mesh_dim))
    else:
        out = ember.empty((n * chunk,) + tuple(padded.shape[1:]), dtype=local.dtype, device=local.device)
        _record(ALL_GATHER)
        _dist().all_gather_into_tensor(out, padded, group=mesh.get_group(mesh_dim))
    parts = []
    for r in range(n):
        _, length = Shard.chunk_bounds(full_size, n, r)
        parts.append(out[r * chunk: r * chunk + length])
    return ember.movedim(ember.cat(parts, 0), 0, tensor_dim).contiguous()


def _reduce_op(op):
    R = _dist().ReduceOp
    return {"sum": R.SUM, "avg": R.SUM, "max": R.MAX, "min": R.MIN}[op]


def all_reduce(local, mesh, mesh_dim, reduce_op):
    n = mesh.size(mesh_dim)
    if n > 1 and _traced(local):
        out = _ops().all_reduce(local.contiguous(), "sum" if reduce_op == "avg" else reduce_op,
                                _name(mesh, mesh_dim))
        return out / n if reduce_op == "avg" else out
    out = local.clone().contiguous()
    if n == 1:
        return out
    _record(ALL_REDUCE)
    _dist().all_reduce(out, op=_reduce_op(reduce_op), group=mesh.get_group(mesh_dim))
    if reduce_op == "avg":
        out = out / n
    return out


def reduce_scatter_dim(local, mesh, mesh_dim, tensor_dim, reduce_op):
    """Reduce the ranks' ``local`` values and keep this rank's torch.chunk piece of ``tensor_dim``."""
    n = mesh.size(mesh_dim)
    if n == 1 or reduce_op not in ("sum", "avg"):
        return shard_slice(all_reduce(local, mesh, mesh_dim, reduce_op), mesh, mesh_dim, tensor_dim)
    full = local.shape[tensor_dim]
    chunk = -(-full // n) if full else 0
    moved = _pad_dim(ember.movedim(local, tensor_dim, 0), 0, n * chunk).contiguous()
    if _traced(local):
        out = _ops().reduce_scatter_tensor(moved, "sum", n, _name(mesh, mesh_dim))
    else:
        out = ember.empty((chunk,) + tuple(moved.shape[1:]), dtype=local.dtype, device=local.device)
        _record(REDUCE_SCATTER)
        _dist().reduce_scatter_tensor(out, moved, op=_reduce_op(reduce_op), group=mesh.get_group(mesh_dim))
    if reduce_op == "avg":
        out = out / n
    _, length = Shard.chunk_bounds(full, n, mesh.get_local_rank(mesh_dim))
    return ember.movedim(out[:length], 0, tensor_dim).contiguous()


def shard_slice(full, mesh, mesh_dim, tensor_dim):
    """This rank's torch.chunk piece of ``tensor_dim`` (no communication)."""
    n = mesh.size(mesh_dim)
    if n == 1:
        return full
    off, length = Shard.chunk_bounds(full.shape[tensor_dim], n, mesh.get_local_rank(mesh_dim))
    return ember.narrow(full, tensor_dim, off, length).clone().contiguous()


def broadcast_from(t, mesh, src_coord):
    """``t`` as held by the rank at mesh coordinate ``src_coord``, on every rank of the mesh: one
    broadcast per mesh dim, each from the line member at the source's index along that dim."""
    if _traced(t):
        raise NotImplementedError("ember.distributed.tensor: a broadcast (distribute_tensor, from_local with "
                                  "run_check=True, random DTensor factories) inside traced code is not supported")
    out = t.clone().contiguous()
    for d in range(mesh.ndim):
        if mesh.size(d) == 1:
            continue
        _record(BROADCAST)
        _dist().broadcast(out, group=mesh.get_group(d), group_src=src_coord[d])
    return out
