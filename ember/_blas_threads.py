"""numpy's OpenBLAS runs its parallel work on ember's OpenMP threads: one thread pool, not two.

Why. numpy's OpenBLAS keeps a pthread pool of its own, and its idle workers spin for about
2^28 cycles (~0.1 s) after every call before they sleep. ember's compiled kernels, native
convolutions and fused optimizer are OpenMP loops. A compiled model alternates the two
(matmul, fused pointwise, matmul, ...), so every OpenMP kernel that follows a matmul shares
its cores with a spinning BLAS worker: on the 2-core box the softmax kernels of nanoGPT ran at
a quarter of their speed, with one of their two threads time-sliced against the spinner.
Making OpenBLAS sleep at once (``OPENBLAS_THREAD_TIMEOUT``) does not help: every matmul then
pays a wake-up, and a batched matmul is one BLAS call per matrix.

How. OpenBLAS >= 0.3.27 lets a caller run its threaded jobs
(``openblas_set_threads_callback_function``; numpy's build exports it under the
``scipy_openblas..64_`` prefix). :func:`install` registers a small native function that runs
the jobs of each BLAS call as one OpenMP parallel region, so BLAS and ember's kernels share
the OpenMP pool. OpenBLAS's own workers then never get work again and sleep for good. Every
job gets its own thread (OpenBLAS's GEMM jobs wait on each other); where OpenMP cannot give
one per job (a call from inside a parallel region), the rest run on short-lived pthreads.

When. At ``import ember``, before ember runs any BLAS call: an OpenBLAS worker that has had
work spins for its 0.1 s before the callback can retire it, and the first steps of a
benchmark would time a spinning worker against the OpenMP pool (measured: eager MLP
training 27 ms instead of 16 for the first 0.2 s). The helper is built when ember is installed
(setup.py, ``inductor/prebuilt.py``), else once per code cache by the inductor's code cache (~0.3 s,
the first import), under a key that needs no compiler run, so an import pays ~5 ms (the key, the
code-cache import, dlopen). Without a C++ compiler OpenBLAS keeps its pool (and
no OpenMP code of ember's runs either). Numerics are unchanged: OpenBLAS splits the work the
same way, only the threads differ (tested, bit for bit).
``EMBER_BLAS_THREADS=native`` (before ``import ember``) keeps OpenBLAS's pool. A forked child
gets OpenBLAS's own pool back (an OpenMP pool does not survive ``fork``).
"""
from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import List, Optional, Tuple

log = logging.getLogger("ember.runtime")

# the callback setter and thread-count setter, as numpy's scipy-openblas and a plain OpenBLAS name them
_SETTERS: Tuple[Tuple[str, str], ...] = (
    ("scipy_openblas_set_threads_callback_function64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_set_threads_callback_function", "scipy_openblas_set_num_threads"),
    ("openblas_set_threads_callback_function64_", "openblas_set_num_threads64_"),
    ("openblas_set_threads_callback_function", "openblas_set_num_threads"),
)

# the native callback (its own file so that setup.py can prebuild it: ember/inductor/prebuilt.py)
_SOURCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_blas_threads.cpp")
with open(_SOURCE_PATH) as _f:
    _SOURCE = _f.read()

_lock = threading.Lock()
_state = {"tried": False, "installed": []}   # installed: [(path, setter)]
_helper: Optional[ctypes.CDLL] = None


def wanted() -> bool:
    """False when the user kept OpenBLAS's own pool (``EMBER_BLAS_THREADS=native``)."""
    return os.environ.get("EMBER_BLAS_THREADS", "").strip().lower() != "native"


def openblas_handles() -> List[Tuple[str, ctypes.CDLL]]:
    """(path, ctypes handle) of every OpenBLAS mapped into this process, numpy's first."""
    from ._openmp import mapped_libraries
    out = []
    for p in sorted(mapped_libraries("openblas"), key=lambda p: "numpy" not in p):
        try:
            out.append((p, ctypes.CDLL(p)))
        except OSError:
            continue
    return out


def openblas_libraries() -> List[Tuple[str, ctypes.CDLL, str, str]]:
    """Loaded OpenBLAS libraries that take a threads callback: (path, handle, setter, num-threads setter)."""
    found = []
    for p, h in openblas_handles():
        setter = next((pair for pair in _SETTERS if hasattr(h, pair[0])), None)
        if setter is not None:
            found.append((p, h, *setter))
    return found


def installed() -> List[str]:
    """Paths of the OpenBLAS libraries whose threaded jobs run on the OpenMP pool."""
    return [p for p, _ in _state["installed"]]


def calls() -> int:
    """BLAS calls that ran their jobs through the callback (0 before :func:`install`)."""
    return int(_helper.ember_blas_thread_calls()) if _helper is not None else 0


def _helper_key() -> str:
    from .inductor import codecache
    return codecache.helper_key(_SOURCE, "blas-threads")


def install() -> List[str]:
    """Register the callback with every loaded OpenBLAS (once per process; see the module doc).
    Returns the libraries it went into; [] when there is none, it is not wanted, or the helper
    cannot be built (logged once)."""
    global _helper
    if _state["tried"]:
        return installed()
    with _lock:
        if _state["tried"]:
            return installed()
        _state["tried"] = True
        if not wanted():
            return []
        libs = openblas_libraries()
        if not libs:
            return []
        try:
            from .inductor import codecache
            helper = codecache.load_key(_helper_key(), _SOURCE)
        except Exception as e:  # noqa: BLE001 - no compiler: OpenBLAS keeps its pool
            log.info("ember: BLAS jobs stay on OpenBLAS's own threads (the helper did not build: %s)", e)
            return []
        helper.ember_blas_thread_calls.restype = ctypes.c_int64
        _helper = helper
        address = ctypes.cast(helper.ember_blas_threads, ctypes.c_void_p)
        from ._openmp import num_threads
        keep_count = "OPENBLAS_NUM_THREADS" in os.environ
        for path, h, setter, nthreads in libs:
            fn = getattr(h, setter)
            fn.argtypes, fn.restype = [ctypes.c_void_p], None
            if not keep_count and hasattr(h, nthreads):
                # jobs per call = OpenBLAS's thread count: no more than the OpenMP pool has
                setn = getattr(h, nthreads)
                setn.argtypes, setn.restype = [ctypes.c_int], None
                setn(num_threads())
            fn(address)
            _state["installed"].append((path, setter))
        if _state["installed"] and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_uninstall_in_child)
        log.info("ember: BLAS jobs run on the OpenMP pool (%s)", ", ".join(installed()))
        return installed()


def _uninstall_in_child() -> None:
    """After ``fork``: OpenBLAS's own pool again (it re-creates it; the OpenMP pool did not survive)."""
    for path, setter in _state["installed"]:
        try:
            fn = getattr(ctypes.CDLL(path), setter)
            fn.argtypes, fn.restype = [ctypes.c_void_p], None
            fn(None)
        except (OSError, AttributeError):
            pass
    _state["installed"] = []
