"""Callgrind client requests for Python code: a tiny C library (built with the system C compiler
against valgrind's own ``<valgrind/callgrind.h>``, cached per user) loaded with ctypes.

``toggle()`` switches event collection on/off, ``toggle_and_dump()`` switches it off and writes
the counts so far to a new numbered ``callgrind.out.N`` file, ``start_instrumentation()`` turns
instrumentation on (the run starts with it off, so importing ember under valgrind stays fast),
``running_on_valgrind()`` tells whether we are inside valgrind at all.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile

_SOURCE = r"""
#include <valgrind/callgrind.h>
int ember_cg_running(void) { return RUNNING_ON_VALGRIND; }
void ember_cg_start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
void ember_cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void ember_cg_toggle_and_dump(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS; }
"""

_HEADER = "/usr/include/valgrind/callgrind.h"


def supported_platform() -> bool:
    """Linux on x86-64 / aarch64 with valgrind's headers and a C compiler."""
    return (platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64")
            and os.path.exists(_HEADER) and _compiler() is not None)


def _compiler():
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


@functools.lru_cache(maxsize=None)
def library_path() -> str:
    """Build (once per source version) and return the shared library's path."""
    if not supported_platform():
        raise OSError("Valgrind is not supported on this platform.")
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    cache = os.path.join(tempfile.gettempdir(), f"ember_callgrind_{os.getuid()}")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"libember_callgrind_{digest}.so")
    if not os.path.exists(path):
        src = os.path.join(cache, f"ember_callgrind_{digest}.c")
        with open(src, "w") as f:
            f.write(_SOURCE)
        tmp = f"{path}.{os.getpid()}.tmp"
        subprocess.run([_compiler(), "-O1", "-shared", "-fPIC", "-o", tmp, src], check=True, capture_output=True)
        os.replace(tmp, path)       # atomic: concurrent builders never see a half-written library
    return path


def load(path: str | None = None):
    lib = ctypes.CDLL(path or library_path())
    lib.ember_cg_running.restype = ctypes.c_int
    for name in ("ember_cg_start_instrumentation", "ember_cg_toggle", "ember_cg_toggle_and_dump"):
        getattr(lib, name).restype = None
    return lib
