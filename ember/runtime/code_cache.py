"""Code objects of Python source generated at compile time, cached on disk.

Why. A warm compile (every compile cache hits) still generates Python source afresh and
compiles it: the guard function (~10-15 ms for an optimizer step's ~330 checks), inductor's
wrapper (~15-20 ms for an unrolled LSTM's), and the autograd record function of each op the
compiled graphs record (~1 ms each, ~20 for nanoGPT) -- 5-10% of a warm compile that must
stay under 0.3 s. Executing a code object is cheap; compiling one is not. The op bindings
made at import have their own cache (``ops/_binding_cache.py``); this one holds source made
later, one small file per source.

Correct by construction: an entry's path is the sha256 of its file name and whole source,
and the entry stores both and is used only when they are equal to what is asked for (no
trust in the hash). Code objects depend on nothing else but the interpreter, which the
format names (cache tag, bytecode magic, exact version, ``-O`` level), so 3.11's are never
read by 3.12. Files are framed and written atomically (``disk_cache``): a missing,
truncated, corrupt or foreign file is a miss (compiled, rewritten), never an error; a cache
root that cannot be written only means no caching. Sources under ``_MIN_CHARS`` are compiled
directly (a file read costs about what compiling them does). ``EMBER_CODE_CACHE=0`` turns
the cache off.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
from importlib.util import MAGIC_NUMBER
from typing import Dict, Tuple

from . import disk_cache

_MAGIC = b"EMBER-CODE"
FORMAT_VERSION = (f"1-{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}-{sys.hexversion:x}"
                  f"-m{marshal.version}-O{sys.flags.optimize}")
_MIN_CHARS = 1500
_MEMO_MAX = 512
_memo: Dict[Tuple[str, str], types.CodeType] = {}     # this process's, by (filename, source)
stats = {"hits": 0, "misses": 0, "stores": 0}


def enabled() -> bool:
    return os.environ.get("EMBER_CODE_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def _path(filename: str, src: str) -> str:
    h = hashlib.sha256(filename.encode() + b"\0" + src.encode()).hexdigest()
    return os.path.join(disk_cache.cache_root(), "code", h[:2], h + ".bin")


def compile_source(src: str, filename: str) -> types.CodeType:
    """``compile(src, filename, "exec", dont_inherit=True)``, from the cache when it holds it."""
    key = (filename, src)
    code = _memo.get(key)
    if code is not None:
        return code
    if len(src) < _MIN_CHARS or not enabled():
        return compile(src, filename, "exec", dont_inherit=True)
    path = _path(filename, src)
    try:
        entry = disk_cache.read_entry(path, _MAGIC, FORMAT_VERSION, marshal.loads)
    except (OSError, ValueError):       # unreadable or corrupt: compiled and rewritten below
        entry = None
    if entry is not None and entry.get("filename") == filename and entry.get("src") == src \
            and type(entry.get("code")) is types.CodeType:
        code = entry["code"]
        stats["hits"] += 1
    else:
        code = compile(src, filename, "exec", dont_inherit=True)
        stats["misses"] += 1
        payload = marshal.dumps({"format": FORMAT_VERSION, "filename": filename, "src": src, "code": code})
        try:
            disk_cache.atomic_write(path, disk_cache.frame(_MAGIC, FORMAT_VERSION, payload), ".bin")
            stats["stores"] += 1
        except OSError:     # a read-only or full cache root: compiled again next time
            pass
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    _memo[key] = code
    return code


__all__ = ["compile_source", "enabled", "stats"]
