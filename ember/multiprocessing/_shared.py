"""Named POSIX shared-memory blocks behind ``Tensor.share_memory_()``.

Why named blocks (``multiprocessing.shared_memory``) and not an anonymous shared mapping: a
name can be sent to a process started with ``spawn``/``forkserver`` too, and the receiver maps
the same pages. Lifetime is the creator's: it unlinks its blocks when it exits (the mapping
stays valid in processes that still have it open, as POSIX shared memory does); Python's
resource tracker is kept out of it, because before 3.13 it also "owns" blocks a child merely
attaches to and would unlink them when that child exits.
"""
from __future__ import annotations

import sys
from multiprocessing import resource_tracker, util
from multiprocessing.shared_memory import SharedMemory

import numpy as np

_CREATED = {}       # name -> SharedMemory made by this process (unlinked at its exit)
_ATTACHED = {}      # name -> SharedMemory mapped from another process (kept open: arrays view it)
_RANGES = {}        # name -> (start address, size) of the block in this process


def _untracked(**kw) -> SharedMemory:
    if sys.version_info >= (3, 13):
        return SharedMemory(track=False, **kw)
    shm = SharedMemory(**kw)
    resource_tracker.unregister(shm._name, "shared_memory")   # noqa: SLF001 - see the module docstring
    return shm


def _remember(name, shm):
    start = np.frombuffer(shm.buf, dtype=np.uint8).__array_interface__["data"][0]
    _RANGES[name] = (start, shm.size)


def new_block(nbytes: int):
    """A fresh block of at least ``nbytes`` bytes: (name, SharedMemory)."""
    shm = _untracked(create=True, size=max(int(nbytes), 1))
    _CREATED[shm.name] = shm
    _remember(shm.name, shm)
    # run at this process's exit (multiprocessing's finalizers: a forked child starts with an
    # empty registry, so a block is unlinked by the process that made it, once)
    util.Finalize(None, _unlink, args=(shm,), exitpriority=0)
    return shm.name, shm


def shared_block(name: str) -> SharedMemory:
    """The block called ``name``, mapped into this process once."""
    shm = _CREATED.get(name) or _ATTACHED.get(name)
    if shm is None:
        shm = _ATTACHED[name] = _untracked(name=name)
        _remember(name, shm)
    return shm


def shared_name(arr: np.ndarray):
    """(block name, byte offset of ``arr``'s first element) when ``arr`` lies in a shared
    block of this process, else None."""
    if not _RANGES:
        return None
    addr = arr.__array_interface__["data"][0]
    for name, (start, size) in _RANGES.items():
        if start <= addr < start + size or (size == 0 and addr == start):
            return name, addr - start
    return None


def share_array(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``arr`` in a new shared block."""
    _name, shm = new_block(arr.nbytes)
    out = np.ndarray(arr.shape, dtype=arr.dtype, buffer=shm.buf)
    out[...] = arr
    return out


def _unlink(shm):
    if sys.version_info < (3, 13):
        # unlink() unregisters from the tracker; the block was unregistered at creation
        resource_tracker.register(shm._name, "shared_memory")   # noqa: SLF001
    try:
        shm.unlink()
    except FileNotFoundError:
        pass
