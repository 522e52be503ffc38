"""ember.distributed's small names and nn.parallel.DistributedDataParallelCPU against torch."""
import typing
import warnings

import numpy as np
import pytest

import ember
import ember.distributed as ed

torch = pytest.importorskip("torch")
import torch.distributed as td  # noqa: E402


def test_queue_empty_error_is_a_store_error():
    assert issubclass(ed.QueueEmptyError, ed.DistStoreError) and issubclass(td.QueueEmptyError, td.DistStoreError)
    assert issubclass(ed.QueueEmptyError, RuntimeError) and issubclass(td.QueueEmptyError, RuntimeError)
    with pytest.raises(ed.DistStoreError, match="empty"):
        raise ed.QueueEmptyError("queue empty")


def test_annotations():
    assert ed.GroupName("g") == td.GroupName("g") == "g"
    assert ed.GroupName.__supertype__ is str
    assert set(typing.get_args(ed.RankType)) == {int, ember.SymInt}
    assert ed.GradBucket is ember.nn.parallel.distributed.GradBucket


def _outcome(lib):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            lib.nn.parallel.DistributedDataParallelCPU(lib.nn.Linear(1, 1))
            err = None
        except Exception as e:  # noqa: BLE001
            err = (type(e).__name__, str(e))
    return err, [(x.category, str(x.message)) for x in w if x.category is FutureWarning]


def test_ddp_cpu_is_deprecated_ddp_as_torch():
    assert issubclass(ember.nn.parallel.DistributedDataParallelCPU, ember.nn.parallel.DistributedDataParallel)
    assert _outcome(ember) == _outcome(torch)


def test_ddp_cpu_trains_in_a_one_process_group(tmp_path):
    ed.init_process_group("gloo", store=ed.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        with pytest.warns(FutureWarning):
            model = ember.nn.parallel.DistributedDataParallelCPU(ember.nn.Linear(3, 2))
        x = ember.randn(4, 3)
        model(x).sum().backward()
        w = model.module.weight
        np.testing.assert_allclose(w.grad.numpy(), np.tile(x.numpy().sum(0), (2, 1)), rtol=1e-5)
    finally:
        ed.destroy_process_group()


def _shrink_outcomes(lib, dist, tmp, calls):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp), 1), rank=0, world_size=1)
    try:
        out = []
        for args, kwargs in calls:
            try:
                dist.shrink_group(*args, **kwargs)
                out.append(None)
            except Exception as e:  # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        return out
    finally:
        dist.destroy_process_group()


def test_shrink_group_checks_match_torch(tmp_path):
    calls = [(([0],), {}), (([],), {}), (((0,),), {}), (([0],), {"shrink_flags": 7}), (([5],), {})]
    assert _shrink_outcomes(ember, ed, tmp_path / "e", calls) == _shrink_outcomes(torch, td, tmp_path / "t", calls)


def test_shrink_group_on_two_ranks_is_refused_as_gloo(monkeypatch):
    import ember.distributed.distributed_c10d as c10d
    monkeypatch.setattr(c10d, "_get_default_group", lambda: ed.GroupMember.WORLD)
    monkeypatch.setattr(c10d, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(c10d, "_get_process_group_name", lambda pg: "0")
    with pytest.raises(TypeError, match="Process group backend for '0' does not support shrinking operations."):
        ed.shrink_group([1])
