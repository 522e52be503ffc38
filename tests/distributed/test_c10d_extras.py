"""The less common torch.distributed API (coalesced collectives, object send/recv,
subgroups, split_group, debug levels, option structs, backend queries, rendezvous,
breakpoint): 4 forked ranks run every multi-rank check in one group; the rest is compared
with torch in this process."""
from __future__ import annotations

import os
from datetime import timedelta

import numpy as np
import pytest

from ._launch import run_ranks

WS = 4


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares type and message
        return type(e).__name__, str(e)
    return None


def _data(rank, shape, dtype="float64", seed=0):
    rng = np.random.default_rng(100 * seed + rank)
    a = rng.standard_normal(shape)
    if dtype == "complex128":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _script(rank, ws):
    import ember
    import ember.distributed as dist
    from ember.distributed import _c10d_extras
    out = {}
    T = ember.from_numpy
    # all_reduce_coalesced: mixed shapes, a complex tensor among float64 ones
    ts = [T(_data(rank, (2, 3))), T(_data(rank, (4,), "complex128", 1)), T(_data(rank, (1,), seed=2))]
    dist.all_reduce_coalesced(ts)
    out["arc"] = [t.numpy().copy() for t in ts]
    fut = dist.all_reduce_coalesced([T(_data(rank, (3,), seed=3))], op=dist.ReduceOp.MAX, async_op=True)
    out["arc_async"] = fut.wait()[0].numpy().copy()
    out["arc_complex_max"] = _err(lambda: dist.all_reduce_coalesced([T(_data(rank, (2,), "complex128"))],
                                                                    op=dist.ReduceOp.MAX))
    out["arc_dtypes"] = _err(lambda: dist.all_reduce_coalesced([ember.ones(2), ember.ones(2, dtype=ember.float64)]))
    # all_gather_coalesced
    ins = [T(_data(rank, (2, 2), seed=4)), T(_data(rank, (3,), seed=5))]
    outs = [[ember.zeros(2, 2, dtype=ember.float64), ember.zeros(3, dtype=ember.float64)] for _ in range(ws)]
    dist.all_gather_coalesced(outs, ins)
    out["agc"] = [[t.numpy().copy() for t in lst] for lst in outs]
    # the *_single names
    o = ember.zeros(ws * 2, dtype=ember.float64)
    dist.all_gather_single(o, T(_data(rank, (2,), seed=6)))
    out["ags"] = o.numpy().copy()
    o = ember.zeros(2, dtype=ember.float64)
    dist.reduce_scatter_single(o, T(_data(rank, (ws * 2,), seed=7)))
    out["rss"] = o.numpy().copy()
    # send_object_list / recv_object_list: 0 -> 1 and 3 -> 2
    objs = [{"rank": rank, "x": [1, 2]}, ember.tensor([float(rank), 2.5]), "hello"]
    if rank in (0, 3):
        dist.send_object_list(objs, dst=1 if rank == 0 else 2)
    else:
        got = [None] * 3
        sender = dist.recv_object_list(got, src=0 if rank == 1 else 3)
        out["objs"] = (sender, got[0], got[1].tolist(), got[2])
    out["send_self"] = _err(lambda: dist.send_object_list([1], dst=rank))
    out["recv_none"] = _err(lambda: dist.recv_object_list([1]))
    # new_subgroups: {0,1} and {2,3}
    cur, subs = dist.new_subgroups(2)
    out["sub_ranks"] = (dist.get_process_group_ranks(cur), [s is cur for s in subs])
    t = ember.tensor([float(rank + 1)])
    dist.all_reduce(t, group=cur)
    out["sub_sum"] = t.item()
    out["sub_errs"] = [_err(lambda g=g: dist.new_subgroups(g)) for g in (0, 5, 3)]
    cur, subs = dist.new_subgroups_by_enumeration([[0, 3], [1], [2]])
    out["enum_ranks"] = dist.get_process_group_ranks(cur)
    out["enum_overlap"] = _err(lambda: dist.new_subgroups_by_enumeration([[0, 1], [1, 2]]))
    out["enum_empty"] = _err(lambda: dist.new_subgroups_by_enumeration([]))
    # split_group: group ranks of the parent
    sp = dist.split_group(split_ranks=[[0, 2], [3]])
    if rank == 1:
        out["split"] = sp
    else:
        t = ember.tensor([float(10 ** rank)])
        dist.all_reduce(t, group=sp)
        out["split"] = (dist.get_process_group_ranks(sp), t.item())
    out["split_overlap"] = _err(lambda: dist.split_group(split_ranks=[[0, 1], [1]]))
    out["split_empty"] = _err(lambda: dist.split_group(split_ranks=[]))
    out["pg_count"] = dist.get_pg_count()
    out["backend_config"] = (dist.get_backend_config(), dist.get_backend_config(cur))
    # ProcessGroup's method API with option structs (roots are group ranks)
    pg = dist.group.WORLD
    got = []
    t = ember.tensor([float(rank + 1)])
    assert pg.allreduce([t]).wait()
    got.append(t.item())                                             # 1+2+3+4
    t = ember.tensor([float(rank + 1)])
    pg.allreduce(t, dist.ReduceOp.MAX).wait()
    got.append(t.item())
    opts = dist.ReduceOptions()
    opts.reduceOp, opts.rootRank = dist.ReduceOp.PRODUCT, 1
    t = ember.tensor([float(rank + 1)])
    pg.reduce([t], opts).wait()
    got.append(t.item() if rank == 1 else None)                      # 24 on group rank 1
    outs = [ember.zeros(1) for _ in range(ws)]
    pg.allgather([outs], [ember.tensor([float(rank)])]).wait()
    got.append([o.item() for o in outs])
    pg.barrier().wait()
    sub_pg, _ = dist.new_subgroups(2)
    bo = dist.BroadcastOptions()
    bo.rootRank = 1                                                  # group rank 1: global 1 or 3
    t = ember.tensor([float(rank)])
    sub_pg.broadcast([t], bo).wait()
    got.append(t.item())
    c = [ember.tensor([1.0 * rank]), ember.tensor([2.0, 3.0])]
    pg.allreduce_coalesced(c, dist.AllreduceCoalescedOptions()).wait()
    got.append([x.tolist() for x in c])
    out["pg_methods"] = got
    # split a sub-group: only its members call split_group; a later world-wide new_group still works
    halves = dist.split_group(parent_pg=sub_pg, split_ranks=[[1], [0]])
    t = ember.tensor([float(rank)])
    dist.all_reduce(t, group=halves)
    everyone = dist.new_group([0, 1, 2, 3])
    u = ember.tensor([1.0])
    dist.all_reduce(u, group=everyone)
    out["split_sub"] = (dist.get_process_group_ranks(halves), t.item(), u.item())
    # the private helpers libraries reach for
    from ember.distributed import distributed_c10d as c10d
    with c10d._coalescing_manager(async_ops=True) as cm:
        t = ember.tensor([1.0])
        cm.append(dist.all_reduce(t, async_op=True))
    cm.wait()
    out["private"] = (c10d._get_default_group() is dist.group.WORLD, c10d._rank_not_in_group(None),
                      c10d._rank_not_in_group(sub_pg), c10d._get_group_size(sub_pg),
                      c10d._get_process_group_name(dist.group.WORLD), t.item(),
                      c10d._get_default_store() is not None)
    # breakpoint: rank 2 stops (a recording pdb stands in for the terminal), the others wait
    calls = []

    class FakePdb:
        def message(self, m):
            calls.append(m)

        def set_trace(self, frame):
            calls.append(frame.f_code.co_name)
    _c10d_extras._distributed_pdb = FakePdb
    for _ in range(3):
        dist.breakpoint(rank=2, skip=1, timeout_s=20)
    out["breakpoint"] = calls
    out["timeout_after_breakpoint"] = dist.group.WORLD.timeout
    return out


def _fold(parts, f=np.add):
    acc = np.array(parts[0], copy=True)
    for p in parts[1:]:
        acc = f(acc, p)
    return acc


def test_multi_rank_extras_on_4_ranks():
    """One spawned group for every multi-rank check of this file."""
    ranks = run_ranks(_script, WS, timeout=60)
    _check_coalesced_collectives(ranks)
    _check_object_point_to_point(ranks)
    _check_subgroups_and_split(ranks)
    _check_breakpoint_stops_one_rank_after_skips(ranks)


def _check_coalesced_collectives(ranks):
    r = range(WS)
    for k in r:
        got = ranks[k]
        np.testing.assert_array_equal(got["arc"][0], _fold([_data(i, (2, 3)) for i in r]))
        np.testing.assert_array_equal(got["arc"][1], _fold([_data(i, (4,), "complex128", 1) for i in r]))
        np.testing.assert_array_equal(got["arc"][2], _fold([_data(i, (1,), seed=2) for i in r]))
        np.testing.assert_array_equal(got["arc_async"], _fold([_data(i, (3,), seed=3) for i in r], np.maximum))
        assert got["arc_complex_max"] == ("ValueError", "all_reduce does not support RedOpType.MAX on complex tensors")
        assert got["arc_dtypes"] == ("ValueError", "Invalid usage of tensors with different dtypesFound "
                                                   "ember.float32 and  ember.float64")
        for src in r:
            np.testing.assert_array_equal(got["agc"][src][0], _data(src, (2, 2), seed=4))
            np.testing.assert_array_equal(got["agc"][src][1], _data(src, (3,), seed=5))
        np.testing.assert_array_equal(got["ags"], np.concatenate([_data(i, (2,), seed=6) for i in r]))
        np.testing.assert_array_equal(got["rss"], _fold([_data(i, (WS * 2,), seed=7) for i in r])[2 * k:2 * k + 2])


def _check_object_point_to_point(ranks):
    assert ranks[1]["objs"] == (0, {"rank": 0, "x": [1, 2]}, [0.0, 2.5], "hello")
    assert ranks[2]["objs"] == (3, {"rank": 3, "x": [1, 2]}, [3.0, 2.5], "hello")
    for k in range(WS):
        assert ranks[k]["send_self"] == ("ValueError", "Invalid destination rank: destination rank should not be "
                                                       "the same as the rank of the current process.")
        assert ranks[k]["recv_none"] == ("ValueError", "Must specify global_rank or group_rank")


def _check_subgroups_and_split(ranks):
    for k in range(WS):
        got = ranks[k]
        mine = [0, 1] if k < 2 else [2, 3]
        assert got["sub_ranks"] == (mine, [k < 2, k >= 2])
        assert got["sub_sum"] == sum(m + 1 for m in mine)
        assert got["sub_errs"] == [("ValueError", "The arg 'group_size' (0) must be positive"),
                                   ("ValueError", "The arg 'group_size' (5) must not exceed the world size (4)"),
                                   ("ValueError", "The world size (4) must be divisible by 'group_size=3'")]
        assert got["enum_ranks"] == {0: [0, 3], 1: [1], 2: [2], 3: [0, 3]}[k]
        assert got["enum_overlap"] == ("ValueError", "Rank 1 has appeared in both subgroup [0, 1] and [1, 2]")
        assert got["enum_empty"] == ("ValueError", "The arg 'ranks_per_subgroup_list' cannot be empty")
        assert got["split_overlap"][0] == "ValueError" and "more than one split" in got["split_overlap"][1]
        assert got["split_empty"] == ("ValueError", "split_ranks cannot be None or empty")
        # default + 2 (new_subgroups) + 3 + 2 (enumeration; the overlapping call made one before failing)
        # + this rank's split (rank 1 is in none)
        assert got["pg_count"] == (8 if k == 1 else 9)
        mine = [0, 1] if k < 2 else [2, 3]
        assert got["pg_methods"] == [10.0, 4.0, 24.0 if k == 1 else None, [0.0, 1.0, 2.0, 3.0], float(mine[1]),
                                     [[6.0], [8.0, 12.0]]]
        assert got["split_sub"] == ([k], float(k), 4.0)
        assert got["private"] == (True, False, False, 2, "0", 4.0, True)
        assert got["backend_config"] == ("cpu:gloo,cuda:gloo", "cpu:gloo,cuda:gloo")
    assert ranks[1]["split"] is None
    assert ranks[0]["split"] == ([0, 2], 101.0) and ranks[2]["split"] == ([0, 2], 101.0)
    assert ranks[3]["split"] == ([3], 1000.0)


def _check_breakpoint_stops_one_rank_after_skips(ranks):
    msg = "\n!!! ATTENTION !!!\n\nType 'up' to get to the frame that called dist.breakpoint(rank=2)\n"
    for k in range(WS):
        assert ranks[k]["breakpoint"] == ([msg, "_script"] * 2 if k == 2 else [])
        assert ranks[k]["timeout_after_breakpoint"] == 20.0


# ---------------------------------------------------------------------------- single process, vs torch
def test_queries_and_structs_match_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.distributed as td
    import ember.distributed as ed
    for b in ["gloo", "nccl", "mpi", "ucc", "xccl", "cpu:gloo", "cpu:gloo,cuda:nccl", "foo"]:
        assert ed.is_backend_available(b) == td.is_backend_available(b), b
    for dev in ["cpu", "cuda", "cpu:0", "meta"]:
        assert _err(lambda: ed.get_default_backend_for_device(dev)) == \
            _err(lambda: td.get_default_backend_for_device(dev))
        if dev != "meta":
            assert ed.get_default_backend_for_device(dev) == td.get_default_backend_for_device(dev)
    assert ed.get_default_backend_for_device(torch.device("cpu") and __import__("ember").device("cpu")) == "gloo"
    for op in ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]:
        assert ed.supports_complex(getattr(ed.ReduceOp, op)) == td.supports_complex(getattr(td.ReduceOp, op)), op
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert _err(ed.get_node_local_rank) == _err(td.get_node_local_rank)
    assert ed.get_node_local_rank(fallback_rank=3) == 3
    monkeypatch.setenv("LOCAL_RANK", "5")
    assert ed.get_node_local_rank(1) == td.get_node_local_rank(1) == 5
    assert ed.get_pg_count() == td.get_pg_count() == 0
    assert _err(ed.get_backend_config) == _err(td.get_backend_config)
    for cfg in ["gloo", "cpu:gloo,cuda:nccl"]:
        assert str(ed.BackendConfig(cfg)) == str(td.BackendConfig(td.Backend(cfg)))
    assert ed.Backend("cpu:gloo,cuda:nccl") == ed.Backend("cpu:gloo") == "gloo"     # ember keeps the CPU part
    assert ed.BackendConfig("gloo").get_device_backend_map() == td.BackendConfig(td.Backend("gloo")) \
        .get_device_backend_map()
    for name in ["AllToAllOptions", "AllreduceCoalescedOptions", "AllreduceOptions", "BarrierOptions",
                 "BroadcastOptions", "GatherOptions", "ReduceOptions", "ReduceScatterOptions", "ScatterOptions"]:
        e, t = getattr(ed, name)(), getattr(td, name)()
        fields = [a for a in dir(t) if not a.startswith("_")]
        for f in fields:
            ev, tv = getattr(e, f), getattr(t, f)
            if f == "reduceOp":
                assert int(ev) == int(tv.op if hasattr(tv, "op") else tv), name
            else:
                assert ev == tv, (name, f)
        e.timeout = timedelta(seconds=3)
        assert e.timeout == timedelta(seconds=3)
    assert [m.name for m in ed.BuiltinCommHookType] == list(td.BuiltinCommHookType.__members__)
    import ember.nn.parallel.distributed as ddp
    assert ed.GradBucket is ddp.GradBucket
    assert {n for n in dir(td.GradBucket) if not n.startswith("_")} <= set(dir(ed.GradBucket))


def test_debug_level_matches_torch(monkeypatch):
    pytest.importorskip("torch")
    import torch.distributed as td
    import ember.distributed as ed
    saved_e, saved_t = ed.get_debug_level(), td.get_debug_level()
    try:
        assert list(ed.DebugLevel.__members__) == list(td.DebugLevel.__members__)
        for lvl in ["OFF", "INFO", "DETAIL"]:
            e, t = getattr(ed.DebugLevel, lvl), getattr(td.DebugLevel, lvl)
            assert (repr(e), str(e), int(e)) == (repr(t), str(t), int(t))
        for env in ["detail", "INFO", "off", "bogus"]:
            monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", env)
            assert _err(ed.set_debug_level_from_env) == _err(td.set_debug_level_from_env)
            assert str(ed.get_debug_level()) == str(td.get_debug_level())
        ed.set_debug_level(ed.DebugLevel.INFO)
        td.set_debug_level(td.DebugLevel.INFO)
        assert str(ed.get_debug_level()) == str(td.get_debug_level())
        e, t = _err(lambda: ed.set_debug_level(3)), _err(lambda: td.set_debug_level(3))
        assert e[0] == t[0] == "TypeError" and e[1].split("\n")[0] == t[1].split("\n")[0]
    finally:
        ed.set_debug_level(saved_e)
        td.set_debug_level(saved_t)


def test_rendezvous_handlers(tmp_path):
    torch = pytest.importorskip("torch")   # noqa: F841
    import torch.distributed as td
    import ember.distributed as ed
    for bad in [lambda d: d.rendezvous(3), lambda d: d.rendezvous("tcp://a:1", rank="0"),
                lambda d: d.rendezvous("tcp://a:1", world_size=1.5), lambda d: d.rendezvous("nope://x"),
                lambda d: d.register_rendezvous_handler("tcp", lambda url: None),
                lambda d: next(d.rendezvous("file://" + str(tmp_path / "f") + "?rank=0", world_size=1)),
                lambda d: next(d.rendezvous("file://" + str(tmp_path / "f"), rank=0)),
                lambda d: next(d.rendezvous("tcp://127.0.0.1:1?rank=0", rank=0))]:
        assert _err(lambda: bad(ed)) == _err(lambda: bad(td))


def test_custom_rendezvous_scheme_drives_init_process_group(tmp_path):
    import ember.distributed as ed
    store, rank, ws = next(ed.rendezvous("file://" + str(tmp_path / "g"), rank=0, world_size=1))
    assert (rank, ws) == (0, 1) and isinstance(store, ed.FileStore)
    # a user scheme drives init_process_group
    seen = []

    def handler(url, **kwargs):
        seen.append((url, sorted(kwargs)))
        yield ed.HashStore(), 0, 1
    ed.register_rendezvous_handler("embertest", handler)
    ed.init_process_group("gloo", init_method="embertest://somewhere")
    try:
        assert (ed.get_rank(), ed.get_world_size()) == (0, 1)
        t = __import__("ember").tensor([2.0])
        ed.all_reduce(t)
        assert t.item() == 2.0
    finally:
        ed.destroy_process_group()
    assert seen == [("embertest://somewhere", ["timeout"])]
