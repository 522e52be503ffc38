"""Join / Joinable / JoinHook and DistributedDataParallel.join on 3 forked ranks with
different numbers of batches, against a single-process replay of what DDP must compute
(every iteration averages the gradients of the ranks that still have data), all in one
spawned group."""
from __future__ import annotations

import numpy as np
import pytest

from ._launch import run_ranks

WS = 3
COUNTS = [3, 5, 4]              # batches per rank: rank 1 joins last
LOCAL = 4


def _batches():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((WS, max(COUNTS), LOCAL, 5)).astype(np.float64)
    y = rng.standard_normal((WS, max(COUNTS), LOCAL, 2)).astype(np.float64)
    return x, y


def _model(seed, bn=False):
    import ember as torch
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(5, 8)] + ([torch.nn.BatchNorm1d(8)] if bn else []) + [torch.nn.Tanh(),
                                                                                      torch.nn.Linear(8, 2)]
    return torch.nn.Sequential(*layers).double()


def _params(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


def _script(rank, ws):
    import ember as torch
    import ember.distributed as dist
    from ember.distributed.algorithms.join import Join, JoinHook, Joinable
    from ember.nn.parallel import DistributedDataParallel as DDP
    X, Y = _batches()
    out = {}

    def train(divide, bn=False, counts=COUNTS, **ddp_kw):
        d = DDP(_model(seed=100 + rank, bn=bn), **ddp_kw)      # DDP broadcasts rank 0's initial weights
        opt = torch.optim.SGD(d.parameters(), lr=0.1)
        with d.join(divide_by_initial_world_size=divide):
            for s in range(counts[rank]):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(d(torch.tensor(X[rank, s])), torch.tensor(Y[rank, s]))
                loss.backward()
                opt.step()
        return _params(d.module), [b.numpy().copy() for b in d.module.buffers()]

    out["ddp_initial_ws"] = train(True)
    out["ddp_effective_ws"] = train(False)
    out["ddp_bn_unused"] = train(True, bn=True, find_unused_parameters=True)

    # a comm hook runs on the joined rank too (with zeros)
    calls = []

    def hook(state, bucket):
        calls.append(float(bucket.buffer().abs().sum().item()) == 0.0)
        t = bucket.buffer() / ws
        return dist.all_reduce(t, async_op=True).get_future().then(lambda f: [t])
    d = DDP(_model(seed=5))
    d.register_comm_hook(None, hook)
    with d.join():
        for s in range(COUNTS[rank]):
            torch.nn.functional.mse_loss(d(torch.tensor(X[rank, s])), torch.tensor(Y[rank, s])).backward()
    out["hook_zero_buckets"] = calls

    # throw_on_early_termination: everyone raises when rank 0 runs out
    d = DDP(_model(seed=6))
    try:
        with d.join(throw_on_early_termination=True):
            for s in range([1, 3, 3][rank]):
                torch.nn.functional.mse_loss(d(torch.tensor(X[rank, s])), torch.tensor(Y[rank, s])).backward()
        out["throw"] = None
    except RuntimeError as e:
        out["throw"] = str(e)

    # no_sync inside join: the joined rank learns that no gradient all-reduce follows
    d = DDP(_model(seed=8))
    with d.join():
        for s in range(COUNTS[rank]):
            with d.no_sync():
                torch.nn.functional.mse_loss(d(torch.tensor(X[rank, s])), torch.tensor(Y[rank, s])).backward()
    out["no_sync_grads"] = [p.grad.numpy().copy() for p in d.parameters()]

    # a user Joinable: a running sum all-reduced every iteration
    class Counter(Joinable):
        def __init__(self):
            super().__init__()
            self.total, self.main_calls, self.last = 0.0, 0, None

        def step(self, v):
            Join.notify_join_context(self)
            t = torch.tensor([v])
            dist.all_reduce(t)
            self.total += t.item()

        def join_hook(self, **kwargs):
            me = self

            class H(JoinHook):
                def main_hook(self):
                    me.main_calls += 1
                    dist.all_reduce(torch.zeros(1))

                def post_hook(self, is_last_joiner):
                    me.last = (is_last_joiner, kwargs.get("tag"))
            return H()

        @property
        def join_device(self):
            return torch.device("cpu")

        @property
        def join_process_group(self):
            return dist.group.WORLD

    c = Counter()
    with Join([c], tag="x"):
        for s in range(COUNTS[rank]):
            c.step(float(rank + 1))
    out["counter"] = (c.total, c.main_calls, c.last)
    c2 = Counter()
    c2.step(1.0)        # outside a join context: no notification all-reduce, just the step's
    out["counter_after"] = c2.total
    errs = []
    for fn in (lambda: Join([]), lambda: Join.notify_join_context(object())):
        try:
            fn()
        except (ValueError, AssertionError) as e:
            errs.append((type(e).__name__, str(e)))
    out["errors"] = errs
    return out


def _reference(divide, steps_of=COUNTS):
    """Single-process replay: each step, the ranks with data left contribute their gradient;
    the sum is divided by the world size (or the number still working)."""
    import ember as torch
    X, Y = _batches()
    m = _model(seed=100)
    for s in range(max(steps_of)):
        active = [r for r in range(WS) if steps_of[r] > s]
        grads = None
        for r in active:
            m.zero_grad()
            torch.nn.functional.mse_loss(m(torch.tensor(X[r, s])), torch.tensor(Y[r, s])).backward()
            g = [p.grad.numpy().copy() for p in m.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        div = WS if divide else len(active)
        with torch.no_grad():
            for p, g in zip(m.parameters(), grads):
                p -= 0.1 * torch.tensor(g / div)
    return _params(m)


def test_join_on_3_ranks_with_uneven_inputs():
    """One spawned group for every check of this file."""
    ranks = run_ranks(_script, WS, timeout=90)
    _check_ddp_join_matches_single_process_replay(ranks, "ddp_initial_ws", True)
    _check_ddp_join_matches_single_process_replay(ranks, "ddp_effective_ws", False)
    _check_ddp_join_with_buffers_and_unused_detection(ranks)
    _check_ddp_join_comm_hook_and_early_termination(ranks)
    _check_ddp_join_no_sync_accumulates_locally(ranks)
    _check_generic_joinable(ranks)


def _check_ddp_join_matches_single_process_replay(ranks, key, divide):
    ref = _reference(divide)
    for r in range(WS):
        for a, b, c in zip(ranks[r][key][0], ranks[1][key][0], ref):
            np.testing.assert_array_equal(a, b)      # every rank ends with the last joiner's model
            np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)


def _check_ddp_join_with_buffers_and_unused_detection(ranks):
    for r in range(WS):
        params, bufs = ranks[r]["ddp_bn_unused"]
        for a, b in zip(params + bufs, ranks[1]["ddp_bn_unused"][0] + ranks[1]["ddp_bn_unused"][1]):
            np.testing.assert_array_equal(a, b)
    # BatchNorm's running mean moved: buffers really were trained and synced
    assert np.abs(ranks[0]["ddp_bn_unused"][1][0]).sum() > 0


def _check_ddp_join_comm_hook_and_early_termination(ranks):
    for r in range(WS):
        calls = ranks[r]["hook_zero_buckets"]
        assert len(calls) == max(COUNTS)              # one bucket per iteration, joined or not
        assert sum(calls) == max(COUNTS) - COUNTS[r]  # zero buckets exactly on the joined iterations
    assert ranks[0]["throw"] == "Rank 0 exhausted all inputs."
    for r in (1, 2):
        assert ranks[r]["throw"] == "Detected at least one rank that exhausted inputs. Throwing across all ranks."


def _check_ddp_join_no_sync_accumulates_locally(ranks):
    import ember as torch
    X, Y = _batches()
    for r in range(WS):
        m = _model(seed=8 if r else 8)
        for s in range(COUNTS[r]):
            torch.nn.functional.mse_loss(m(torch.tensor(X[r, s])), torch.tensor(Y[r, s])).backward()
        for a, p in zip(ranks[r]["no_sync_grads"], m.parameters()):
            np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-10, atol=1e-12)


def _check_generic_joinable(ranks):
    # iteration s sums (rank + 1) over the ranks still working
    totals = sum(sum(r + 1 for r in range(WS) if COUNTS[r] > s) for s in range(max(COUNTS)))
    for r in range(WS):
        total, main_calls, last = ranks[r]["counter"]
        assert total == sum(sum(q + 1 for q in range(WS) if COUNTS[q] > s) for s in range(COUNTS[r]))
        assert main_calls == max(COUNTS) - COUNTS[r]
        assert last == (r == 1, "x")
        assert ranks[r]["counter_after"] == WS
        assert ranks[r]["errors"] == [
            ("ValueError", "The join context manager requires at least one joinable"),
            ("AssertionError", "Check that the <class 'object'> constructor calls the ``Joinable`` constructor")]
    assert totals > 0
