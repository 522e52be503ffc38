"""``ProcessGroupGloo(store, rank, size, timeout)``: a process group made directly from a store,
as torch's gloo backend class is constructed (no ``init_process_group``).

It is a real group of ember's transport: construction rendezvouses through ``store`` (each
member publishes its address there and connects to every other one: the same full mesh of TCP
connections the default group uses, but its own), then torch's method API works on it
(``pg.allreduce([t]).wait()``, ``pg.broadcast``, ``pg.allgather``, ``pg.barrier()``...) and so
do the module-level collectives given ``group=pg``. Every member must construct it, with the
same store (a ``PrefixStore`` keeps several groups on one store apart) and size.
``shutdown()`` / ``abort()`` close its connections.

``Options`` / ``Device`` / ``create_device`` exist for torch's signatures: ember's transport
picks its own interface (devices other than the default are refused), and ``threads`` is
accepted (the group runs its collectives in order on one worker thread)."""
from __future__ import annotations

from datetime import timedelta

from ._transport import Mesh
from .distributed_c10d import ProcessGroup, _World, default_pg_timeout
from .store import PrefixStore, Store

__all__ = ["ProcessGroupGloo"]


class _GlooDevice:
    """``ProcessGroupGloo.Device``: which interface the transport uses (ember: its default)."""

    def __init__(self, hostname="", interface=""):
        self.hostname, self.interface = hostname, interface

    def __repr__(self):
        return f"ProcessGroupGloo.Device(hostname={self.hostname!r}, interface={self.interface!r})"


class _GlooOptions:
    """``ProcessGroupGloo.Options``: ``devices``, ``threads``, ``_timeout``."""

    def __init__(self):
        self.devices = []
        self.threads = 2
        self._timeout = default_pg_timeout
        self.backend = "gloo"
        self.global_ranks_in_group = []
        self.group_name = ""


class ProcessGroupGloo(ProcessGroup):
    Device = _GlooDevice
    Options = _GlooOptions

    def __init__(self, store, rank, size, timeout=default_pg_timeout):
        if not isinstance(store, Store):
            raise TypeError(_ctor_error(store, rank, size, timeout))
        for v in (rank, size):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(_ctor_error(store, rank, size, timeout))
        if isinstance(timeout, _GlooOptions):
            options = timeout
            timeout = options._timeout
            for d in options.devices:
                if d.hostname or d.interface:
                    raise NotImplementedError("ProcessGroupGloo: ember's transport chooses its own interface; "
                                              f"a device with hostname/interface ({d}) is not supported")
        else:
            options = _GlooOptions()
            if not isinstance(timeout, timedelta):
                raise TypeError(_ctor_error(store, rank, size, timeout))
            options._timeout = timeout
        if size <= 0:
            raise RuntimeError(f"ProcessGroupGloo: size must be positive, got {size}")
        if not 0 <= rank < size:
            raise RuntimeError(f"ProcessGroupGloo: rank {rank} is out of range for size {size}")
        secs = timeout.total_seconds()
        # each construction through the same store gets fresh keys (members construct in lockstep)
        gen = (store.add("ember_gloo_pgs", 1) - 1) // size
        mesh = Mesh(rank, size, PrefixStore(f"ember_gloo{gen}", store), secs)
        world = _World(rank, size, store, secs, "gloo", mesh)
        super().__init__(world, range(size), 0, secs, "gloo")
        world.groups.append(self)
        self._standalone = True
        self._options = options

    @property
    def options(self):
        return self._options

    def _set_default_timeout(self, timeout):
        if not isinstance(timeout, timedelta):
            raise TypeError(f"_set_default_timeout: expected a datetime.timedelta, got {type(timeout).__name__}")
        self.timeout = timeout.total_seconds()
        self._options._timeout = timeout

    @staticmethod
    def create_device(hostname="", interface="", lazy_init=None):
        return _GlooDevice(hostname, interface)

    @staticmethod
    def create_default_device(lazy_init=None):
        return _GlooDevice()

    def shutdown(self):
        """Close this group's connections (its collectives fail afterwards)."""
        self._shutdown()
        if not self._world.mesh.closed:
            self._world.mesh.close()

    def abort(self):
        self._shutdown()
        if not self._world.mesh.closed:
            self._world.mesh.close(graceful=False)

    def __repr__(self):
        return f"ProcessGroupGloo(rank={self.rank()}, size={self.size()})"


def _ctor_error(store, rank, size, timeout):
    got = ", ".join(type(a).__name__ for a in (store, rank, size, timeout))
    return ("__init__(): incompatible constructor arguments. The following argument types are supported:\n"
            "    1. ProcessGroupGloo(store: Store, rank: int, size: int, options: ProcessGroupGloo.Options)\n"
            "    2. ProcessGroupGloo(store: Store, rank: int, size: int, timeout: datetime.timedelta = "
            f"datetime.timedelta(seconds=1800))\n\nInvoked with: {got}")
