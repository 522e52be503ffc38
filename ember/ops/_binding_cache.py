"""The code objects of the generated op bindings, cached on disk: a warm ``import ember`` compiles none.

Why. Every op's public binding, and the ``run`` specialised to its fast path, is Python source
generated from the schema (registry.py: the exact signature and the fast path, so a call
binds its arguments without ``inspect``). Compiling those ~570 sources took 85-90 ms of a
~250 ms ``import ember`` (cProfile, 2-core box, Python 3.11: more than numpy's whole
import), and ember.prims compiles ~200 more at the first compile. Executing a code object is
cheap, compiling one is not. So the code objects are marshalled, one file per group of ops
(``ops``: what ``import ember`` registers; ``prims``: ember.prims), under the cache root
(``$EMBER_CACHE_DIR``, see runtime/disk_cache.py), and a later import execs them. Measured
(median of 10, same box): ``import ember`` after numpy 149 -> 64 ms warm; reading the 1.1 MB
file (sha256, ``marshal.loads``) is ~3 ms of that; a cold import is as slow as before.

Correct by construction. An entry is keyed by its whole source text and file name, not by a
hash or by ember's version: a binding whose generated source changed (an edited schema, a new
fast path in registry.py) misses and is compiled, and the group's file is rewritten with
only what this import used, so stale entries never pile up. The code objects depend on
nothing else (compiled with ``dont_inherit``, so registry.py's ``__future__`` imports do not
leak in) but the interpreter, which the format names: cache tag, bytecode magic, exact
version, ``-O`` level. So code marshalled by 3.11 is never read by 3.12 (each version also
has a file of its own). The file is framed by disk_cache (magic, format, sha256 of the
payload): a missing, truncated, corrupt or foreign file is a miss (everything compiles, the
file is rewritten), never an error. A cache root that cannot be written only means no
caching. ``EMBER_BINDING_CACHE=0`` (before ``import ember``) turns the cache off.
"""
from __future__ import annotations

import contextlib
import marshal
import os
import sys
import types
from importlib.util import MAGIC_NUMBER
from typing import Dict, Iterator, List, Optional, Tuple

from ..runtime import disk_cache

_MAGIC = b"EMBER-BINDINGS"
# no spaces (the header is space-separated): format 1, then what a code object depends on
FORMAT_VERSION = (f"1-{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}-{sys.hexversion:x}"
                  f"-m{marshal.version}-O{sys.flags.optimize}")

_active: List["CodeCache"] = []     # the group whose ops are being registered (innermost last)
# per group, what its last import did: {"used": code objects executed, "compiled": of those, compiled}
stats: Dict[str, Dict[str, int]] = {}


def enabled() -> bool:
    return os.environ.get("EMBER_BINDING_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def path(group: str) -> str:
    return os.path.join(disk_cache.cache_root(), "bindings", f"{group}-{sys.implementation.cache_tag}.bin")


class CodeCache:
    """The stored code objects of one group, and the ones this import used."""

    def __init__(self, group: str):
        self.path = path(group)
        self.stored = self._load()
        self.used: Dict[Tuple[str, str], types.CodeType] = {}
        self.misses = 0

    def _load(self) -> dict:
        try:
            entry = disk_cache.read_entry(self.path, _MAGIC, FORMAT_VERSION, marshal.loads)
        except (OSError, ValueError):   # unreadable or corrupt: compile everything, rewrite it
            return {}
        code = entry.get("code") if entry is not None else None
        return code if isinstance(code, dict) else {}

    def code(self, src: str, filename: str) -> types.CodeType:
        key = (filename, src)
        code = self.stored.get(key)
        if type(code) is not types.CodeType:
            code = self.stored[key] = compile(src, filename, "exec", dont_inherit=True)
            self.misses += 1
        self.used[key] = code
        return code

    def save(self) -> None:
        """Rewrite the file when anything missed (only this import's entries)."""
        if not self.misses:
            return
        payload = marshal.dumps({"format": FORMAT_VERSION, "code": self.used})
        try:
            disk_cache.atomic_write(self.path, disk_cache.frame(_MAGIC, FORMAT_VERSION, payload), ".bin")
        except OSError:     # read-only or full cache root: the next import compiles again
            pass


def code(src: str, filename: str) -> types.CodeType:
    """The code object of generated source ``src``: from the active group's cache when there
    is one (see :func:`group`), else compiled."""
    if _active:
        return _active[-1].code(src, filename)
    return compile(src, filename, "exec", dont_inherit=True)


@contextlib.contextmanager
def group(name: str) -> Iterator[Optional[CodeCache]]:
    """Bindings generated inside the block come from (and go to) the cache file of ``name``;
    the file is written when the block ends normally."""
    if not enabled():
        yield None
        return
    cache = CodeCache(name)
    _active.append(cache)
    try:
        yield cache
    finally:
        _active.remove(cache)
    stats[name] = {"used": len(cache.used), "compiled": cache.misses}
    cache.save()
