"""Shape arithmetic of a layout: which piece of the global tensor a rank holds.

Kept apart from the collectives so the operator rules can ask "what is my local shape" without
talking to any other rank."""
from __future__ import annotations

from .placement_types import Partial, Placement, Replicate, Shard


def check_mesh(mesh, what):
    from ..device_mesh import DeviceMesh
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{what}: expected device_mesh to be a DeviceMesh, got {type(mesh).__name__}")
    return mesh


def normalize_placements(placements, mesh, ndim, what):
    """``placements`` as a tuple of one Placement per mesh dim, Shard dims made non-negative.
    None means all Replicate (torch's default)."""
    if placements is None:
        return tuple(Replicate() for _ in range(mesh.ndim))
    if isinstance(placements, Placement):
        placements = (placements,)
    placements = tuple(placements)
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"{what}: placements must be Shard/Replicate/Partial instances, got {p!r}")
    if len(placements) != mesh.ndim:
        raise ValueError(f"{what}: `placements` must have the same length as `device_mesh.ndim`! "
                         f"Found placements length: {len(placements)}, and device_mesh.ndim: {mesh.ndim}.")
    out = []
    for p in placements:
        if isinstance(p, Shard):
            d = p.dim + ndim if p.dim < 0 else p.dim
            if not 0 <= d < max(ndim, 0) :
                raise IndexError(f"{what}: Shard({p.dim}) is out of range for a tensor with {ndim} dimensions")
            p = Shard(d)
        out.append(p)
    return tuple(out)


def local_shape_and_offset(global_shape, mesh, placements, coord=None):
    """(local shape, global offset of the local piece) on the rank at ``coord`` (default: this
    rank). Mesh dims shard in order: a later mesh dim cuts the piece an earlier one left."""
    if coord is None:
        coord = mesh.get_coordinate()
    shape = list(global_shape)
    offset = [0] * len(shape)
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            o, n = Shard.chunk_bounds(shape[p.dim], mesh.size(i), coord[i])
            offset[p.dim] += o
            shape[p.dim] = n
    return tuple(shape), tuple(offset)


def local_shape(global_shape, mesh, placements):
    return local_shape_and_offset(global_shape, mesh, placements)[0]


def size_before_mesh_dim(global_shape, mesh, placements, mesh_dim, tensor_dim):
    """Size of ``tensor_dim`` on this rank after sharding by the mesh dims before ``mesh_dim`` only:
    the whole that ``mesh_dim`` cuts into pieces."""
    coord = mesh.get_coordinate()
    size = global_shape[tensor_dim]
    for i in range(mesh_dim):
        p = placements[i]
        if isinstance(p, Shard) and p.dim == tensor_dim:
            size = Shard.chunk_bounds(size, mesh.size(i), coord[i])[1]
    return size


def contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def is_partial(p):
    return isinstance(p, Partial)
