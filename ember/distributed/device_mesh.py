"""``DeviceMesh`` / ``init_device_mesh``: the ranks of a job laid out as an n-d array, with one
process group per mesh dimension (torch's ``torch.distributed.device_mesh``).

Why: data/tensor/pipeline parallel code addresses ranks by position ("my data-parallel group",
"my coordinate along tp") rather than by rank numbers; the mesh builds, for each dimension, the
groups of ranks that differ only along it, and hands each rank the one it belongs to.

Building a mesh is collective (every rank of the world builds the same mesh, in the same order,
as torch): the groups come from ``new_group``, which every rank must call in the same order.
A dimension whose group would span the whole world uses the default group itself (as torch).
Slicing (``mesh["dp"]``) is local: the sub-mesh reuses the parent's groups.

CPU only ("cpu" device type): ember's process groups run over TCP on the CPU. Not supported:
``backend_override`` (NotImplementedError); ``from_group`` and ``_flatten``/``_unflatten`` do
not exist here (AttributeError).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["DeviceMesh", "init_device_mesh"]


def _c10d():
    from . import distributed_c10d
    return distributed_c10d


def _check_device_type(device_type, what):
    if not isinstance(device_type, str):
        raise TypeError(f"{what}: device_type must be a str such as 'cpu', got {type(device_type).__name__}")
    if device_type != "cpu":
        raise RuntimeError(f"{what}: device_type {device_type!r} is not supported; ember's process groups run on "
                           "the CPU (use 'cpu')")


def _check_names(names, ndim):
    if names is None:
        return None
    names = tuple(names)
    if len(names) != ndim:
        raise RuntimeError("mesh_shape and mesh_dim_names should have same length! "
                           f"Found len(mesh_dim_names): {len(names)} and len(mesh_shape):{ndim}.")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"mesh_dim_names must be strings, got {type(n).__name__}")
    if len(set(names)) != len(names):
        raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names {names}")
    return names


class DeviceMesh:
    """``DeviceMesh(device_type, mesh, *, mesh_dim_names=None)``: ``mesh`` (a nested list, array
    or tensor of global ranks) is the layout. Every rank of the world must construct it."""

    # ember.compile treats a mesh as a constant of the trace, guarded with == (dynamo/variables/builder.py)
    _ember_dynamo_constant = True

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, backend_override=None, _init_backend=True,
                 _groups=None, _strides=None):
        import ember
        _check_device_type(device_type, "DeviceMesh")
        if backend_override is not None:
            raise NotImplementedError("ember.distributed.DeviceMesh: backend_override is not supported")
        arr = np.asarray(mesh.tolist() if isinstance(mesh, ember.Tensor) else mesh)
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"DeviceMesh: mesh must hold integer ranks, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        if arr.ndim == 0:
            raise ValueError("DeviceMesh: mesh must have at least one dimension, got a scalar")
        flat = arr.reshape(-1).tolist()
        if len(set(flat)) != len(flat):
            raise ValueError(f"DeviceMesh: mesh must list each rank at most once, got {arr.tolist()}")
        self.device_type = device_type
        self.mesh = ember.tensor(arr.tolist(), dtype=ember.int32)
        self._arr = arr
        self._mesh_dim_names = _check_names(mesh_dim_names, arr.ndim)
        c = _c10d()
        if not c.is_initialized():
            raise RuntimeError("DeviceMesh: the default process group is not initialized; call "
                               "ember.distributed.init_process_group first (or use init_device_mesh)")
        world = c.get_world_size()
        bad = [r for r in flat if not 0 <= r < world]
        if bad:
            raise ValueError(f"DeviceMesh: ranks {bad} are out of range for world size {world}")
        self._rank = c.get_rank()
        where = np.argwhere(arr == self._rank)
        self._coordinate = tuple(int(i) for i in where[0]) if len(where) else None
        self._strides = _strides if _strides is not None else self._row_major_strides()
        self._groups = _groups if _groups is not None else (self._build_groups(world) if _init_backend else None)

    # ------------------------------------------------------------------ construction
    def _row_major_strides(self):
        shape = self._arr.shape
        return tuple(() if s == 1 else int(math.prod(shape[i + 1:])) for i, s in enumerate(shape))

    def _build_groups(self, world):
        """One group per dimension: the line of the mesh through this rank along it. All ranks
        create every line's group, in the same order."""
        c = _c10d()
        groups = []
        for dim in range(self._arr.ndim):
            lines = np.moveaxis(self._arr, dim, -1).reshape(-1, self._arr.shape[dim])
            mine = None
            for line in lines.tolist():
                if sorted(line) == list(range(world)):
                    pg = c.GroupMember.WORLD
                else:
                    pg = c.new_group(line)
                if self._rank in line:
                    mine = pg
            groups.append(mine)
        return groups

    # ------------------------------------------------------------------ queries
    @property
    def mesh_dim_names(self):
        return self._mesh_dim_names

    @property
    def ndim(self):
        return self._arr.ndim

    @property
    def shape(self):
        return tuple(int(s) for s in self._arr.shape)

    def size(self, mesh_dim=None):
        return int(self._arr.size) if mesh_dim is None else int(self._arr.shape[self._dim(mesh_dim)])

    def get_rank(self):
        return self._rank

    def get_coordinate(self):
        """This rank's index in the mesh, or None when the mesh does not hold it."""
        return self._coordinate

    def _dim(self, mesh_dim):
        if isinstance(mesh_dim, str):
            if self._mesh_dim_names is None:
                raise KeyError("No `mesh_dim_names` found.")
            if mesh_dim not in self._mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist.",
                               f"Available mesh dimensions are: mesh_dim_names={self._mesh_dim_names}")
            return self._mesh_dim_names.index(mesh_dim)
        if not isinstance(mesh_dim, int) or isinstance(mesh_dim, bool):
            raise TypeError(f"mesh_dim must be an int or a mesh dimension name, got {type(mesh_dim).__name__}")
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError("list index out of range")
        return mesh_dim % self.ndim

    def _need_dim(self, mesh_dim, all_groups_hint):
        if mesh_dim is None:
            if self.ndim > 1:
                args = (f"Found the DeviceMesh have {self.ndim} dimensions",
                        "Optional kwarg `mesh_dim` needs to be specified when device_mesh.ndim > 1.")
                if all_groups_hint:
                    args += ("If you want to get the list of all the ProcessGroups in the DeviceMesh,"
                             "please use `get_all_groups()` instead.",)
                raise RuntimeError(*args)
            return 0
        return self._dim(mesh_dim)

    def get_group(self, mesh_dim=None):
        """The process group of this rank's line along ``mesh_dim`` (an int or a name)."""
        dim = self._need_dim(mesh_dim, True)
        if self._groups is None:
            raise RuntimeError("DeviceMesh: this mesh was built with _init_backend=False and has no process groups")
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {self._rank} is not part of the mesh {self._arr.tolist()}")
        return self._groups[dim]

    def get_all_groups(self):
        return [self.get_group(d) for d in range(self.ndim)]

    def get_local_rank(self, mesh_dim=None):
        """This rank's coordinate along ``mesh_dim``."""
        dim = self._need_dim(mesh_dim, False)
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {self._rank} is not part of the mesh {self._arr.tolist()}")
        return self._coordinate[dim]

    # ------------------------------------------------------------------ slicing
    def __getitem__(self, names):
        if self._mesh_dim_names is None:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (names,) if isinstance(names, str) else tuple(names)
        if names == self._mesh_dim_names:
            return self
        if not names or any(n not in self._mesh_dim_names for n in names) or len(set(names)) != len(names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. "
                           f"Valid mesh_dim_names are {list(self._mesh_dim_names)}.")
        dims = [self._mesh_dim_names.index(n) for n in names]
        coord = self._coordinate if self._coordinate is not None else (0,) * self.ndim
        index = tuple(slice(None) if d in dims else coord[d] for d in range(self.ndim))
        kept = [d for d in range(self.ndim) if d in dims]         # axes left by the indexing, in order
        sub = np.transpose(self._arr[index], [kept.index(d) for d in dims])
        groups = None if self._groups is None else [self._groups[d] for d in dims]
        return DeviceMesh(self.device_type, sub, mesh_dim_names=names, _groups=groups,
                          _strides=tuple(self._strides[d] for d in dims))

    # ------------------------------------------------------------------ identity / printing
    def _key(self):
        return (self.device_type, self.shape, tuple(self._arr.reshape(-1).tolist()), self._mesh_dim_names)

    def __eq__(self, other):
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        if self._mesh_dim_names is None:
            dims = repr(self.shape)
        else:
            dims = "(" + ", ".join(f"{n}={s}" for n, s in zip(self._mesh_dim_names, self.shape)) + ")"
        return f"DeviceMesh({dims}, {self.device_type!r}, stride={self._strides!r})"

    __str__ = __repr__


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A mesh of ``mesh_shape`` over ranks ``0 .. prod(mesh_shape)-1`` in row-major order.
    Initializes the default process group from the environment (``env://``) when it is not
    yet, as torch."""
    _check_device_type(device_type, "init_device_mesh")
    if not isinstance(mesh_shape, (tuple, list)):
        raise TypeError(f"init_device_mesh: mesh_shape must be a tuple of ints such as (2,), got "
                        f"{type(mesh_shape).__name__}")
    mesh_shape = tuple(mesh_shape)
    if not mesh_shape or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in mesh_shape):
        raise ValueError(f"init_device_mesh: mesh_shape must be a tuple of positive ints, got {mesh_shape}")
    names = _check_names(mesh_dim_names, len(mesh_shape))
    c = _c10d()
    if not c.is_initialized():
        c.init_process_group("gloo")
    world = c.get_world_size()
    n = math.prod(mesh_shape)
    if n > world:
        raise RuntimeError(f"Mesh should not be bigger than default world size {world}, but found {n} ranks!")
    return DeviceMesh(device_type, np.arange(n).reshape(mesh_shape), mesh_dim_names=names,
                      backend_override=backend_override)
