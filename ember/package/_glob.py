"""Glob patterns over dotted module names (or ``/``-separated file paths).

``PackageExporter.intern/extern/mock/deny`` and ``PackageImporter.file_structure`` select
modules and files with torch.package's pattern language: a segment is a literal, a
segment with ``*`` wildcards (never crossing a separator), or ``**`` alone (zero or more
whole segments). A candidate matches when some include pattern matches it and no
exclude pattern does.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Union

__all__ = ["GlobGroup", "GlobPattern"]

GlobPattern = Union[str, Iterable[str]]


def _segment_regex(segment: str, sep: str) -> str:
    """The regex of one pattern segment, including the separator that precedes it."""
    s = re.escape(sep)
    if segment == "**":
        return f"(?:{s}[^{s}]+)*"
    if "**" in segment:
        raise ValueError("** can only appear as an entire path segment")
    return s + f"[^{s}]*".join(re.escape(piece) for piece in segment.split("*"))


def _compile(pattern: str, sep: str):
    if not isinstance(pattern, str):
        raise TypeError(f"a glob pattern must be a str, got {type(pattern).__name__}")
    return re.compile("".join(_segment_regex(seg, sep) for seg in pattern.split(sep)))


class GlobGroup:
    """A set of include patterns minus a set of exclude patterns (see the module docstring)."""

    def __init__(self, include, *, exclude=(), separator: str = "."):
        self._dbg = f"GlobGroup(include={include}, exclude={exclude})"
        self.separator = separator
        self.include = self._patterns(include)
        self.exclude = self._patterns(exclude)

    def _patterns(self, elems):
        if isinstance(elems, str):
            elems = [elems]
        return [_compile(e, self.separator) for e in elems]

    def matches(self, candidate: str) -> bool:
        # the leading separator lets the first segment be handled like the others
        c = self.separator + candidate
        return any(p.fullmatch(c) for p in self.include) and not any(p.fullmatch(c) for p in self.exclude)

    def __str__(self):
        return self._dbg

    __repr__ = __str__
