"""``init_rpc`` / ``rpc_sync`` / ``rpc_async`` / ``remote`` / ``shutdown`` (PyTorch's
``torch.distributed.rpc`` with its TensorPipe backend's options)."""
from __future__ import annotations

import enum
import numbers
import threading
import time
from datetime import timedelta

from .agent import Agent, WorkerInfo

__all__ = ["BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions", "get_rpc_timeout", "get_worker_info",
           "init_rpc", "remote", "rpc_async", "rpc_sync", "shutdown"]

_NOT_INIT = "RPC has not been initialized. Call torch.distributed.rpc.init_rpc first."
_AGENT = None
_lock = threading.Lock()


def _current_agent():
    if _AGENT is None:
        raise RuntimeError(_NOT_INIT)
    return _AGENT


class BackendType(enum.Enum):
    """RPC backends: ember has one, answering to PyTorch's ``TENSORPIPE`` (it runs over
    ember's TCP connections)."""
    TENSORPIPE = 1

    def __repr__(self):
        return f"BackendType.{self.name}"


class RpcBackendOptions:
    """Options every backend takes: ``rpc_timeout`` (seconds; 0 = never) and ``init_method``."""

    def __init__(self, rpc_timeout=60.0, init_method="env://"):
        self.rpc_timeout = float(rpc_timeout)
        self.init_method = init_method


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """PyTorch's TensorPipe options. ``num_worker_threads`` sizes the pool running incoming
    calls; ``device_maps``/``devices`` (GPU tensors) are refused: ember's RPC moves CPU
    tensors only."""

    def __init__(self, *, num_worker_threads=16, rpc_timeout=60.0, init_method="env://", device_maps=None,
                 devices=None, _transports=None, _channels=None):
        super().__init__(rpc_timeout, init_method)
        if device_maps or devices:
            raise NotImplementedError("ember.distributed.rpc: device_maps/devices (GPU tensors over RPC) are not "
                                      "supported; ember's RPC carries CPU tensors")
        self.num_worker_threads = int(num_worker_threads)
        self.device_maps = {}
        self.devices = []

    def set_device_map(self, to, device_map):
        raise NotImplementedError("ember.distributed.rpc: set_device_map (GPU tensors over RPC) is not supported")

    def set_devices(self, devices):
        raise NotImplementedError("ember.distributed.rpc: set_devices (GPU tensors over RPC) is not supported")


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None):
    """Join the RPC group as worker ``name`` with id ``rank``: rendezvous through
    ``rpc_backend_options.init_method`` (``env://``, ``tcp://host:port``, ``file://``), then
    connect to every other worker. Every worker calls it; it returns once all are connected."""
    global _AGENT
    if backend is not None and not isinstance(backend, BackendType):
        raise TypeError("Argument backend must be a member of BackendType")
    if rpc_backend_options is not None and not isinstance(rpc_backend_options, RpcBackendOptions):
        raise TypeError("Argument rpc_backend_options must be an instance of RpcBackendOptions")
    opts = rpc_backend_options if rpc_backend_options is not None else TensorPipeRpcBackendOptions()
    if world_size is None:
        raise NotImplementedError("ember.distributed.rpc: dynamic RPC groups (world_size=None) are not supported; "
                                  "pass world_size")
    for arg, typ in ((name, str), (rank, numbers.Integral), (world_size, numbers.Integral)):
        if not isinstance(arg, typ):
            raise RuntimeError(f"Argument {arg} must be of type {typ} but got type {type(arg)}")
    if not name or len(name) >= 128 or not all(c.isalnum() or c in "_:-" for c in name):
        raise RuntimeError(f"Worker name must match ^[A-Za-z0-9-_:]*$, and be shorter than 128 characters, got "
                           f"{name!r}")
    with _lock:
        if _AGENT is not None:
            raise RuntimeError("RPC is already initialized")
        from ..rendezvous import rendezvous
        from ..store import PrefixStore
        timeout = timedelta(seconds=opts.rpc_timeout if opts.rpc_timeout > 0 else 1800)
        store, rank, world_size = next(rendezvous(opts.init_method, rank=rank, world_size=world_size,
                                                  timeout=timeout))
        if not 0 <= rank < world_size:
            raise ValueError(f"init_rpc: rank {rank} out of range for world_size {world_size}")
        gen = (store.add("ember_rpc_inits", 1) - 1) // world_size    # fresh keys for each RPC group
        pstore = PrefixStore(f"ember_rpc{gen}", store)
        agent = Agent(name, rank, world_size, pstore, opts.rpc_timeout, getattr(opts, "num_worker_threads", 16))
        agent.root_store = store
        _AGENT = agent
        from .. import autograd as dist_autograd
        dist_autograd._init(rank)
    _store_barrier(agent, "init")


def _store_barrier(agent, tag, timeout=None):
    """Every worker reaches ``tag``; the TCP store's server (worker 0) leaves last, so nobody
    talks to a closed store."""
    st = agent.store
    n = agent.world_size
    st.add(f"{tag}/arrived", 1)
    deadline = None if not timeout else time.monotonic() + timeout
    while int(st.add(f"{tag}/arrived", 0)) < n:
        if deadline is not None and time.monotonic() > deadline:
            raise RuntimeError(f"ember.distributed.rpc: {tag}: timed out after {timeout}s waiting for every worker")
        time.sleep(0.01)
    st.add(f"{tag}/left", 1)
    if agent.rank == 0:
        while int(st.add(f"{tag}/left", 0)) < n:
            time.sleep(0.01)


def shutdown(graceful=True, timeout=0):
    """Leave the RPC group. ``graceful``: first wait until every worker has called
    ``shutdown`` and none has calls in flight (this worker keeps serving meanwhile), so no
    request is cut off; ``timeout`` (seconds, 0 = none) bounds that wait."""
    global _AGENT
    ag = _current_agent()
    try:
        if graceful:
            deadline = None if not timeout else time.monotonic() + timeout
            while ag.outstanding():
                if deadline is not None and time.monotonic() > deadline:
                    raise RuntimeError(f"ember.distributed.rpc: shutdown timed out after {timeout}s with "
                                       f"{ag.outstanding()} call(s) still in flight")
                time.sleep(0.005)
            _store_barrier(ag, "shutdown", timeout)
    finally:
        with _lock:
            _AGENT = None
        from .. import autograd as dist_autograd
        dist_autograd._shutdown()
        ag.close()
        store = getattr(ag, "root_store", None)
        from ..store import TCPStore
        if ag.rank == 0 and isinstance(store, TCPStore):
            store.close()


def get_worker_info(worker_name=None):
    """This worker's ``WorkerInfo``, or that of ``worker_name``."""
    ag = _current_agent()
    if worker_name is None:
        return ag.me
    return ag.worker(worker_name)


def get_rpc_timeout():
    """The default timeout of calls, in seconds."""
    return _current_agent().rpc_timeout


def _check_callable(func):
    if not callable(func):
        raise TypeError("function should be callable.")


def rpc_async(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run ``func(*args, **kwargs)`` on worker ``to``; a Future of its result (``wait()``
    re-raises the remote error with the remote traceback in its message). Inside a distributed
    autograd context the call is recorded (``ember.distributed.autograd``) and made at once."""
    _check_callable(func)
    from .. import autograd as dist_autograd
    if dist_autograd._recording():
        from ...futures import Future
        fut = Future()
        try:
            fut.set_result(dist_autograd._recorded_rpc(to, func, args, kwargs, timeout))
        except Exception as e:  # noqa: BLE001 - delivered by the future, as a remote error is
            fut.set_exception(e)
        return fut
    return _plain_rpc_async(to, func, args, kwargs, timeout)


def _plain_rpc_async(to, func, args=None, kwargs=None, timeout=-1.0):
    ag = _current_agent()
    return ag.request(ag.worker(to), "call", (func, tuple(args or ()), dict(kwargs or {})), timeout)


def _plain_rpc_sync(to, func, args=None, kwargs=None, timeout=-1.0):
    return _plain_rpc_async(to, func, args, kwargs, timeout).wait()


def rpc_sync(to, func, args=None, kwargs=None, timeout=-1.0):
    """``rpc_async(...).wait()``: the result of ``func(*args, **kwargs)`` run on ``to``."""
    _check_callable(func)
    from .. import autograd as dist_autograd
    if dist_autograd._recording():
        return dist_autograd._recorded_rpc(to, func, args, kwargs, timeout)
    return _plain_rpc_sync(to, func, args, kwargs, timeout)


def remote(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run ``func`` on ``to`` and keep the result there; returns at once with an ``RRef`` to
    it (``to_here()`` waits for it)."""
    from .rref import RRef, _counter
    _check_callable(func)
    ag = _current_agent()
    owner = ag.worker(to)
    rref_id = (ag.rank, next(_counter))
    created = ag.request(owner, "remote", (rref_id, func, tuple(args or ()), dict(kwargs or {})), timeout)
    # a failure is kept by the owner for to_here(); nobody has to wait on the creation future
    created.add_done_callback(lambda f: None)
    return RRef._handle(owner, rref_id, created)
