"""FSDP2 ``ember.distributed.fsdp.fully_shard`` on 2 forked ranks (one group for every check):
parameters become DTensor Shard(0), training on half a batch per rank matches one process on the
whole batch (gradients reduce-scattered with an average), for both reshard_after_forward modes."""
from __future__ import annotations

import copy
import traceback

import pytest


def _train(rank, reshard_after_forward):
    import ember
    import ember.nn as nn
    from ember.distributed.fsdp import FSDPModule, fully_shard
    from ember.distributed.tensor import DTensor, Shard
    from ember.distributed.tensor.debug import CommDebugMode, c10d_functional as fc
    ember.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 5))     # 9 rows: uneven shards
    model = copy.deepcopy(ref)
    for layer in (model[0], model[2]):
        fully_shard(layer, reshard_after_forward=reshard_after_forward)
    fully_shard(model, reshard_after_forward=reshard_after_forward)
    assert isinstance(model, FSDPModule) and type(model).__name__ == "FSDPSequential"
    assert type(model[0]).__name__ == "FSDPLinear" and isinstance(model[0], nn.Linear)
    for p in model.parameters():
        assert isinstance(p, DTensor) and p.placements == (Shard(0),)
    assert model[0].weight.to_local().shape == ((5, 6) if rank == 0 else (4, 6))
    opt_r = ember.optim.AdamW(ref.parameters(), lr=0.01, fused=False)
    opt = ember.optim.AdamW(model.parameters(), lr=0.01, fused=False)
    x, tgt = ember.randn(4, 6), ember.randn(4, 5)
    for step in range(3):
        ((ref(x) - tgt) ** 2).mean().backward()
        with CommDebugMode() as m:
            out = model(x[2 * rank: 2 * rank + 2])
        assert m.get_comm_counts() == {fc.all_gather_into_tensor: 4}, m.get_comm_counts()
        with CommDebugMode() as m:
            ((out - tgt[2 * rank: 2 * rank + 2]) ** 2).mean().backward()
        assert m.get_comm_counts() == {fc.reduce_scatter_tensor: 4}, m.get_comm_counts()
        for (n, p), q in zip(ref.named_parameters(), model.parameters()):
            assert isinstance(q, DTensor) and q.grad.placements == (Shard(0),), n
            assert ember.allclose(q.grad.full_tensor(), p.grad, atol=1e-6), (n, step)
        opt_r.step()
        opt.step()
        opt_r.zero_grad()
        opt.zero_grad()
        for (n, p), q in zip(ref.named_parameters(), model.parameters()):
            assert ember.allclose(q.full_tensor(), p, atol=1e-6), (n, step)
    return True


def _api(rank):
    import ember
    import ember.nn as nn
    from ember.distributed.fsdp import fully_shard
    from ember.distributed.tensor import DTensor, init_device_mesh
    lin = fully_shard(nn.Linear(3, 4))
    lin.unshard()
    assert type(lin.weight) is ember.Tensor and lin.weight.shape == (4, 3)
    lin.reshard()
    assert isinstance(lin.weight, DTensor)
    # tied weights stay tied
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    fully_shard(tied)
    assert tied[0].weight is tied[1].weight and len(list(tied.parameters())) == 3
    errs = []
    for kw, msg in [({"mp_policy": object()}, "mp_policy is not supported"),
                    ({"reshard_after_forward": 2}, "reshard_after_forward must be a bool")]:
        try:
            fully_shard(nn.Linear(2, 2), **kw)
        except NotImplementedError as e:
            errs.append(msg in str(e))
    return errs == [True, True]


CHECKS = {"train_reshard": lambda r: _train(r, True), "train_keep_unsharded": lambda r: _train(r, False),
          "api": _api}


def _worker(rank, ws):
    out = {}
    for name, f in CHECKS.items():
        try:
            out[name] = ("ok", f(rank))
        except Exception:  # noqa: BLE001 - reported by the check's test
            out[name] = ("err", traceback.format_exc()[-3000:])
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    from ._dtensor_checks import run_once
    return run_once(tmp_path_factory, "fsdp", _worker, 2, timeout=60)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_check(ranks, name):
    for rank in range(2):
        status, val = ranks[rank][name]
        assert status == "ok" and val is True, f"rank {rank}:\n{val}"
