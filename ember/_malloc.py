"""glibc's allocator keeps big blocks, set at ``import ember``.

Why. glibc serves an allocation above its mmap threshold (adaptive, at most 32 MB) with a
fresh ``mmap`` and returns it to the OS on ``free``. Every large output of a kernel then pays
the first touch of new pages -- a page fault and the kernel zeroing each 4 KB -- every call:
measured on the 2-core box, a copy of 64 MB into a fresh array ran at 28 GB/s against 42 GB/s
into a reused one, and the fused pointwise roofline programs (16M-element outputs) lost a
third of their bandwidth to it. Raising the mmap and trim thresholds keeps such blocks in the
heap, so the next array of that size reuses memory that is already mapped (what PyTorch users
get from preloading jemalloc or tcmalloc).

Cost: freed memory up to the trim threshold stays with the process instead of going back to
the OS. ``EMBER_MALLOC_TUNING=0`` (before ``import ember``) leaves glibc's defaults alone.
Nothing happens on a libc without ``mallopt`` (macOS, musl): :data:`applied` stays False.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_THRESHOLD = 256 << 20    # blocks below this come from the heap (glibc max default: 32 MB)
TRIM_THRESHOLD = 512 << 20    # free memory at the heap's top kept up to this
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameter numbers

applied = False


def at_import() -> bool:
    """Apply the thresholds once (``ember/__init__``); True when glibc took them."""
    global applied
    if applied or os.environ.get("EMBER_MALLOC_TUNING", "1") == "0":
        return applied
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return applied
