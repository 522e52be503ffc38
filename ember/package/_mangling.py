"""Module-name mangling: every PackageImporter gives its modules a private top-level parent.

A module ``foo.bar`` loaded from a package gets ``__name__ == "<ember_package_N>.foo.bar"``,
so two packages (or a package and the host) can hold different ``foo.bar`` modules side by
side, and pickling can tell a packaged class from the host's class of the same name.
``demangle`` strips the prefix again when a name is written back into an archive.
"""
from __future__ import annotations

import itertools
import re

__all__ = ["PackageMangler", "is_mangled", "demangle", "get_mangle_prefix", "MANGLE_PREFIX"]

MANGLE_PREFIX = "ember_package"
_MANGLED = re.compile(r"<ember_package_\d+>")
_counter = itertools.count()


class PackageMangler:
    """Hands out one unique parent name (``<ember_package_N>``) per importer."""

    def __init__(self):
        self._mangle_index = next(_counter)
        self._mangle_parent = f"<{MANGLE_PREFIX}_{self._mangle_index}>"

    def mangle(self, name: str) -> str:
        if not name:
            raise ValueError("PackageMangler.mangle: the module name must not be empty")
        return f"{self._mangle_parent}.{name}"

    def demangle(self, mangled: str) -> str:
        """Strip this mangler's prefix; names of other manglers pass through unchanged."""
        if mangled.startswith(self._mangle_parent + "."):
            return mangled.partition(".")[2]
        return mangled

    def parent_name(self) -> str:
        return self._mangle_parent


def is_mangled(name: str) -> bool:
    return _MANGLED.match(name) is not None


def demangle(name: str) -> str:
    """Strip any importer's mangle prefix (a bare prefix demangles to '')."""
    if is_mangled(name):
        return name.partition(".")[2]
    return name


def get_mangle_prefix(name: str) -> str:
    return name.partition(".")[0] if is_mangled(name) else name
