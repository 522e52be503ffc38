"""Checks run inside the ranks of tests/distributed/test_dtensor.py: each takes (mesh, rank),
asserts, and returns something small. Every rank seeds ember alike, so single-process models
and random data agree across ranks."""
from __future__ import annotations

import copy
import fcntl
import os
import pickle

import numpy as np

CHECKS_1D = ["distribute_roundtrip", "redistribute_all_1d", "from_local", "autograd_local", "redistribute_backward",
             "inplace", "matmul_family", "tp_mlp", "tp_mlp_layouts", "tp_attention", "sequence_parallel",
             "embedding", "factories", "repr_and_metadata", "errors", "comm_debug_mode", "distribute_module",
             "compile", "scalars", "loss_parallel", "prepare_module_io", "dropout", "fallback", "clip_grad_norm", "optimizers_accumulate"]


def run_once(tmp_path_factory, key, fn, nprocs, timeout):
    """``run_ranks(fn, nprocs)`` once per test session even under pytest-xdist: the first worker
    runs the ranks (under a file lock) and leaves the results for the others, so a module's
    tests spread over workers share one spawned group instead of starting one each."""
    from ._launch import run_ranks
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    path = root / f"dtensor_{key}.pkl"
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                return pickle.loads(path.read_bytes())
            out = run_ranks(fn, nprocs, timeout=timeout)
            path.write_bytes(pickle.dumps(out))
            return out
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _lib():
    import ember
    import ember.distributed.tensor as dt
    return ember, dt


def _rand(*shape, seed=0):
    import ember
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _close(a, b, tol=1e-5):
    import ember
    a = a.full_tensor() if hasattr(a, "full_tensor") else a
    b = b.full_tensor() if hasattr(b, "full_tensor") else b
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert ember.allclose(a.double(), b.double(), atol=tol, rtol=tol), float((a.double() - b.double()).abs().max())


def _chunk_len(n, parts, idx):
    full = -(-n // parts)
    start = min(full * idx, n)
    return max(0, min(start + full, n) - start)


def distribute_roundtrip(mesh, rank):
    ember, dt = _lib()
    for shape in [(5, 3), (4, 6), (1, 3), (3, 1, 2)]:
        x = _rand(*shape, seed=len(shape))
        for p in [dt.Shard(0), dt.Shard(1), dt.Shard(-1), dt.Replicate()]:
            d = dt.distribute_tensor(x, mesh, [p])
            assert d.shape == x.shape and d.size() == x.size() and d.stride() == x.stride()
            if isinstance(p, dt.Shard):
                dim = p.dim % len(shape)
                assert d.placements == (dt.Shard(dim),)
                want = list(shape)
                want[dim] = _chunk_len(shape[dim], 2, rank)
                assert tuple(d.to_local().shape) == tuple(want), (d.to_local().shape, want)
                assert ember.equal(d.to_local(), ember.chunk(x, 2, dim)[rank]) if want[dim] else True
            assert ember.equal(d.full_tensor(), x)
    # src_data_rank: rank 0's value wins; None keeps each rank's own
    mine = _rand(4, 2, seed=10 + rank)
    d = dt.distribute_tensor(mine, mesh, [dt.Replicate()])
    assert ember.equal(d.to_local(), _rand(4, 2, seed=10))
    own = dt.distribute_tensor(mine, mesh, [dt.Shard(0)], src_data_rank=None)
    assert ember.equal(own.to_local(), mine[2 * rank: 2 * rank + 2])
    # requires_grad carries over; the result is a leaf
    g = dt.distribute_tensor(_rand(4, 2).requires_grad_(), mesh, [dt.Shard(0)])
    assert g.requires_grad and g.is_leaf and g.grad_fn is None
    return True


def redistribute_all_1d(mesh, rank):
    ember, dt = _lib()
    from ember.distributed.tensor.debug import CommDebugMode, c10d_functional as fc
    S0, S1, R, P = dt.Shard(0), dt.Shard(1), dt.Replicate(), dt.Partial()
    x = _rand(5, 3)
    parts = [_rand(5, 3, seed=21), _rand(5, 3, seed=22)]
    expected_comms = {("S0", "R"): {fc.all_gather_into_tensor: 1}, ("S0", "S1"): {fc.all_gather_into_tensor: 1},
                      ("R", "S0"): {}, ("P", "R"): {fc.all_reduce: 1}, ("P", "S0"): {fc.reduce_scatter_tensor: 1},
                      ("P", "S1"): {fc.reduce_scatter_tensor: 1}}
    names = {"S0": S0, "S1": S1, "R": R, "P": P}
    seen = []
    for sk, src in names.items():
        for tk, dst in names.items():
            if sk == "P":
                d = dt.DTensor.from_local(parts[rank], mesh, [P])
                full = parts[0] + parts[1]
            else:
                d = dt.distribute_tensor(x, mesh, [src])
                full = x
            if tk == "P":
                if sk != "P":
                    try:
                        d.redistribute(mesh, [dst])
                    except RuntimeError as e:
                        assert "Can not redistribute to Partial" in str(e)
                    else:
                        raise AssertionError("redistribute to Partial was allowed")
                continue
            with CommDebugMode() as m:
                r = d.redistribute(mesh, [dst])
            assert r.placements == (dst,)
            _close(r, full)
            if (sk, tk) in expected_comms:
                assert m.get_comm_counts() == expected_comms[(sk, tk)], (sk, tk, m.get_comm_counts())
            seen.append((sk, tk))
    # Partial(avg/max/min): the pending reduction is the named one
    for op, f in [("avg", lambda a, b: (a + b) / 2), ("max", ember.maximum), ("min", ember.minimum)]:
        d = dt.DTensor.from_local(parts[rank], mesh, [dt.Partial(op)])
        _close(d.full_tensor(), f(parts[0], parts[1]))
        _close(d.redistribute(mesh, [S1]), f(parts[0], parts[1]))
    # redistributing to the same layout is the same object, no communication
    d = dt.distribute_tensor(x, mesh, [S0])
    assert d.redistribute(mesh, [S0]) is d
    return len(seen)


def from_local(mesh, rank):
    ember, dt = _lib()
    local = _rand(2, 3, seed=rank)
    d = dt.DTensor.from_local(local, mesh, [dt.Shard(0)])
    assert d.shape == (4, 3) and d.to_local() is local or ember.equal(d.to_local(), local)
    _close(d.full_tensor(), ember.cat([_rand(2, 3, seed=0), _rand(2, 3, seed=1)]))
    # uneven pieces need the global shape
    local = _rand(3 - rank, 2, seed=5 + rank)
    u = dt.DTensor.from_local(local, mesh, [dt.Shard(0)], shape=(5, 2), stride=(2, 1))
    assert u.shape == (5, 2) and u.stride() == (2, 1)
    _close(u.full_tensor(), ember.cat([_rand(3, 2, seed=5), _rand(2, 2, seed=6)]))
    try:
        dt.DTensor.from_local(_rand(2, 2), mesh, [dt.Shard(0)], shape=(7, 2))
    except ValueError as e:
        assert "piece of global shape" in str(e)
    else:
        raise AssertionError("a wrong global shape was accepted")
    # run_check: equal replicas pass, differing ones are refused
    # run_check makes replicas agree: rank 0's piece is broadcast (as torch does)
    r = dt.DTensor.from_local(_rand(2, 2, seed=rank), mesh, [dt.Replicate()], run_check=True)
    assert ember.equal(r.to_local(), _rand(2, 2, seed=0))
    return True


def autograd_local(mesh, rank):
    ember, dt = _lib()
    # from_local(Shard) -> Replicate -> local sum: each rank's piece gets ones
    x = _rand(2, 3, seed=rank).requires_grad_()
    d = dt.DTensor.from_local(x, mesh, [dt.Shard(0)])
    assert d.requires_grad and d.grad_fn is not None
    (d.redistribute(mesh, [dt.Replicate()]).to_local() * 3).sum().backward()
    assert ember.equal(x.grad, ember.full((2, 3), 3.0))
    # from_local(Partial): the gradient of each addend is the whole gradient
    x = _rand(2, 3, seed=rank).requires_grad_()
    c = _rand(2, 3, seed=9)
    d = dt.DTensor.from_local(x, mesh, [dt.Partial()])
    (d.full_tensor() * c).sum().backward()
    _close(x.grad, c)
    # to_local's gradient is a DTensor with the DTensor's placements (or grad_placements)
    w = dt.distribute_tensor(_rand(4, 3).requires_grad_(), mesh, [dt.Shard(0)])
    (w.to_local() * 2).sum().backward()
    assert isinstance(w.grad, dt.DTensor) and w.grad.placements == (dt.Shard(0),)
    _close(w.grad, ember.full((4, 3), 2.0))
    w2 = dt.distribute_tensor(_rand(4, 3).requires_grad_(), mesh, [dt.Replicate()])
    (w2.to_local() * (rank + 1)).sum().backward()   # each rank's contribution differs: declare it Partial
    assert w2.grad.placements == (dt.Replicate(),)
    w3 = dt.distribute_tensor(_rand(4, 3).requires_grad_(), mesh, [dt.Replicate()])
    (w3.to_local(grad_placements=[dt.Partial()]) * (rank + 1)).sum().backward()
    _close(w3.grad, ember.full((4, 3), 3.0))
    return True


def redistribute_backward(mesh, rank):
    ember, dt = _lib()
    x = _rand(5, 4)
    c = _rand(5, 4, seed=3)
    for src, dst in [(dt.Shard(0), dt.Replicate()), (dt.Shard(0), dt.Shard(1)), (dt.Replicate(), dt.Shard(1))]:
        d = dt.distribute_tensor(x.clone().requires_grad_(), mesh, [src])
        r = d.redistribute(mesh, [dst])
        (r * dt.distribute_tensor(c, mesh, [dst])).sum().full_tensor().backward()
        assert isinstance(d.grad, dt.DTensor) and d.grad.placements == (src,), (src, dst, d.grad.placements)
        _close(d.grad, c)
    # full_tensor is differentiable too
    d = dt.distribute_tensor(x.clone().requires_grad_(), mesh, [dt.Shard(1)])
    (d.full_tensor() ** 2).sum().backward()
    _close(d.grad, 2 * x)
    # a Partial input gets a Replicate gradient
    p = dt.DTensor.from_local(_rand(5, 4, seed=rank).requires_grad_(), mesh, [dt.Partial()])
    r = p.redistribute(mesh, [dt.Replicate()])
    assert r.placements == (dt.Replicate(),)
    return True


def inplace(mesh, rank):
    ember, dt = _lib()
    x = _rand(5, 4)
    d = dt.distribute_tensor(x, mesh, [dt.Shard(0)])
    r = dt.distribute_tensor(_rand(5, 4, seed=2), mesh, [dt.Replicate()])
    out = d.add_(1.0)
    assert out is d and d.placements == (dt.Shard(0),)
    d.mul_(r)
    _close(d, (x + 1) * _rand(5, 4, seed=2))
    d.copy_(r)
    assert d.placements == (dt.Shard(0),)
    _close(d, _rand(5, 4, seed=2))
    # a Partial self keeps its layout under linear in-place ops
    parts = [_rand(5, 4, seed=30), _rand(5, 4, seed=31)]
    p = dt.DTensor.from_local(parts[rank].clone(), mesh, [dt.Partial()])
    p.add_(r)
    p.mul_(2.0)
    assert p.placements == (dt.Partial(),)
    _close(p, (parts[0] + parts[1] + _rand(5, 4, seed=2)) * 2)
    try:
        p.add_(1.0)
    except RuntimeError as e:
        assert "Partial" in str(e)
    else:
        raise AssertionError("adding a number in place to a Partial DTensor was allowed")
    z = dt.distribute_tensor(x, mesh, [dt.Shard(1)])
    z.zero_()
    _close(z, ember.zeros(5, 4))
    return True


def matmul_family(mesh, rank):
    ember, dt = _lib()
    S0, S1, S2, R, P = dt.Shard(0), dt.Shard(1), dt.Shard(2), dt.Replicate(), dt.Partial()
    a, b, bias = _rand(6, 4), _rand(4, 5, seed=1), _rand(5, seed=2)
    D = lambda t, p: dt.distribute_tensor(t, mesh, [p])
    for pa, pb, po in [(S0, R, S0), (R, S1, S1), (S1, S0, P), (R, R, R)]:
        y = ember.mm(D(a, pa), D(b, pb))
        assert y.placements == (po,), (pa, pb, y.placements)
        _close(y, a @ b)
        z = ember.addmm(D(bias, R), D(a, pa), D(b, pb))
        assert z.placements == (po,)
        _close(z, ember.addmm(bias, a, b))
    # a (Shard, Shard) mismatch is resolved by redistribution, value unchanged
    _close(ember.mm(D(a, S0), D(b, S1)), a @ b)
    ba, bb = _rand(4, 3, 5, seed=3), _rand(4, 5, 2, seed=4)
    for pa, pb, po in [(S0, S0, S0), (S1, R, S1), (R, S2, S2), (S2, S1, P)]:
        y = ember.bmm(D(ba, pa), D(bb, pb))
        assert y.placements == (po,), (pa, pb, y.placements)
        _close(y, ember.bmm(ba, bb))
    # matmul/linear with batch dims go through view + mm
    x3 = _rand(2, 3, 4, seed=5)
    w = _rand(5, 4, seed=6)
    y = ember.nn.functional.linear(D(x3, R), D(w, S0))
    assert y.placements == (S2,)
    _close(y, ember.nn.functional.linear(x3, w))
    y = D(x3, S0) @ D(_rand(4, 5, seed=7), R)
    assert y.placements == (S0,)
    _close(y, x3 @ _rand(4, 5, seed=7))
    return True


class _MLP:
    @staticmethod
    def make():
        import ember.nn as nn

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(8, 12)
                self.fc2 = nn.Linear(12, 8)

            def forward(self, x):
                return self.fc2(nn.functional.gelu(self.fc1(x)))
        return MLP()


def _train_compare(ref, tp, x, opt_cls, steps=2, tol=1e-5, **opt_kw):
    ember, dt = _lib()
    opt_r, opt_t = opt_cls(ref.parameters(), **opt_kw), opt_cls(tp.parameters(), **opt_kw)
    for _ in range(steps):
        opt_r.zero_grad()
        opt_t.zero_grad()
        yr, yt = ref(x), tp(x)
        yt_full = yt.full_tensor() if isinstance(yt, dt.DTensor) else yt
        _close(yt_full, yr, tol)
        (yr ** 2).mean().backward()
        (yt ** 2).mean().backward() if not isinstance(yt, dt.DTensor) else (yt ** 2).mean().full_tensor().backward()
        for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
            assert isinstance(q, dt.DTensor) and isinstance(q.grad, dt.DTensor), n
            _close(q.grad, p.grad, tol)
        opt_r.step()
        opt_t.step()
        for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
            _close(q, p, tol)


def tp_mlp(mesh, rank):
    ember, dt = _lib()
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for opt, kw in [(ember.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (ember.optim.AdamW, {"lr": 0.01, "fused": False})]:
        ember.manual_seed(0)
        ref = _MLP.make()
        tp = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        assert tp.fc1.weight.placements == (dt.Shard(0),) and tp.fc2.weight.placements == (dt.Shard(1),)
        assert tp.fc1.bias.placements == (dt.Shard(0),) and tp.fc2.bias.placements == (dt.Replicate(),)
        assert tp.fc1.weight.to_local().shape == (6, 8)
        _train_compare(ref, tp, _rand(3, 5, 8, seed=11), opt, **kw)
        out = tp(_rand(3, 5, 8))
        assert type(out) is ember.Tensor
    return True


def tp_mlp_layouts(mesh, rank):
    """input_layouts/output_layouts/use_local_output: a batch-sharded input, a DTensor output."""
    ember, dt = _lib()
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    ember.manual_seed(1)
    ref = _MLP.make()
    tp = parallelize_module(copy.deepcopy(ref), mesh, {
        "fc1": ColwiseParallel(input_layouts=dt.Shard(0)),
        "fc2": RowwiseParallel(output_layouts=dt.Shard(0), use_local_output=False)})
    x = _rand(4, 8, seed=12)
    y = tp(x[2 * rank: 2 * rank + 2])
    assert isinstance(y, dt.DTensor) and y.placements == (dt.Shard(0),)
    _close(y, ref(x))
    ember.manual_seed(1)
    tp2 = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(output_layouts=dt.Replicate()),
                                                         "fc2": ColwiseParallel()})
    y2 = tp2(x)
    assert tuple(y2.shape) == (4, 4)
    _close(ember.cat([ref(x)[:, :4], ref(x)[:, 4:]], 1)[:, 4 * rank: 4 * rank + 4], y2)
    return True


def _attention_cls():
    import ember
    import ember.nn as nn

    class Attention(nn.Module):
        def __init__(self, dim=8, heads=4, sdpa=False):
            super().__init__()
            self.sdpa = sdpa
            self.heads, self.hd = heads, dim // heads
            # no key bias: its exact gradient is zero (softmax is shift-invariant), so AdamW would
            # amplify rounding noise into full-size steps that differ between the two runs
            self.wq, self.wk, self.wv = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim)
            self.wo = nn.Linear(dim, dim)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            b, s, _ = x.shape
            h = self.norm(x)
            q, k, v = (f(h).view(b, s, self.heads, self.hd).transpose(1, 2) for f in (self.wq, self.wk, self.wv))
            if self.sdpa:     # ember's SDPA builds its causal mask as a plain tensor: implicitly replicated
                o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                o = ember.softmax((q @ k.transpose(-2, -1)) / self.hd ** 0.5, dim=-1) @ v
            o = o.transpose(1, 2).reshape(b, s, self.heads * self.hd)
            return x + self.wo(o)
    return Attention


def tp_attention(mesh, rank):
    ember, dt = _lib()
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for opt, kw, sdpa in [(ember.optim.SGD, {"lr": 0.1}, False),
                          (ember.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1, "fused": False}, True)]:
        ember.manual_seed(2)
        ref = _attention_cls()(sdpa=sdpa)
        plan = {"wq": ColwiseParallel(use_local_output=False), "wk": ColwiseParallel(use_local_output=False),
                "wv": ColwiseParallel(use_local_output=False), "wo": RowwiseParallel()}
        tp = parallelize_module(copy.deepcopy(ref), mesh, plan)
        # the norm's parameters stay plain on a TP module: replicate them for the optimizer comparison
        parallelize_module(tp, mesh, {"norm": _replicate_style()})
        _train_compare(ref, tp, _rand(2, 3, 8, seed=13), opt, **kw)
    return True


def _replicate_style():
    from ember.distributed.tensor.parallel import ParallelStyle
    from ember.distributed.tensor import distribute_module

    class ReplicateParams(ParallelStyle):
        def _apply(self, module, mesh):
            return distribute_module(module, mesh, output_fn=lambda m, o, mesh: o)
    return ReplicateParams()


def sequence_parallel(mesh, rank):
    """Megatron sequence parallel: LayerNorm on sequence shards, then Colwise/Rowwise with Shard(1) edges."""
    ember, dt = _lib()
    import ember.nn as nn
    from ember.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.fc1 = nn.Linear(8, 12)
            self.fc2 = nn.Linear(12, 8)

        def forward(self, x):
            return self.fc2(ember.relu(self.fc1(self.norm(x))))
    ember.manual_seed(3)
    ref = Block()
    tp = parallelize_module(copy.deepcopy(ref), mesh, {
        "norm": SequenceParallel(), "fc1": ColwiseParallel(input_layouts=dt.Shard(1)),
        "fc2": RowwiseParallel(output_layouts=dt.Shard(1))})
    x = _rand(2, 4, 8, seed=14)
    y = tp(x[:, 2 * rank: 2 * rank + 2])
    assert type(y) is ember.Tensor and tuple(y.shape) == (2, 2, 8)
    yr = ref(x)
    _close(y, yr[:, 2 * rank: 2 * rank + 2])
    (yr ** 2).sum().backward()
    (y ** 2).sum().backward()
    assert tp.norm.weight.placements == (dt.Replicate(),)
    for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
        _close(q.grad, p.grad, 1e-4)
    return True


def embedding(mesh, rank):
    ember, dt = _lib()
    import ember.nn as nn
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    idx = ember.tensor([[0, 3, 6], [5, 1, 6]])
    for style, wp in [(ColwiseParallel(), dt.Shard(1)), (RowwiseParallel(input_layouts=dt.Replicate()), dt.Shard(0))]:
        ember.manual_seed(4)
        ref = nn.Embedding(7, 6, padding_idx=6)
        with ember.no_grad():
            ref.weight[6] = 1.5          # the lookup returns the padding row as it is; only its gradient is zero
        tp = parallelize_module(copy.deepcopy(ref), mesh, style)
        assert tp.weight.placements == (wp,)
        y = tp(idx)
        yr = ref(idx)
        if wp == dt.Shard(1):
            _close(y, yr[..., 3 * rank: 3 * rank + 3])
        else:
            _close(y, yr)
        yr.pow(2).sum().backward()
        y.pow(2).sum().backward()
        g = tp.weight.grad
        assert isinstance(g, dt.DTensor)
        if wp == dt.Shard(1):
            # local output pieces: each rank's loss covers its columns only
            _close(g.to_local(), ref.weight.grad[:, 3 * rank: 3 * rank + 3])
        else:
            _close(g, ref.weight.grad)
    return True


def factories(mesh, rank):
    ember, dt = _lib()
    for f, check in [(dt.zeros, lambda t: ember.equal(t, ember.zeros(t.shape))),
                     (dt.ones, lambda t: ember.equal(t, ember.ones(t.shape))),
                     (dt.empty, lambda t: True)]:
        d = f(5, 3, device_mesh=mesh, placements=[dt.Shard(0)])
        assert d.shape == (5, 3) and tuple(d.to_local().shape) == ((3, 3) if rank == 0 else (2, 3))
        assert check(d.to_local())
        assert d.dtype == ember.float32
    d = dt.full((4, 2), 7.5, device_mesh=mesh, placements=[dt.Shard(1)], dtype=ember.float64)
    assert d.dtype == ember.float64 and ember.equal(d.full_tensor(), ember.full((4, 2), 7.5, dtype=ember.float64))
    try:
        dt.ones(2, device_mesh=mesh, layout=ember.sparse_coo)
    except NotImplementedError as e:
        assert "only layout=torch.strided" in str(e)
    else:
        raise AssertionError("a sparse layout was accepted")
    z = dt.zeros((2, 2), device_mesh=mesh, requires_grad=True, layout=ember.strided)
    assert z.requires_grad and z.placements == (dt.Replicate(),)
    # random factories: rank 0's global draw, cut; replicas agree even when generators differ
    ember.manual_seed(100 + rank)
    r = dt.randn(6, 2, device_mesh=mesh, placements=[dt.Replicate()])
    ember.manual_seed(100)
    ref = ember.randn(6, 2)
    assert ember.equal(r.to_local(), ref)
    ember.manual_seed(5)
    s = dt.rand(6, 2, device_mesh=mesh, placements=[dt.Shard(0)])
    ember.manual_seed(5)
    assert ember.equal(s.full_tensor(), ember.rand(6, 2))
    return True


def repr_and_metadata(mesh, rank):
    ember, dt = _lib()
    x = _rand(4, 2)
    d = dt.distribute_tensor(x, mesh, [dt.Shard(0)])
    assert repr(d) == (f"DTensor(local_tensor={d.to_local()!r}, device_mesh={mesh!r}, "
                       f"placements=(Shard(dim=0),))"), repr(d)
    assert (repr(dt.Shard(1)), str(dt.Shard(1)), repr(dt.Replicate()), str(dt.Replicate()), repr(dt.Partial()),
            str(dt.Partial()), repr(dt.Partial("max"))) == \
        ("Shard(dim=1)", "S(1)", "Replicate()", "R", "Partial(sum)", "P(sum)", "Partial(max)")
    assert dt.Shard(0) == dt.Shard(0) and dt.Shard(0) != dt.Shard(1) and hash(dt.Replicate()) == hash(dt.Replicate())
    assert d.device_mesh is mesh and d.ndim == 2 and d.dtype == ember.float32 and d.numel() == 8
    assert d.size(0) == 4 and d.t().stride() == (1, 2) and d.t().shape == (2, 4)
    c = copy.deepcopy(d)
    assert isinstance(c, dt.DTensor) and c.placements == d.placements and c.to_local() is not d.to_local()
    assert ember.equal(c.to_local(), d.to_local())
    plain = ember.zeros(4, 2)
    try:
        plain.add_(d)
    except RuntimeError as e:
        assert "got mixed torch.Tensor and DTensor" in str(e)
    else:
        raise AssertionError("writing a DTensor into a plain tensor was allowed")
    p = ember.nn.Parameter(d)
    assert isinstance(p, dt.DTensor) and isinstance(p, ember.nn.Parameter) and p.requires_grad
    assert repr(p).startswith("Parameter containing:\nDTensor(")
    q = copy.deepcopy(p)
    assert isinstance(q, ember.nn.Parameter) and isinstance(q, dt.DTensor) and q.requires_grad
    # a TP module deep-copies and loads a plain state dict into its shards
    from ember.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    lin = ember.nn.Linear(3, 4)
    tp = parallelize_module(copy.deepcopy(lin), mesh, ColwiseParallel())
    tp2 = copy.deepcopy(tp)
    assert tp2.weight.placements == (dt.Shard(0),)
    other = ember.nn.Linear(3, 4)
    tp2.load_state_dict(other.state_dict())
    _close(tp2.weight, other.weight)
    sd = tp2.state_dict()
    assert isinstance(sd["weight"], dt.DTensor)
    # .data is a DTensor alias; Module.double() swaps the shards' dtype in place of the same Parameter
    w = tp2.weight
    assert isinstance(w.data, dt.DTensor) and not w.data.requires_grad and w.data.placements == w.placements
    tp2.double()
    assert tp2.weight is w and w.dtype == ember.float64 and w.to_local().dtype == ember.float64
    _close(tp2(ember.ones(2, 3, dtype=ember.float64)), other(ember.ones(2, 3)).double()[:, 2 * rank: 2 * rank + 2])
    return True


def errors(mesh, rank):
    ember, dt = _lib()
    x = _rand(4, 2)
    cases = [
        (lambda: dt.distribute_tensor(x, mesh, [dt.Shard(0), dt.Shard(1)]), ValueError,
         "`placements` must have the same length as `device_mesh.ndim`"),
        (lambda: dt.distribute_tensor(x, mesh, [dt.Shard(2)]), IndexError, "Shard(2) is out of range"),
        (lambda: dt.distribute_tensor(x, mesh, ["S0"]), TypeError, "placements must be Shard/Replicate/Partial"),
        (lambda: dt.distribute_tensor(x, "mesh", [dt.Shard(0)]), TypeError, "expected device_mesh to be a DeviceMesh"),
        (lambda: dt.distribute_tensor(x, mesh, [dt.Partial()]), RuntimeError, "Partial placements are not supported"),
        (lambda: dt.Partial("mean"), ValueError, "reduce_op must be one of"),
        (lambda: dt.Shard(1.0), TypeError, "expected dim to be an int"),
        (lambda: dt.distribute_tensor(x, mesh, [dt.Shard(0)]).redistribute(mesh, None), RuntimeError,
         "placements is needed for redistribute!"),
        (lambda: dt.DTensor.from_local(dt.distribute_tensor(x, mesh), mesh), TypeError, "expected local_tensor"),
    ]
    from ember.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    cases.append((lambda: parallelize_module(ember.nn.ReLU(), mesh, ColwiseParallel()), NotImplementedError,
                  "currently only support nn.Linear and nn.Embedding"))
    cases.append((lambda: parallelize_module(ember.nn.Sequential(ember.nn.Linear(2, 2)), mesh, {"x": ColwiseParallel()}),
                  ValueError, "no submodule"))
    for f, exc, msg in cases:
        try:
            f()
        except exc as e:
            assert msg in str(e), (msg, str(e))
        else:
            raise AssertionError(f"no {exc.__name__} for {msg}")
    return True


def comm_debug_mode(mesh, rank):
    ember, dt = _lib()
    from ember.distributed.tensor.debug import CommDebugMode, c10d_functional as fc
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    ember.manual_seed(0)
    tp = parallelize_module(_MLP.make(), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    x = _rand(2, 8)
    with CommDebugMode() as m:
        y = tp(x)
    assert m.get_comm_counts() == {fc.all_reduce: 1} and m.get_total_counts() == 1, m.get_comm_counts()
    with CommDebugMode() as m:
        y.sum().backward()
    assert m.get_comm_counts() == {}, m.get_comm_counts()    # no input gradient: nothing to reduce
    y = tp(x.clone().requires_grad_())
    with CommDebugMode() as m:
        y.sum().backward()
    assert m.get_comm_counts() == {fc.all_reduce: 1}, m.get_comm_counts()
    return True


def distribute_module(mesh, rank):
    ember, dt = _lib()
    import ember.nn as nn
    ember.manual_seed(6)
    lin = nn.Linear(4, 2)
    ref = copy.deepcopy(lin)
    calls = []

    def partition(name, mod, m):
        calls.append(name)
        if isinstance(mod, nn.Linear):
            mod.register_parameter("weight", nn.Parameter(dt.distribute_tensor(mod.weight, m, [dt.Shard(0)])))

    def input_fn(mod, inputs, m):
        return (dt.DTensor.from_local(inputs[0], m, [dt.Replicate()]),)

    def output_fn(mod, outputs, m):
        return outputs.full_tensor()

    dt.distribute_module(lin, mesh, partition, input_fn, output_fn)
    assert calls == [""] and lin.weight.placements == (dt.Shard(0),) and lin.bias.placements == (dt.Replicate(),)
    x = _rand(3, 4)
    _close(lin(x), ref(x))
    try:
        dt.distribute_module(lin, mesh)
    except RuntimeError as e:
        assert "only be called once" in str(e)
    else:
        raise AssertionError("distribute_module twice was allowed")
    plain = dt.distribute_module(nn.Linear(2, 2), mesh)
    assert plain.weight.placements == (dt.Replicate(),)
    return True


def compile(mesh, rank):
    ember, dt = _lib()
    x = _rand(5, 3)
    d = dt.distribute_tensor(x, mesh, [dt.Shard(0)])
    f = ember.compile(lambda t: (t.relu() * 2).sum(0), backend="aot_eager")    # (inductor: test_dtensor_compile.py)
    y = f(d)
    assert isinstance(y, dt.DTensor) and y.placements == (dt.Partial(),)
    _close(y, (x.relu() * 2).sum(0))
    return True


def scalars(mesh, rank):
    ember, dt = _lib()
    x = _rand(5, 3)
    d = dt.distribute_tensor(x, mesh, [dt.Shard(0)])
    s = d.sum()
    assert abs(s.item() - x.sum().item()) < 1e-5
    assert ember.equal(d, dt.distribute_tensor(x, mesh, [dt.Shard(1)]))
    assert bool((d > -100).all())
    return True


def loss_parallel(mesh, rank):
    ember, dt = _lib()
    F = ember.nn.functional
    from ember.distributed.tensor.debug import CommDebugMode, c10d_functional as fc
    from ember.distributed.tensor.parallel import loss_parallel as lp
    logits = _rand(4, 7, seed=15)
    target = ember.tensor([0, 6, 2, 3])
    cw = ember.rand(7) + 0.5
    for kw in [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 6}, {"weight": cw}]:
        ref_l = logits.clone().requires_grad_()
        ref = F.cross_entropy(ref_l, target, **kw)
        ref.sum().backward()
        d = dt.distribute_tensor(logits.clone().requires_grad_(), mesh, [dt.Shard(1)])
        dkw = {k: (dt.distribute_tensor(v, mesh, [dt.Replicate()]) if k == "weight" else v) for k, v in kw.items()}
        with lp():
            with CommDebugMode() as m:
                loss = F.cross_entropy(d, dt.distribute_tensor(target, mesh, [dt.Replicate()]), **dkw)
            # the logits are never gathered: only the row max and the exp-sums are reduced
            assert fc.all_gather_into_tensor not in m.get_comm_counts(), m.get_comm_counts()
            assert isinstance(loss, dt.DTensor)
            _close(loss, ref)
            loss.sum().backward()
        assert d.grad.placements == (dt.Shard(1),), d.grad.placements
        _close(d.grad, ref_l.grad)
    # outside loss_parallel the class-sharded logits are gathered and the result is the same
    d = dt.distribute_tensor(logits, mesh, [dt.Shard(1)])
    _close(F.cross_entropy(d, dt.distribute_tensor(target, mesh, [dt.Replicate()])), F.cross_entropy(logits, target))
    return True


def prepare_module_io(mesh, rank):
    ember, dt = _lib()
    import ember.nn as nn
    from ember.distributed.tensor.parallel import PrepareModuleInput, PrepareModuleOutput, parallelize_module
    seen = {}

    class M(nn.Module):
        def forward(self, x, y, *, z=None):
            seen.update(x=x, y=y, z=z)
            return x * 2, y

    x = _rand(4, 3)
    piece = x[2 * rank: 2 * rank + 2]
    m = parallelize_module(M(), mesh, PrepareModuleInput(
        input_layouts=(dt.Shard(0), None), desired_input_layouts=(dt.Replicate(), None),
        input_kwarg_layouts={"z": dt.Shard(0)}, desired_input_kwarg_layouts={"z": dt.Shard(1)}))
    m(piece, "other", z=piece)
    assert isinstance(seen["x"], dt.DTensor) and seen["x"].placements == (dt.Replicate(),)
    assert ember.equal(seen["x"].to_local(), x) and seen["y"] == "other"
    assert seen["z"].placements == (dt.Shard(1),)
    _close(seen["z"], x)
    m2 = parallelize_module(M(), mesh, PrepareModuleInput(input_layouts=dt.Shard(0), desired_input_layouts=dt.Replicate(),
                                                          use_local_output=True))
    m2.forward = lambda x: x + 1
    assert ember.equal(m2(piece), x + 1)

    class Piece(nn.Module):
        def forward(self, x):
            return x[2 * rank: 2 * rank + 2] * 3
    m3 = parallelize_module(Piece(), mesh, PrepareModuleOutput(output_layouts=dt.Shard(0),
                                                               desired_output_layouts=dt.Replicate()))
    out = m3(x)
    assert type(out) is ember.Tensor and ember.allclose(out, x * 3)
    try:
        PrepareModuleInput(input_layouts=(dt.Shard(0),), desired_input_layouts=(dt.Replicate(), dt.Replicate()))
    except AssertionError as e:
        assert "same length" in str(e)
    else:
        raise AssertionError("mismatched layouts were accepted")
    return True


def dropout(mesh, rank):
    """Dropout on a DTensor draws the global mask (ranks seeded alike agree with one process)."""
    ember, dt = _lib()
    x = _rand(6, 4)
    for p in [dt.Shard(0), dt.Shard(1), dt.Replicate()]:
        d = dt.distribute_tensor(x.clone().requires_grad_(), mesh, [p])
        ember.manual_seed(7)
        y = ember.nn.functional.dropout(d, 0.5)
        ember.manual_seed(7)
        ref_x = x.clone().requires_grad_()
        ref = ember.nn.functional.dropout(ref_x, 0.5)
        assert y.placements == (p,)
        _close(y, ref)
        y.sum().full_tensor().backward()
        ref.sum().backward()
        _close(d.grad, ref_x.grad)
    return True


def fallback(mesh, rank):
    """An op with no sharding rule runs on the whole values (Replicate result), logged once per op."""
    import io
    import logging
    ember, dt = _lib()
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    log = logging.getLogger("ember.distributed.tensor")
    log.addHandler(handler)
    try:
        x = _rand(5, 4)
        d = dt.distribute_tensor(x, mesh, [dt.Shard(0)])
        y = ember.cumsum(d, 0)
        assert y.placements == (dt.Replicate(),)
        _close(y, ember.cumsum(x, 0))
        ember.cumsum(d, 1)
        assert buf.getvalue().count("cumsum") == 1, buf.getvalue()
        assert "has no sharding rule" in buf.getvalue()
        # in place: the result goes back into the DTensor's own layout
        assert d.cumsum_(0) is d and d.placements == (dt.Shard(0),)
        _close(d, ember.cumsum(x, 0))
        # a data-dependent shape (no meta shape) is fine replicated
        nz = ember.nonzero(dt.distribute_tensor(x, mesh, [dt.Shard(1)]) > 0)
        assert nz.placements == (dt.Replicate(),)
        assert ember.equal(nz.to_local(), ember.nonzero(x > 0))
    finally:
        log.removeHandler(handler)
    return True


def clip_grad_norm(mesh, rank):
    """clip_grad_norm_ over a TP model's DTensor gradients: the total norm and the clipped grads."""
    ember, dt = _lib()
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    ember.manual_seed(0)
    ref = _MLP.make()
    tp = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    x = _rand(3, 8)
    ref(x).pow(2).sum().backward()
    tp(x).pow(2).sum().backward()
    n_ref = ember.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
    n_tp = ember.nn.utils.clip_grad_norm_(tp.parameters(), 0.5)
    assert isinstance(n_tp, dt.DTensor)
    _close(n_tp, n_ref)
    for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
        _close(q.grad, p.grad)
    return True


def optimizers_accumulate(mesh, rank):
    """Gradients accumulated over two backward passes, zero_grad(set_to_none=False), foreach and
    single-tensor optimizer paths: the TP model follows the single-process one."""
    ember, dt = _lib()
    from ember.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for opt_cls, kw in [(ember.optim.SGD, {"lr": 0.1, "foreach": True, "nesterov": True, "momentum": 0.9}),
                        (ember.optim.Adam, {"lr": 0.01, "amsgrad": True, "foreach": True}),
                        (ember.optim.AdamW, {"lr": 0.01, "foreach": False, "fused": False})]:
        ember.manual_seed(0)
        ref = _MLP.make()
        tp = parallelize_module(copy.deepcopy(ref), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        o1, o2 = opt_cls(ref.parameters(), **kw), opt_cls(tp.parameters(), **kw)
        for step in range(2):
            x = _rand(3, 8, seed=step)
            for _ in range(2):
                ref(x).pow(2).sum().backward()
                tp(x).pow(2).sum().backward()
            for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
                _close(q.grad, p.grad)
            o1.step()
            o2.step()
            o1.zero_grad(set_to_none=False)
            o2.zero_grad(set_to_none=False)
            for (n, p), (_, q) in zip(ref.named_parameters(), tp.named_parameters()):
                _close(q, p)
                assert float(q.grad.full_tensor().abs().max()) == 0.0
    return True
