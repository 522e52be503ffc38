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

from . import config, prebuilt
from .prebuilt import FORMAT_VERSION, cpu_identity  # noqa: F401 - re-exported (fx_graph_cache, tests)

log = logging.getLogger("ember.inductor")

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
            v = prebuilt.compiler_version(cxx)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"C++ compiler {cxx!r} not usable: {e}") from e
        _compiler_version[cxx] = v
    return v


def _flags() -> List[str]:
    return list(config.cpp_flags)


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


_file_sha = prebuilt.file_sha
_valid = prebuilt.valid


def _atomic_write_text(path: str, text: str) -> None:
    from ..runtime.disk_cache import atomic_write
    atomic_write(path, text.encode(), ".txt")


# ---------------------------------------------------------------- precompiled header
# Parsing the standard headers -- <immintrin.h> above all -- was ~1.1 s of the ~1.2 s g++ spent
# on a small kernel (every generated kernel and native helper pays it). They are compiled once
# into a GCC precompiled header (``ember_prelude.h.gch``, ~40 MB, built in ~3 s with the
# kernels' own flags) that every compile then loads with ``-include`` (0.16 s for the same
# kernel, the same machine code). The header only includes what the sources include
# themselves, guarded, so with or without it a source means the same; GCC ignores a .gch that
# does not match the flags (``-Winvalid-pch`` says so) and reads the text instead. Stored
# like a kernel: under a key of (header, compiler, flags, CPU), written atomically, with a
# checksum; a corrupt one is rebuilt. Only for GCC (``config.precompiled_header``). Built at
# install time too (``prebuilt.py``): found there, a fresh cache does not build it.
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
    if not prebuilt.is_gcc(version):
        return []
    key = prebuilt.pch_key(config.cxx, _flags(), version)
    path = _pch.get(key)
    if path is None:
        with _pch_lock:
            path = _pch.get(key)
            if path is None:
                path = _pch[key] = _build_pch(key)
    return ["-include", path, "-Winvalid-pch"] if path else []


def _build_pch(key: str) -> str:
    """The header's path: the install's prebuilt one, the cache's, or one built now ("" if none)."""
    if config.prebuilt:
        found = prebuilt.find_pch(key)
        if found:
            return found
    d = os.path.join(cache_dir(), key[:2], key + ".pch")      # (a kernel shard: shared like kernels)
    header = os.path.join(d, "ember_prelude.h")
    gch, sha = header + ".gch", header + ".gch.sha256"
    if os.path.exists(header) and os.path.exists(gch) and _valid(gch, sha):
        return header
    try:
        os.makedirs(d, exist_ok=True)
        from ..runtime.disk_cache import atomic_write
        atomic_write(header, prebuilt.PRELUDE_HEADER.encode(), ".h")
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
    its version. ``setup.py`` prebuilds these under the same keys (``prebuilt.py``)."""
    key = prebuilt.helper_key(source, tag, config.cxx, config.cpp_flags, config.cpp_libs)
    if key is None:
        raise CompileError(f"no C++ compiler {config.cxx!r} on PATH")
    return key


def load(source: str) -> ctypes.CDLL:
    """The loaded library for ``source``, compiling it on a miss."""
    return load_key(cache_key(source), source)


def _load_prebuilt(key: str) -> Optional[ctypes.CDLL]:
    """One of the fixed helpers as built when ember was installed (``prebuilt.py``), or None."""
    found = prebuilt.find_so(key)
    if found is None:
        return None
    try:
        lib = ctypes.CDLL(found)
    except OSError as e:
        log.warning("inductor: prebuilt library %s failed to load (%s); using the code cache", found, e)
        return None
    stats["prebuilt_hits"] += 1
    return lib


def load_key(key: str, source: str) -> ctypes.CDLL:
    """The library stored under ``key`` (a :func:`cache_key` computed earlier, e.g. kept in
    a graph-cache entry), compiled from ``source`` when it is missing or corrupt. Skips
    hashing the source and asking the compiler for its version on the warm path."""
    _openmp_env()
    lib = _memory.get(key)
    if lib is not None:
        return lib
    _, so, sha = _paths(key)
    lib = _load_prebuilt(key) if config.prebuilt else None
    if lib is None and os.path.exists(so):
        if _valid(so, sha):
            try:
                lib = ctypes.CDLL(so)
                stats["disk_hits"] += 1
            except OSError as e:
                log.warning("inductor: cached kernel %s failed to load (%s); rebuilding", so, e)
        else:
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


stats = {"compiles": 0, "disk_hits": 0, "prebuilt_hits": 0}
