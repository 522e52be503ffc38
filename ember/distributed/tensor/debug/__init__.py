"""``ember.distributed.tensor.debug``: ``CommDebugMode`` counts the collectives DTensor runs.

Keys of the counts are the ``c10d_functional`` names (``c10d_functional.all_reduce``,
``.all_gather_into_tensor``, ``.reduce_scatter_tensor``, ``.broadcast``), as torch keys them by
its functional collective ops."""
from __future__ import annotations

import types
from collections import defaultdict

from .. import _collectives as _C

c10d_functional = types.SimpleNamespace(all_reduce=_C.ALL_REDUCE, all_gather_into_tensor=_C.ALL_GATHER,
                                        reduce_scatter_tensor=_C.REDUCE_SCATTER, broadcast=_C.BROADCAST)


class CommDebugMode:
    """``with CommDebugMode() as m: ...`` then ``m.get_comm_counts()`` / ``m.get_total_counts()``."""

    def __init__(self):
        self.comm_counts = defaultdict(int)

    def _count(self, key):
        self.comm_counts[key] += 1

    def __enter__(self):
        self.comm_counts.clear()
        _C.COUNTERS.append(self)
        return self

    def __exit__(self, *exc):
        _C.COUNTERS.remove(self)
        return False

    def get_comm_counts(self):
        """{collective: how many times it ran} for the collectives seen inside the mode."""
        return dict(self.comm_counts)

    def get_total_counts(self) -> int:
        return sum(self.comm_counts.values())


__all__ = ["CommDebugMode", "c10d_functional"]
