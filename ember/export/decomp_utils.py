"""``ember.export.default_decompositions``: the table ``ExportedProgram.run_decompositions`` uses.

``CustomDecompTable`` is a dict {ember op: decomposition} that starts as every registered
decomposition (to ember's prims, ``ember/prims/table.py``) and is edited before use: ``pop``
an op to keep it whole in the decomposed graph, set ``table[op] = fn`` to decompose it your
way. Loading the decompositions imports every decomposition module, so the table is filled
on first use (``materialize``), not when made (as torch's table, which is lazy for the same
reason). Keys may be given as an op (``OpDef``), its binding (``ember.addmm``) or its name
(``"addmm"``); they are stored as the op."""
from __future__ import annotations

from typing import Any, Callable, Dict

__all__ = ["CustomDecompTable", "default_decompositions"]


def _key(k):
    from ..prims.table import _as_op
    try:
        return _as_op(k)
    except (TypeError, KeyError, ValueError):
        raise TypeError(f"CustomDecompTable: a key must be an ember op (an OpDef, its binding such as "
                        f"ember.addmm, or its name such as 'addmm'), got {k!r}") from None


class CustomDecompTable(dict):
    """{op: decomposition}, filled with ember's default decompositions on first use."""

    def __init__(self):
        super().__init__()
        self.has_materialized = False

    def _fill(self):
        if not self.has_materialized:
            from ..prims.table import decomposition_table
            self.has_materialized = True
            super().update(decomposition_table())
        return self

    # ---- reads
    def __getitem__(self, k):
        return dict.__getitem__(self._fill(), _key(k))

    def get(self, k, default=None):
        return dict.get(self._fill(), _key(k), default)

    def __contains__(self, k):
        try:
            k = _key(k)
        except TypeError:
            return False
        return dict.__contains__(self._fill(), k)

    def __len__(self):
        return dict.__len__(self._fill())

    def __iter__(self):
        return dict.__iter__(self._fill())

    def keys(self):
        return dict.keys(self._fill())

    def values(self):
        return dict.values(self._fill())

    def items(self):
        return dict.items(self._fill())

    def __eq__(self, other):
        return dict.__eq__(self._fill(), other._fill() if isinstance(other, CustomDecompTable) else other)

    __hash__ = None

    def __repr__(self):
        state = f"{dict.__len__(self)} ops" if self.has_materialized else "not materialized"
        return f"CustomDecompTable({state})"

    # ---- writes
    def __setitem__(self, k, fn: Callable[..., Any]):
        if not callable(fn):
            raise TypeError(f"CustomDecompTable: the decomposition for {k!r} must be callable, got {fn!r}")
        dict.__setitem__(self._fill(), _key(k), fn)

    def __delitem__(self, k):
        dict.__delitem__(self._fill(), _key(k))

    _MISSING = object()

    def pop(self, k, default=_MISSING):
        """Remove ``k`` (the op stays whole in the graph) and return its decomposition."""
        if default is CustomDecompTable._MISSING:
            return dict.pop(self._fill(), _key(k))
        return dict.pop(self._fill(), _key(k), default)

    def popitem(self):
        return dict.popitem(self._fill())

    def setdefault(self, k, default=None):
        return dict.setdefault(self._fill(), _key(k), default)

    def update(self, other=(), **kw):
        for k, v in dict(other, **kw).items():
            self[k] = v

    def clear(self):
        self.has_materialized = True
        dict.clear(self)

    def copy(self) -> "CustomDecompTable":
        new = CustomDecompTable()
        if self.has_materialized:
            new.has_materialized = True
            dict.update(new, self)
        return new

    def materialize(self) -> Dict[Any, Callable[..., Any]]:
        """A plain dict of the table."""
        return dict(dict.items(self._fill()))


def default_decompositions() -> CustomDecompTable:
    """Every decomposition ``run_decompositions()`` applies by default (to ember's prims)."""
    return CustomDecompTable()
