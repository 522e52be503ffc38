"""Digests of ember's own source files for cache keys, each file's remembered across processes.

Why. The aot and FX-graph caches key every entry on a sha256 of the ember sources a compile
runs through, so that editing ember invalidates what it compiled. Reading and hashing those
~900 files (6-7 MB) took ~70 ms in every new process: a quarter of a warm compile (LSTM
inference's was 0.23-0.35 s against the issue's 0.3 s target). Now each file's sha256 is
remembered in the cache root (``source-digests.json``) under the file's stat identity -- size,
mtime and ctime in nanoseconds, inode -- and a file whose identity differs is read and hashed
again. ctime cannot be set from user space and moves with every write to the file (a copy that
preserves mtimes still gets a new ctime), so an edited source is always seen: the trust a .pyc
places in its source's stat, made stricter. The stat walk costs ~10 ms.

The tree's digest is a sha256 over (path relative to the root, file digest) pairs in sorted
order. A memo that is missing, unreadable or foreign is ignored (every file hashed, the memo
rewritten); one that cannot be written is not an error (the next process hashes again).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, Iterable, List, Optional

_MEMO_NAME = "source-digests.json"
_FORMAT = 1
_memo: Optional[Dict[str, list]] = None     # absolute path -> [size, mtime_ns, ctime_ns, inode, sha256]


def _memo_path() -> str:
    from .disk_cache import cache_root
    return os.path.join(cache_root(), _MEMO_NAME)


def _load() -> Dict[str, list]:
    global _memo
    if _memo is None:
        _memo = {}
        try:
            with open(_memo_path(), "rb") as f:
                data = json.loads(f.read())
            if isinstance(data, dict) and data.get("format") == _FORMAT and isinstance(data.get("files"), dict):
                _memo = {k: v for k, v in data["files"].items() if isinstance(v, list) and len(v) == 5}
        except (OSError, ValueError):
            pass
    return _memo


def _save(memo: Dict[str, list]) -> None:
    from .disk_cache import atomic_write, touched
    path = _memo_path()
    try:
        atomic_write(path, json.dumps({"format": _FORMAT, "files": memo}).encode(), suffix=".json")
    except OSError:
        return
    touched.pop(path, None)       # not a compile artifact (ember.compiler's cache bundles)


def _identity(st: os.stat_result) -> List[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def file_digest(path: str, memo: Dict[str, list]) -> "tuple[str, bool]":
    """(sha256 of the file's bytes, whether ``memo`` gained an entry)."""
    ident = _identity(os.stat(path))
    ent = memo.get(path)
    if ent is not None and ent[:4] == ident:
        return ent[4], False
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if _identity(os.stat(path)) != ident:      # written while read: hash it again next time
        return digest, False
    memo[path] = ident + [digest]
    return digest, True


def tree_digest(root: str, files: Iterable[str]) -> str:
    """sha256 over the (path relative to ``root``, content sha256) of ``files`` (absolute paths)."""
    memo = _load()
    h = hashlib.sha256()
    changed = False
    prefix = os.path.join(root, "")
    for f in sorted(files):
        d, new = file_digest(f, memo)
        changed |= new
        rel = f[len(prefix):] if f.startswith(prefix) else os.path.relpath(f, root)   # (relpath: 20 us a file)
        h.update(rel.encode() + b"\0" + d.encode() + b"\0")
    if changed:
        _save(memo)
    return h.hexdigest()
