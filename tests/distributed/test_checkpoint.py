"""ember.distributed.checkpoint (DCP) vs torch.distributed.checkpoint: round trips of random
nested state_dicts, the directory layout and flattened keys, load errors, async_save, model +
optimizer state_dicts by FQN (plain and DDP), and saving/loading from 2 forked ranks (which
rank writes which key, as torch's planner decides)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import ember
import ember.distributed.checkpoint as dcp
from ember.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, get_state_dict, set_model_state_dict,
                                                     set_optimizer_state_dict, set_state_dict)

from ._launch import run_ranks


def _arr(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, size=shape).astype(dtype)
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _spec(seed):
    """A nested state_dict description: numpy arrays for tensors, plain values otherwise."""
    rng = np.random.default_rng(seed)
    return {
        "w": _arr(rng, "float32", (3, 4)),
        "scalar": _arr(rng, "float64", ()),
        "empty": _arr(rng, "float32", (0, 2)),
        "nested": {"i64": _arr(rng, "int64", (5,)), "b": _arr(rng, "bool", (2, 3)),
                   "c": _arr(rng, "complex64", (2,)), "deep": {"x": _arr(rng, "float64", (2, 2, 2))}},
        "step": int(rng.integers(1, 1000)), "name": "run-%d" % seed, "lr": float(rng.random()), "none": None,
        "plain_list": [1, 2.5, "a"], "mixed_list": [int(rng.integers(9)), _arr(rng, "float32", (2,))],
        "tup": (3, "t"),
    }


def _build(spec, lib, blank=False):
    """The spec as a state_dict of ``lib``'s tensors; ``blank``: same structure, other values."""
    def conv(v):
        if isinstance(v, np.ndarray):
            a = np.zeros_like(v) + (1 if v.dtype != bool else False) if blank else v.copy()
            return lib.from_numpy(np.ascontiguousarray(a))
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        if blank:
            return {int: -1, float: -1.0, str: "blank", type(None): 0, tuple: (), list: []}.get(type(v), v)
        return v
    return conv(spec)


def _to_np(v):
    if isinstance(v, dict):
        return {k: _to_np(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_np(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_to_np(x) for x in v)
    if isinstance(v, ember.Tensor):
        return ("tensor", str(v.dtype).split(".")[-1], v.numpy().copy())
    return v


def _assert_same(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b and type(a) is type(b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip_in_place(tmp_path, seed):
    spec = _spec(seed)
    sd = _build(spec, ember)
    md = dcp.save(sd, checkpoint_id=tmp_path)
    assert sorted(os.listdir(tmp_path)) == [".metadata", "__0_0.distcp"]
    out = _build(spec, ember, blank=True)
    w_before = out["w"]
    dcp.load(out, storage_reader=dcp.FileSystemReader(tmp_path))
    assert out["w"] is w_before            # tensors are filled in place
    _assert_same(_to_np(out), _to_np(sd))
    assert isinstance(md, dcp.Metadata)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "uint8", "int8", "int16", "complex128"])
def test_round_trip_other_dtypes(tmp_path, dtype):
    rng = np.random.default_rng(len(dtype))
    src = ember.randn(3, 5, dtype=ember.float64) * 10 if not dtype.startswith("complex") else \
        ember.complex(ember.randn(3, 5, dtype=ember.float64), ember.randn(3, 5, dtype=ember.float64))
    t = src.to(getattr(ember, dtype))
    v = t.t()                                    # a non-contiguous view is saved by value
    dcp.save({"t": t, "v": v, "k": int(rng.integers(100))}, checkpoint_id=tmp_path)
    out = {"t": ember.zeros(3, 5, dtype=getattr(ember, dtype)), "v": ember.zeros(5, 3, dtype=getattr(ember, dtype)),
           "k": None}
    dcp.load(out, checkpoint_id=tmp_path)
    assert out["t"].dtype == t.dtype
    assert ember.equal(out["t"], t) and ember.equal(out["v"], v)


def test_layout_and_keys_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    spec = _spec(7)
    ours = dcp.save(_build(spec, ember), storage_writer=dcp.FileSystemWriter(tmp_path / "e"))
    theirs = tdcp.save(_build(spec, torch), checkpoint_id=str(tmp_path / "t"))
    assert sorted(os.listdir(tmp_path / "e")) == sorted(os.listdir(tmp_path / "t"))
    assert list(ours.state_dict_metadata) == list(theirs.state_dict_metadata)
    assert ours.planner_data == theirs.planner_data
    for k, m in theirs.state_dict_metadata.items():
        e = ours.state_dict_metadata[k]
        assert type(e).__name__ == type(m).__name__
        if type(m).__name__ == "TensorStorageMetadata":
            assert list(e.size) == list(m.size) and str(e.properties.dtype) == str(m.properties.dtype).replace(
                "torch.", "ember.")
            assert [list(c.sizes) for c in e.chunks] == [list(c.sizes) for c in m.chunks]
    assert {(i.fqn, v.relative_path) for i, v in ours.storage_data.items()} == \
        {(i.fqn, v.relative_path) for i, v in theirs.storage_data.items()}
    # the metadata read back equals what save returned
    back = dcp.FileSystemReader(tmp_path / "e").read_metadata()
    assert back.state_dict_metadata == ours.state_dict_metadata and back.storage_data == ours.storage_data


def _torch_error(torch, tdcp, path, bad):
    try:
        tdcp.load(bad, checkpoint_id=str(path))
    except BaseException as e:  # noqa: BLE001 - CheckpointException is a BaseException
        return type(e).__name__, str(e).strip().splitlines()[-1]
    raise AssertionError("torch did not raise")


def test_load_errors_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 2)).astype(np.float32)
    dcp.save({"a": ember.from_numpy(a.copy()), "k": 4}, checkpoint_id=tmp_path / "e")
    tdcp.save({"a": torch.from_numpy(a.copy()), "k": 4}, checkpoint_id=str(tmp_path / "t"))
    cases = [lambda L: {"zz": L.zeros(3)}, lambda L: {"a": L.zeros(2, 3)}, lambda L: {"a": 7},
             lambda L: {"a": L.zeros(3, 2), "extra": L.zeros(1)}]
    for make in cases:
        want = _torch_error(torch, tdcp, tmp_path / "t", make(torch))
        with pytest.raises(dcp.CheckpointException) as info:
            dcp.load(make(ember), checkpoint_id=tmp_path / "e")
        got = (type(info.value).__name__, str(info.value).strip().splitlines()[-1])
        assert got == (want[0], want[1].replace("torch.distributed", "ember.distributed").replace("torch.", "ember."))
        assert list(info.value.failures) == [0]
    # no checkpoint_id and no storage: torch's RuntimeError
    for ours, theirs in [(lambda: dcp.load({"a": ember.zeros(1)}), lambda: tdcp.load({"a": torch.zeros(1)})),
                         (lambda: dcp.save({"a": ember.zeros(1)}), lambda: tdcp.save({"a": torch.zeros(1)}))]:
        with pytest.raises(RuntimeError) as got:
            ours()
        with pytest.raises(RuntimeError) as want:
            theirs()
        assert str(got.value) == str(want.value)


def test_load_converts_dtype_and_partial_load(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    rng = np.random.default_rng(11)
    a = rng.standard_normal(5).astype(np.float32)
    dcp.save({"a": ember.from_numpy(a.copy())}, checkpoint_id=tmp_path / "e")
    tdcp.save({"a": torch.from_numpy(a.copy())}, checkpoint_id=str(tmp_path / "t"))
    ours = {"a": ember.zeros(5, dtype=ember.float64), "new": ember.ones(2)}
    theirs = {"a": torch.zeros(5, dtype=torch.float64), "new": torch.ones(2)}
    dcp.load(ours, checkpoint_id=tmp_path / "e", planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    tdcp.load(theirs, checkpoint_id=str(tmp_path / "t"), planner=tdcp.DefaultLoadPlanner(allow_partial_load=True))
    assert ours["a"].dtype == ember.float64
    np.testing.assert_array_equal(ours["a"].numpy(), theirs["a"].numpy())
    np.testing.assert_array_equal(ours["new"].numpy(), np.ones(2, np.float32))


def test_async_save_snapshots_values(tmp_path):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    t = ember.from_numpy(a.copy())
    fut = dcp.async_save({"t": t, "n": 3}, checkpoint_id=tmp_path)
    t.add_(1.0)                     # after async_save returns: not in the checkpoint
    md = fut.result(timeout=30)
    assert isinstance(md, dcp.Metadata)
    out = {"t": ember.zeros(4, 3), "n": 0}
    dcp.load(out, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(out["t"].numpy(), a)
    assert out["n"] == 3


def test_unsupported_inputs_raise(tmp_path):
    with pytest.raises(dcp.CheckpointException) as info:
        dcp.save({"obj": object()}, checkpoint_id=tmp_path / "a")
    assert "cannot store the value at key 'obj'" in str(info.value)

    class MyPlanner(dcp.DefaultSavePlanner):
        pass
    with pytest.raises(NotImplementedError, match="custom planners"):
        dcp.save({"a": ember.ones(1)}, checkpoint_id=tmp_path / "b", planner=MyPlanner())
    with pytest.raises(NotImplementedError, match="thread_count"):
        dcp.FileSystemWriter(tmp_path, thread_count=2)
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    tdcp.save({"a": torch.ones(2)}, checkpoint_id=str(tmp_path / "t"))
    with pytest.raises(dcp.CheckpointException) as info:
        dcp.load({"a": ember.ones(2)}, checkpoint_id=tmp_path / "t")
    assert "never unpickles" in str(info.value)


def _model(lib, seed):
    lib.manual_seed(seed)
    nn = lib.nn
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def _train(lib, model, opt, xs):
    for x in xs:
        opt.zero_grad()
        model(lib.from_numpy(x)).pow(2).sum().backward()
        opt.step()


def test_model_and_optimizer_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint.state_dict as tsd
    for opt_name in ["Adam", "SGD"]:
        kw = {"lr": 0.05} if opt_name == "Adam" else {"lr": 0.05, "momentum": 0.9}
        res = []
        for lib, mod in [(ember, None), (torch, tsd)]:
            m = _model(lib, 0)
            m[3].bias.requires_grad_(False)
            opt = getattr(lib.optim, opt_name)(m.parameters(), **kw)
            get = get_state_dict if mod is None else mod.get_state_dict
            opts = StateDictOptions if mod is None else mod.StateDictOptions
            gmsd = get_model_state_dict if mod is None else mod.get_model_state_dict
            gosd = get_optimizer_state_dict if mod is None else mod.get_optimizer_state_dict
            msd, osd = get(m, opt)     # fresh optimizer: state created by a zero step
            res.append((list(msd), {k: sorted(v) for k, v in osd["state"].items()},
                        [g["params"] for g in osd["param_groups"]],
                        list(gmsd(m, options=opts(ignore_frozen_params=True))),
                        list(gosd(m, opt, options=opts(flatten_optimizer_state_dict=True)))))
        assert res[0] == res[1]


def test_model_optimizer_checkpoint_resumes_training(tmp_path):
    rng = np.random.default_rng(21)
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(6)]
    m = _model(ember, 1)
    opt = ember.optim.Adam(m.parameters(), lr=0.01)
    _train(ember, m, opt, xs[:3])
    msd, osd = get_state_dict(m, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=tmp_path)
    _train(ember, m, opt, xs[3:])

    m2 = _model(ember, 99)
    opt2 = ember.optim.Adam(m2.parameters(), lr=0.5)
    msd2, osd2 = get_state_dict(m2, opt2)
    state = {"model": msd2, "optim": osd2}
    dcp.load(state, checkpoint_id=tmp_path)
    keys = set_state_dict(m2, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
    assert keys.missing_keys == [] and keys.unexpected_keys == []
    assert opt2.param_groups[0]["lr"] == 0.01
    _train(ember, m2, opt2, xs[3:])
    for (k, a), (_, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=0, err_msg=k)


def test_stateful_values_model_and_optimizer(tmp_path):
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]
    m = _model(ember, 3)
    opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    _train(ember, m, opt, xs[:2])

    class App:              # torch's Stateful protocol: state_dict / load_state_dict
        def __init__(self, step):
            self.step = step

        def state_dict(self):
            return {"step": self.step, "noise": ember.full((2,), float(self.step))}

        def load_state_dict(self, sd):
            self.step = sd["step"]
            self.noise = sd["noise"]

    assert isinstance(m, dcp.Stateful) and isinstance(App(1), dcp.Stateful)
    saved_step = int(rng.integers(5, 50))
    dcp.save({"model": m, "optim": opt, "app": App(saved_step)}, checkpoint_id=tmp_path)
    m2 = _model(ember, 4)
    opt2 = ember.optim.SGD(m2.parameters(), lr=0.9, momentum=0.9)
    _train(ember, m2, opt2, xs[:1])       # creates the momentum buffers to load into
    app = App(0)
    target = {"model": m2, "optim": opt2, "app": app}
    dcp.load(target, checkpoint_id=tmp_path)
    assert target["model"] is m2 and target["app"] is app and app.step == saved_step
    np.testing.assert_array_equal(app.noise.numpy(), np.full(2, float(saved_step), np.float32))
    _train(ember, m, opt, xs[2:])
    _train(ember, m2, opt2, xs[2:])
    for (k, a), (_, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)


def test_set_state_dict_flattened_and_non_strict_match_torch():
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint.state_dict as tsd
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(2)]
    out = []
    for lib, mod in [(ember, None), (torch, tsd)]:
        ns = {k: getattr(mod, k) if mod else globals()[k] for k in
              ["StateDictOptions", "get_optimizer_state_dict", "set_optimizer_state_dict", "set_model_state_dict",
               "get_model_state_dict"]}
        m = _model(lib, 2)
        opt = lib.optim.AdamW(m.parameters(), lr=0.02)
        _train(lib, m, opt, xs)
        flat = ns["get_optimizer_state_dict"](m, opt, options=ns["StateDictOptions"](flatten_optimizer_state_dict=True))
        m2 = _model(lib, 3)
        opt2 = lib.optim.AdamW(m2.parameters(), lr=0.7)
        ns["set_optimizer_state_dict"](m2, opt2, flat)
        part = {k: v for k, v in ns["get_model_state_dict"](m).items() if k.startswith("0.")}
        keys = ns["set_model_state_dict"](m2, part, options=ns["StateDictOptions"](strict=False))
        src, got = opt.state_dict()["state"], opt2.state_dict()["state"]
        assert sorted(src) == sorted(got)
        for i in src:      # the second optimizer now holds the first one's state
            assert sorted(src[i]) == sorted(got[i])
            for k in src[i]:
                np.testing.assert_array_equal(np.asarray(src[i][k].detach().numpy()),
                                              np.asarray(got[i][k].detach().numpy()))
        out.append((keys.missing_keys, keys.unexpected_keys, opt2.param_groups[0]["lr"], sorted(flat)))
    assert out[0] == out[1]


# ------------------------------------------------------------------ two ranks
def _mixed_state(rank):
    """Replicated keys (same on both ranks) plus one key only this rank has."""
    rng = np.random.default_rng(123)
    sd = {"big": rng.standard_normal((8, 8)).astype(np.float32), "small": rng.standard_normal(3).astype(np.float64),
          "mid": rng.standard_normal((4, 4)).astype(np.float32), "meta": {"epoch": 3}}
    sd[f"only{rank}"] = np.random.default_rng(rank).standard_normal(2).astype(np.float32)
    return sd


def _save_mixed(rank, ws, path, lib):
    if lib == "torch":
        import torch as L
        import torch.distributed.checkpoint as D
    else:
        L, D = ember, dcp
    conv = {k: (L.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in _mixed_state(rank).items()}
    md = D.save(conv, checkpoint_id=str(path))
    return sorted((i.fqn, v.relative_path) for i, v in md.storage_data.items())


def test_two_ranks_dedup_matches_torch(tmp_path):
    pytest.importorskip("torch")
    ours = run_ranks(_save_mixed, 2, tmp_path / "e", "ember")
    theirs = run_ranks(_save_mixed, 2, tmp_path / "t", "torch", backend="torch")
    assert ours[0] == ours[1] == theirs[0]
    assert sorted(os.listdir(tmp_path / "e")) == sorted(os.listdir(tmp_path / "t")) == \
        [".metadata", "__0_0.distcp", "__1_0.distcp"]
    # every key once; each rank-only key in its own rank's file
    assert len({f for f, _ in ours[0]}) == len(ours[0])
    assert ("only1", "__1_0.distcp") in ours[0] and ("only0", "__0_0.distcp") in ours[0]

    def load_body(rank, ws, path):
        want = _mixed_state(rank)
        out = {k: (ember.zeros(*v.shape, dtype=getattr(ember, str(v.dtype))) if isinstance(v, np.ndarray) else
                   {"epoch": -1}) for k, v in want.items()}
        out["only1" if rank == 0 else "only0"] = ember.zeros(2)     # the other rank's key: read from its file
        dcp.load(out, checkpoint_id=path)
        return {k: (v.numpy().copy() if isinstance(v, ember.Tensor) else v) for k, v in out.items()}

    loaded = run_ranks(load_body, 2, tmp_path / "e")
    for rank in range(2):
        full = dict(_mixed_state(0), **_mixed_state(1))
        for k, v in loaded[rank].items():
            _assert_same(v, full[k])


def test_two_ranks_ddp_save_then_load_into_fresh_model(tmp_path):
    def body(rank, ws, path):
        import ember.distributed as dist
        from ember.nn.parallel import DistributedDataParallel as DDP
        rng = np.random.default_rng(40 + rank)
        model = DDP(_model(ember, 5))
        opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        _train(ember, model, opt, [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2)])
        msd, osd = get_state_dict(model, opt)
        assert all(not k.startswith("module.") for k in msd)
        md = dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
        files = {v.relative_path for v in md.storage_data.values()}

        fresh = DDP(_model(ember, 77 + rank))
        opt2 = ember.optim.SGD(fresh.parameters(), lr=0.3, momentum=0.9)
        m2, o2 = get_state_dict(fresh, opt2)
        state = {"model": m2, "optim": o2}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(fresh, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
        dist.barrier()
        a = {k: v.detach().numpy().copy() for k, v in model.module.state_dict().items()}
        b = {k: v.detach().numpy().copy() for k, v in fresh.module.state_dict().items()}
        mom = [opt2.state[p]["momentum_buffer"].numpy().copy() for p in fresh.parameters()]
        mom0 = [opt.state[p]["momentum_buffer"].numpy().copy() for p in model.parameters()]
        return a, b, mom, mom0, files

    res = run_ranks(body, 2, tmp_path)
    assert res[0][4] == {"__0_0.distcp", "__1_0.distcp"}     # the replicated keys are split between ranks
    for rank in range(2):
        a, b, mom, mom0, _ = res[rank]
        for k in a:
            np.testing.assert_array_equal(b[k], res[0][1][k])    # both ranks loaded the same values
            if "running" in k:
                # BatchNorm statistics: DDP syncs them from rank 0 at each forward, so after the
                # last step the ranks differ; one copy was saved (whichever rank wrote the key)
                assert any(np.array_equal(b[k], res[r][0][k]) for r in range(2))
            else:
                np.testing.assert_array_equal(a[k], b[k])        # parameters: replicas equal, restored
        for x, y in zip(mom, mom0):
            np.testing.assert_array_equal(x, y)


def test_two_ranks_error_on_one_rank_raises_everywhere(tmp_path):
    def body(rank, ws, path):
        dcp.save({"a": ember.ones(3)}, checkpoint_id=path)
        bad = {"a": ember.zeros(3)} if rank == 0 else {"a": ember.zeros(3), "missing": ember.zeros(1)}
        try:
            dcp.load(bad, checkpoint_id=path)
        except dcp.CheckpointException as e:
            return sorted(e.failures), type(e.failures[1][0]).__name__, str(e.failures[1][0])
        return None

    res = run_ranks(body, 2, tmp_path)
    assert res[0] == res[1] == ([1], "RuntimeError", "Missing key in checkpoint state_dict: missing.")


def test_two_ranks_broadcast_from_rank0():
    def body(rank, ws):
        rng = np.random.default_rng(9)
        src = _model(ember, 10)
        # fused=False: the native (OpenMP) Adam step hangs in a forked child when the parent
        # process already ran it (libgomp's thread pool does not survive fork)
        opt = ember.optim.Adam(src.parameters(), lr=0.03, fused=False)
        _train(ember, src, opt, [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2)])
        msd, osd = get_state_dict(src, opt, options=StateDictOptions(full_state_dict=True))
        dst = _model(ember, 20 + rank)
        opt2 = ember.optim.Adam(dst.parameters(), lr=0.5, fused=False)
        opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_state_dict(dst, opt2, model_state_dict=msd if rank == 0 else {},
                       optim_state_dict=osd if rank == 0 else {}, options=opts)
        return ({k: v.numpy().copy() for k, v in dst.state_dict().items()},
                {k: v.numpy().copy() for k, v in src.state_dict().items()}, opt2.param_groups[0]["lr"],
                [opt2.state[p]["exp_avg"].numpy().copy() for p in dst.parameters()],
                [opt.state[p]["exp_avg"].numpy().copy() for p in src.parameters()])

    res = run_ranks(body, 2)
    for rank in range(2):
        got, _, lr, avg, _ = res[rank]
        want = res[0][1]     # rank 0's source model and optimizer
        assert lr == 0.03
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        for x, y in zip(avg, res[0][4]):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="full_state_dict must be True"):
        get_model_state_dict(_model(ember, 0), options=StateDictOptions(broadcast_from_rank0=True))
