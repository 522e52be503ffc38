"""Process groups and collectives (PyTorch's ``torch.distributed.distributed_c10d``).

See the package docstring (``ember/distributed/__init__.py``) for the transport and its cost.
"""
from __future__ import annotations

import contextlib
import enum
import os
import pickle
import queue
import threading
from datetime import timedelta
from urllib.parse import urlparse, parse_qs

import numpy as np

from ._pg_methods import ProcessGroupOps
from ._transport import Mesh
from .store import FileStore, PrefixStore, TCPStore

default_pg_timeout = timedelta(minutes=30)

_NOT_INIT = ("Default process group has not been initialized, please make sure to call init_process_group.")


# ---------------------------------------------------------------------------- backends and ops
class Backend(str):
    """Backend names: ``Backend.GLOO`` (ember's only one: CPU tensors over TCP)."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name!r}")
        value = name.lower()
        if "," in value:      # "cpu:gloo,cuda:nccl": ember keeps the CPU one
            parts = dict(p.strip().split(":", 1) for p in value.split(",") if ":" in p)
            value = parts.get("cpu", value)
        if value.startswith("cpu:"):
            value = value[4:]
        return super().__new__(cls, value)


_GPU_BACKENDS = {"nccl": "NCCL", "xccl": "XCCL (Intel GPUs)"}


def _check_backend(backend):
    b = Backend("gloo" if backend is None else str(backend))
    if b in _GPU_BACKENDS:
        raise RuntimeError(f"ember.distributed: backend {b!r} needs GPUs and {_GPU_BACKENDS[b]}; ember's process groups "
                           f"run CPU tensors only -- use backend='gloo' (move tensors to CPU)")
    if b in ("mpi", "ucc"):
        raise RuntimeError(f"ember.distributed: backend {b!r} is not available in ember; use backend='gloo'")
    if b != "gloo":
        raise ValueError(f"ember.distributed: unknown backend {str(backend)!r} (expected 'gloo')")
    return b


class ReduceOp:
    """``ReduceOp.SUM / PRODUCT / MIN / MAX / AVG / BAND / BOR / BXOR`` (the last three for
    integer and bool tensors)."""

    class RedOpType(enum.IntEnum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8
        UNUSED = 9

        def __repr__(self):
            return f"<RedOpType.{self.name}: {self.value}>"

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM
    UNUSED = RedOpType.UNUSED


class reduce_op:  # noqa: N801 - PyTorch's deprecated alias
    SUM, PRODUCT, MIN, MAX = ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX


_BIT_OPS = {ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or, ReduceOp.BXOR: np.bitwise_xor}
_ARITH = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
          ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum}


def _reducer(op, dtype, what):
    """(binary in-place ufunc, finishing function) for ``op`` on tensors of ember dtype ``dtype``."""
    try:
        op = ReduceOp.RedOpType(int(op))
    except (TypeError, ValueError):
        raise ValueError(f"{what}: op must be a ReduceOp, got {op!r}") from None
    if op in _BIT_OPS:
        if dtype.is_floating_point or dtype.is_complex:
            raise RuntimeError(f"{what}: Cannot use ReduceOp.{op.name} with non-integral dtype {dtype}")
        return _BIT_OPS[op], None
    if op in (ReduceOp.PREMUL_SUM, ReduceOp.UNUSED):
        raise NotImplementedError(f"{what}: ReduceOp.{op.name} is not implemented in ember.distributed")
    if dtype.is_complex and op in (ReduceOp.MIN, ReduceOp.MAX):
        raise RuntimeError(f"{what}: ReduceOp.{op.name} is not supported for complex tensors")
    return _ARITH[op], (op if op == ReduceOp.AVG else None)


def _avg(acc, n):
    if acc.dtype.kind in "iu":
        return (np.sign(acc) * (np.abs(acc) // n)).astype(acc.dtype)    # C's truncating division
    if acc.dtype.kind == "b":
        return acc
    return (acc / n).astype(acc.dtype)


# ---------------------------------------------------------------------------- work objects
class _Future:
    """What ``Work.get_future()`` returns: ``wait()`` / ``value()`` / ``done()`` / ``then(fn)``."""

    def __init__(self, work):
        self._work = work

    def wait(self):
        self._work.wait()
        return self._work.result()

    def value(self):
        return self.wait()

    def done(self):
        return self._work.is_completed()

    def then(self, callback):
        fut = _DoneFuture()
        try:
            fut._value = callback(self)
        except BaseException as e:  # noqa: BLE001 - delivered by the returned future
            fut._exc = e
        return fut


class _DoneFuture:
    def __init__(self):
        self._value, self._exc = None, None

    def wait(self):
        if self._exc is not None:
            raise self._exc
        return self._value

    value = wait

    def done(self):
        return True


class Work:
    """The handle ``async_op=True`` returns: ``wait()`` blocks until the operation finished
    (re-raising its error), ``is_completed()`` polls."""

    def __init__(self, result=None):
        self._event = threading.Event()
        self._exc = None
        self._result = result

    def _finish(self, exc=None):
        self._exc = exc
        self._event.set()

    def is_completed(self):
        return self._event.is_set()

    def is_success(self):
        if not self._event.is_set():
            raise RuntimeError("Work.is_success: the operation has not completed yet")
        return self._exc is None

    def exception(self):
        return self._exc

    def wait(self, timeout=None):
        t = None if timeout is None else (timeout.total_seconds() if isinstance(timeout, timedelta) else timeout)
        if not self._event.wait(t):
            raise RuntimeError(f"Work.wait: the operation did not complete within {t}s")
        if self._exc is not None:
            raise self._exc
        return True

    def result(self):
        return self._result if isinstance(self._result, list) else [] if self._result is None else [self._result]

    def get_future(self):
        return _Future(self)

    def synchronize(self):
        self.wait()


def _done_work(result=None):
    w = Work(result)
    w._finish()
    return w


# ---------------------------------------------------------------------------- process groups
class ProcessGroup(ProcessGroupOps):
    """A set of ranks sharing the world's connections. ``rank()`` / ``size()`` are this process's
    position in the group and the group's size; ``ranks`` the global ranks, in group order.
    PyTorch's method API (``pg.allreduce(tensors, opts)``, ...) comes from ``ProcessGroupOps``."""

    # ember.compile passes a group to the ops it calls as a constant of the trace (guarded: the same group)
    _ember_dynamo_constant = True

    def __init__(self, world, ranks, gid, timeout, backend="gloo"):
        self._world = world
        self.ranks = list(ranks)
        self.gid = gid
        self.timeout = timeout
        self._backend = backend
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._worker = None
        self._jobs = None
        self._p2p_sent = {}
        self._p2p_recvd = {}
        self._standalone = False

    def rank(self):
        return self.ranks.index(self._world.rank)

    def size(self):
        return len(self.ranks)

    def name(self):
        return self._backend

    def _get_backend_name(self):
        return self._backend

    def __repr__(self):
        return f"ProcessGroup(ranks={self.ranks}, backend={self._backend!r})"

    # -------------------------------------------------------------- plumbing
    def _next(self, name):
        # the profiling title of the collective about to be run (``record_comm``'s name, or
        # "<backend>:<collective>"); ``_run`` takes it
        _COMM_TITLE.pending = getattr(_COMM_TITLE, "name", None) or f"{self._backend}:{name}"
        with self._seq_lock:
            self._seq += 1
            return ("c", self.gid, self._seq), f"{name} (#{self._seq} of group {self.ranks})"

    def _mesh(self):
        m = self._world.mesh
        if m is None or m.closed:
            raise RuntimeError("ember.distributed: the process group has been destroyed")
        return m

    def _send(self, grank, key, arr=None, part=0, **meta):
        g = self.ranks[grank]
        k = key + (part,)
        if arr is None:
            self._mesh().send(g, k, b"", **meta)
        else:
            arr = np.ascontiguousarray(arr)
            self._mesh().send(g, k, arr.reshape(-1).view(np.uint8) if arr.size else b"", d=str(arr.dtype),
                              s=list(arr.shape), **meta)

    def _recv(self, granks, key, what, part=0):
        """{group rank: header, payload} for one message from each of ``granks``."""
        me = self.rank()
        k = key + (part,)
        others = [self.ranks[g] for g in granks if g != me]
        got = self._mesh().recv_many(others, k, what, self.timeout) if others else {}
        out = {self.ranks.index(p): v for p, v in got.items()}
        return out

    def _fail_all(self, key, msg, exc=RuntimeError, part=0):
        """Tell every other rank of the group that this operation failed here (they wait for
        message ``part`` of it), then raise."""
        me = self.rank()
        for g in range(self.size()):
            if g != me:
                try:
                    self._send(g, key, part=part, err=msg)
                except Exception:  # noqa: BLE001 - best effort: a dead peer learns nothing
                    pass
        raise exc(msg)

    def _run(self, fn, async_op, result=None):
        """Run ``fn`` now, or (``async_op``) on the group's worker thread, in submission order.
        A profiler recording on this thread sees a range named by the collective's profiling
        title (``record_comm``): the whole collective, or (async) its submission."""
        title, _COMM_TITLE.pending = getattr(_COMM_TITLE, "pending", None), None
        prof = _profiler_range(title)
        if prof is not None:
            with prof:
                return self._run_now(fn, async_op, result)
        return self._run_now(fn, async_op, result)

    def _run_now(self, fn, async_op, result):
        if not async_op:
            fn()
            return None
        work = Work(result)
        if self._jobs is None:
            self._jobs = queue.Queue()
            self._worker = threading.Thread(target=self._work_loop, daemon=True, name=f"ember-dist-pg{self.gid}")
            self._worker.start()
        self._jobs.put((fn, work))
        return work

    def _work_loop(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, work = job
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - re-raised by Work.wait
                work._finish(e)
            else:
                work._finish()

    def _shutdown(self):
        if self._jobs is not None:
            self._jobs.put(None)


_COMM_TITLE = threading.local()


def _profiler_range(title):
    """A ``record_function`` range named ``title`` when a profiler records (else None)."""
    import sys
    prof = sys.modules.get("ember.profiler")
    if title is None or prof is None or not prof._ACTIVE:
        return None
    return prof.record_function(title)


def _get_comm_profiling_name():
    return getattr(_COMM_TITLE, "name", None) or ""


@contextlib.contextmanager
def record_comm(name: str):
    """Collectives issued inside (on this thread) are profiled under ``name`` instead of their
    backend's default title ("gloo:all_reduce"): ``ember.profiler`` shows a range so named for
    each (torch.distributed.record_comm)."""
    if not isinstance(name, str):
        raise TypeError(f"record_comm(): argument 'name' must be str, not {type(name).__name__}")
    prev = getattr(_COMM_TITLE, "name", None)
    _COMM_TITLE.name = name
    try:
        yield
    finally:
        _COMM_TITLE.name = prev


def _arr(t, what, arg="tensor"):
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {arg} must be an ember Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise RuntimeError(f"{what}: {arg} is on {t.device}; ember.distributed (gloo) handles CPU tensors only")
    return t._data


def _write(t, value):
    """Store ``value`` into ``t``'s memory in place (views of it see the change)."""
    t._data[...] = value.reshape(t._data.shape) if value.shape != t._data.shape else value
    t._bump_version()


def _decode(header, payload, what, expect=None, src=None):
    if "d" not in header:
        return np.empty((0,), np.uint8)
    shape = tuple(header["s"])
    dt = expect.dtype if expect is not None else np.dtype(header["d"])
    if expect is not None and (str(expect.dtype) != header["d"] or tuple(expect.shape) != shape):
        raise RuntimeError(f"{what}: rank {src} sent a tensor of shape {list(shape)} and dtype {header['d']} where "
                           f"this rank expected shape {list(expect.shape)} and dtype {expect.dtype}: every rank must "
                           f"pass tensors of matching shape and dtype")
    return np.frombuffer(payload, dtype=dt).reshape(shape) if payload else np.empty(shape, dt)


class _World:
    """The state of the default group: rank, size, the mesh, the groups made so far."""

    def __init__(self, rank, world_size, store, timeout, backend, mesh):
        self.rank, self.world_size, self.store = rank, world_size, store
        self.timeout, self.backend, self.mesh = timeout, backend, mesh
        self.ngroups = 0
        self.groups = []


class _GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = object()


GroupMember = _GroupMember
group = _GroupMember          # dist.group.WORLD
_WORLD = None
_world_lock = threading.Lock()


def _world():
    if _WORLD is None:
        raise ValueError(_NOT_INIT)
    return _WORLD


def _group(g):
    if getattr(g, "_standalone", False):
        return g            # a ProcessGroupGloo made from a store: its own connections
    w = _world()
    if g is None or g is GroupMember.WORLD:
        return GroupMember.WORLD
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup made by new_group (or None), got {type(g).__name__}")
    if g._world is not w:
        raise RuntimeError("ember.distributed: this group belongs to a destroyed process group")
    return g if w.rank in g.ranks else None


def _g_rank(pg, global_rank, arg, what):
    if not isinstance(global_rank, int):
        raise TypeError(f"{what}: {arg} must be an int rank, got {type(global_rank).__name__}")
    if global_rank not in pg.ranks:
        raise ValueError(f"{what}: {arg}={global_rank} is not a rank of the group {pg.ranks}")
    return pg.ranks.index(global_rank)


# ---------------------------------------------------------------------------- init / teardown
def is_available():
    return True


def is_initialized():
    return _WORLD is not None


def is_gloo_available():
    return True


def is_nccl_available():
    return False


def is_mpi_available():
    return False


def is_ucc_available():
    return False


def is_torchelastic_launched():
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def _env(name, given=None):
    v = os.environ.get(name)
    if v is None:
        raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: environment variable {name} "
                         f"expected, but not set")
    return v


def _secs(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the default process group: rendezvous through a store (``env://``: MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE; ``tcp://host:port`` or ``file:///path`` with ``rank`` and
    ``world_size`` given; or ``store=``), then connect to every other rank."""
    global _WORLD
    with _world_lock:
        if _WORLD is not None:
            raise ValueError("trying to initialize the default process group twice!")
        b = _check_backend(backend)
        secs = _secs(timeout)
        if store is not None and init_method is not None:
            raise AssertionError("Cannot specify both init_method and store.")
        host = None
        if store is not None:
            if world_size <= 0:
                raise ValueError("world_size must be positive if using store")
            if rank < 0:
                raise ValueError("rank must be non-negative if using store")
            if isinstance(store, TCPStore):
                host = store.local_address
        else:
            init_method = init_method or "env://"
            url = urlparse(init_method)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if "rank" in q:
                rank = int(q["rank"])
            if "world_size" in q:
                world_size = int(q["world_size"])
            if url.scheme == "env":
                rank = int(_env("RANK")) if rank < 0 else rank
                world_size = int(_env("WORLD_SIZE")) if world_size < 0 else world_size
                addr, port = _env("MASTER_ADDR"), int(_env("MASTER_PORT"))
            elif url.scheme == "tcp":
                if rank < 0:
                    raise ValueError("Error initializing torch.distributed using tcp:// rendezvous: rank parameter "
                                     "missing")
                if world_size < 0:
                    raise ValueError("Error initializing torch.distributed using tcp:// rendezvous: world size "
                                     "parameter missing")
                if url.hostname is None or url.port is None:
                    raise ValueError(f"init_process_group: tcp:// init_method needs host and port, got "
                                     f"{init_method!r}")
                addr, port = url.hostname, url.port
            elif url.scheme == "file":
                if rank < 0 or world_size < 0:
                    raise ValueError("Error initializing torch.distributed using file:// rendezvous: rank and "
                                     "world_size parameters needed")
                store = FileStore(url.path, world_size, timeout=timedelta(seconds=secs))
            else:
                from .rendezvous import _handlers, _with_node_args
                if url.scheme not in _handlers:
                    raise ValueError(f"init_process_group: unsupported init_method {init_method!r} (expected env://, "
                                     f"tcp://host:port, file:///path or a scheme given to "
                                     f"register_rendezvous_handler)")
                # a user-registered scheme: its handler makes the store and decides rank and size
                store, rank, world_size = next(_with_node_args(
                    init_method, -1 if "rank" in q else rank, -1 if "world_size" in q else world_size,
                    timeout=timedelta(seconds=secs)))
            if not 0 <= rank < world_size:
                raise ValueError(f"init_process_group: rank {rank} out of range for world_size {world_size}")
            if store is None and url.scheme == "env" and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
                # launched by ember.distributed.run (torchrun): the launcher already serves the store at
                # MASTER_ADDR:MASTER_PORT, so every rank is a client; keys live under a per-attempt prefix
                # so a restarted worker group never sees the keys of the attempt that failed
                agent = TCPStore(addr, port, world_size, is_master=False, timeout=timedelta(seconds=secs))
                host = agent.local_address
                store = PrefixStore(f"/worker/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", agent)
            if store is None:
                from .rendezvous import _served_here     # RPC may already serve this address here
                store = TCPStore(addr, port, world_size, is_master=(rank == 0 and not _served_here(port)),
                                 timeout=timedelta(seconds=secs))
                host = store.local_address
        if not 0 <= rank < world_size:
            raise ValueError(f"init_process_group: rank {rank} out of range for world_size {world_size}")
        # each init through the same store gets fresh keys (ranks init in lockstep)
        gen = (store.add("ember_pg_inits", 1) - 1) // world_size
        pstore = PrefixStore(f"ember_pg{gen}", store)
        mesh = Mesh(rank, world_size, pstore, secs, host=host)
        w = _World(rank, world_size, store, secs, b, mesh)
        pg = ProcessGroup(w, range(world_size), 0, secs, b)
        w.groups.append(pg)
        GroupMember.WORLD = pg
        _WORLD = w
    try:
        barrier()       # nobody returns (and may exit, taking the store with it) before all are connected
    except BaseException:
        destroy_process_group()
        raise


def destroy_process_group(group=None):
    """Tear down the default group (closing every connection) or forget a sub-group."""
    global _WORLD
    w = _world() if group is None else _WORLD
    if w is None:
        raise ValueError(_NOT_INIT)
    if group is not None and group is not GroupMember.WORLD:
        if isinstance(group, ProcessGroup):
            group._shutdown()
            if group in w.groups:
                w.groups.remove(group)
        return
    for g in w.groups:
        g._shutdown()
    if w.mesh is not None:
        w.mesh.close(graceful=True)
    if isinstance(w.store, TCPStore) and w.rank == 0:
        w.store.close()
    GroupMember.WORLD = None
    _WORLD = None


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group over ``ranks`` (global ranks; all of them when None). Every rank of the world
    must call ``new_group`` in the same order, as PyTorch; a rank outside ``ranks`` gets
    ``GroupMember.NON_GROUP_MEMBER``."""
    w = _world()
    if backend is not None:
        _check_backend(backend)
    ranks = list(range(w.world_size)) if ranks is None else sorted(int(r) for r in ranks)
    for r in ranks:
        if not 0 <= r < w.world_size:
            raise ValueError(f"new_group: rank {r} is out of range for world_size {w.world_size}")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks must be unique, got {ranks}")
    w.ngroups += 1
    pg = ProcessGroup(w, ranks, w.ngroups, _secs(timeout) if timeout is not None else w.timeout, w.backend)
    if w.rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    w.groups.append(pg)
    return pg


def _get_default_group():
    """The default (world) group; PyTorch's error before ``init_process_group``."""
    _world()
    return GroupMember.WORLD


def _get_default_store():
    """The store the default group rendezvoused through."""
    return _world().store


def _rank_not_in_group(group):
    """Whether this rank is outside ``group`` (None: the world, which every rank is in)."""
    if group is None or group is GroupMember.WORLD:
        return False
    if group is GroupMember.NON_GROUP_MEMBER:
        return True
    return _world().rank not in group.ranks


def _get_group_size(group):
    return get_world_size(group)


def _get_process_group_name(pg):
    """A group's name: ember numbers its groups in creation order ("0" is the world)."""
    return str(pg.gid)


class _CoalescingManager:
    """What ``_coalescing_manager`` yields: ``works`` and ``wait()``. ember runs the
    collectives issued inside the block one by one, so there is nothing left to wait for
    unless they were started with ``async_op=True`` (their works are waited here)."""

    def __init__(self):
        self.works = []

    def append(self, work):
        if work is not None:
            self.works.append(work)

    def wait(self):
        for w in self.works:
            w.wait()


from contextlib import contextmanager as _contextmanager  # noqa: E402


@_contextmanager
def _coalescing_manager(group=None, device=None, async_ops=False):
    """PyTorch batches the collectives of the block into one; ember issues them as they come
    (same results, no fusion). With ``async_ops`` the caller waits on the yielded manager."""
    cm = _CoalescingManager()
    yield cm
    if not async_ops:
        cm.wait()


def _pg_count():
    """Groups made since ``init_process_group`` (the default one included; non-members' too,
    as PyTorch counts every ``new_group`` call)."""
    return 0 if _WORLD is None else _WORLD.ngroups + 1 + getattr(_WORLD, "nsplit", 0)


def get_rank(group=None):
    if getattr(group, "_standalone", False):
        return group.rank()
    w = _world()
    if group is None or group is GroupMember.WORLD:
        return w.rank
    pg = _group(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    if getattr(group, "_standalone", False):
        return group.size()
    w = _world()
    if group is None or group is GroupMember.WORLD:
        return w.world_size
    pg = _group(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    w = _world()
    if group is not None and _group(group) is None:
        raise ValueError("Invalid process group specified")
    return w.backend


def get_global_rank(group, group_rank):
    pg = _group(group)
    if pg is None:
        raise ValueError("Group is not a member of this process group")
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg.ranks}")
    return pg.ranks[group_rank]


def get_group_rank(group, global_rank):
    pg = _group(group)
    if pg is None or global_rank not in pg.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return pg.ranks.index(global_rank)


def get_process_group_ranks(group):
    pg = _group(group)
    return list(pg.ranks) if pg is not None else []


def _pg(group, what):
    """The group to run ``what`` on, or None when this rank is not a member (PyTorch returns
    without doing anything then)."""
    if getattr(group, "_standalone", False):
        return group
    if _WORLD is None:
        raise ValueError(_NOT_INIT)
    return _group(group)


# ---------------------------------------------------------------------------- reductions
def _reduce_into(pg, key, what, local, op, dst, dtype):
    """Reduce ``local`` (numpy) over the group onto group rank ``dst``, in group-rank order:
    returns the result on ``dst``, None elsewhere."""
    n, me = pg.size(), pg.rank()
    if me != dst:
        pg._send(dst, key, local)
        return None
    got = pg._recv([g for g in range(n) if g != me], key, what)
    try:
        ufunc, fin = _reducer(op, dtype, what)
        parts = [local if g == me else _decode(*got[g], what, expect=local, src=pg.ranks[g]) for g in range(n)]
    except (RuntimeError, ValueError, NotImplementedError) as e:
        pg._fail_all(key, str(e), type(e), part=1)
    acc = np.array(parts[0], copy=True)
    for p in parts[1:]:
        ufunc(acc, p, out=acc)
    return _avg(acc, n) if fin is not None else acc



def _bcast_arr(pg, key, what, arr, src, part=1):
    """``arr`` (numpy, on ``src``) to every rank of the group; returns it everywhere."""
    n, me = pg.size(), pg.rank()
    if me == src:
        for g in range(n):
            if g != me:
                pg._send(g, key, arr, part=part)
        return arr
    (h, p), = pg._recv([src], key, what, part=part).values()
    return _decode(h, p, what)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    what = "all_reduce"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    _reducer(op, tensor.dtype, what)      # refuse a bad op before talking to anyone
    key, desc = pg._next(what)

    def run():
        local = np.ascontiguousarray(a)
        if pg.rank() != 0:
            pg._send(0, key, local)
            (h, p), = pg._recv([0], key, desc, part=1).values()
            _write(tensor, _decode(h, p, desc))
        else:
            acc = _reduce_into(pg, key, desc, local, op, 0, tensor.dtype)
            _bcast_arr(pg, key, desc, acc, 0)
            _write(tensor, acc)
    return pg._run(run, async_op, tensor)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    what = "reduce"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    _reducer(op, tensor.dtype, what)
    d = group_dst if group_dst is not None else _g_rank(pg, 0 if dst is None else dst, "dst", what)
    key, desc = pg._next(what)

    def run():
        out = _reduce_into(pg, key, desc, np.ascontiguousarray(a), op, d, tensor.dtype)
        if out is not None:
            _write(tensor, out)
    return pg._run(run, async_op, tensor)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    what = "broadcast"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    s = group_src if group_src is not None else _g_rank(pg, 0 if src is None else src, "src", what)
    key, desc = pg._next(what)

    def run():
        if pg.rank() == s:
            _bcast_arr(pg, key, desc, np.ascontiguousarray(a), s)
        else:
            (h, p), = pg._recv([s], key, desc, part=1).values()
            _write(tensor, _decode(h, p, desc, expect=a, src=pg.ranks[s]))
    return pg._run(run, async_op, tensor)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group reached its barrier (a zero-byte all-reduce through
    group rank 0, so a timeout names the ranks that did not arrive)."""
    what = "barrier"
    pg = _pg(group, what)
    if pg is None:
        return None
    key, desc = pg._next(what)

    def run():
        n, me = pg.size(), pg.rank()
        if me == 0:
            pg._recv(list(range(1, n)), key, desc)
            for g in range(1, n):
                pg._send(g, key, part=1)
        else:
            pg._send(0, key)
            pg._recv([0], key, desc, part=1)
    return pg._run(run, async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """``barrier`` whose timeout error names the ranks that did not arrive (ours always does)."""
    pg = _pg(group, "monitored_barrier")
    if pg is None:
        return None
    old = pg.timeout
    if timeout is not None:
        pg.timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    try:
        barrier(group)
    finally:
        pg.timeout = old


# ---------------------------------------------------------------------------- data movement
def _check_list(lst, n, what, arg):
    if not isinstance(lst, (list, tuple)):
        raise TypeError(f"{what}: {arg} must be a list of tensors, got {type(lst).__name__}")
    if len(lst) != n:
        raise ValueError(f"{what}: {arg} must hold one tensor per rank of the group ({n}), got {len(lst)}")


def _exchange(pg, key, desc, send_to, recv_from):
    """Send ``send_to[g]`` (numpy) to each group rank g and receive from each of ``recv_from``:
    {g: (header, payload)} (this rank's own entry passed through locally)."""
    me = pg.rank()
    for g, arr in send_to.items():
        if g != me:
            pg._send(g, key, arr)
    got = pg._recv([g for g in recv_from if g != me], key, desc)
    return got


def all_gather(tensor_list, tensor, group=None, async_op=False):
    what = "all_gather"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    n = pg.size()
    _check_list(tensor_list, n, what, "tensor_list")
    outs = [_arr(t, what, "tensor_list[i]") for t in tensor_list]
    for i, o in enumerate(outs):
        if o.size != a.size or tensor_list[i].dtype != tensor.dtype:
            raise RuntimeError(f"{what}: tensor_list[{i}] has shape {list(o.shape)} and dtype {tensor_list[i].dtype}, "
                               f"expected shape {list(a.shape)} and dtype {tensor.dtype} (the input's)")
    key, desc = pg._next(what)

    def run():
        me = pg.rank()
        local = np.ascontiguousarray(a)
        got = _exchange(pg, key, desc, {g: local for g in range(n)}, range(n))
        for g in range(n):
            _write(tensor_list[g], local if g == me else _decode(*got[g], desc, expect=local, src=pg.ranks[g]))
    return pg._run(run, async_op, list(tensor_list))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    what = "all_gather_into_tensor"
    pg = _pg(group, what)
    if pg is None:
        return None
    a, o = _arr(input_tensor, what, "input_tensor"), _arr(output_tensor, what, "output_tensor")
    n = pg.size()
    if o.size != n * a.size or output_tensor.dtype != input_tensor.dtype:
        raise ValueError(f"{what}: output_tensor must have world_size ({n}) times the input's numel ({a.size}) "
                         f"and the same dtype; got numel {o.size} and dtype {output_tensor.dtype}")
    key, desc = pg._next(what)

    def run():
        me = pg.rank()
        local = np.ascontiguousarray(a)
        got = _exchange(pg, key, desc, {g: local for g in range(n)}, range(n))
        parts = [local if g == me else _decode(*got[g], desc, expect=local, src=pg.ranks[g]) for g in range(n)]
        _write(output_tensor, np.concatenate([p.reshape(-1) for p in parts]))
    return pg._run(run, async_op, output_tensor)


_all_gather_base = all_gather_into_tensor


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    what = "gather"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    n = pg.size()
    d = group_dst if group_dst is not None else _g_rank(pg, 0 if dst is None else dst, "dst", what)
    me = pg.rank()
    if me == d:
        if gather_list is None:
            raise ValueError(f"{what}: gather_list is required on the destination rank")
        _check_list(gather_list, n, what, "gather_list")
        for t in gather_list:
            _arr(t, what, "gather_list[i]")
    elif gather_list:
        raise ValueError(f"{what}: gather_list must be None or empty on a non-destination rank (rank {pg.ranks[me]})")
    key, desc = pg._next(what)

    def run():
        local = np.ascontiguousarray(a)
        if me != d:
            pg._send(d, key, local)
            return
        got = pg._recv([g for g in range(n) if g != me], key, desc)
        for g in range(n):
            _write(gather_list[g], local if g == me else _decode(*got[g], desc, expect=local, src=pg.ranks[g]))
    return pg._run(run, async_op, gather_list)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    what = "scatter"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    n = pg.size()
    s = group_src if group_src is not None else _g_rank(pg, 0 if src is None else src, "src", what)
    me = pg.rank()
    if me == s:
        if scatter_list is None:
            raise ValueError(f"{what}: scatter_list is required on the source rank")
        _check_list(scatter_list, n, what, "scatter_list")
        for i, t in enumerate(scatter_list):
            if _arr(t, what, "scatter_list[i]").size != a.size or t.dtype != tensor.dtype:
                raise RuntimeError(f"{what}: scatter_list[{i}] has shape {list(t.shape)} and dtype {t.dtype}, "
                                   f"expected the output tensor's shape {list(a.shape)} and dtype {tensor.dtype}")
    elif scatter_list:
        raise ValueError(f"{what}: scatter_list must be None or empty on a non-source rank (rank {pg.ranks[me]})")
    key, desc = pg._next(what)

    def run():
        if me == s:
            for g in range(n):
                if g != me:
                    pg._send(g, key, np.ascontiguousarray(scatter_list[g]._data))
            _write(tensor, np.array(scatter_list[me]._data).reshape(a.shape))
        else:
            (h, p), = pg._recv([s], key, desc).values()
            _write(tensor, _decode(h, p, desc, expect=a, src=pg.ranks[s]))
    return pg._run(run, async_op, tensor)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    what = "reduce_scatter"
    pg = _pg(group, what)
    if pg is None:
        return None
    o = _arr(output, what, "output")
    n = pg.size()
    _check_list(input_list, n, what, "input_list")
    for i, t in enumerate(input_list):
        if _arr(t, what, "input_list[i]").size != o.size or t.dtype != output.dtype:
            raise RuntimeError(f"{what}: input_list[{i}] has shape {list(t.shape)} and dtype {t.dtype}, expected "
                               f"the output's shape {list(o.shape)} and dtype {output.dtype}")
    _reducer(op, output.dtype, what)
    key, desc = pg._next(what)
    return pg._run(lambda: _reduce_scatter_run(pg, key, desc, output, [t._data for t in input_list], op),
                   async_op, output)


def _reduce_scatter_run(pg, key, desc, output, chunks, op):
    """Chunk g of every rank goes to rank g, which reduces them in group-rank order."""
    n, me = pg.size(), pg.rank()
    shape = output._data.shape
    chunks = [np.ascontiguousarray(c).reshape(shape) for c in chunks]
    got = _exchange(pg, key, desc, {g: chunks[g] for g in range(n)}, range(n))
    ufunc, fin = _reducer(op, output.dtype, desc)
    mine = chunks[me]
    acc = None
    for g in range(n):
        part = mine if g == me else _decode(*got[g], desc, expect=mine, src=pg.ranks[g])
        acc = np.array(part, copy=True) if acc is None else ufunc(acc, part, out=acc)
    _write(output, _avg(acc, n) if fin is not None else acc)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    what = "reduce_scatter_tensor"
    pg = _pg(group, what)
    if pg is None:
        return None
    o, i = _arr(output, what, "output"), _arr(input, what, "input")
    n = pg.size()
    if i.size != n * o.size or input.dtype != output.dtype:
        raise ValueError(f"{what}: input must have world_size ({n}) times the output's numel ({o.size}) and the "
                         f"same dtype; got numel {i.size} and dtype {input.dtype}")
    _reducer(op, output.dtype, what)
    key, desc = pg._next(what)
    flat = lambda: np.ascontiguousarray(i).reshape(n, -1)   # noqa: E731
    return pg._run(lambda: _reduce_scatter_run(pg, key, desc, output, list(flat()), op), async_op, output)


_reduce_scatter_base = reduce_scatter_tensor


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    what = "all_to_all"
    pg = _pg(group, what)
    if pg is None:
        return None
    n = pg.size()
    _check_list(output_tensor_list, n, what, "output_tensor_list")
    _check_list(input_tensor_list, n, what, "input_tensor_list")
    ins = [_arr(t, what, "input_tensor_list[i]") for t in input_tensor_list]
    outs = [_arr(t, what, "output_tensor_list[i]") for t in output_tensor_list]
    key, desc = pg._next(what)

    def run():
        me = pg.rank()
        got = _exchange(pg, key, desc, {g: np.ascontiguousarray(ins[g]) for g in range(n)}, range(n))
        for g in range(n):
            if g == me:
                val = np.array(ins[me])
            else:
                val = _decode(*got[g], desc)
            if val.size != outs[g].size or output_tensor_list[g].dtype != input_tensor_list[me].dtype:
                raise RuntimeError(f"{desc}: rank {pg.ranks[g]} sent {val.size} elements of {val.dtype} for "
                                   f"output_tensor_list[{g}], which holds {outs[g].size} of {outs[g].dtype}")
            _write(output_tensor_list[g], val.reshape(outs[g].shape))
    return pg._run(run, async_op, list(output_tensor_list))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    what = "all_to_all_single"
    pg = _pg(group, what)
    if pg is None:
        return None
    o, i = _arr(output, what, "output"), _arr(input, what, "input")
    n = pg.size()

    def splits(sizes, t, arg):
        d0 = t.shape[0] if t.ndim else 1
        if sizes is None or len(sizes) == 0:
            if d0 % n:
                raise ValueError(f"{what}: {arg}'s first dimension ({d0}) must be divisible by the world size ({n}) "
                                 f"when no split sizes are given")
            return [d0 // n] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != d0:
            raise ValueError(f"{what}: {arg} split sizes {sizes} must have one entry per rank ({n}) summing to its "
                             f"first dimension ({d0})")
        return sizes
    ins, outs = splits(input_split_sizes, i, "input"), splits(output_split_sizes, o, "output")
    if output.dtype != input.dtype:
        raise ValueError(f"{what}: output dtype {output.dtype} differs from input dtype {input.dtype}")
    key, desc = pg._next(what)

    def run():
        me = pg.rank()
        src = np.ascontiguousarray(i)
        offs = np.cumsum([0] + ins)
        chunks = {g: src[offs[g]:offs[g + 1]] for g in range(n)}
        got = _exchange(pg, key, desc, chunks, range(n))
        res = []
        for g in range(n):
            val = chunks[me] if g == me else _decode(*got[g], desc)
            if val.shape[:1] != (outs[g],) or val.shape[1:] != o.shape[1:]:
                raise RuntimeError(f"{desc}: rank {pg.ranks[g]} sent a chunk of shape {list(val.shape)}, but this "
                                   f"rank's output split for it is {outs[g]} rows of shape {list(o.shape[1:])}")
            res.append(val)
        _write(output, np.concatenate(res).astype(o.dtype, copy=False))
    return pg._run(run, async_op, output)


# ---------------------------------------------------------------------------- point to point
def _p2p_key(pg, src_g, dst_g, tag, counter):
    return ("p", pg.gid, src_g, dst_g, int(tag), counter)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` (returns once handed to the kernel; the receiver's reader
    thread drains it, so ``send`` never waits for the matching ``recv``)."""
    what = "send"
    pg = _pg(group, what)
    if pg is None:
        return None
    a = _arr(tensor, what)
    d = group_dst if group_dst is not None else _g_rank(pg, dst, "dst", what)
    me = pg.rank()
    if d == me:
        raise ValueError("Invalid destination rank: should not be the same as the rank of the current process.")
    with pg._seq_lock:
        c = pg._p2p_sent.get((d, tag), 0)
        pg._p2p_sent[(d, tag)] = c + 1
    arr = np.ascontiguousarray(a)
    pg._mesh().send(pg.ranks[d], _p2p_key(pg, me, d, tag, c), arr.reshape(-1).view(np.uint8) if arr.size else b"",
                    d=str(arr.dtype), s=list(arr.shape))


def _post_recv(pg, tensor, s, tag, what):
    """Reserve the next message from group rank ``s`` (None: any rank) with ``tag`` and return
    a function that waits for it, writes it into ``tensor`` and returns the sender's global
    rank. Reserving at post time keeps several ``irecv`` from one peer in posting order."""
    me = pg.rank()
    if s is not None:
        with pg._seq_lock:
            c = pg._p2p_recvd.get((s, tag), 0)
            pg._p2p_recvd[(s, tag)] = c + 1
        key = _p2p_key(pg, s, me, tag, c)

        def wait_known():
            (h, p), = pg._mesh().recv_many([pg.ranks[s]], key, what, pg.timeout).values()
            _write(tensor, _decode(h, p, what, expect=tensor._data, src=pg.ranks[s]))
            return pg.ranks[s]
        return wait_known

    def wait_any():
        def key_of(global_peer):
            g = pg.ranks.index(global_peer)
            with pg._seq_lock:
                return _p2p_key(pg, g, me, tag, pg._p2p_recvd.get((g, tag), 0))
        srcs = [pg.ranks[g] for g in range(pg.size()) if g != me]
        peer, h, p = pg._mesh().recv_any(srcs, key_of, what, pg.timeout)
        g = pg.ranks.index(peer)
        with pg._seq_lock:
            pg._p2p_recvd[(g, tag)] = pg._p2p_recvd.get((g, tag), 0) + 1
        _write(tensor, _decode(h, p, what, expect=tensor._data, src=peer))
        return peer
    return wait_any


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from ``src`` (any rank when None); returns the sender's rank."""
    what = "recv"
    pg = _pg(group, what)
    if pg is None:
        return -1
    _arr(tensor, what)
    s = group_src if group_src is not None else (None if src is None else _g_rank(pg, src, "src", what))
    if s == pg.rank():
        raise ValueError("Invalid source rank: should not be the same as the rank of the current process.")
    return _post_recv(pg, tensor, s, tag, f"recv (from {'any rank' if s is None else pg.ranks[s]}, tag {tag})")()


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    send(tensor, dst, group, tag, group_dst)
    return _done_work(tensor)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """A Work that completes when the message has arrived (received on a thread of its own)."""
    what = "irecv"
    pg = _pg(group, what)
    if pg is None:
        return None
    _arr(tensor, what)
    s = group_src if group_src is not None else (None if src is None else _g_rank(pg, src, "src", what))
    if s == pg.rank():
        raise ValueError("Invalid source rank: should not be the same as the rank of the current process.")
    wait = _post_recv(pg, tensor, s, tag, f"irecv (from {'any rank' if s is None else pg.ranks[s]}, tag {tag})")
    work = Work(tensor)

    def run():
        try:
            wait()
        except BaseException as e:  # noqa: BLE001 - re-raised by Work.wait
            work._finish(e)
        else:
            work._finish()
    threading.Thread(target=run, daemon=True, name="ember-dist-irecv").start()
    return work


class P2POp:
    """One operation of ``batch_isend_irecv``: ``P2POp(dist.isend or dist.irecv, tensor, peer)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv, send, recv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag


def batch_isend_irecv(p2p_op_list):
    works = []
    for p in p2p_op_list:
        op = isend if p.op in (isend, send) else irecv
        works.append(op(p.tensor, p.peer, p.group, p.tag))
    return works


# ---------------------------------------------------------------------------- objects
def _dumps(obj):
    import io
    from ..multiprocessing import ForkingPickler  # registers ember's tensor reducers
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def _loads(arr):
    return pickle.loads(arr.tobytes())


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Pickle ``object_list`` on ``src`` and replace the list's items with it everywhere.
    (Unpickling runs code: only use with ranks you trust, as PyTorch warns.)"""
    what = "broadcast_object_list"
    pg = _pg(group, what)
    if pg is None:
        return None
    s = group_src if group_src is not None else _g_rank(pg, 0 if src is None else src, "src", what)
    key, desc = pg._next(what)
    me = pg.rank()
    if me == s:
        _bcast_arr(pg, key, desc, _dumps(list(object_list)), s)
        return None
    (h, p), = pg._recv([s], key, desc, part=1).values()
    got = _loads(_decode(h, p, desc))
    if len(got) != len(object_list):
        raise RuntimeError(f"{what}: rank {pg.ranks[s]} broadcast {len(got)} objects but this rank's object_list "
                           f"has {len(object_list)} slots")
    object_list[:] = got


def all_gather_object(object_list, obj, group=None):
    what = "all_gather_object"
    pg = _pg(group, what)
    if pg is None:
        return None
    n = pg.size()
    if len(object_list) != n:
        raise ValueError(f"{what}: object_list must have one slot per rank of the group ({n}), got {len(object_list)}")
    key, desc = pg._next(what)
    me = pg.rank()
    mine = _dumps(obj)
    got = _exchange(pg, key, desc, {g: mine for g in range(n)}, range(n))
    for g in range(n):
        object_list[g] = _loads(mine) if g == me else _loads(_decode(*got[g], desc))


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    what = "gather_object"
    pg = _pg(group, what)
    if pg is None:
        return None
    n, me = pg.size(), pg.rank()
    d = group_dst if group_dst is not None else _g_rank(pg, 0 if dst is None else dst, "dst", what)
    if me == d and (object_gather_list is None or len(object_gather_list) != n):
        raise ValueError(f"{what}: object_gather_list must have one slot per rank ({n}) on the destination rank")
    key, desc = pg._next(what)
    mine = _dumps(obj)
    if me != d:
        pg._send(d, key, mine)
        return None
    got = pg._recv([g for g in range(n) if g != me], key, desc)
    for g in range(n):
        object_gather_list[g] = _loads(mine) if g == me else _loads(_decode(*got[g], desc))


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    what = "scatter_object_list"
    pg = _pg(group, what)
    if pg is None:
        return None
    n, me = pg.size(), pg.rank()
    s = group_src if group_src is not None else _g_rank(pg, 0 if src is None else src, "src", what)
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    if me == s and (scatter_object_input_list is None or len(scatter_object_input_list) != n):
        raise ValueError(f"{what}: scatter_object_input_list must have one object per rank ({n}) on the source rank")
    key, desc = pg._next(what)
    if me == s:
        for g in range(n):
            if g != me:
                pg._send(g, key, _dumps(scatter_object_input_list[g]))
        scatter_object_output_list[0] = _loads(_dumps(scatter_object_input_list[me]))
        return None
    (h, p), = pg._recv([s], key, desc).values()
    scatter_object_output_list[0] = _loads(_decode(h, p, desc))
