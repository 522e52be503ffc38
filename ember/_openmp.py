"""The OpenMP wait policy of the compiled kernels, set at ``import ember``.

The C++ kernels of ``ember.inductor`` are OpenMP loops; their worker threads
should sleep when idle (``OMP_WAIT_POLICY=passive``) instead of spinning: on a
small or busy machine spinning workers steal the cores that the master thread,
numpy's BLAS threads and the next kernel need (measured: compiled models ran
10x slower). libgomp reads the variable once, when it is loaded. So ember sets
it (unless the user did) as the very first thing ``import ember`` does, before
anything could load a libgomp through ember.

What ember cannot fix: a libgomp already loaded before ``import ember`` (torch
ships its own ``libgomp.so.1``; importing torch first loads it) was initialised
without the variable, and our kernels then bind to that library (same soname).
:func:`at_import` records whether that happened; the first compile calls
:func:`check_wait_policy`, which logs one warning saying what to export.
"""
from __future__ import annotations

import logging
import os
from typing import List, Optional

POLICY = "passive"

# what import ember saw: the user's own value (None: unset) and the libgomps already mapped
_user_value: Optional[str] = None
_preloaded: List[str] = []
_warned = False


def loaded_libgomp() -> List[str]:
    """Paths of the libgomp libraries mapped into this process (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            text = f.read()
    except OSError:        # not Linux: nothing to detect
        return []
    paths = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and "libgomp" in os.path.basename(parts[5]):
            p = parts[5].strip()
            if p not in paths:
                paths.append(p)
    return paths


def at_import() -> None:
    """Set the default policy and remember what was there before (called by ``ember/__init__``)."""
    global _user_value, _preloaded
    _user_value = os.environ.get("OMP_WAIT_POLICY")
    os.environ.setdefault("OMP_WAIT_POLICY", POLICY)
    # reading the maps costs ~0.1 ms: only when the answer can matter
    _preloaded = loaded_libgomp() if _user_value is None else []


def wait_policy_problem() -> Optional[str]:
    """The warning text when a libgomp was initialised before ember could set the policy, else None."""
    if _user_value is not None or not _preloaded:
        return None
    return (f"an OpenMP runtime ({', '.join(_preloaded)}) was loaded before `import ember` could set "
            f"OMP_WAIT_POLICY={POLICY} (importing torch first does this), so its idle threads spin: "
            f"compiled kernels can run up to 10x slower on a busy machine. Fix: "
            f"`export OMP_WAIT_POLICY={POLICY}` before starting Python, or import ember before torch.")


def check_wait_policy(logger: Optional[logging.Logger] = None) -> Optional[str]:
    """Log :func:`wait_policy_problem` once per process (the first compile calls this)."""
    global _warned
    if _warned:
        return None
    _warned = True
    msg = wait_policy_problem()
    if msg is not None:
        (logger or logging.getLogger("ember.inductor")).warning("inductor: %s", msg)
    return msg


def num_threads() -> int:
    """Threads for ember's native OpenMP kernels (convolution, the fused optimizer step): the
    inductor's ``config.threads``, else ``OMP_NUM_THREADS``, else the cores this process may
    run on (not ``os.cpu_count()``: in a container limited to 2 of 64 cores, 64 threads would
    fight over 2)."""
    from .inductor import config
    if config.threads:
        return int(config.threads)
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return os.cpu_count() or 1
