"""Loops over ``model.parameters()`` (and the other Module tree walks) inside a compiled frame.

Module's own walk builds a ``set`` and generators, neither traced: every such loop was a graph
break and the loop ran eagerly (an EMA update, a hand-written weight decay or gradient-norm
sum). dynamo now walks the tree itself, in Module's order with its de-duplication, reading
every member through its source; the walked dict keys are guarded, and so is which members
are the same object (tying two weights later changes what is walked)."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _model():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.LayerNorm(8), ember.nn.ReLU(),
                               ember.nn.Sequential(ember.nn.Linear(8, 8), ember.nn.BatchNorm1d(8)))


def _ema(model, ema):
    with ember.no_grad():
        for p, q in zip(model.parameters(), ema.parameters()):
            q.mul_(0.9).add_(p, alpha=0.1)


def _ema_data(model, ema):
    for p, q in zip(model.parameters(), ema.parameters()):
        q.data.mul_(0.9).add_(p.data, alpha=0.1)


def _summary(model, x):
    total = x.sum() * 0
    for name, p in model.named_parameters():
        total = total + p.pow(2).sum() * len(name)
    for name, b in model.named_buffers(prefix="m"):
        total = total + b.float().sum() * len(name)
    kinds = [type(m).__name__ for m in model.modules()]
    n_children = len(list(model.children()))
    names = [n for n, _ in model.named_modules()]
    return total, len(kinds), n_children, len(names), "".join(n for n, _ in model.named_children())


def _params(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("fn", [_ema, _ema_data], ids=lambda f: f.__name__)
def test_a_loop_over_parameters_compiles_whole_and_matches_eager(fn):
    dynamo.reset()
    src = _model()
    got, want = _model(), _model()
    for p in list(got.parameters()) + list(want.parameters()):
        with ember.no_grad():
            p.mul_(0.5)
    cf = ember.compile(fn)
    for _ in range(3):
        cf(src, got)
        fn(src, want)
    for a, b in zip(_params(got), _params(want)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not dynamo.fallback_reasons, dynamo.fallback_reasons
    assert dynamo.convert_frame.counters["compiled"] == 1


def test_named_walks_match_eager_and_follow_changes():
    dynamo.reset()
    m = _model()
    cf = ember.compile(_summary, backend="aot_eager")
    x = ember.randn(3)

    def check():
        got, want = cf(m, x), _summary(m, x)
        np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=1e-5)
        assert got[1:] == want[1:]

    check()
    assert not dynamo.fallback_reasons, dynamo.fallback_reasons
    m.append(ember.nn.Linear(8, 2))            # a new member: walked again
    check()
    m[0].bias = None                           # a parameter removed
    check()
    lin_a, lin_b = ember.nn.Linear(3, 3), ember.nn.Linear(3, 3)
    tied = ember.nn.Sequential(lin_a, lin_b)
    ct = ember.compile(_summary, backend="aot_eager")

    def check_tied():
        got, want = ct(tied, x), _summary(tied, x)
        np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=1e-5)

    check_tied()
    lin_b.weight = lin_a.weight                # tied after compile: walked once, as eager
    check_tied()
