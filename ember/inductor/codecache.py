"""Compiled-kernel cache: in memory and on disk.

Key: sha256 of (source, compiler command and flags, compiler version, the
CPU's model and feature flags (the code is ``-march=native``), ember version,
this file's format version). The shared object lives at
``$EMBER_CACHE_DIR/inductor/<key[:2]>/<key>.so`` (default cache dir:
``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember``), next to ``<key>.sha256``
holding the .so's own checksum.

Concurrency: g++ writes to a private temporary file in the same directory,
which is then ``os.replace``-d into place (atomic on POSIX), so two processes
compiling the same kernel both succeed and readers never see a partial file.
The checksum is written (atomically too) *after* the .so; a .so without a
matching checksum -- truncated, corrupt, or from a crashed writer -- is
rebuilt, as is one that fails to load.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

from . import config

log = logging.getLogger("ember.inductor")

FORMAT_VERSION = "1"
_EMBER_VERSION = "0.1.0"

_memory: Dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()
_compiler_version: Dict[str, str] = {}


class CompileError(RuntimeError):
    """g++ failed; the message carries the compiler's output."""


def cache_dir() -> str:
    from ..runtime.disk_cache import cache_root
    return os.path.join(cache_root(), "inductor")


def compiler_version(cxx: Optional[str] = None) -> str:
    cxx = cxx or config.cxx
    v = _compiler_version.get(cxx)
    if v is None:
        try:
            v = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"C++ compiler {cxx!r} not usable: {e}") from e
        _compiler_version[cxx] = v
    return v


def _flags() -> List[str]:
    return list(config.cpp_flags)


_cpu_id: List[str] = []


def cpu_identity() -> str:
    """The host CPU's model and feature flags: ``-march=native`` code is only valid on
    CPUs with the same instruction sets, so a cache directory shared between
    machines (a network home) must not hand one machine's kernels to another."""
    if not _cpu_id:
        ident = ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith(("model name", "flags", "Features", "CPU part")):
                        ident += line.strip() + "\n"
                    if line.strip() == "" and ident:
                        break
        except OSError:
            import platform
            ident = platform.processor() + platform.machine()
        _cpu_id.append(hashlib.sha256(ident.encode()).hexdigest()[:16])
    return _cpu_id[0]


def cache_key(source: str) -> str:
    h = hashlib.sha256()
    for part in (source, config.cxx, " ".join(_flags()), " ".join(config.cpp_libs), compiler_version(),
                 cpu_identity(), _EMBER_VERSION, FORMAT_VERSION):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _paths(key: str):
    d = os.path.join(cache_dir(), key[:2])
    return d, os.path.join(d, key + ".so"), os.path.join(d, key + ".sha256")


def _file_sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _atomic_write_text(path: str, text: str) -> None:
    from ..runtime.disk_cache import atomic_write
    atomic_write(path, text.encode(), ".txt")


def _valid(so: str, sha: str) -> bool:
    try:
        with open(sha) as f:
            want = f.read().strip()
        return bool(want) and _file_sha(so) == want
    except OSError:
        return False


# ---------------------------------------------------------------- precompiled header
# Parsing the standard headers -- <immintrin.h> above all -- was ~1.1 s of the ~1.2 s g++ spent
# on a small kernel (every generated kernel and native helper pays it). They are compiled once
# into a GCC precompiled header (``ember_prelude.h.gch``, ~40 MB, built in ~3 s with the
# kernels' own flags) that every compile then loads with ``-include`` (0.16 s for the same
# kernel, the same machine code). The header only includes what the sources include
# themselves, guarded, so with or without it a source means the same; GCC ignores a .gch that
# does not match the flags (``-Winvalid-pch`` says so) and reads the text instead. Stored
# like a kernel: under a key of (header, compiler, flags, CPU), written atomically, with a
# checksum; a corrupt one is rebuilt. Only for GCC (``config.precompiled_header``).
_PRELUDE_HEADER = """// ember: the standard headers its kernels and native helpers include (precompiled once)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
#include <omp.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
"""
_pch: Dict[str, str] = {}        # key -> the header's path ("" when it could not be built)
_pch_lock = threading.Lock()


def _pch_flags() -> List[str]:
    """``-include <prelude.h> -Winvalid-pch``, building the precompiled header on first use."""
    if not config.precompiled_header:
        return []
    try:
        version = compiler_version()
    except CompileError:
        return []
    if "g++" not in version and "GCC" not in version:
        return []
    h = hashlib.sha256()
    for part in (_PRELUDE_HEADER, config.cxx, " ".join(_flags()), version, cpu_identity(), FORMAT_VERSION, "pch"):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    path = _pch.get(key)
    if path is None:
        with _pch_lock:
            path = _pch.get(key)
            if path is None:
                path = _pch[key] = _build_pch(key)
    return ["-include", path, "-Winvalid-pch"] if path else []


def _build_pch(key: str) -> str:
    d = os.path.join(cache_dir(), key[:2], key + ".pch")      # (a kernel shard: shared like kernels)
    header = os.path.join(d, "ember_prelude.h")
    gch, sha = header + ".gch", header + ".gch.sha256"
    if os.path.exists(header) and os.path.exists(gch) and _valid(gch, sha):
        return header
    try:
        os.makedirs(d, exist_ok=True)
        from ..runtime.disk_cache import atomic_write
        atomic_write(header, _PRELUDE_HEADER.encode(), ".h")
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".gch")
        os.close(fd)
        flags = [f for f in _flags() if f != "-shared"]
        r = subprocess.run([config.cxx, *flags, "-x", "c++-header", header, "-o", tmp], capture_output=True,
                           text=True)
        if r.returncode != 0:
            os.unlink(tmp)
            log.info("inductor: no precompiled header (g++ failed: %s); kernels parse their headers",
                     r.stderr.strip()[-500:])
            return ""
        os.replace(tmp, gch)
        _atomic_write_text(sha, _file_sha(gch))
        return header
    except OSError as e:
        log.info("inductor: no precompiled header (%s); kernels parse their headers", e)
        return ""


def _compiler_message(stderr: str, limit: int = 8000) -> str:
    """The compiler's stderr for an error message, at most ``limit`` characters: when cut, the
    first ``error:`` line (the cause; later errors often follow from it) is kept ahead of the tail."""
    if len(stderr) <= limit:
        return stderr
    first = next((ln for ln in stderr.splitlines() if "error:" in ln), None)
    head = f"{first}\n[... {len(stderr) - limit} characters cut ...]\n" if first else ""
    return head + stderr[-limit:]


def compile_so(source: str, so_path: str, extra_flags=()) -> str:
    """Compile ``source`` into ``so_path`` atomically; returns the compiler's stderr."""
    d = os.path.dirname(so_path)
    os.makedirs(d, exist_ok=True)
    pch = _pch_flags()
    fd, src = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".cpp")
    with os.fdopen(fd, "w") as f:
        f.write(source)
    fd, tmp_so = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".so")
    os.close(fd)
    cmd = [config.cxx, *_flags(), *pch, *extra_flags, src, "-o", tmp_so, *config.cpp_libs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise CompileError(f"g++ failed ({' '.join(cmd)}):\n{_compiler_message(r.stderr)}")
        os.replace(tmp_so, so_path)
        return r.stderr
    finally:
        for p in (src, tmp_so):
            if os.path.exists(p):
                os.unlink(p)


def _openmp_env() -> None:
    if config.omp_wait_policy:
        os.environ.setdefault("OMP_WAIT_POLICY", config.omp_wait_policy)


def helper_key(source: str, tag: str) -> str:
    """Code-cache key of one of ember's fixed native helpers (the BLAS threads callback, the
    GEMM) without running the compiler (:func:`cache_key` asks ``g++ --version``, ~5 ms, which
    an ``import ember`` should not pay): the compiler binary's path, size and mtime stand for
    its version."""
    import shutil
    exe = shutil.which(config.cxx)
    if exe is None:
        raise CompileError(f"no C++ compiler {config.cxx!r} on PATH")
    real = os.path.realpath(exe)
    st = os.stat(real)
    h = hashlib.sha256()
    for part in (source, real, str(st.st_size), str(st.st_mtime_ns), " ".join(config.cpp_flags),
                 " ".join(config.cpp_libs), cpu_identity(), FORMAT_VERSION, tag):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load(source: str) -> ctypes.CDLL:
    """The loaded library for ``source``, compiling it on a miss."""
    return load_key(cache_key(source), source)


def load_key(key: str, source: str) -> ctypes.CDLL:
    """The library stored under ``key`` (a :func:`cache_key` computed earlier, e.g. kept in
    a graph-cache entry), compiled from ``source`` when it is missing or corrupt. Skips
    hashing the source and asking the compiler for its version on the warm path."""
    _openmp_env()
    lib = _memory.get(key)
    if lib is not None:
        return lib
    _, so, sha = _paths(key)
    lib = None
    if os.path.exists(so) and _valid(so, sha):
        try:
            lib = ctypes.CDLL(so)
            stats["disk_hits"] += 1
        except OSError as e:
            log.warning("inductor: cached kernel %s failed to load (%s); rebuilding", so, e)
            lib = None
    elif os.path.exists(so):
        log.warning("inductor: cached kernel %s has a bad checksum; rebuilding", so)
    if lib is None:
        compile_so(source, so)
        _atomic_write_text(sha, _file_sha(so))
        with _lock:
            stats["compiles"] += 1
        lib = ctypes.CDLL(so)
    with _lock:
        return _memory.setdefault(key, lib)


def load_many(sources: List[str]) -> List[ctypes.CDLL]:
    """Compile several sources in parallel (g++ runs as separate processes, so
    threads suffice to overlap them)."""
    if len(sources) <= 1:
        return [load(s) for s in sources]
    with ThreadPoolExecutor(max_workers=min(len(sources), os.cpu_count() or 1)) as ex:
        return list(ex.map(load, sources))


def clear_memory_cache() -> None:
    _memory.clear()


stats = {"compiles": 0, "disk_hits": 0}
