"""ember.utils.data.DistributedSampler against torch.utils.data.DistributedSampler (torch 2.13).

Without shuffling the index lists must equal torch's for every (size, num_replicas, rank,
drop_last). With shuffling the permutation is ember's (``ember.randperm`` with a
Generator seeded ``seed + epoch``; ember's PCG64 stream is not torch's Mersenne
Twister, so the order itself differs from torch's): the padding / cutting / striding
applied to it must be torch's, which is checked by mapping torch's unshuffled
positions through ember's permutation.
"""
import math

import numpy as np
import pytest

import ember
from ember.utils.data import DataLoader, DistributedSampler, TensorDataset


class _Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def _cases():
    # fixed, so that every xdist worker collects the same ids; test_random_sizes_* draws more
    return [(0, 1), (1, 3), (3, 4), (10, 3), (12, 4), (7, 7), (5, 8), (37, 6), (23, 5), (16, 2)]


@pytest.mark.parametrize("n,replicas", _cases())
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_matches_torch(n, replicas, drop_last):
    tdata = pytest.importorskip("torch.utils.data")
    for rank in range(replicas):
        e = DistributedSampler(_Sized(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        t = tdata.DistributedSampler(_Sized(n), num_replicas=replicas, rank=rank, shuffle=False,
                                     drop_last=drop_last)
        assert list(e) == list(t)
        assert len(e) == len(t) and e.num_samples == t.num_samples and e.total_size == t.total_size


@pytest.mark.parametrize("n,replicas", [c for c in _cases() if c[0] > 0])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_partition_follows_torch(n, replicas, drop_last):
    tdata = pytest.importorskip("torch.utils.data")
    seed = int(np.random.default_rng().integers(0, 1000))
    for epoch in (0, 3):
        g = ember.Generator()
        g.manual_seed(seed + epoch)
        perm = ember.randperm(n, generator=g).tolist()
        for rank in range(replicas):
            e = DistributedSampler(_Sized(n), num_replicas=replicas, rank=rank, seed=seed, drop_last=drop_last)
            e.set_epoch(epoch)
            positions = list(tdata.DistributedSampler(_Sized(n), num_replicas=replicas, rank=rank, shuffle=False,
                                                      drop_last=drop_last))
            assert list(e) == [perm[p] for p in positions]


@pytest.mark.parametrize("n,replicas", [c for c in _cases() if c[0] > 0])
def test_shuffled_partition_properties(n, replicas):
    """No torch needed: the ranks' shares are equally long, cover the dataset, and only the
    padding repeats indices; drop_last covers all but fewer than num_replicas indices once."""
    for seed in (0, 5):
        shares = [list(DistributedSampler(_Sized(n), num_replicas=replicas, rank=r, seed=seed))
                  for r in range(replicas)]
        size = math.ceil(n / replicas)
        assert all(len(s) == size for s in shares)
        allidx = [i for s in shares for i in s]
        assert set(allidx) == set(range(n))
        assert len(allidx) - n == size * replicas - n        # the padding
        dl = [list(DistributedSampler(_Sized(n), num_replicas=replicas, rank=r, seed=seed, drop_last=True))
              for r in range(replicas)]
        flat = [i for s in dl for i in s]
        assert len(flat) == len(set(flat)) == (n // replicas) * replicas
        assert all(len(s) == n // replicas for s in dl)


def test_random_sizes_against_torch():
    rng = np.random.default_rng()
    for _ in range(8):
        n, r = int(rng.integers(1, 60)), int(rng.integers(1, 10))
        drop_last = bool(rng.integers(0, 2))
        test_unshuffled_matches_torch(n, r, drop_last)
        test_shuffled_partition_follows_torch(n, r, drop_last)
        test_shuffled_partition_properties(n, r)


def test_seed_and_epoch_determine_the_order():
    n = 50
    a = DistributedSampler(_Sized(n), num_replicas=2, rank=0, seed=7)
    b = DistributedSampler(_Sized(n), num_replicas=2, rank=0, seed=7)
    assert list(a) == list(b) == list(a)                     # repeatable; no global RNG involved
    ember.manual_seed(123)
    assert list(a) == list(b)
    e0 = list(a)
    a.set_epoch(1)
    assert a.epoch == 1 and list(a) != e0
    b.set_epoch(1)
    assert list(a) == list(b)
    c = DistributedSampler(_Sized(n), num_replicas=2, rank=0, seed=8)
    assert list(c) != e0
    assert list(DistributedSampler(_Sized(n), num_replicas=1, rank=0, shuffle=False)) == list(range(n))


def test_padding_repeats_when_dataset_is_smaller_than_replicas():
    tdata = pytest.importorskip("torch.utils.data")
    for n, r in ((2, 7), (1, 5), (3, 10)):
        e = [list(DistributedSampler(_Sized(n), num_replicas=r, rank=k, shuffle=False)) for k in range(r)]
        t = [list(tdata.DistributedSampler(_Sized(n), num_replicas=r, rank=k, shuffle=False)) for k in range(r)]
        assert e == t
        assert [x for s in e for x in s] == (list(range(n)) * r)[:r]


def test_errors_match_torch():
    tdata = pytest.importorskip("torch.utils.data")
    import torch.distributed as tdist
    for kw in (dict(num_replicas=2, rank=2), dict(num_replicas=2, rank=-1), dict(num_replicas=0, rank=0)):
        with pytest.raises(ValueError) as te:
            tdata.DistributedSampler(_Sized(4), **kw)
        with pytest.raises(ValueError) as ee:
            DistributedSampler(_Sized(4), **kw)
        assert str(ee.value) == str(te.value)
    if not tdist.is_initialized():
        for kw in (dict(), dict(num_replicas=2), dict(rank=0)):
            with pytest.raises(ValueError) as te:
                tdata.DistributedSampler(_Sized(4), **kw)
            with pytest.raises(ValueError) as ee:
                DistributedSampler(_Sized(4), **kw)
            assert str(ee.value) == str(te.value)


def test_defaults_come_from_the_process_group():
    import ember.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(_Sized(4))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        s = DistributedSampler(_Sized(5), shuffle=False)
        assert (s.num_replicas, s.rank, len(s)) == (1, 0, 5)
        assert list(s) == list(range(5))
        with pytest.raises(ValueError, match=r"Invalid rank 0, rank should be in the interval \[0, -1\]"):
            DistributedSampler(_Sized(5), num_replicas=0)
    finally:
        dist.destroy_process_group()


def test_with_dataloader():
    rng = np.random.default_rng()
    x = ember.tensor(rng.standard_normal((11, 3)).astype(np.float32))
    ds = TensorDataset(x)
    seen = []
    for rank in range(3):
        s = DistributedSampler(ds, num_replicas=3, rank=rank, seed=1)
        s.set_epoch(2)
        loader = DataLoader(ds, batch_size=2, sampler=s)
        rows = [b[0] for b in loader]
        assert sum(r.shape[0] for r in rows) == 4 == len(s)
        got = ember.cat(rows).numpy()
        np.testing.assert_array_equal(got, x.numpy()[list(s)])
        seen.extend(list(s))
    assert set(seen) == set(range(11))


def test_module_path():
    from ember.utils.data import distributed
    assert distributed.DistributedSampler is DistributedSampler
    assert issubclass(DistributedSampler, ember.utils.data.Sampler)


def test_generic_subscription_like_torch():
    """``DistributedSampler[int]``, ``Sampler[int]``, ``Dataset[int]``, ``DataLoader[int]`` work in
    annotations as with torch's Generic classes, and the alias still builds the class."""
    import ember.utils.data as d
    for cls in (d.DistributedSampler, d.Sampler, d.Dataset, d.IterableDataset, d.DataLoader, d.TensorDataset):
        alias = cls[int]
        assert alias.__origin__ is cls and alias.__args__ == (int,)
    s = d.DistributedSampler[int](_Sized(4), num_replicas=2, rank=1, shuffle=False)
    assert list(s) == [1, 3]
