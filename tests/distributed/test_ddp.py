"""DistributedDataParallel and SyncBatchNorm on 2 forked ranks vs single-process training on
the concatenated batch."""
from __future__ import annotations

import numpy as np
import pytest

from ._launch import run_ranks

STEPS, LOCAL, WS = 3, 4, 2


def _batches():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((STEPS, WS * LOCAL, 5)).astype(np.float32)
    y = rng.standard_normal((STEPS, WS * LOCAL, 2)).astype(np.float32)
    return x, y


def _mlp(seed):
    import ember as torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _params(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("bucket_cap_mb", [25, 0.0005])     # one bucket / one per parameter
def test_ddp_training_matches_single_process(bucket_cap_mb):
    X, Y = _batches()

    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        m = _mlp(seed=100 + rank)           # different init per rank: DDP broadcasts rank 0's
        d = DDP(m, bucket_cap_mb=bucket_cap_mb)
        start = _params(m)
        opt = torch.optim.SGD(d.parameters(), lr=0.1, momentum=0.9)
        sl = slice(rank * LOCAL, (rank + 1) * LOCAL)
        for s in range(STEPS):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(d(torch.tensor(X[s, sl])), torch.tensor(Y[s, sl]))
            loss.backward()
            opt.step()
        return start, _params(m), list(d.state_dict())

    out = run_ranks(body, WS)

    import ember as torch
    ref = _mlp(seed=100)
    start = _params(ref)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(torch.tensor(X[s])), torch.tensor(Y[s])).backward()
        opt.step()
    for r in range(WS):
        st, final, keys = out[r]
        for a, b in zip(st, start):
            np.testing.assert_array_equal(a, b)          # rank 0's initial parameters everywhere
        for a, b, c in zip(final, out[0][1], _params(ref)):
            np.testing.assert_array_equal(a, b)          # replicas identical bit for bit
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
        assert keys == ["module." + k for k in ref.state_dict()]


def test_no_sync_accumulates_then_averages_once():
    X, Y = _batches()

    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        m = _mlp(seed=7)
        d = DDP(m)
        sl = slice(rank * LOCAL, (rank + 1) * LOCAL)
        with d.no_sync():
            for s in range(2):
                torch.nn.functional.mse_loss(d(torch.tensor(X[s, sl])), torch.tensor(Y[s, sl])).backward()
        local = [p.grad.numpy().copy() for p in m.parameters()]
        torch.nn.functional.mse_loss(d(torch.tensor(X[2, sl])), torch.tensor(Y[2, sl])).backward()
        return local, [p.grad.numpy().copy() for p in m.parameters()]

    out = run_ranks(body, WS)
    import ember as torch

    def grads(rows):
        m = _mlp(seed=7)
        for s in range(STEPS):
            torch.nn.functional.mse_loss(m(torch.tensor(X[s, rows])), torch.tensor(Y[s, rows])).backward()
        return [p.grad.numpy() for p in m.parameters()]
    full = grads(slice(None))
    for r in range(WS):
        m = _mlp(seed=7)
        sl = slice(r * LOCAL, (r + 1) * LOCAL)
        for s in range(2):
            torch.nn.functional.mse_loss(m(torch.tensor(X[s, sl])), torch.tensor(Y[s, sl])).backward()
        for a, b in zip(out[r][0], [p.grad.numpy() for p in m.parameters()]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)     # no_sync: purely local
        for a, b in zip(out[r][1], full):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)     # mean over ranks of the sums


def _two_heads():
    import ember as torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 2)
            self.b = torch.nn.Linear(3, 2)

        def forward(self, x, use_b=False):
            return self.b(x) if use_b else self.a(x)
    torch.manual_seed(0)
    return M()


def test_unused_parameters():
    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        x = torch.randn(4, 3)
        res = {}
        d = DDP(_two_heads())
        d(x).sum().backward()
        with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior iteration") as e:
            d(x)
        res["err"] = str(e.value)
        # find_unused_parameters: rank 1 uses head b, rank 0 head a; b unused on rank 0 still gets
        # the average (rank 1's grad / 2); a parameter unused everywhere keeps grad None
        f = DDP(_two_heads(), find_unused_parameters=True)
        f(x, use_b=(rank == 1)).sum().backward()
        res["grads"] = {n: None if p.grad is None else p.grad.numpy().copy() for n, p in f.module.named_parameters()}
        f.zero_grad(set_to_none=True)
        f(x).sum().backward()
        res["b_none"] = f.module.b.weight.grad is None
        res["x"] = x.numpy().copy()
        return res

    out = run_ranks(body, WS)
    assert "Parameter indices which did not receive grad for rank 0: 2 3" in out[0]["err"]
    for r in range(WS):
        g = out[r]["grads"]
        # d/dW of sum(x W^T + b), averaged over 2 ranks of which one used each head
        np.testing.assert_allclose(g["a.weight"], np.tile(out[0]["x"].sum(0) / 2, (2, 1)), rtol=1e-5)
        np.testing.assert_allclose(g["b.weight"], np.tile(out[1]["x"].sum(0) / 2, (2, 1)), rtol=1e-5)
        np.testing.assert_allclose(g["a.bias"], np.full(2, 4 / 2), rtol=1e-6)
        assert out[r]["b_none"]


def test_buffers_broadcast_and_construction_errors():
    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        torch.manual_seed(rank)
        m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
        d = DDP(m)
        d(torch.randn(6, 3) + rank)          # running stats diverge per rank...
        before = m[1].running_mean.numpy().copy()
        torch.manual_seed(123)
        d(torch.randn(6, 3))                 # ...the next forward starts from rank 0's: same data, same result
        after = m[1].running_mean.numpy().copy(), m[1].running_var.numpy().copy()
        with pytest.raises(ValueError, match="device_ids and output_device arguments only work"):
            DDP(torch.nn.Linear(2, 2), device_ids=[0])
        frozen = torch.nn.Linear(2, 2).requires_grad_(False)
        with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
            DDP(frozen)
        return before, after

    out = run_ranks(body, WS)
    assert not np.array_equal(out[0][0], out[1][0])
    for a, b in zip(out[0][1], out[1][1]):
        np.testing.assert_array_equal(a, b)


def test_mismatched_models_refused():
    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        with pytest.raises(RuntimeError, match="DDP expects same model across all ranks"):
            DDP(torch.nn.Linear(3, 2 + rank))
        return True

    run_ranks(body, WS)


def test_sync_batchnorm_matches_global_batch():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((WS * 3, 4, 5)).astype(np.float32) * 2 + 1
    G = rng.standard_normal((WS * 3, 4, 5)).astype(np.float32)

    def body(rank, ws):
        import ember as torch
        torch.manual_seed(0)
        bn = torch.nn.SyncBatchNorm(4)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
        x = torch.tensor(X[rank * 3:(rank + 1) * 3], requires_grad=True)
        y = bn(x)
        (y * torch.tensor(G[rank * 3:(rank + 1) * 3])).sum().backward()
        return (y.detach().numpy().copy(), x.grad.numpy().copy(), bn.weight.grad.numpy().copy(),
                bn.running_mean.numpy().copy(), bn.running_var.numpy().copy())

    out = run_ranks(body, WS)
    import ember as torch
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    x = torch.tensor(X, requires_grad=True)
    y = bn(x)
    (y * torch.tensor(G)).sum().backward()
    wsum = sum(out[r][2] for r in range(WS))     # each rank's weight grad is its share
    for r in range(WS):
        sl = slice(r * 3, (r + 1) * 3)
        np.testing.assert_allclose(out[r][0], y.detach().numpy()[sl], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out[r][1], x.grad.numpy()[sl], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out[r][3], bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[r][4], bn.running_var.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wsum, bn.weight.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_ddp_matches_torch_ddp():
    """The same 2-rank DDP run under torch (gloo) from the same initial weights."""
    torch_ = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401  (torch's DDP imports it: once here, not in every forked rank)
    X, Y = _batches()
    init = _params(_mlp(seed=5))

    def body(rank, ws, backend):
        if backend == "torch":
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            t = torch.from_numpy
        else:
            import ember as torch
            from ember.nn.parallel import DistributedDataParallel as DDP
            t = torch.tensor
        m = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        with torch.no_grad():
            for p, v in zip(m.parameters(), init):
                p.copy_(t(np.array(v)))
        d = DDP(m)
        opt = torch.optim.SGD(d.parameters(), lr=0.05)
        sl = slice(rank * LOCAL, (rank + 1) * LOCAL)
        for s in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(d(t(np.array(X[s, sl]))), t(np.array(Y[s, sl]))).backward()
            opt.step()
        return [p.detach().numpy().copy() for p in m.parameters()]

    ours = run_ranks(body, WS, "ember")
    theirs = run_ranks(body, WS, "torch", backend="torch")
    assert torch_ is not None
    for r in range(WS):
        for a, b in zip(ours[r], theirs[r]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_ddp_with_sync_batchnorm_matches_single_process():
    """convert_sync_batchnorm + DDP: the statistics' collectives (forward and backward) and the
    gradient all-reduce interleave in the same order on every rank."""
    X, Y = _batches()

    def model():
        import ember as torch
        torch.manual_seed(42)
        return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                   torch.nn.Linear(8, 2))

    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        m = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model())
        assert isinstance(m[1], torch.nn.SyncBatchNorm)
        d = DDP(m)
        opt = torch.optim.SGD(d.parameters(), lr=0.1)
        sl = slice(rank * LOCAL, (rank + 1) * LOCAL)
        for s in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(d(torch.tensor(X[s, sl])), torch.tensor(Y[s, sl])).backward()
            opt.step()
        return [v.numpy().copy() for v in m.state_dict().values()]

    out = run_ranks(body, WS)
    import ember as torch
    ref = model()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(torch.tensor(X[s])), torch.tensor(Y[s])).backward()
        opt.step()
    for r in range(WS):
        for a, b in zip(out[r], ref.state_dict().values()):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)


def test_compiled_ddp_averages_gradients():
    """ember.compile over a DDP module (aot_eager): the post-accumulate hooks still fire once."""
    def body(rank, ws):
        import ember as torch
        from ember.nn.parallel import DistributedDataParallel as DDP
        m = _mlp(seed=3)
        c = torch.compile(DDP(m), backend="aot_eager")
        x = torch.tensor(_batches()[0][0, rank * LOCAL:(rank + 1) * LOCAL])
        c(x).pow(2).mean().backward()
        return [p.grad.numpy().copy() for p in m.parameters()]

    out = run_ranks(body, WS, timeout=60)
    import ember as torch
    ref = _mlp(seed=3)
    ref(torch.tensor(_batches()[0][0])).pow(2).mean().backward()
    for r in range(WS):
        for a, p in zip(out[r], ref.parameters()):
            np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_comm_hooks():
    """register_comm_hook: the stock allreduce hook == no hook; fp16 compression within half
    precision; a custom hook's result is what lands in .grad."""
    X, _ = _batches()

    def body(rank, ws):
        import ember as torch
        from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
        from ember.nn.parallel import DistributedDataParallel as DDP
        res = []
        x = torch.tensor(X[0, rank * LOCAL:(rank + 1) * LOCAL])
        for hook in (None, default_hooks.allreduce_hook, default_hooks.fp16_compress_hook, "twice"):
            m = _mlp(seed=9)
            d = DDP(m)
            if hook == "twice":
                def twice(state, bucket):
                    assert state == "s" and bucket.is_last() and len(bucket.parameters()) == 4
                    return _Done(bucket.buffer() * 2)       # any object with wait() will do
                d.register_comm_hook("s", twice)
                with pytest.raises(RuntimeError, match="can only be called once"):
                    d.register_comm_hook("s", twice)
            elif hook is not None:
                d.register_comm_hook(None, hook)
            d(x).pow(2).mean().backward()
            res.append([p.grad.numpy().copy() for p in m.parameters()])
        return res

    out = run_ranks(body, WS)
    import ember as torch
    locals_ = []
    for r in range(WS):
        m = _mlp(seed=9)
        m(torch.tensor(X[0, r * LOCAL:(r + 1) * LOCAL])).pow(2).mean().backward()
        locals_.append([p.grad.numpy() for p in m.parameters()])
    for r in range(WS):
        plain, hooked, fp16, twice = out[r]
        for a, b in zip(plain, hooked):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(plain, fp16):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)
        for a, g0 in zip(twice, locals_[r]):
            np.testing.assert_allclose(a, 2 * g0, rtol=1e-6)    # the custom hook did no communication


class _Done:
    def __init__(self, v):
        self.v = v

    def wait(self):
        return self.v
