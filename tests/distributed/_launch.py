"""Run a function on N forked ranks of an ember (or torch) process group, with a hard deadline.

``run_ranks(fn, nprocs, *args)`` starts ``nprocs`` processes with ``ember.multiprocessing``
(start method ``fork``: the test's closures need not be importable), each joining a process
group through a ``TCPStore`` the parent serves on a port the kernel picked (port 0: no race
for a free port), calls ``fn(rank, world_size, *args)`` and sends its return value back.
The group is always destroyed; a rank that raises fails the test with its traceback; ranks
still running at the deadline are terminated and the test fails instead of hanging."""
from __future__ import annotations

import os
import socket
import time
import traceback
import warnings
from datetime import timedelta


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _rank_main(rank, world_size, fn, args, port, results, backend, pg_timeout, init):
    if backend == "torch":
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=pg_timeout))
    else:
        import ember.distributed as dist
        if init:
            store = dist.TCPStore("127.0.0.1", port, timeout=timedelta(seconds=pg_timeout))
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=pg_timeout))
    try:
        out = fn(rank, world_size, *args)
        results.put((rank, "ok", out))
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, "err", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(fn, nprocs, *args, timeout=30, backend="ember", pg_timeout=15, init=True):
    """{rank: fn's return value}; raises AssertionError with a rank's traceback when one failed."""
    import ember.multiprocessing as mp
    ctx = mp.get_context("fork")
    results = ctx.SimpleQueue()
    store = None
    if backend == "torch":
        port = free_port()
    else:
        import ember.distributed as dist
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=pg_timeout))
        port = store.port
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a threaded process may deadlock the child on a lock
            # another thread held; the parent's threads here are the store's server threads
            # (idle in accept/recv, holding no lock the children take) and torch's pools.
            warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
            pc = mp.start_processes(_rank_main, args=(nprocs, fn, args, port, results, backend, pg_timeout, init),
                                    nprocs=nprocs, join=False, start_method="fork")
        deadline = time.monotonic() + timeout
        try:
            while not pc.join(timeout=0.2):
                if time.monotonic() > deadline:
                    raise AssertionError(f"ranks still running after {timeout}s (hang?)")
        finally:
            for p in pc.processes:
                if p.is_alive():
                    p.terminate()
                p.join(5)
        out = {}
        while not results.empty():
            rank, status, val = results.get()
            if status == "err":
                raise AssertionError(f"rank {rank} failed:\n{val}")
            out[rank] = val
        assert sorted(out) == list(range(nprocs)), f"missing results from ranks {set(range(nprocs)) - set(out)}"
        return out
    finally:
        if store is not None:
            store.close()
