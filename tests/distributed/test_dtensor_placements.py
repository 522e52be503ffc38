"""DTensor layout arithmetic without processes: placements (printing, equality) against
torch's, torch.chunk piece bounds, local shapes of nested shards, view dim grouping."""
from __future__ import annotations

import numpy as np
import pytest

from ember.distributed.tensor import Partial, Replicate, Shard
from ember.distributed.tensor._ops._view import _groups
from ember.distributed.tensor._utils import local_shape_and_offset


class _Mesh:
    """Just what the shape arithmetic asks of a mesh: its shape and a coordinate."""

    def __init__(self, shape, coord):
        self.shape, self._coord, self.ndim = shape, coord, len(shape)

    def size(self, d):
        return self.shape[d]

    def get_coordinate(self):
        return self._coord


def test_placements_match_torch():
    torch = pytest.importorskip("torch")
    from torch.distributed.tensor import Partial as TP, Replicate as TR, Shard as TS
    pairs = [(Shard(0), TS(0)), (Shard(3), TS(3)), (Replicate(), TR()), (Partial(), TP()), (Partial("max"), TP("max")),
             (Partial("avg"), TP("avg"))]
    for ours, theirs in pairs:
        assert (repr(ours), str(ours)) == (repr(theirs), str(theirs))
        assert ours.is_shard() == theirs.is_shard() and ours.is_replicate() == theirs.is_replicate()
        assert ours.is_partial() == theirs.is_partial()
    assert Shard(1).is_shard(1) and not Shard(1).is_shard(0)
    assert Shard(0) == Shard(0) and Shard(0) != Shard(1) and Partial() != Partial("max") and Replicate() == Replicate()
    assert len({Shard(0), Shard(0), Replicate(), Replicate(), Partial()}) == 3


@pytest.mark.parametrize("seed", range(4))
def test_chunk_bounds_are_torch_chunk(seed):
    """Against ember.chunk (itself tested against torch.chunk; importing torch here costs seconds)."""
    import ember
    rng = np.random.default_rng(seed)
    for _ in range(50):
        size, n = int(rng.integers(0, 20)), int(rng.integers(1, 7))
        pieces = ember.arange(size).chunk(n) if size else ()
        for r in range(n):
            off, length = Shard.chunk_bounds(size, n, r)
            if r < len(pieces):
                assert (off, length) == (int(pieces[r][0]) if len(pieces[r]) else off, len(pieces[r]))
            else:
                assert length == 0


@pytest.mark.parametrize("seed", range(3))
def test_nested_local_shapes_tile_the_tensor(seed):
    """Over all coordinates of a 2-D mesh, the pieces cover every element exactly once."""
    rng = np.random.default_rng(seed)
    for _ in range(20):
        shape = tuple(int(s) for s in rng.integers(0, 9, size=2))
        mesh_shape = tuple(int(s) for s in rng.integers(1, 4, size=2))
        placements = [rng.choice([Shard(0), Shard(1), Replicate()]) for _ in range(2)]
        seen = np.zeros(shape, dtype=int)
        for c0 in range(mesh_shape[0]):
            for c1 in range(mesh_shape[1]):
                ls, off = local_shape_and_offset(shape, _Mesh(mesh_shape, (c0, c1)), placements)
                seen[off[0]: off[0] + ls[0], off[1]: off[1] + ls[1]] += 1
        copies = np.prod([m for m, p in zip(mesh_shape, placements) if isinstance(p, Replicate)])
        assert (seen == copies).all(), (shape, mesh_shape, placements)


def test_view_groups():
    assert _groups([4, 6], [24]) == [([0, 1], [0])]
    assert _groups([24], [2, 3, 4]) == [([0], [0, 1, 2])]
    assert _groups([2, 3, 4], [6, 4]) == [([0, 1], [0]), ([2], [1])]
    assert _groups([4, 1, 3], [4, 3]) == [([0], [0]), ([1, 2], [1])]
    assert _groups([5, 4], [5, 2, 2]) == [([0], [0]), ([1], [1, 2])]
