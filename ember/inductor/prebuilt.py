"""ember's fixed native code, built once when ember is installed instead of in every new code cache.

Why. Three pieces of native code do not depend on any model: the GEMM (``gemm_native.cpp``),
the callback that runs OpenBLAS's jobs on the OpenMP pool (``ember/_blas_threads.cpp``) and the
precompiled header of the standard headers every kernel includes (``codecache._pch_flags``).
The code cache built them into each fresh ``EMBER_CACHE_DIR`` on first use: the header and the
callback at ``import ember`` (~2 s on the AVX-512 box, the first import ever), the GEMM during
the first compile of a graph with a float32 product (0.7 s on the AVX-512 box, ~4.5 s for the
AVX2 build on the AVX2 box -- most of the MLP rows' cold compile there). A compiled framework
ships such code built (torch ships oneDNN and its kernels); ember builds it where it is
installed, because the code cache compiles for the host CPU (``-march=native``).

How. ``setup.py``'s ``build_ext`` calls :func:`build` after the C extensions, which writes
``ember/_C/prebuilt/`` (in the source tree for an editable install, in the wheel otherwise):
``<key>.so`` with ``<key>.sha256`` for each helper, ``<key>.pch/ember_prelude.h`` with its
``.gch`` and checksum for the header. The keys are exactly the ones the code cache computes
at run time (:func:`helper_key`, :func:`pch_key`: the source, the compiler's path, size and
mtime or version, the flags, the CPU's identity), so a prebuilt file is used only where the
code cache would have built the very same thing: an edited source, other flags, another
compiler or a wheel taken to another CPU miss, and the code cache builds as before. A file
whose checksum fails is ignored (never rebuilt in place: the install may be read-only).
``EMBER_PREBUILD=0`` at install skips the build; ``config.prebuilt = False`` (``EMBER_PREBUILT=0``)
makes the code cache ignore the directory (the ablation; tests of the cache's own building).

This module imports nothing of ember (only the standard library): ``setup.py`` loads it by path
in pip's build environment, where numpy is not installed."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from typing import Callable, List, Optional, Sequence

FORMAT_VERSION = "1"       # of the code cache's keys and layout (codecache.py uses this one)

# the standard headers ember's kernels and native helpers include (precompiled once; see codecache)
PRELUDE_HEADER = """// ember: the standard headers its kernels and native helpers include (precompiled once)
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

_HERE = os.path.dirname(os.path.abspath(__file__))
# the fixed helpers: (tag, source file); the tags are part of the keys
HELPERS = (("gemm", os.path.join(_HERE, "gemm_native.cpp")),
           ("blas-threads", os.path.join(os.path.dirname(_HERE), "_blas_threads.cpp")))

_cpu_id: List[str] = []


def directory() -> str:
    """Where an install's prebuilt files live: ``ember/_C/prebuilt``."""
    return os.path.join(os.path.dirname(_HERE), "_C", "prebuilt")


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


def _digest(parts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def helper_key(source: str, tag: str, cxx: str, flags: Sequence[str], libs: Sequence[str]) -> Optional[str]:
    """The code-cache key of a fixed helper, without running the compiler (``g++ --version``
    costs ~5 ms, which ``import ember`` should not pay): the compiler binary's real path, size
    and mtime stand for its version. None when ``cxx`` is not on the PATH."""
    exe = shutil.which(cxx)
    if exe is None:
        return None
    real = os.path.realpath(exe)
    st = os.stat(real)
    return _digest((source, real, str(st.st_size), str(st.st_mtime_ns), " ".join(flags), " ".join(libs),
                    cpu_identity(), FORMAT_VERSION, tag))


def pch_key(cxx: str, flags: Sequence[str], version: str) -> str:
    """The key of the precompiled header for these compiler flags and ``cxx --version`` line."""
    return _digest((PRELUDE_HEADER, cxx, " ".join(flags), version, cpu_identity(), FORMAT_VERSION, "pch"))


def compiler_version(cxx: str) -> str:
    """The first line of ``cxx --version`` (raises OSError/SubprocessError when it cannot run)."""
    return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]


def is_gcc(version: str) -> bool:
    """Precompiled headers are used with GCC only (clang's are another format and flag)."""
    return "g++" in version or "GCC" in version


def file_sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def valid(path: str, sha_path: str) -> bool:
    """Whether ``path`` matches the checksum stored in ``sha_path`` (False when either is missing)."""
    try:
        with open(sha_path) as f:
            want = f.read().strip()
        return bool(want) and file_sha(path) == want
    except OSError:
        return False


def find_so(key: str, root: Optional[str] = None) -> Optional[str]:
    """The prebuilt library stored under ``key``, when there is one with a good checksum."""
    so = os.path.join(root or directory(), key + ".so")
    return so if os.path.exists(so) and valid(so, so[:-3] + ".sha256") else None


def find_pch(key: str, root: Optional[str] = None) -> Optional[str]:
    """The prebuilt prelude header (its ``.gch`` next to it) under ``key``, when its checksum holds."""
    header = os.path.join(root or directory(), key + ".pch", "ember_prelude.h")
    gch = header + ".gch"
    return header if os.path.exists(header) and os.path.exists(gch) and valid(gch, gch + ".sha256") else None


def _write(path: str, data: bytes) -> None:
    """Atomically: a temporary file in the same directory, then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _compile(cmd: List[str], out: str) -> List[str]:
    """Run one compiler command that writes ``out`` (through a temporary name), then its checksum;
    returns the two paths."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out), prefix=".tmp-", suffix=os.path.splitext(out)[1])
    os.close(fd)
    try:
        r = subprocess.run([*cmd, "-o", tmp], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr.strip()[-2000:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    sha = out + ".sha256" if out.endswith(".gch") else out[:-3] + ".sha256"
    _write(sha, file_sha(out).encode())
    return [out, sha]


def build(target: str, cxx: str, flags: Sequence[str], libs: Sequence[str], use_pch: bool = True,
          say: Callable[[str], None] = print) -> List[str]:
    """Build the precompiled header and the fixed helpers into ``target`` (setup.py's step).

    Returns the files written. Never raises: a helper that does not build (no compiler, a CPU
    with neither AVX-512 nor AVX2, an ARM machine for the GEMM) is reported through ``say`` and
    left to the code cache, which then fails or falls back at run time exactly as before."""
    written: List[str] = []
    try:
        version = compiler_version(cxx)
    except (OSError, subprocess.SubprocessError) as e:
        say(f"ember: no prebuilt native helpers ({cxx!r} not usable: {e})")
        return written
    os.makedirs(target, exist_ok=True)
    include: List[str] = []
    if use_pch and is_gcc(version):
        d = os.path.join(target, pch_key(cxx, flags, version) + ".pch")
        header = os.path.join(d, "ember_prelude.h")
        try:
            os.makedirs(d, exist_ok=True)
            _write(header, PRELUDE_HEADER.encode())
            gch = _compile([cxx, *[f for f in flags if f != "-shared"], "-x", "c++-header", header], header + ".gch")
            written += [header, *gch]
            include = ["-include", header, "-Winvalid-pch"]
        except (OSError, RuntimeError) as e:
            say(f"ember: no prebuilt precompiled header ({e})")
    for tag, path in HELPERS:
        with open(path) as f:
            source = f.read()
        key = helper_key(source, tag, cxx, flags, libs)
        if key is None:
            say(f"ember: no prebuilt {tag} helper ({cxx!r} not on the PATH)")
            continue
        so = os.path.join(target, key + ".so")
        try:
            written += _compile([cxx, *flags, *include, "-x", "c++", path, *libs], so)
        except (OSError, RuntimeError) as e:
            say(f"ember: no prebuilt {tag} helper; the code cache builds it on first use ({e})")
    return written
