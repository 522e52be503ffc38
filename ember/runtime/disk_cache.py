"""On-disk cache plumbing shared by the kernel, FX-graph and aot caches.

One root (``$EMBER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ember`` or
``~/.cache/ember``) with a folder per cache; files written atomically (a temp
file in the same folder, then ``os.replace``) so two processes filling the same
entry never see half of the other's; entries framed by a one-line header
``<magic> <format> <sha256 of the payload>`` so a truncated, overwritten or
foreign file is detected (``ValueError``) and rebuilt rather than trusted.
Imports nothing heavy: a cache hit must stay cheap (the warm-compile target).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Callable, Optional


# Every entry path this process wrote or read successfully, in order (ember.compiler's
# save_cache_artifacts bundles the compile caches' ones into a portable blob).
touched: dict = {}


def cache_root() -> str:
    d = os.environ.get("EMBER_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "ember")
    return d


def atomic_write(path: str, data: bytes, suffix: str = "") -> None:
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        touched[path] = None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def frame(magic: bytes, version: str, payload: bytes) -> bytes:
    """``payload`` behind its checksummed header."""
    return b" ".join([magic, version.encode(), hashlib.sha256(payload).hexdigest().encode()]) + b"\n" + payload


def read_entry(path: str, magic: bytes, version: str, loads: Callable[[bytes], Any]) -> Optional[dict]:
    """The entry stored at ``path`` (a dict with ``format == version``), None when there is
    none; ``ValueError`` naming what is wrong when the file is corrupt."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    head, sep, payload = data.partition(b"\n")
    parts = head.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != magic or parts[1] != version.encode():
        raise ValueError("bad header")
    if hashlib.sha256(payload).hexdigest().encode() != parts[2]:
        raise ValueError("checksum mismatch (truncated or overwritten)")
    try:
        entry = loads(payload)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"unpickling failed: {type(e).__name__}: {e}") from e
    if not isinstance(entry, dict) or entry.get("format") != version:
        raise ValueError("not an entry of this format")
    touched[path] = None
    return entry


def log_from_env(log, artifact: str) -> None:
    """Turn on a cache's hit/miss/store logger when ``EMBER_LOGS`` names ``artifact`` (or ``all``)."""
    import logging
    names = {s.strip() for s in os.environ.get("EMBER_LOGS", "").split(",")}
    if names & {artifact, "all"}:
        log.setLevel(logging.INFO)
        if not log.handlers:
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter(f"[{log.name}] %(message)s"))
            log.addHandler(h)
