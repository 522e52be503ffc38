"""Initialisation (env://, tcp://, file://, store=), stores, and the errors users hit."""
from __future__ import annotations

import os
import time
from datetime import timedelta

import numpy as np
import pytest

from ._launch import free_port, run_ranks


def test_uninitialized_errors_and_backends():
    import ember as torch
    import ember.distributed as dist
    assert dist.is_available() and not dist.is_initialized()
    msg = "Default process group has not been initialized, please make sure to call init_process_group."
    for call in (lambda: dist.all_reduce(torch.ones(2)), dist.get_rank, dist.get_world_size, dist.barrier,
                 lambda: dist.broadcast(torch.ones(1), 0), dist.get_backend):
        with pytest.raises(ValueError, match="Default process group has not been initialized") as e:
            call()
        assert str(e.value) == msg
    with pytest.raises(RuntimeError, match="nccl.*gloo"):
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("carrier-pigeon", rank=0, world_size=1)
    assert not dist.is_initialized()
    import ember
    assert ember.distributed is dist


def test_single_process_group_env_init(monkeypatch):
    import ember as torch
    import ember.distributed as dist
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("gloo")
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        assert dist.get_backend() == "gloo"
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("gloo")
        t = torch.tensor([1.5, -2.0])
        dist.all_reduce(t)
        assert t.tolist() == [1.5, -2.0]
        with pytest.raises(RuntimeError, match="Cannot use ReduceOp.BAND with non-integral dtype"):
            dist.all_reduce(t, op=dist.ReduceOp.BAND)
        lst = [torch.zeros(3)]
        with pytest.raises(ValueError, match="tensor_list must hold one tensor per rank of the group \\(1\\), got 2"):
            dist.all_gather(lst + lst, torch.ones(3))
        with pytest.raises(TypeError, match="tensor must be an ember Tensor"):
            dist.all_reduce(np.ones(2))
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_env_missing_variable(monkeypatch):
    import ember.distributed as dist
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="environment variable RANK expected, but not set"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="rank parameter missing"):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1234")


@pytest.mark.parametrize("method", ["env", "tcp", "file"])
def test_init_methods_two_ranks(method, tmp_path):
    port = free_port()
    path = str(tmp_path / "store")

    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        if method == "env":
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(ws))
            dist.init_process_group(backend="gloo", timeout=timedelta(seconds=10))
        elif method == "tcp":
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                                    timeout=timedelta(seconds=10))
        else:
            dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=ws,
                                    timeout=timedelta(seconds=10))
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)
        return dist.get_rank(), dist.get_world_size(), t.item()

    out = run_ranks(body, 2, init=False)
    assert out == {0: (0, 2, 3.0), 1: (1, 2, 3.0)}


def test_stores(tmp_path):
    import ember.distributed as dist
    tcp = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    client = dist.TCPStore("127.0.0.1", tcp.port, timeout=timedelta(seconds=5))
    stores = [dist.HashStore(), dist.FileStore(str(tmp_path / "fs")), tcp,
              dist.PrefixStore("pre", dist.HashStore())]
    try:
        for s in stores:
            s.set("a", "hello")
            s.set("b", b"\x00\x01")
            assert s.get("a") == b"hello" and s.get("b") == b"\x00\x01"
            assert s.add("n", 3) == 3 and s.add("n", -1) == 2 and s.get("n") == b"2"
            s.wait(["a", "n"])
            assert s.check(["a"]) and not s.check(["zzz"])
            assert s.compare_set("a", "hello", "bye") == b"bye"
            assert s.compare_set("a", "nope", "x") == b"bye"
            assert s.delete_key("b") and not s.check(["b"])
            s.set_timeout(timedelta(seconds=0.2))
            t0 = time.monotonic()
            with pytest.raises(RuntimeError, match="timed out.*missing"):
                s.get("missing")
            assert time.monotonic() - t0 < 3
        assert client.get("a") == b"bye"           # one TCP store seen by two clients
        assert client.add("n", 10) == 12
    finally:
        client.close()
        tcp.close()


def test_mismatched_sizes_raise_on_every_rank():
    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        t = torch.ones(3 + rank)
        with pytest.raises(RuntimeError, match="shape") as e:
            dist.all_reduce(t)
        t2 = torch.ones(2)
        dist.all_reduce(t2)         # the group still works afterwards
        return str(e.value), t2.tolist()

    out = run_ranks(body, 3)
    for r in range(3):
        assert "rank 1 sent a tensor of shape [4]" in out[r][0] or "rank 2 sent a tensor of shape [5]" in out[r][0]
        assert out[r][1] == [3.0, 3.0]


def test_timeout_names_collective_and_missing_ranks():
    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        g = dist.new_group([0, 1, 2], timeout=timedelta(seconds=0.5))
        if rank == 2:
            time.sleep(6.0)         # never joins the all_reduce below (and stays up: margins for a loaded machine)
            return "slept"
        t0 = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            dist.all_reduce(torch.ones(2), group=g)
        assert time.monotonic() - t0 < 5
        if rank == 0:
            time.sleep(3.0)         # stay connected until rank 1 timed out too
        return str(e.value)

    out = run_ranks(body, 3)
    assert "all_reduce" in out[0] and "timed out" in out[0] and "[1, 2]" not in out[0] and "rank(s) [2]" in out[0]
    assert "all_reduce" in out[1] and "timed out" in out[1] and "rank(s) [0]" in out[1]


def test_dead_peer_fails_fast():
    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        if rank == 1:
            dist.destroy_process_group()
            return "left"
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="rank 1"):
            dist.all_reduce(torch.ones(2))
        return time.monotonic() - t0

    out = run_ranks(body, 2, pg_timeout=20)
    assert out[0] < 10
