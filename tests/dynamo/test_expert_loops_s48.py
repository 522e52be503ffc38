"""Mixtral-style expert loops (session 48): ``for e in range(n): ... self.experts[e](...)``
breaks in every iteration; the resume function is specialised to ``e`` (it picks a module), and
the recompile limit now counts those entries per member module (as it does for ``for expert in
self.experts``), so 12 experts no longer send the loop to eager. ``out[mask] += y`` (a boolean
mask and tensor rows) is a graph break at the item assignment instead of running the rest of
the frame -- the remaining experts -- eagerly."""
import warnings

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend


def _rand(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class _MoE(ember.nn.Module):
    def __init__(self, d=6, n=12, masked=False):
        super().__init__()
        nn = ember.nn
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, 10), nn.GELU(), nn.Linear(10, d))
                                      for _ in range(n)])
        self.n, self.masked = n, masked

    def forward(self, x):
        idx = self.router(x).argmax(-1)
        out = ember.zeros_like(x)
        for e in range(self.n):
            mask = idx == e
            if mask.any():
                if self.masked:
                    out[mask] += self.experts[e](x[mask])
                else:
                    rows = ember.where(mask)[0]
                    out.index_add_(0, rows, self.experts[e](x[rows]))
        return out


def _grads(m):
    """The parameters' gradients (zeros for an expert no token was routed to, and the router)."""
    return [ember.zeros_like(p) if p.grad is None else p.grad.clone() for p in m.parameters()]


def _check(m, calls=3):
    dynamo.reset()
    cm = ember.compile(m, backend=CountingBackend())
    with warnings.catch_warnings():
        warnings.simplefilter("error", dynamo.RecompileLimitExceeded)
        for i in range(calls):
            x = _rand(40 + i, 6, seed=i)
            g = _rand(40 + i, 6, seed=100 + i)
            xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
            m.zero_grad()
            want = m(xe)
            (want * g).sum().backward()
            want_g = _grads(m) + [xe.grad]
            m.zero_grad()
            got = cm(xc)
            (got * g).sum().backward()
            got_g = _grads(m) + [xc.grad]
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
            for a, b in zip(want_g, got_g):
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


def test_range_indexed_experts_beyond_the_recompile_limit():
    """12 experts > recompile_limit (8): each expert's entries are counted on their own, so no
    RecompileLimitExceeded (it used to stop at e == 8 and run the rest eagerly); results and
    gradients equal eager."""
    ember.manual_seed(0)
    _check(_MoE(n=12))
    assert not any("recompile limit" in r for _, r in dynamo.fallback_reasons)


def test_masked_accumulate_breaks_at_the_assignment():
    """``out[mask] += expert(x[mask])``: the assignment is a graph break (``operator.setitem``
    run after the graph), so no resume function of the loop runs eagerly as a whole."""
    ember.manual_seed(1)
    _check(_MoE(n=4, masked=True))
    eager = [w for w, r in dynamo.fallback_reasons if "__resume_at" in w and not r.startswith("graph break")]
    assert not eager, dynamo.fallback_reasons


def _store_then_use(out, mask, y):
    out[mask] = y * 2
    return out.sum(0) + 1


def test_item_assignment_break_result_equals_eager():
    """The setitem made after the graph writes the tensor the resumed code reads."""
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(_store_then_use, backend=cnt)
    for i in range(2):
        mask = _rand(7, seed=i) > 0
        n = int(mask.sum())
        o1, o2 = _rand(7, 3, seed=10 + i), _rand(7, 3, seed=10 + i)
        y = _rand(n, 3, seed=20 + i)
        want, got = _store_then_use(o1, mask, y), cf(o2, mask, y)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(o2.numpy(), o1.numpy())
    assert cnt.frame_count >= 2      # the ``+ 1`` after the break is compiled
