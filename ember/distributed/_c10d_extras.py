"""The less common parts of PyTorch's ``torch.distributed`` API, built on the collectives of
``distributed_c10d``: coalesced collectives, object point-to-point, subgroup helpers, debug
levels, the ``*Options`` structs, backend queries and ``breakpoint``.

Coalesced collectives pack their tensors into one flat buffer and run a single collective on
it (one round trip instead of one per tensor), which is what PyTorch's backends do too."""
from __future__ import annotations

import enum
import os
from datetime import timedelta

import numpy as np

from . import distributed_c10d as c10d
from .distributed_c10d import Backend, GroupMember, ReduceOp, _pg

__all__ = [
    "AllToAllOptions", "AllreduceCoalescedOptions", "AllreduceOptions", "BackendConfig", "BarrierOptions",
    "BroadcastOptions", "BuiltinCommHookType", "DebugLevel", "GatherOptions", "ReduceOptions",
    "ReduceScatterOptions", "ScatterOptions", "all_gather_coalesced", "all_gather_single", "all_reduce_coalesced",
    "breakpoint", "get_backend_config", "get_debug_level", "get_default_backend_for_device", "get_node_local_rank",
    "get_pg_count", "is_backend_available", "is_xccl_available", "new_subgroups", "new_subgroups_by_enumeration",
    "recv_object_list", "reduce_scatter_single", "send_object_list", "set_debug_level", "set_debug_level_from_env",
    "split_group", "supports_complex",
]


# ---------------------------------------------------------------------------- argument checks (torch's texts)
def _check_tensor_list(param, name):
    from ..tensor import Tensor
    if not isinstance(param, list):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]\n"
                        f"             but got {type(param)} instead.")
    if not all(isinstance(p, Tensor) for p in param):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor]\n"
                        f"             but got {type(param)} with elements of type {[type(p) for p in param]}.")


def _same_dtype(tensors):
    """PyTorch's rule: one dtype for all (a complex dtype counts as its real element type)."""
    from .. import float32, float64, complex64
    last = None
    for t in tensors:
        dt = t.dtype
        if dt.is_complex:
            dt = float32 if dt == complex64 else float64
        if last is None:
            last = dt
        elif last != dt:
            raise ValueError(f"Invalid usage of tensors with different dtypesFound {last} and  {t.dtype}")


def _real(arr):
    """Complex numpy arrays as their (..., 2) real view, so they pack with real ones."""
    return arr.view(arr.real.dtype).reshape(arr.shape + (2,)) if arr.dtype.kind == "c" else arr


def _flat_of(tensors):
    return np.concatenate([np.ascontiguousarray(_real(t._data)).reshape(-1) for t in tensors]) if tensors \
        else np.empty((0,), np.float32)


def _unpack_into(flat, tensors):
    """Write consecutive pieces of ``flat`` into ``tensors`` (complex ones from real pairs)."""
    off = 0
    for t in tensors:
        a = t._data
        n = a.size * (2 if a.dtype.kind == "c" else 1)
        piece = flat[off:off + n]
        if a.dtype.kind == "c":
            piece = np.ascontiguousarray(piece).view(a.dtype)
        c10d._write(t, piece.reshape(a.shape))
        off += n


def _wrap(tensor_of_flat):
    from .. import from_numpy
    return from_numpy(np.ascontiguousarray(tensor_of_flat))


# ---------------------------------------------------------------------------- coalesced collectives
def supports_complex(reduceOp):
    """Whether ``reduceOp`` is defined on complex tensors (SUM, AVG, PREMUL_SUM are)."""
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND, ReduceOp.BOR,
                            ReduceOp.BXOR)


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """``all_reduce`` of every tensor of ``tensors`` (in place), as one message per rank."""
    from ..tensor import Tensor
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    _check_tensor_list(tensors, "tensor")
    _same_dtype(tensors)
    pg = _pg(group, "all_reduce_coalesced")
    if pg is None:
        return None
    if any(t.dtype.is_complex for t in tensors) and not supports_complex(op):
        raise ValueError(f"all_reduce does not support RedOpType.{ReduceOp.RedOpType(int(op)).name} on complex "
                         f"tensors")
    for t in tensors:
        c10d._arr(t, "all_reduce_coalesced", "tensors[i]")
    flat = _wrap(_flat_of(tensors))
    work = c10d.all_reduce(flat, op=op, group=group, async_op=async_op)

    def finish():
        _unpack_into(flat._data, tensors)
        return list(tensors)
    if async_op:
        return _ThenFuture(work, finish)
    finish()
    return None


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    """``output_tensor_lists[r][i]`` = rank r's ``input_tensor_list[i]``, as one all-gather."""
    pg = _pg(group, "all_gather_coalesced")
    if pg is None:
        return None
    _check_tensor_list(input_tensor_list, "input_tensor_list")
    _same_dtype(input_tensor_list)
    if not isinstance(output_tensor_lists, list):
        raise TypeError("Invalid function argument: output_tensor_lists should be a list")
    for lst in output_tensor_lists:
        _check_tensor_list(lst, "output_tensor_lists")
        _same_dtype(lst)
    n = pg.size()
    if len(output_tensor_lists) != n:
        raise ValueError(f"all_gather_coalesced: output_tensor_lists must hold one list per rank of the group "
                         f"({n}), got {len(output_tensor_lists)}")
    for r, lst in enumerate(output_tensor_lists):
        if [tuple(t.shape) for t in lst] != [tuple(t.shape) for t in input_tensor_list]:
            raise ValueError(f"all_gather_coalesced: output_tensor_lists[{r}] has shapes "
                             f"{[list(t.shape) for t in lst]}, expected the input_tensor_list's "
                             f"{[list(t.shape) for t in input_tensor_list]}")
    flat = _flat_of(input_tensor_list)
    inp = _wrap(flat)
    out = _wrap(np.empty((n * flat.size,), flat.dtype))
    work = c10d.all_gather_into_tensor(out, inp, group=group, async_op=async_op)

    def finish():
        parts = out._data.reshape(n, -1)
        for r in range(n):
            _unpack_into(parts[r], output_tensor_lists[r])
        return output_tensor_lists
    if async_op:
        return _ThenFuture(work, finish)
    finish()
    return None


class _ThenFuture:
    """What the coalesced collectives return with ``async_op=True`` (PyTorch returns the
    work's future): ``wait()`` finishes the operation, unpacks and returns the tensors."""

    def __init__(self, work, finish):
        self._work, self._finish, self._value, self._done = work, finish, None, False

    def wait(self):
        if not self._done:
            self._work.wait()
            self._value = self._finish()
            self._done = True
        return self._value

    value = wait

    def done(self):
        return self._done or self._work.is_completed()


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    """``all_gather_into_tensor`` under the name PyTorch 2.13 also gives it."""
    return c10d.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


def reduce_scatter_single(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``reduce_scatter_tensor`` under the name PyTorch 2.13 also gives it."""
    return c10d.reduce_scatter_tensor(output, input, op=op, group=group, async_op=async_op)


# ---------------------------------------------------------------------------- objects, point to point
def _canonical_peer(pg, global_rank, group_rank, kind):
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError("Can't specify both group_rank and global_rank")
        g = int(group_rank)
        if not 0 <= g < pg.size():
            raise ValueError(f"Group rank {g} is not part of group {pg.ranks}")
    else:
        if global_rank is None:
            raise ValueError("Must specify global_rank or group_rank")
        if global_rank not in pg.ranks:
            raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
        g = pg.ranks.index(global_rank)
    if g == pg.rank():
        raise ValueError(f"Invalid {kind} rank: {kind} rank should not be the same as the rank of the current "
                         f"process.")
    return g


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None, use_batch=False):
    """Pickle each object of ``object_list`` and send them to ``dst`` (sizes first, then the
    bytes), to be received by ``recv_object_list``. Unpickling runs code: trusted ranks only."""
    pg = _pg(group, "send_object_list")
    if pg is None:
        return None
    g = _canonical_peer(pg, dst, group_dst, "destination")
    from .. import from_numpy
    blobs = [c10d._dumps(o) for o in object_list]
    sizes = from_numpy(np.array([b.size for b in blobs], dtype=np.int64))
    c10d.send(sizes, group=group, group_dst=g)
    c10d.send(from_numpy(np.concatenate(blobs) if blobs else np.empty((0,), np.uint8)), group=group, group_dst=g)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False):
    """Fill ``object_list`` (which must have as many slots as were sent) with the objects
    ``src`` sent; returns the sender's global rank."""
    pg = _pg(group, "recv_object_list")
    if pg is None:
        return -1
    g = _canonical_peer(pg, src, group_src, "source")
    from .. import empty, int64, uint8
    sizes = empty(len(object_list), dtype=int64)
    sender = c10d.recv(sizes, group=group, group_src=g)
    blob = empty(int(sizes._data.sum()), dtype=uint8)
    c10d.recv(blob, group=group, group_src=g)
    off = 0
    for i, n in enumerate(sizes._data.tolist()):
        object_list[i] = c10d._loads(blob._data[off:off + n])
        off += n
    return sender


# ---------------------------------------------------------------------------- subgroups
def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Split ``group``'s ranks into consecutive blocks of ``group_size``: (this rank's
    subgroup, every subgroup). Every rank must call it."""
    if group_size is None:
        raise ValueError("Default group size only takes effect when CUDA is available.If your subgroup using a "
                         "backend that does not depend on CUDA,please pass in 'group_size' correctly.")
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    world_size = c10d.get_world_size(group=group)
    if world_size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({world_size})")
    if world_size % group_size != 0:
        raise ValueError(f"The world size ({world_size}) must be divisible by 'group_size={group_size}'")
    ranks = c10d.get_process_group_ranks(group if group is not None else GroupMember.WORLD)
    return new_subgroups_by_enumeration([ranks[i:i + group_size] for i in range(0, len(ranks), group_size)],
                                        timeout=timeout, backend=backend, pg_options=pg_options,
                                        group_desc=group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    """One group per list of global ranks: (this rank's subgroup or None, every subgroup).
    The lists must not overlap."""
    if ranks_per_subgroup_list is None or len(ranks_per_subgroup_list) == 0:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    subgroups, mine, owner = [], None, {}
    me = c10d.get_rank()
    for ranks in ranks_per_subgroup_list:
        sub = c10d.new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options,
                             group_desc=group_desc)
        subgroups.append(sub)
        for r in ranks:
            if r in owner:
                raise ValueError(f"Rank {r} has appeared in both subgroup {owner[r]} and {ranks}")
            owner[r] = ranks
            if r == me:
                mine = sub
    return mine, subgroups


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None, backend=None):
    """Split ``parent_pg`` into disjoint groups; ``split_ranks`` lists each split's ranks as
    *group ranks of the parent*. Every rank of the parent (and only those) calls it with the
    same lists and gets its own split's group (None when it is in none). PyTorch only splits
    device (NCCL) groups and raises on CPU; ember's groups are all CPU, so ember splits them.

    The new groups are named after the parent and its split count, not numbered from the
    world's ``new_group`` counter, so ranks outside the parent (which do not call this) stay in
    step for later ``new_group`` calls."""
    if split_ranks is None or len(split_ranks) == 0:
        raise ValueError("split_ranks cannot be None or empty")
    w = c10d._world()
    parent = parent_pg if parent_pg is not None else GroupMember.WORLD
    if not isinstance(parent, c10d.ProcessGroup) or (parent not in w.groups and parent is not GroupMember.WORLD):
        raise ValueError(f"Group {parent_pg} is not registered")
    if w.rank not in parent.ranks:
        raise ValueError(f"Global rank {w.rank} is not part of the parent group {parent}")
    seen = set()
    for split in split_ranks:
        for g in split:
            if not 0 <= g < parent.size():
                raise ValueError(f"split_group: group rank {g} is out of range for the parent group of size "
                                 f"{parent.size()}")
            if g in seen:
                raise ValueError(f"split_group: group rank {g} appears in more than one split of {split_ranks}")
            seen.add(g)
    if backend is not None:
        c10d._check_backend(backend)
    n = getattr(parent, "_splits", 0)
    parent._splits = n + 1
    secs = c10d._secs(timeout) if timeout is not None else parent.timeout
    for i, split in enumerate(split_ranks):
        ranks = sorted(parent.ranks[g] for g in split)
        if w.rank in ranks:
            pg = c10d.ProcessGroup(w, ranks, f"{parent.gid}s{n}.{i}", secs, w.backend)
            w.groups.append(pg)
            w.nsplit = getattr(w, "nsplit", 0) + 1
            return pg
    return None


# ---------------------------------------------------------------------------- queries
def get_pg_count():
    """How many process groups this process made (the default one included)."""
    return c10d._pg_count()


def get_node_local_rank(fallback_rank=None):
    """``LOCAL_RANK`` from the environment (set by torchrun), else ``fallback_rank``."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
                       "want the code to run locally instead.")


def is_xccl_available():
    return False


_AVAILABLE = {"gloo": True, "nccl": False, "mpi": False, "ucc": False, "xccl": False}


def is_backend_available(backend):
    """Whether ember can run ``backend`` (only gloo; ``"cpu:gloo,cuda:nccl"`` needs all)."""
    b = str(backend).lower()
    if ":" in b:
        return all(_AVAILABLE.get(part.split(":", 1)[1].strip(), False) for part in b.split(","))
    return _AVAILABLE.get(b, False)


_DEVICE_BACKEND = {"cpu": "gloo", "cuda": "nccl", "xpu": "xccl", "mtia": "mtia"}


def get_default_backend_for_device(device):
    """The backend PyTorch would pick for ``device``'s type (``cpu`` -> gloo)."""
    from .. import device as _device
    dtype = device.type if isinstance(device, _device) else _device(device).type
    b = _DEVICE_BACKEND.get(dtype)
    if b is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return b


class BackendConfig:
    """Device type -> backend name for a group (ember: gloo for both CPU and CUDA, as
    PyTorch reports for a gloo group)."""

    def __init__(self, backend):
        b = str(backend).lower()
        if ":" in b:
            self.device_backend_map = {k.strip(): v.strip() for k, v in (p.split(":", 1) for p in b.split(","))}
        elif b == "gloo":
            self.device_backend_map = {"cpu": "gloo", "cuda": "gloo"}
        else:
            self.device_backend_map = {d: b for d, v in _DEVICE_BACKEND.items() if v == b} or {"cpu": b}

    def get_device_backend_map(self):
        return dict(self.device_backend_map)

    def __repr__(self):
        return ",".join(f"{k}:{v}" for k, v in self.device_backend_map.items())

    __str__ = __repr__


def get_backend_config(group=None):
    """The group's backend config string (``"cpu:gloo,cuda:gloo"``)."""
    c10d._world()
    if group is not None and c10d._group(group) is None:
        raise ValueError("Invalid process group specified")
    return str(BackendConfig(c10d.get_backend(group)))


# ---------------------------------------------------------------------------- debug level
class DebugLevel(enum.IntEnum):
    """``TORCH_DISTRIBUTED_DEBUG``: OFF, INFO, DETAIL."""
    OFF = 0
    INFO = 1
    DETAIL = 2

    def __repr__(self):
        return f"<DebugLevel.{self.name}: {self.value}>"

    def __str__(self):
        return f"DebugLevel.{self.name}"


_debug_level = [None]


def _level_from_env():
    v = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper()
    if v not in DebugLevel.__members__:
        raise ValueError("The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL.")
    return DebugLevel[v]


def get_debug_level():
    if _debug_level[0] is None:
        _debug_level[0] = _level_from_env()
    return _debug_level[0]


def set_debug_level(level):
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level(): incompatible function arguments. The following argument types are "
                        f"supported:\n    1. (arg0: torch._C._distributed_c10d.DebugLevel) -> None\n\n"
                        f"Invoked with: {level!r}")
    _debug_level[0] = level


def set_debug_level_from_env():
    _debug_level[0] = _level_from_env()


# ---------------------------------------------------------------------------- option structs
_UNSET_TIMEOUT = timedelta(milliseconds=-1)     # PyTorch's "use the group's timeout"


def _options(name, doc, **fields):
    """A plain attribute struct with PyTorch's field names and defaults (what custom backends
    and ProcessGroup methods receive)."""
    def __init__(self):
        for k, v in fields.items():
            setattr(self, k, v)
        self.timeout = _UNSET_TIMEOUT
        self.asyncOp = True

    def __repr__(self):
        return f"{name}({', '.join(f'{k}={getattr(self, k)!r}' for k in (*fields, 'timeout', 'asyncOp'))})"
    return type(name, (), {"__init__": __init__, "__repr__": __repr__, "__doc__": doc,
                           "__module__": __name__})


AllreduceOptions = _options("AllreduceOptions", "Options of an all-reduce.", reduceOp=ReduceOp.SUM)
AllreduceCoalescedOptions = _options("AllreduceCoalescedOptions", "Options of a coalesced all-reduce.",
                                     reduceOp=ReduceOp.SUM)
ReduceOptions = _options("ReduceOptions", "Options of a reduce.", reduceOp=ReduceOp.SUM, rootRank=0, rootTensor=0)
BroadcastOptions = _options("BroadcastOptions", "Options of a broadcast.", rootRank=0, rootTensor=0)
GatherOptions = _options("GatherOptions", "Options of a gather.", rootRank=0)
ScatterOptions = _options("ScatterOptions", "Options of a scatter.", rootRank=0)
AllgatherOptions = _options("AllgatherOptions", "Options of an all-gather.")
ReduceScatterOptions = _options("ReduceScatterOptions", "Options of a reduce-scatter.", reduceOp=ReduceOp.SUM)
AllToAllOptions = _options("AllToAllOptions", "Options of an all-to-all.")
BarrierOptions = _options("BarrierOptions", "Options of a barrier.", device_ids=[], device=None)


class BuiltinCommHookType(enum.Enum):
    """DDP's built-in communication hooks (``_register_builtin_comm_hook``)."""
    ALLREDUCE = 0
    FP16_COMPRESS = 1


# ---------------------------------------------------------------------------- breakpoint
_breakpoint_cache = {}


def breakpoint(rank=0, skip=0, timeout_s=3600):  # noqa: A001 - PyTorch's name
    """Stop in pdb on rank ``rank`` only; the other ranks wait in a barrier until it
    continues. ``skip``: ignore the first ``skip`` calls from the same place. While it waits,
    every group's timeout is ``timeout_s`` (so the others do not time out meanwhile)."""
    import sys
    import traceback
    if skip > 0:
        key = hash("".join(traceback.format_stack(sys._getframe(1), limit=1)))
        _breakpoint_cache[key] = _breakpoint_cache.get(key, 0) + 1
        if _breakpoint_cache[key] <= skip:
            return
    w = c10d._world()
    if timeout_s is not None:
        for g in w.groups:
            g.timeout = float(timeout_s)
    if w.rank == rank:
        pdb = _distributed_pdb()
        pdb.message("\n!!! ATTENTION !!!\n\n"
                    f"Type 'up' to get to the frame that called dist.breakpoint(rank={rank})\n")
        pdb.set_trace(sys._getframe(1))
    c10d.barrier()


def _distributed_pdb():
    """A pdb reading the terminal, not the worker's stdin (which a launcher may have closed)."""
    import pdb

    class _DistributedPdb(pdb.Pdb):
        def interaction(self, *args, **kwargs):
            import sys
            saved = sys.stdin
            try:
                with open("/dev/stdin") as tty:
                    sys.stdin = tty
                    pdb.Pdb.interaction(self, *args, **kwargs)
            finally:
                sys.stdin = saved
    return _DistributedPdb()

