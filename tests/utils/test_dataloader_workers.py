"""DataLoader with worker processes (``num_workers > 0``) and ``ember.multiprocessing``.

Pinned against PyTorch where the behaviour is deterministic: the batches and their order for
map-style datasets (shuffled with the loader's generator: same indices as the single-process
loader), the round-robin interleaving of iterable-dataset workers, ``get_worker_info``, errors
raised in a worker (type and the "Caught ... in DataLoader worker process N" message), timeouts
and dead workers, persistent workers over epochs, worker seeding (workers draw different random
numbers; the same ``manual_seed`` gives the same draws), and tensors shared through
``share_memory_`` between processes (fork and spawn).
"""
import os
import random
import signal
import time

import numpy as np
import pytest

import ember
import ember.multiprocessing as emp
from ember.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info


class Squares(Dataset):
    def __init__(self, n=11):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": ember.tensor([float(i * i), 1.0]), "i": i}


class Strided(IterableDataset):
    """Each worker yields its own residue class (the sharding PyTorch's docs show)."""

    def __init__(self, n=10):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(w, self.n, k))


class Failing(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            raise ValueError(f"item {i} is broken")
        return i


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(3)
        return i


class Dies(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class Draws(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, float(ember.rand(1).item()), random.random(), float(np.random.rand()))


def _flat(batches):
    return [(b["i"].tolist(), b["x"].tolist()) for b in batches]


@pytest.mark.parametrize("workers", [1, 3])
def test_map_style_batches_equal_the_single_process_loader(workers):
    ds = Squares()
    ref = _flat(DataLoader(ds, batch_size=3, drop_last=False))
    got = _flat(DataLoader(ds, batch_size=3, num_workers=workers))
    assert got == ref
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    ref = _flat(DataLoader(ds, batch_size=4, shuffle=True, generator=g1))
    got = _flat(DataLoader(ds, batch_size=4, shuffle=True, generator=g2, num_workers=2, prefetch_factor=1))
    assert got == ref
    assert [x for x in DataLoader(list(range(5)), batch_size=None, num_workers=2)] == [0, 1, 2, 3, 4]


def test_len_and_in_order_false():
    dl = DataLoader(Squares(), batch_size=4, num_workers=2, in_order=False)
    assert len(dl) == 3
    got = sorted(i for b in dl for i in b["i"].tolist())
    assert got == list(range(11))


def test_iterable_dataset_round_robin_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TDL, IterableDataset as TID, get_worker_info as twi

    class TStrided(TID):
        def __iter__(self):
            info = twi()
            return iter(range(info.id, 10, info.num_workers))
    for workers, bs in ((2, 2), (3, 3)):
        ref = [b.tolist() for b in TDL(TStrided(), batch_size=bs, num_workers=workers)]
        got = [b.tolist() for b in DataLoader(Strided(), batch_size=bs, num_workers=workers)]
        assert got == ref


def test_iterable_dataset_drop_last_and_no_batching():
    got = [b.tolist() for b in DataLoader(Strided(), batch_size=3, num_workers=2, drop_last=True)]
    assert got == [[0, 2, 4], [1, 3, 5]]
    assert sorted(DataLoader(Strided(), batch_size=None, num_workers=2)) == list(range(10))


def test_worker_exception_is_reraised_with_its_traceback():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TDL
    msgs = []
    for loader in (TDL(Failing(), num_workers=2), DataLoader(Failing(), num_workers=2)):
        with pytest.raises(ValueError) as info:
            list(loader)
        msgs.append(str(info.value))
    for m in msgs:
        assert m.startswith("Caught ValueError in DataLoader worker process 1.")
        assert "Original Traceback (most recent call last):" in m and "item 3 is broken" in m


def test_worker_init_fn_error_and_key_error():
    def bad_init(worker_id):
        raise KeyError("init failed")
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(DataLoader(list(range(4)), num_workers=1, worker_init_fn=bad_init))


def test_timeout_and_dead_worker():
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 1 seconds"):
        list(DataLoader(Slow(), num_workers=1, timeout=1))
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+.*exited unexpectedly"):
        list(DataLoader(Dies(), num_workers=1))


def test_bad_options():
    with pytest.raises(ValueError, match="multiprocessing_context option should specify a valid start method"):
        iter(DataLoader(list(range(3)), num_workers=1, multiprocessing_context="bogus"))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(list(range(3)), num_workers=-1)


def test_persistent_workers_keep_their_processes_over_epochs():
    dl = DataLoader(Strided(9), batch_size=2, num_workers=3, persistent_workers=True)
    first = [b.tolist() for b in dl]
    pids = [w.pid for w in dl._iterator._workers]
    second = [b.tolist() for b in dl]
    assert first == second == [[0, 3], [1, 4], [2, 5], [6], [7], [8]]
    assert [w.pid for w in dl._iterator._workers] == pids and all(w.is_alive() for w in dl._iterator._workers)
    dl._iterator._shutdown()
    assert not any(w.is_alive() for w in dl._iterator._workers)


def test_worker_seeding_is_distinct_and_reproducible():
    def draws():
        ember.manual_seed(123)
        return [tuple(x.tolist() if hasattr(x, "tolist") else x for x in b)
                for b in DataLoader(Draws(), batch_size=None, num_workers=2)]
    a, b = draws(), draws()
    assert a == b
    by_worker = {}
    for wid, e, r, n in a:
        by_worker.setdefault(wid, []).append((e, r, n))
    (w0, w1) = by_worker.values()
    assert w0[0] != w1[0]          # workers do not repeat each other's streams


def test_spawn_context_and_tensor_batches():
    ds = TensorDataset(ember.randn(7, 3), ember.arange(7))
    ref = [(x.tolist(), y.tolist()) for x, y in DataLoader(ds, batch_size=2)]
    got = [(x.tolist(), y.tolist()) for x, y in DataLoader(ds, batch_size=2, num_workers=2,
                                                          multiprocessing_context="spawn")]
    assert got == ref
    x, y = next(iter(DataLoader(ds, batch_size=7, num_workers=1)))
    assert x.dtype is ember.float32 and y.dtype is ember.int64 and x.requires_grad is False


# ---------------------------------------------------------------------- ember.multiprocessing
def _add_rank(rank, t, q):
    t[rank] += rank + 1                       # each process its own element: no lost updates
    q.put(ember.full((2,), float(rank)))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_shared_tensor_writes_are_seen_across_processes(method):
    t = ember.zeros(3).share_memory_()
    assert t.is_shared() and not ember.zeros(3).is_shared()
    ctx = emp.get_context(method)
    q = ctx.Queue()
    ps = [ctx.Process(target=_add_rank, args=(r, t, q)) for r in range(3)]
    for p in ps:
        p.start()
    got = sorted(tuple(q.get(timeout=60).tolist()) for _ in ps)
    for p in ps:
        p.join(60)
    assert t.tolist() == [1.0, 2.0, 3.0]
    assert got == [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)]


def test_module_share_memory_and_refusals():
    assert ember.multiprocessing is emp and emp.get_sharing_strategy() in emp.get_all_sharing_strategies()
    m = ember.nn.Linear(3, 2).share_memory()
    assert all(p.is_shared() for p in m.parameters())
    y = ember.randn(2, requires_grad=True) * 2
    ctx = emp.get_context("fork")
    q = ctx.Queue()
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        from multiprocessing.reduction import ForkingPickler
        ForkingPickler.dumps(y)
    q.close()


def _fail(rank):
    if rank == 1:
        raise ValueError("rank 1 failed")


def _ok(rank, path):
    with open(f"{path}.{rank}", "w") as f:
        f.write(str(rank))


def test_spawn_runs_and_reraises(tmp_path):
    emp.spawn(_ok, args=(str(tmp_path / "r"),), nprocs=2, start_method="fork")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.0", "r.1"]
    with pytest.raises(emp.ProcessRaisedException, match="rank 1 failed"):
        emp.spawn(_fail, nprocs=2, start_method="fork")


def test_more_workers_than_cpus_warns_as_torch():
    cpus = len(os.sched_getaffinity(0))
    if cpus > 8:
        pytest.skip("would start more than 9 worker processes")
    with pytest.warns(UserWarning, match=f"This DataLoader will create {cpus + 1} worker processes in total. "
                                         f"Our suggested max number of worker in current system is {cpus}"):
        got = [b.tolist() for b in DataLoader(list(range(4)), batch_size=2, num_workers=cpus + 1)]
    assert got == [[0, 1], [2, 3]]


@pytest.mark.parametrize("workers", [0, 1])
def test_pin_memory_without_accelerator_warns_as_torch(workers):
    if ember.cuda.is_available():
        pytest.skip("an accelerator is present")
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found"):
        got = [b.tolist() for b in DataLoader(list(range(4)), batch_size=2, pin_memory=True, num_workers=workers)]
    assert got == [[0, 1], [2, 3]]
