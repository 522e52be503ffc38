"""Placements: how one mesh dimension lays a DTensor's global value over its ranks.

Why three kinds. Along one mesh dimension a value is either cut into pieces (``Shard(dim)``:
torch.chunk of tensor dim ``dim``, so trailing ranks may hold shorter or empty pieces), held
whole by every rank (``Replicate()``), or held as addends still to be reduced
(``Partial(reduce_op)``: the global value is the reduction of the ranks' local values).
"""
from __future__ import annotations

_REDUCE_OPS = ("sum", "avg", "max", "min")


class Placement:
    """Base of the placement kinds (torch.distributed.tensor.Placement)."""

    # ember.compile treats placements as constants of the trace, guarded with == (dynamo/variables/builder.py),
    # and makes those a frame constructs (Shard(0)) while tracing (dynamo/variables/objects.py)
    _ember_dynamo_constant = True
    _ember_dynamo_constructible = True

    def is_shard(self, dim=None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op=None) -> bool:
        return False


class Shard(Placement):
    """Tensor dim ``dim`` split across the mesh dimension with torch.chunk semantics."""

    __slots__ = ("dim",)

    def __init__(self, dim: int):
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Shard: expected dim to be an int, got {type(dim).__name__}")
        self.dim = dim

    def is_shard(self, dim=None) -> bool:
        return dim is None or dim == self.dim

    @staticmethod
    def chunk_bounds(size: int, n: int, idx: int):
        """(offset, length) of piece ``idx`` of ``size`` elements cut into ``n`` torch.chunk pieces:
        every piece has ceil(size / n) elements except the last non-empty one; later ones are empty."""
        full = -(-size // n) if size else 0
        start = min(full * idx, size)
        return start, max(0, min(start + full, size) - start)

    def __eq__(self, other):
        return type(other) is Shard and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole value."""

    __slots__ = ()

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other):
        return type(other) is Replicate

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """The global value is ``reduce_op`` over the ranks' local values (pending reduction)."""

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op: str = "sum"):
        if reduce_op not in _REDUCE_OPS:
            raise ValueError(f"Partial: reduce_op must be one of {_REDUCE_OPS}, got {reduce_op!r}")
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op=None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"


__all__ = ["Placement", "Shard", "Replicate", "Partial"]
