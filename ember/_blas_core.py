"""numpy's OpenBLAS runs its AVX-512 kernels on a CPU that has AVX-512 but that OpenBLAS does not recognise.

Why. A ``DYNAMIC_ARCH`` OpenBLAS (numpy's wheels ship one) picks its kernel set by CPU family
and model when it loads. A CPU newer than the library falls back to an older set: numpy 2.4's
OpenBLAS 0.3.31 calls AMD's Zen 5 (family 0x1A) "Haswell" and runs AVX2 kernels, half the
FMA width the core has. On the 2-core Zen 5 development box (measured, median of 20):

    =====================  ===============  ================
    sgemm, 2 threads        Haswell kernels  SkylakeX kernels
    =====================  ===============  ================
    1024 x 256 x 1024       2.6 ms, 209 GF   1.4 ms, 388 GF
    1024 x 1024 x 1024      10.0 ms, 215 GF  5.5 ms, 387 GF
    32 x 256 x 1024         0.11 ms          0.10 ms
    =====================  ===============  ================

Matrix products and the convolutions' GEMMs (``ops/_conv_native.py`` calls the same sgemm)
are most of every benchmark model's time, eager and compiled alike.

How. When the library names a kernel set without AVX-512 while the CPU reports every AVX-512
subset OpenBLAS's SkylakeX kernels use (F, CD, BW, DQ, VL), :func:`apply` sets
``OPENBLAS_CORETYPE=SkylakeX`` for as long as it takes to re-run OpenBLAS's own core selection
(``gotoblas_dynamic_quit`` + ``gotoblas_dynamic_init``, both exported), then restores the
environment. OpenBLAS sizes its work buffers from a compile-time constant, not from the kernel
set, so buffers made before the switch stay valid. It runs at ``import ember``, before ember
calls BLAS.

When not. The user exported ``OPENBLAS_CORETYPE`` (OpenBLAS honoured it when it loaded; export
``OPENBLAS_CORETYPE=Haswell`` to keep the library's own choice); the library is not
``DYNAMIC_ARCH``; the CPU flags cannot be read (no ``/proc/cpuinfo``); or the library already
runs an AVX-512 kernel set. Results change in the last bits only (a different blocking order),
as between any two OpenBLAS kernel sets.
"""
from __future__ import annotations

import ctypes
import logging
import os
from typing import List, Optional, Set, Tuple

log = logging.getLogger("ember.runtime")

# OpenBLAS kernel sets that already use AVX-512 (get_corename spellings, lower case)
_AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
# what OpenBLAS's SkylakeX kernels need from the CPU (/proc/cpuinfo spellings)
_NEEDED_FLAGS = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
_TARGET = "SkylakeX"
_state = {"switched": []}   # [(library path, core before, core after)]


def cpu_flags(path: str = "/proc/cpuinfo") -> Optional[Set[str]]:
    """The first CPU's feature flags, or None where they cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def _corename(h: ctypes.CDLL) -> Optional[str]:
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                 "openblas_get_corename"):
        fn = getattr(h, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = [], ctypes.c_char_p
            out = fn()
            return out.decode() if out else None
    return None


def corenames() -> List[Tuple[str, Optional[str]]]:
    """(path, kernel set) of every loaded OpenBLAS, e.g. ``SkylakeX``."""
    from ._blas_threads import openblas_handles
    return [(p, _corename(h)) for p, h in openblas_handles()]


def switched() -> List[Tuple[str, str, str]]:
    """(library, kernel set before, after) for each library :func:`apply` switched."""
    return list(_state["switched"])


def apply(flags: Optional[Set[str]] = None) -> List[Tuple[str, str, str]]:
    """Switch every loaded OpenBLAS that runs a kernel set without AVX-512 on an AVX-512 CPU
    to its SkylakeX kernels (see the module doc). Returns what it switched."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return []
    flags = cpu_flags() if flags is None else flags
    if not flags or not _NEEDED_FLAGS <= flags:
        return []
    from ._blas_threads import openblas_handles
    for path, h in openblas_handles():
        before = _corename(h)
        if before is None or before.lower() in _AVX512_CORES:
            continue
        if not (hasattr(h, "gotoblas_dynamic_quit") and hasattr(h, "gotoblas_dynamic_init")):
            continue   # not DYNAMIC_ARCH: the kernels are fixed at build time
        os.environ["OPENBLAS_CORETYPE"] = _TARGET
        try:
            h.gotoblas_dynamic_quit.restype = None
            h.gotoblas_dynamic_init.restype = None
            h.gotoblas_dynamic_quit()
            h.gotoblas_dynamic_init()
        finally:
            del os.environ["OPENBLAS_CORETYPE"]
        after = _corename(h) or "?"
        _state["switched"].append((path, before, after))
        log.info("ember: OpenBLAS %s: %s kernels -> %s (the CPU has AVX-512; ember/_blas_core.py)",
                 os.path.basename(path), before, after)
    return switched()
