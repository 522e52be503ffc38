"""ember.distributed collectives on 2-4 forked ranks vs numpy references (a fold in rank order,
which is what ember's reductions compute, so float results match exactly)."""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ._launch import run_ranks

DTYPES = ["float32", "float64", "int32", "int64", "bfloat16"]


def _data(rank, dtype, shape=(3, 5), seed=0):
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype.startswith("int"):
        return rng.integers(-9, 10, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    x = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype)


def _ember(a):
    import ember
    t = ember.empty(list(a.shape), dtype=getattr(ember, str(a.dtype) if str(a.dtype) != "bool" else "bool"))
    t._data[...] = a
    return t


def _fold(parts, op):
    f = {"SUM": np.add, "AVG": np.add, "PRODUCT": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
         "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op]
    acc = np.array(parts[0], copy=True)
    for p in parts[1:]:
        f(acc, p, out=acc)
    if op == "AVG":
        n = len(parts)
        acc = (np.sign(acc) * (np.abs(acc) // n)).astype(acc.dtype) if acc.dtype.kind in "iu" else \
            (acc / n).astype(acc.dtype)
    return acc


def _cases():
    out = []
    for dt in DTYPES:
        ops = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
        if dt.startswith("int"):
            ops += ["BAND", "BOR", "BXOR"]
        out += [(dt, op) for op in ops]
    return out + [("bool", "BOR"), ("bool", "BAND"), ("bool", "MAX"), ("complex64", "SUM")]


def _complex(rank):
    rng = np.random.default_rng(77 + rank)
    return (rng.standard_normal((4,)) + 1j * rng.standard_normal((4,))).astype(np.complex64)


@pytest.mark.parametrize("nprocs", [2, 3])
def test_all_reduce_and_reduce_every_dtype_and_op(nprocs):
    cases = _cases()

    def body(rank, ws):
        import ember.distributed as dist
        res = {}
        for dt, op in cases:
            a = _complex(rank) if dt == "complex64" else _data(rank, dt)
            t = _ember(a)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            r = _ember(a)
            dist.reduce(r, dst=ws - 1, op=getattr(dist.ReduceOp, op))
            res[(dt, op)] = (t.numpy().copy() if dt != "bfloat16" else t._data.astype(np.float32),
                             r._data.astype(np.float64 if dt != "complex64" else np.complex128))
        return res

    out = run_ranks(body, nprocs)
    for dt, op in cases:
        parts = [_complex(r) if dt == "complex64" else _data(r, dt) for r in range(nprocs)]
        ref = _fold(parts, op)
        for r in range(nprocs):
            got, red = out[r][(dt, op)]
            np.testing.assert_array_equal(got, ref.astype(got.dtype), err_msg=f"all_reduce {dt} {op} rank {r}")
            if r == nprocs - 1:
                np.testing.assert_array_equal(red, ref.astype(red.dtype), err_msg=f"reduce {dt} {op}")
            else:   # untouched off the destination
                np.testing.assert_array_equal(red, parts[r].astype(red.dtype))


def test_data_movement_collectives():
    nprocs = 3

    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        res = {}
        a = _data(rank, "float32", (2, 3))
        b = _ember(a)
        dist.broadcast(b, src=1)
        res["broadcast"] = b.numpy().copy()
        lst = [torch.zeros(2, 3) for _ in range(ws)]
        dist.all_gather(lst, _ember(a))
        res["all_gather"] = [t.numpy().copy() for t in lst]
        out = torch.zeros(ws * 2, 3)
        dist.all_gather_into_tensor(out, _ember(a))
        res["all_gather_into_tensor"] = out.numpy().copy()
        g = [torch.zeros(2, 3) for _ in range(ws)] if rank == 2 else None
        dist.gather(_ember(a), g, dst=2)
        res["gather"] = None if g is None else [t.numpy().copy() for t in g]
        s = torch.zeros(2, 3)
        dist.scatter(s, [_ember(_data(j, "float32", (2, 3), seed=5)) for j in range(ws)] if rank == 0 else None,
                     src=0)
        res["scatter"] = s.numpy().copy()
        ins = [_ember(_data(rank, "int64", (4,), seed=10 + j)) for j in range(ws)]
        o = torch.zeros(4, dtype=torch.int64)
        dist.reduce_scatter(o, ins)
        res["reduce_scatter"] = o.numpy().copy()
        big = _ember(_data(rank, "float64", (ws * 2, 2), seed=20))
        o2 = torch.zeros(2, 2, dtype=torch.float64)
        dist.reduce_scatter_tensor(o2, big, op=dist.ReduceOp.MAX)
        res["reduce_scatter_tensor"] = o2.numpy().copy()
        outs = [torch.zeros(3, dtype=torch.int32) for _ in range(ws)]
        dist.all_to_all(outs, [_ember(np.full(3, 10 * rank + j, np.int32)) for j in range(ws)])
        res["all_to_all"] = [t.numpy().copy() for t in outs]
        # uneven splits: rank r sends (j + 1) rows to rank j, receives (r + 1) rows from each
        in_splits = [j + 1 for j in range(ws)]
        src = _ember(np.concatenate([np.full((j + 1, 2), 100 * rank + j, np.float32) for j in range(ws)]))
        dst = torch.zeros((rank + 1) * ws, 2)
        dist.all_to_all_single(dst, src, output_split_sizes=[rank + 1] * ws, input_split_sizes=in_splits)
        res["all_to_all_single"] = dst.numpy().copy()
        return res

    out = run_ranks(body, nprocs)
    A = [_data(r, "float32", (2, 3)) for r in range(nprocs)]
    for r in range(nprocs):
        o = out[r]
        np.testing.assert_array_equal(o["broadcast"], A[1])
        for j in range(nprocs):
            np.testing.assert_array_equal(o["all_gather"][j], A[j])
        np.testing.assert_array_equal(o["all_gather_into_tensor"], np.concatenate(A))
        if r == 2:
            for j in range(nprocs):
                np.testing.assert_array_equal(o["gather"][j], A[j])
        else:
            assert o["gather"] is None
        np.testing.assert_array_equal(o["scatter"], _data(r, "float32", (2, 3), seed=5))
        ref = _fold([_data(s, "int64", (4,), seed=10 + r) for s in range(nprocs)], "SUM")
        np.testing.assert_array_equal(o["reduce_scatter"], ref)
        bigs = [_data(s, "float64", (nprocs * 2, 2), seed=20) for s in range(nprocs)]
        np.testing.assert_array_equal(o["reduce_scatter_tensor"], np.maximum.reduce(bigs)[2 * r:2 * r + 2])
        for j in range(nprocs):
            np.testing.assert_array_equal(o["all_to_all"][j], np.full(3, 10 * j + r, np.int32))
        exp = np.concatenate([np.full((r + 1, 2), 100 * j + r, np.float32) for j in range(nprocs)])
        np.testing.assert_array_equal(o["all_to_all_single"], exp)


def test_point_to_point_async_and_subgroups():
    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        res = {}
        # ring of sends with tags; recv from any source returns the sender
        x = torch.tensor([float(rank)] * 3)
        w = dist.isend(x, (rank + 1) % ws, tag=7)
        y = torch.zeros(3)
        rw = dist.irecv(y, (rank - 1) % ws, tag=7)
        rw.wait()
        w.wait()
        res["ring"] = y.numpy().copy()
        if rank == 0:
            z = torch.zeros(2, dtype=torch.int64)
            got = sorted(dist.recv(z) for _ in range(ws - 1))
            res["any"] = got
        else:
            dist.send(torch.tensor([rank, rank], dtype=torch.int64), 0)
        # async collectives complete in order
        t = torch.tensor([rank + 1.0])
        u = torch.tensor([rank + 1.0])
        w1 = dist.all_reduce(t, async_op=True)
        w2 = dist.all_reduce(u, op=dist.ReduceOp.PRODUCT, async_op=True)
        assert w2.wait() and w1.wait()
        assert w1.is_completed() and w2.is_completed()
        res["async"] = (t.item(), u.item())
        # sub-groups: even ranks and odd ranks
        ev = dist.new_group([0, 2])
        od = dist.new_group([1, 3])
        mine = ev if rank % 2 == 0 else od
        other = od if rank % 2 == 0 else ev
        assert other is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_world_size(mine) == 2 and dist.get_rank(mine) == rank // 2
        s = torch.tensor([float(rank)])
        dist.all_reduce(s, group=mine)
        assert dist.all_reduce(torch.zeros(1), group=other) is None     # not a member: nothing happens
        b = torch.tensor([float(rank)])
        dist.broadcast(b, src=2 if rank % 2 == 0 else 3, group=mine)
        res["group"] = (s.item(), b.item(), dist.get_process_group_ranks(mine))
        dist.barrier(group=mine)
        dist.barrier()
        # batch_isend_irecv: exchange with both ring neighbours at once
        left, right = torch.zeros(2), torch.zeros(2)
        ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank)), (rank + 1) % ws),
               dist.P2POp(dist.isend, torch.full((2,), float(-rank)), (rank - 1) % ws),
               dist.P2POp(dist.irecv, left, (rank - 1) % ws),
               dist.P2POp(dist.irecv, right, (rank + 1) % ws)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        res["batch"] = (left.tolist(), right.tolist())
        dist.monitored_barrier(timeout=timedelta(seconds=5))
        return res

    out = run_ranks(body, 4)
    for r in range(4):
        np.testing.assert_array_equal(out[r]["ring"], np.full(3, (r - 1) % 4, np.float32))
        assert out[r]["async"] == (10.0, 24.0)
        s, b, ranks = out[r]["group"]
        assert s == (2.0 if r % 2 == 0 else 4.0)
        assert b == (2.0 if r % 2 == 0 else 3.0)
        assert ranks == ([0, 2] if r % 2 == 0 else [1, 3])
        assert out[r]["batch"] == ([float((r - 1) % 4)] * 2, [float(-((r + 1) % 4))] * 2)
    assert out[0]["any"] == [1, 2, 3]


def test_object_collectives():
    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        objs = [None] * ws
        dist.all_gather_object(objs, {"rank": rank, "t": torch.tensor([rank, rank + 1])})
        lst = [rank, "x", None] if rank == 1 else [None, None, None]
        dist.broadcast_object_list(lst, src=1)
        g = [None] * ws if rank == 0 else None
        dist.gather_object(("r", rank), g, dst=0)
        o = [None]
        dist.scatter_object_list(o, [{"to": j} for j in range(ws)] if rank == 0 else None, src=0)
        return ([(d["rank"], d["t"].tolist()) for d in objs], lst, g, o[0])

    out = run_ranks(body, 3)
    for r in range(3):
        gathered, lst, g, o = out[r]
        assert gathered == [(j, [j, j + 1]) for j in range(3)]
        assert lst == [1, "x", None]
        assert g == ([("r", j) for j in range(3)] if r == 0 else None)
        assert o == {"to": r}


def test_torch_gloo_agrees():
    """The same collectives under torch.distributed (gloo): integers exactly, floats to rounding
    (gloo sums in its own order)."""
    pytest.importorskip("torch")

    def body(rank, ws, backend):
        if backend == "torch":
            import torch
            import torch.distributed as dist

            def mk(a):
                return torch.from_numpy(np.array(a))
        else:
            import ember.distributed as dist
            mk = _ember
        res = []
        for dt in ["int64", "float32"]:
            for op in ["SUM", "MIN", "MAX", "PRODUCT"]:
                t = mk(_data(rank, dt, (5,)))
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                res.append(t.numpy().copy())
        lst = [mk(np.zeros(4, np.float64)) for _ in range(ws)]
        dist.all_gather(lst, mk(_data(rank, "float64", (4,))))
        res += [t.numpy().copy() for t in lst]
        o = mk(np.zeros(3, np.int64))
        dist.reduce_scatter_tensor(o, mk(_data(rank, "int64", (3 * ws,))))
        res.append(o.numpy().copy())
        objs = [None] * ws
        dist.all_gather_object(objs, {"r": rank})
        res.append(objs)
        return res

    ours = run_ranks(body, 3, "ember")
    theirs = run_ranks(body, 3, "torch", backend="torch")
    for r in range(3):
        for a, b in zip(ours[r], theirs[r]):
            if isinstance(a, list):
                assert a == b
            elif a.dtype.kind == "i":
                np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-6)


def test_large_tensors_and_futures():
    """Tensors far larger than the sockets' buffers (no send/receive deadlock), Work futures."""
    n = 1 << 21

    def body(rank, ws):
        import ember as torch
        import ember.distributed as dist
        t = torch.full((n,), float(rank + 1))
        w = dist.all_reduce(t, async_op=True)
        fut = w.get_future()
        got = fut.wait()
        assert got[0] is t and fut.done()
        lst = [torch.zeros(n // 4) for _ in range(ws)]
        dist.all_gather(lst, torch.full((n // 4,), float(rank)))
        return float(t[0].item()), float(t[-1].item()), [float(x[-1].item()) for x in lst]

    out = run_ranks(body, 3)
    for r in range(3):
        assert out[r] == (6.0, 6.0, [0.0, 1.0, 2.0])
