"""ember.distributed.rpc on 3 forked workers (one group for the whole file): calls, futures,
remote references, errors with the remote traceback, timeouts, nested calls and graceful
shutdown. Expected messages are PyTorch 2.13's (captured from torch.distributed.rpc)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from ember.distributed.rpc.functions import async_execution

from ._launch import free_port, run_ranks

WS = 3
LOG = []


def boom(x):
    raise ValueError(f"bad {x}")


class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def two_arg_error():
    raise TwoArgError(1, 2)


def slow(seconds, tag):
    time.sleep(seconds)
    LOG.append(tag)
    return tag


def whoami():
    import ember.distributed.rpc as rpc
    return rpc.get_worker_info().name


def relay(depth):
    """worker1 -> worker2 -> back to worker0 (the original caller): nested calls."""
    import ember.distributed.rpc as rpc
    if depth == 0:
        return [whoami()]
    nxt = {"worker0": "worker1", "worker1": "worker2", "worker2": "worker0"}[whoami()]
    return [whoami()] + rpc.rpc_sync(nxt, relay, args=(depth - 1,))


@async_execution
def async_add_chained(to, x, y, z):
    """PyTorch's example: answer with a Future chained on a nested call."""
    import ember.distributed.rpc as rpc
    return rpc.rpc_async(to, _add, args=(x, y)).then(lambda fut: fut.wait() + z)


@async_execution
def not_a_future():
    return 3


def _add(a, b):
    return a + b


def double_local(rref):
    return rref.local_value() * 2


def owner_of(rref):
    return (rref.is_owner(), rref.owner_name())


class Acc:
    def __init__(self, start):
        self.total = start

    def add(self, v):
        self.total += v
        return self.total


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def _script(rank, ws, port):
    import ember
    import ember.distributed as dist
    import ember.distributed.rpc as rpc
    # a process group and the RPC agent rendezvous on the same address (one store, as torch's
    # multi-tenant TCPStore)
    url = f"tcp://127.0.0.1:{port}"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=url, rpc_timeout=20)
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=ws)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=ws, rpc_backend_options=opts)
    t = ember.tensor([float(rank)])
    dist.all_reduce(t)
    out = {"me": repr(rpc.get_worker_info()), "timeout": rpc.get_rpc_timeout(), "pg_sum": t.item()}
    if rank == 0:
        w1 = rpc.get_worker_info("worker1")
        out["info"] = (repr(w1), w1.id, w1.name, w1 == rpc.get_worker_info(1), rpc.get_worker_info(w1) == w1)
        out["unknown"] = [_err(lambda: rpc.get_worker_info("nope")), _err(lambda: rpc.rpc_sync(5, whoami))]
        x = ember.tensor(np.arange(6.0).reshape(2, 3))
        out["sync"] = rpc.rpc_sync("worker1", ember.add, args=(x, 1.5)).numpy()
        out["kw"] = rpc.rpc_sync(2, ember.mul, args=(x,), kwargs={"other": 3.0}).numpy()
        futs = [rpc.rpc_async(f"worker{r}", whoami) for r in (1, 2, 0)]
        out["async"] = [f.wait() for f in futs]
        out["then"] = rpc.rpc_async("worker2", whoami).then(lambda f: f.wait() + "!").wait()
        out["boom"] = _err(lambda: rpc.rpc_sync("worker1", boom, args=(3,)))
        out["boom_async"] = _err(lambda: rpc.rpc_async("worker2", boom, args=(4,)).wait())
        out["two_arg"] = _err(lambda: rpc.rpc_sync("worker1", two_arg_error))
        out["timeout_err"] = _err(lambda: rpc.rpc_sync("worker1", slow, args=(1.0, "late"), timeout=0.2))
        out["not_callable"] = _err(lambda: rpc.rpc_sync("worker1", 3))
        rr = rpc.remote("worker1", ember.add, args=(ember.ones(2), 1))
        out["rref"] = (rr.owner() == w1, rr.owner_name(), rr.is_owner(), rr.to_here().numpy().tolist())
        out["rref_local_err"] = _err(rr.local_value)
        out["rref_as_arg"] = rpc.rpc_sync("worker1", double_local, args=(rr,)).numpy().tolist()
        out["rref_elsewhere"] = rpc.rpc_sync("worker2", owner_of, args=(rr,))
        bad = rpc.remote("worker2", boom, args=(5,))
        out["rref_boom"] = _err(bad.to_here)
        acc = rpc.remote("worker2", Acc, args=(10,))
        acc.rpc_sync().add(5)
        out["proxy"] = (acc.rpc_async().add(1).wait(), acc.remote().add(0).to_here())
        own = rpc.RRef(ember.tensor([7.0]))
        out["own"] = (own.is_owner(), own.local_value().item(), own.to_here().item(), repr(own).startswith("Owner"))
        out["self_call"] = rpc.rpc_sync("worker0", whoami)
        out["nested"] = rpc.rpc_sync("worker1", relay, args=(3,))
        out["async_exec"] = (rpc.rpc_sync("worker1", async_add_chained, args=("worker2", 1, 2, 3)),
                             rpc.remote("worker2", async_add_chained, args=("worker0", 4, 5, 6)).to_here())
        out["async_exec_err"] = _err(lambda: rpc.rpc_sync("worker1", not_a_future))
    if rank == 2:
        # fire and leave: shutdown() must wait for the answer
        fut = rpc.rpc_async("worker0", slow, args=(0.4, "from2"))
        rpc.shutdown()
        out["graceful"] = (fut.done(), fut.wait())
        return out
    rpc.shutdown()
    out["log"] = list(LOG)
    out["after"] = _err(lambda: rpc.rpc_sync("worker1", whoami))
    return out


def test_rpc_on_3_workers():
    """One spawned RPC group for every multi-worker check of this file."""
    ranks = run_ranks(_script, WS, free_port(), init=False, timeout=60)
    _check_worker_infos(ranks)
    _check_calls_and_futures(ranks)
    _check_remote_errors_carry_type_and_traceback(ranks)
    _check_rrefs(ranks)
    _check_graceful_shutdown(ranks)


def _check_worker_infos(ranks):
    assert [ranks[r]["me"] for r in range(WS)] == [f"WorkerInfo(id={r}, name=worker{r})" for r in range(WS)]
    assert ranks[0]["timeout"] == 20.0
    assert [ranks[r]["pg_sum"] for r in range(WS)] == [3.0] * WS
    assert ranks[0]["info"] == ("WorkerInfo(id=1, name=worker1)", 1, "worker1", True, True)
    assert ranks[0]["unknown"] == [
        ("RuntimeError", "name:worker0,rank:0 could not find destination name nope"),
        ("RuntimeError", "name:worker0,rank:0 could not find destination id 5")]


def _check_calls_and_futures(ranks):
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ranks[0]["sync"], x + 1.5)
    np.testing.assert_array_equal(ranks[0]["kw"], x * 3.0)
    assert ranks[0]["async"] == ["worker1", "worker2", "worker0"]
    assert ranks[0]["then"] == "worker2!"
    assert ranks[0]["self_call"] == "worker0"
    assert ranks[0]["nested"] == ["worker1", "worker2", "worker0", "worker1"]
    assert ranks[0]["async_exec"] == (6, 15)
    kind, msg = ranks[0]["async_exec_err"]
    assert kind == "TypeError" and "must return a torch.futures.Future object, but got <class 'int'>" in msg
    assert ranks[0]["not_callable"] == ("TypeError", "function should be callable.")


def _check_remote_errors_carry_type_and_traceback(ranks):
    kind, msg = ranks[0]["boom"]
    assert kind == "ValueError"
    assert msg.startswith("On WorkerInfo(id=1, name=worker1):\nValueError('bad 3')\nTraceback (most recent call "
                          "last):\n")
    assert 'raise ValueError(f"bad {x}")' in msg and msg.rstrip().endswith("ValueError: bad 3")
    kind, msg = ranks[0]["boom_async"]
    assert kind == "ValueError" and msg.startswith("On WorkerInfo(id=2, name=worker2):\nValueError('bad 4')")
    kind, msg = ranks[0]["two_arg"]
    assert kind == "RuntimeError" and msg.startswith("Failed to create original exception type. Error msg was ")
    assert "Original exception on remote side was On WorkerInfo(id=1, name=worker1):\nTwoArgError(1, 2)" in msg
    assert ranks[0]["timeout_err"] == ("RuntimeError", "RPCErr:1:RPC ran for more than set timeout (200 ms) and "
                                                       "will now be marked with an error")


def _check_rrefs(ranks):
    got = ranks[0]
    assert got["rref"] == (True, "worker1", False, [2.0, 2.0])
    assert got["rref_local_err"] == ("RuntimeError", "For UserRRef(RRefId = GloballyUniqueId(created_on=0, "
                                     "local_id=0), owner = WorkerInfo(id=1, name=worker1)), can't call localValue() "
                                     "on user WorkerInfo(id=0, name=worker0). Call it on owner WorkerInfo(id=1, "
                                     "name=worker1)")
    assert got["rref_as_arg"] == [4.0, 4.0]
    assert got["rref_elsewhere"] == (False, "worker1")
    assert got["rref_boom"][0] == "ValueError" and "ValueError('bad 5')" in got["rref_boom"][1]
    assert got["proxy"] == (16, 16)
    assert got["own"] == (True, 7.0, 7.0, True)


def _check_graceful_shutdown(ranks):
    assert ranks[2]["graceful"] == (True, "from2")
    assert "from2" in ranks[0]["log"]
    assert "late" in ranks[1]["log"]      # the timed-out call still ran to the end before shutdown
    assert ranks[0]["after"] == ("RuntimeError", "RPC has not been initialized. Call "
                                                 "torch.distributed.rpc.init_rpc first.")


def test_init_errors():
    import ember.distributed.rpc as rpc
    assert _err(lambda: rpc.rpc_sync("w", whoami)) == ("RuntimeError", "RPC has not been initialized. Call "
                                                                       "torch.distributed.rpc.init_rpc first.")
    assert _err(lambda: rpc.init_rpc("w", backend="tensorpipe", rank=0, world_size=1)) == \
        ("TypeError", "Argument backend must be a member of BackendType")
    assert _err(lambda: rpc.init_rpc("w", rank=0, world_size=1, rpc_backend_options={})) == \
        ("TypeError", "Argument rpc_backend_options must be an instance of RpcBackendOptions")
    assert _err(lambda: rpc.init_rpc("w", rank=0))[0] == "NotImplementedError"
    assert _err(lambda: rpc.TensorPipeRpcBackendOptions(device_maps={"w": {0: 1}}))[0] == "NotImplementedError"
    o = rpc.TensorPipeRpcBackendOptions()
    assert (o.rpc_timeout, o.init_method, o.num_worker_threads) == (60.0, "env://", 16)


def test_rpc_then_process_group_on_one_address():
    import ember
    import ember.distributed as dist
    import ember.distributed.rpc as rpc
    url = f"tcp://127.0.0.1:{free_port()}"
    rpc.init_rpc("solo", rank=0, world_size=1,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(init_method=url, rpc_timeout=10))
    try:
        dist.init_process_group("gloo", init_method=url, rank=0, world_size=1)
        try:
            t = ember.tensor([2.0])
            dist.all_reduce(t)
            assert rpc.rpc_sync("solo", _add, args=(t, 1.0)).item() == 3.0
            assert rpc.get_worker_info() == rpc.get_worker_info(0)
        finally:
            dist.destroy_process_group()
    finally:
        rpc.shutdown()
