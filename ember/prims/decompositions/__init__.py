"""Decompositions of ember's ops into prims, one module per op family.

``pointwise``, ``reductions``, ``creation`` (this file's owner) and ``shape``,
``indexing``, ``linalg``, ``nn`` register their functions with
:func:`register_decomposition` on import. Use
:func:`~ember.prims.table.decomposition_table` / :func:`decompose` to get
the table; importing this package loads every family.
"""
from __future__ import annotations

import importlib

from ..table import decompose, decomposition_table, register_decomposition  # noqa: F401

__all__ = ["register_decomposition", "decomposition_table", "decompose"]

# shape first: the other families import its helpers
_FAMILIES = ("shape", "pointwise", "reductions", "creation", "indexing", "linalg", "nn")
for _name in _FAMILIES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:
        # a family not written yet: the coverage report lists its ops as missing
        if _e.name != f"{__name__}.{_name}":
            raise
