"""ember.utils.data: batching, shuffling, drop_last, collate, samplers, random_split."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import ember
from ember.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                              SequentialSampler, Subset, TensorDataset, default_collate, random_split)


def _ds(n=10):
    return TensorDataset(ember.arange(n * 2).float().reshape(n, 2), ember.arange(n))


def test_sequential_batches_and_drop_last():
    batches = list(DataLoader(_ds(), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert tuple(batches[0][0].shape) == (4, 2) and isinstance(batches[0], list)
    dl = DataLoader(_ds(), batch_size=4, drop_last=True)
    assert len(dl) == 2 and [len(b[1]) for b in dl] == [4, 4]
    assert len(DataLoader(_ds(), batch_size=4)) == 3


def test_shuffle_is_a_permutation_and_seeded():
    ember.manual_seed(0)
    a = [i for b in DataLoader(_ds(), batch_size=3, shuffle=True) for i in b[1].tolist()]
    ember.manual_seed(0)
    b = [i for b in DataLoader(_ds(), batch_size=3, shuffle=True) for i in b[1].tolist()]
    c = [i for b in DataLoader(_ds(), batch_size=3, shuffle=True) for i in b[1].tolist()]
    assert a == b and sorted(a) == list(range(10)) and a != list(range(10)) and c != a
    g = ember.Generator().manual_seed(5)
    d1 = [i for b in DataLoader(_ds(), batch_size=10, shuffle=True, generator=g) for i in b[1].tolist()]
    g.manual_seed(5)
    d2 = [i for b in DataLoader(_ds(), batch_size=10, shuffle=True, generator=g) for i in b[1].tolist()]
    assert d1 == d2


def test_collate_structures():
    Point = namedtuple("Point", "x y")
    batch = default_collate([{"a": 1.0, "b": (1, "s"), "c": np.ones(2, np.float32), "p": Point(1, 2.0)},
                             {"a": 2.0, "b": (2, "t"), "c": np.zeros(2, np.float32), "p": Point(3, 4.0)}])
    assert batch["a"].dtype is ember.float64 and batch["a"].tolist() == [1.0, 2.0]
    assert batch["b"][0].dtype is ember.int64 and list(batch["b"][1]) == ["s", "t"]
    assert tuple(batch["c"].shape) == (2, 2) and batch["c"].dtype is ember.float32
    assert isinstance(batch["p"], Point) and batch["p"].x.tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


def test_batch_size_none_custom_collate_and_batch_sampler():
    dl = DataLoader(_ds(3), batch_size=None)
    first = next(iter(dl))
    assert tuple(first[0].shape) == (2,) and len(dl) == 3
    dl = DataLoader(list(range(7)), batch_size=3, collate_fn=lambda b: sum(b))
    assert list(dl) == [3, 12, 6]
    dl = DataLoader(list(range(6)), batch_sampler=BatchSampler(SequentialSampler(range(6)), 4, False))
    assert [b.tolist() for b in dl] == [[0, 1, 2, 3], [4, 5]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(list(range(6)), batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(list(range(6)), sampler=SequentialSampler(range(6)), shuffle=True)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(list(range(6)), persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        DataLoader(list(range(6)), prefetch_factor=2)


def test_iterable_dataset():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Count(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Count(), shuffle=True)


def test_datasets_and_random_split():
    class Sq(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i * i

    cat = Sq() + Sq()
    assert isinstance(cat, ConcatDataset) and len(cat) == 10 and cat[7] == 4 and cat[-1] == 16
    sub = Subset(Sq(), [4, 0])
    assert len(sub) == 2 and sub[0] == 16
    ember.manual_seed(1)
    parts = random_split(range(10), [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [5, 3, 2]
    assert sorted(i for p in parts for i in p) == list(range(10))
    parts = random_split(range(10), [7, 3], generator=ember.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [7, 3]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [3, 3])
    rs = list(RandomSampler(range(5), replacement=True, num_samples=40))
    assert len(rs) == 40 and set(rs) <= set(range(5))


def test_single_process_iterator_has_the_loaders_length():
    """``len(iter(loader))`` as in torch (the single-process iterator was a bare generator)."""
    from ember.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(ember.arange(10.0))
    for bs, drop in ((3, False), (3, True), (None, False)):
        loader = DataLoader(ds, batch_size=bs, drop_last=drop)
        it = iter(loader)
        assert len(it) == len(loader)
        assert sum(1 for _ in it) == len(loader)
