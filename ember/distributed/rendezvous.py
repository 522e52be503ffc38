"""Rendezvous handlers: how ``init_process_group(init_method=URL)`` turns a URL into a store,
a rank and a world size (PyTorch's ``torch.distributed.rendezvous``).

``register_rendezvous_handler(scheme, handler)`` adds a scheme: ``handler(url, **kwargs)``
returns an iterator yielding ``(store, rank, world_size)``; ``init_process_group`` takes the
first item for a URL of that scheme. ``rendezvous(url, rank, world_size)`` runs the handler,
with ``rank``/``world_size`` added to the URL's query as PyTorch does. ember registers
``tcp``, ``env`` and ``file``."""
from __future__ import annotations

import numbers
import os
from datetime import timedelta
from urllib.parse import urlparse, urlunparse

from .store import FileStore, PrefixStore, TCPStore

__all__ = ["register_rendezvous_handler", "rendezvous"]

_handlers = {}
_DEFAULT_TIMEOUT = timedelta(minutes=30)


def register_rendezvous_handler(scheme, handler):
    """Make ``init_process_group``/``rendezvous`` use ``handler`` for ``scheme://`` URLs."""
    if scheme in _handlers:
        raise RuntimeError(f"Rendezvous handler for {scheme}:// already registered")
    _handlers[scheme] = handler


def _query(q):
    return {k: v for k, v in (pair.split("=", 1) for pair in q.split("&") if pair)}


def rendezvous(url, rank=-1, world_size=-1, **kwargs):
    """The iterator of ``(store, rank, world_size)`` of the handler for ``url``'s scheme."""
    if not isinstance(url, (str, bytes)):
        raise RuntimeError(f"`url` must be a string. {type(url)}: {url}")
    if not isinstance(rank, numbers.Integral):
        raise RuntimeError(f"`rank` must be an integer. {rank}")
    if not isinstance(world_size, numbers.Integral):
        raise RuntimeError(f"`world_size` must be an integer. {world_size}")
    return _with_node_args(url, rank, world_size, **kwargs)


def _with_node_args(url, rank, world_size, **kwargs):
    parsed = urlparse(url)
    if rank != -1 or world_size != -1:
        q = _query(parsed.query)
        if "rank" in q or "world_size" in q:
            raise AssertionError(f"The url: {url} has node-specific arguments(rank, world_size) already.")
        if rank != -1:
            q["rank"] = str(rank)
        if world_size != -1:
            q["world_size"] = str(world_size)
        parsed = parsed._replace(query="&".join(f"{k}={v}" for k, v in q.items()))
        url = urlunparse(parsed)
    if parsed.scheme not in _handlers:
        raise RuntimeError(f"No rendezvous handler for {parsed.scheme}://")
    return _handlers[parsed.scheme](url, **kwargs)


def _served_here(port):
    """Whether this process already serves a TCP store on ``port`` (the default process
    group's or the RPC agent's): a second rendezvous on the same address (PyTorch's
    "multi-tenant" store, e.g. init_process_group and init_rpc both on MASTER_PORT) then
    joins it as a client instead of failing to bind."""
    from . import distributed_c10d as c10d
    stores = []
    if c10d._WORLD is not None:
        stores.append(c10d._WORLD.store)
    try:
        from .rpc.api import _AGENT
    except ImportError:
        _AGENT = None
    if _AGENT is not None:
        stores.append(getattr(_AGENT, "root_store", None))
    for st in stores:
        while isinstance(st, PrefixStore):
            st = st.underlying_store
        if isinstance(st, TCPStore) and st._server is not None and st.port == port:
            return True
    return False


def _tcp_store(host, port, world_size, rank, timeout):
    master = rank == 0 and not _served_here(port) and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    return TCPStore(host, port, world_size, is_master=master, timeout=timeout)


def _error(scheme, msg):
    return ValueError(f"Error initializing torch.distributed using {scheme}:// rendezvous: {msg}")


def _timeout(kwargs):
    t = kwargs.get("timeout", _DEFAULT_TIMEOUT)
    return t if isinstance(t, timedelta) else timedelta(seconds=float(t))


def _tcp_handler(url, **kwargs):
    parsed = urlparse(url)
    if not parsed.port:
        raise _error("tcp", "port number missing")
    q = _query(parsed.query)
    if "rank" not in q:
        raise _error("tcp", "rank parameter missing")
    if "world_size" not in q:
        raise _error("tcp", "world size parameter missing")
    rank, world_size = int(q["rank"]), int(q["world_size"])
    store = _tcp_store(parsed.hostname, parsed.port, world_size, rank, _timeout(kwargs))
    yield store, rank, world_size
    raise RuntimeError("Unable to perform re-rendezvous using tcp:// method")


def _env_handler(url, **kwargs):
    q = _query(urlparse(url).query)

    def need(name):
        v = os.environ.get(name)
        if v is None:
            raise _error("env", f"environment variable {name} expected, but not set")
        return v
    rank = int(q["rank"]) if "rank" in q else int(need("RANK"))
    world_size = int(q["world_size"]) if "world_size" in q else int(need("WORLD_SIZE"))
    addr, port = need("MASTER_ADDR"), int(need("MASTER_PORT"))
    store = _tcp_store(addr, port, world_size, rank, _timeout(kwargs))
    yield store, rank, world_size
    raise RuntimeError("Unable to perform re-rendezvous using env:// method")


def _file_handler(url, **kwargs):
    parsed = urlparse(url)
    if not parsed.path:
        raise _error("file", "path missing")
    q = _query(parsed.query)
    if "rank" not in q:
        raise _error("file", "rank parameter missing")
    if "world_size" not in q:
        raise _error("file", "world size parameter missing")
    rank, world_size = int(q["rank"]), int(q["world_size"])
    yield FileStore(parsed.path, world_size), rank, world_size
    raise RuntimeError("Unable to perform rerendezvous using file:// method")


register_rendezvous_handler("tcp", _tcp_handler)
register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("file", _file_handler)
