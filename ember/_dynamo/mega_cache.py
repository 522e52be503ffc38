"""``ember.compiler.save_cache_artifacts`` / ``load_cache_artifacts`` (torch's "mega-cache").

What a compile leaves on disk, under ``$EMBER_CACHE_DIR`` (``ember/runtime/disk_cache.py``):
the aot cache's entries (``aot/<k[:2]>/<k>.aot``: the traced forward/backward graphs), the FX
graph cache's (``inductor/fxgraph/<k[:2]>/<k>.fxg``: inductor's generated code) and the kernel
cache's shared objects (``inductor/<k[:2]>/<k>.so`` and their ``.sha256``). ``disk_cache``
records every entry this process wrote or read; ``save_cache_artifacts()`` bundles those of
the aot and FX graph caches, plus the kernels each FX graph entry loads, into one blob that
``load_cache_artifacts(blob)`` writes into another process's (possibly empty) cache, so that
its first compile of the same programs hits all three caches instead of tracing, lowering and
running g++. Keys include the Python/numpy versions, ember's sources, the C++ compiler and the
CPU, so a blob from another setup loads but simply never hits.

Blob layout: ``EMBER-MEGACACHE <format> <header length>\\n``, a JSON header (per file: its path
relative to the cache root, kind, size, sha256), then the files' bytes in order. A blob that is
cut, altered or not one of these is refused (logged, None returned, as torch does). Paths are
checked to stay inside the cache folders. The entries it carries hold pickles that ember's
caches load: load blobs you trust, as with torch's mega-cache.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections import defaultdict

log = logging.getLogger("ember.compiler.cache")

_MAGIC = b"EMBER-MEGACACHE"
_FORMAT = "1"
_KINDS = {"aot": "aot_autograd", "fxgraph": "inductor", "kernel": "inductor"}


@dataclasses.dataclass
class CacheInfo:
    """What a save bundled or a load installed, as lists of cache keys per cache (torch's
    ``torch.compiler.CacheInfo``): ``inductor_artifacts`` (FX graph entries and kernels),
    ``aot_autograd_artifacts``; ember has no autotune, PGO or precompile caches, whose lists stay empty."""

    artifacts: defaultdict = dataclasses.field(default_factory=lambda: defaultdict(list))

    @property
    def inductor_artifacts(self) -> list:
        return self.artifacts["inductor"]

    @property
    def aot_autograd_artifacts(self) -> list:
        return self.artifacts["aot_autograd"]

    @property
    def autotune_artifacts(self) -> list:
        return self.artifacts["autotune"]

    @property
    def pgo_artifacts(self) -> list:
        return self.artifacts["pgo"]

    @property
    def precompile_artifacts(self) -> list:
        return self.artifacts["precompile"]

    def add(self, kind: str, key: str) -> None:
        self.artifacts[kind].append(key)

    def clear(self) -> None:
        self.artifacts.clear()

    def empty(self) -> bool:
        return not any(self.artifacts.values())


def _root():
    from ..runtime import disk_cache
    return os.path.abspath(disk_cache.cache_root())


def _classify(rel: str):
    """(kind, key) of a cache file given by its path relative to the root, None for other files."""
    parts = rel.split("/")
    name = parts[-1]
    if len(parts) == 3 and parts[0] == "aot" and name.endswith(".aot"):
        return "aot", name[:-4]
    if len(parts) == 4 and parts[:2] == ["inductor", "fxgraph"] and name.endswith(".fxg"):
        return "fxgraph", name[:-4]
    if len(parts) == 3 and parts[0] == "inductor" and name.endswith((".so", ".sha256")):
        return "kernel", name.rsplit(".", 1)[0]
    return None


def _kernel_files(fxg_path):
    """The kernel files (.so and .sha256) an FX graph entry loads, that exist."""
    from ..inductor import codecache, fx_graph_cache
    try:
        entry = fx_graph_cache._read(fxg_path)
    except ValueError:
        return []
    out = []
    for key in (entry or {}).get("so_keys", ()):
        _, so, sha = codecache._paths(key)
        if os.path.exists(so) and os.path.exists(sha):
            out += [so, sha]
    return out


def _collect():
    """Absolute paths of the compile-cache files this process used, entries first."""
    from ..runtime import disk_cache
    root = _root()
    picked = {}
    for path in list(disk_cache.touched):
        path = os.path.abspath(path)
        if not path.startswith(root + os.sep) or not os.path.exists(path):
            continue
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        kind = _classify(rel)
        if kind is None:
            continue
        if kind[0] == "kernel" and path.endswith(".sha256"):
            so = path[:-len(".sha256")] + ".so"
            if os.path.exists(so):
                picked[so] = None
        picked[path] = None
        if kind[0] == "fxgraph":
            for p in _kernel_files(path):
                picked[p] = None
    # a kernel travels as its .so with its .sha256 (codecache rebuilds a .so without a checksum)
    def complete(p):
        if p.endswith(".so"):
            return p[:-3] + ".sha256" in picked
        if p.endswith(".sha256"):
            return p[:-7] + ".so" in picked
        return True
    return [p for p in picked if complete(p)]


def save_cache_artifacts():
    """``(blob, CacheInfo)`` of the compile-cache entries this process wrote or hit, or None when
    there are none (see the module docstring)."""
    root = _root()
    info = CacheInfo()
    header, chunks = [], []
    for path in _collect():
        with open(path, "rb") as f:
            data = f.read()
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        kind, key = _classify(rel)
        header.append({"path": rel, "kind": kind, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        chunks.append(data)
        if not rel.endswith(".sha256"):
            info.add(_KINDS[kind], key)
    if not header:
        return None
    head = json.dumps({"format": _FORMAT, "files": header}, sort_keys=True).encode()
    blob = b" ".join([_MAGIC, _FORMAT.encode(), str(len(head)).encode()]) + b"\n" + head + b"".join(chunks)
    return blob, info


def _parse(blob):
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_cache_artifacts: argument 'serialized_artifacts' must be bytes, "
                        f"got {type(blob).__name__}")
    blob = bytes(blob)
    first, sep, rest = blob.partition(b"\n")
    parts = first.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != _MAGIC:
        raise ValueError("not a blob made by ember.compiler.save_cache_artifacts")
    if parts[1] != _FORMAT.encode():
        raise ValueError(f"blob format {parts[1].decode(errors='replace')!r}, this ember reads {_FORMAT!r}")
    n = int(parts[2])
    head = json.loads(rest[:n].decode())
    files, pos, body = [], n, rest
    for item in head["files"]:
        rel, size = item["path"], int(item["size"])
        data = body[pos:pos + size]
        pos += size
        if len(data) != size or hashlib.sha256(data).hexdigest() != item["sha256"]:
            raise ValueError(f"{rel}: truncated or altered")
        if os.path.isabs(rel) or ".." in rel.split("/") or _classify(rel) is None:
            raise ValueError(f"{rel!r} is not a path of ember's compile caches")
        files.append((rel, data))
    if pos != len(body):
        raise ValueError("trailing bytes after the last file")
    return files


def load_cache_artifacts(serialized_artifacts):
    """Write the entries of a ``save_cache_artifacts`` blob into this process's cache folders
    (``$EMBER_CACHE_DIR``), so the next compiles of those programs hit; returns a ``CacheInfo``
    of what it holds, or None (with a warning logged) for a blob that is not valid."""
    try:
        files = _parse(serialized_artifacts)
    except (ValueError, KeyError, UnicodeDecodeError) as e:
        log.warning("ember.compiler.load_cache_artifacts: ignoring the blob: %s", e)
        return None
    from ..runtime import disk_cache
    root = _root()
    info = CacheInfo()
    for rel, data in files:
        path = os.path.join(root, *rel.split("/"))
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            disk_cache.atomic_write(path, data, ".load")
        kind, key = _classify(rel)
        if not rel.endswith(".sha256"):
            info.add(_KINDS[kind], key)
    return info
