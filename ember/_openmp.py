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

Spinning, once there is one pool. When numpy's OpenBLAS will run its threaded jobs on the
OpenMP pool (``ember/_blas_threads.py``) no second pool competes for the cores, and a worker
that spins briefly before it sleeps catches the next kernel or matmul without a futex wake-up
(~60 us a region). ember then also sets ``GOMP_SPINCOUNT`` (:data:`SPIN_COUNT`, about 0.4 ms of
spinning on the 2-core Zen 5 box), unless the user set either variable. Measured, suite of
benchmarks/models.py: nanoGPT inference 42 -> 37 ms, training 130 -> 120 ms compiled. With
OpenBLAS's own pool still there, the same spinning made nanoGPT 2.3x *slower*; so with
``EMBER_BLAS_THREADS=native`` or a BLAS without the callback the workers stay passive.
"""
from __future__ import annotations

import logging
import os
from typing import List, Optional

POLICY = "passive"
SPIN_COUNT = "30000"

# what import ember saw: the user's own value (None: unset) and the libgomps already mapped
_user_value: Optional[str] = None
_preloaded: List[str] = []
spin_count_set = False         # whether at_import chose GOMP_SPINCOUNT (one OpenMP pool for BLAS too)
_warned = False


def mapped_libraries(name_part: str) -> List[str]:
    """Paths of the shared libraries mapped into this process whose file name contains
    ``name_part`` (from /proc/self/maps; [] off Linux)."""
    try:
        with open("/proc/self/maps") as f:
            text = f.read()
    except OSError:        # not Linux: nothing to detect
        return []
    paths = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and name_part in os.path.basename(parts[5]).lower():
            p = parts[5].strip()
            if p not in paths:
                paths.append(p)
    return paths


def loaded_libgomp() -> List[str]:
    """Paths of the libgomp libraries mapped into this process."""
    return mapped_libraries("libgomp")


def at_import() -> None:
    """Set the default policy and remember what was there before (called by ``ember/__init__``)."""
    global _user_value, _preloaded, spin_count_set
    _user_value = os.environ.get("OMP_WAIT_POLICY")
    os.environ.setdefault("OMP_WAIT_POLICY", POLICY)
    if _user_value is None and "GOMP_SPINCOUNT" not in os.environ:
        import numpy  # noqa: F401 - maps its OpenBLAS (numpy loads no OpenMP runtime)
        from . import _blas_threads
        if _blas_threads.wanted() and _blas_threads.openblas_libraries():
            os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
            spin_count_set = True
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


_forked = [False]     # this process is a fork of one whose OpenMP pool may have had threads


def _after_fork_in_child() -> None:
    """An OpenMP (libgomp) thread pool does not survive ``fork``: the child's first parallel region
    would wait forever for workers that exist only in the parent (seen: a DataLoader worker or a
    forked DDP rank running the fused Adam step hung). As torch does, a forked child runs its
    OpenMP loops on one thread: :func:`num_threads` answers 1 and every loaded libgomp's default
    team size is set to 1 (the inductor's kernels use it)."""
    _forked[0] = True
    import ctypes
    for path in loaded_libgomp():
        try:
            ctypes.CDLL(path).omp_set_num_threads(1)
        except (OSError, AttributeError):
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def num_threads() -> int:
    """Threads for ember's native OpenMP kernels (convolution, the fused optimizer step): the
    inductor's ``config.threads``, else ``OMP_NUM_THREADS``, else the cores this process may
    run on (not ``os.cpu_count()``: in a container limited to 2 of 64 cores, 64 threads would
    fight over 2); 1 in a forked child (see :func:`_after_fork_in_child`)."""
    if _forked[0]:
        return 1
    config = _config[0]
    if config is None:
        from .inductor import config
        _config[0] = config
    if config.threads:
        return int(config.threads)
    env = os.environ.get("OMP_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return _usable_cores()


_config = [None]


_cores = [0]


def _usable_cores() -> int:
    """The cores this process may run on, read once: ``sched_getaffinity`` is a system call
    (~10 us) and :func:`num_threads` is asked on every native kernel call. A process that
    changes its affinity later sets its thread count with ``ember.set_num_threads``."""
    n = _cores[0]
    if n == 0:
        try:
            n = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        _cores[0] = n
    return n
