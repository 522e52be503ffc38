"""A user try block whose traced code records no graph op cannot see an exception from the
graph, so it does not make the frame 're-run eagerly if the graph raises' -- which forbade
in-place ops: an LR scheduler's try/finally after opt.step() ran the whole step eagerly."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import dynamo

_rng = np.random.default_rng(41)


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


def _train(compiled):
    ember.manual_seed(0)
    model = ember.nn.Linear(8, 4)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    sched = ember.optim.lr_scheduler.StepLR(opt, 2, 0.5)

    def step(x, y):
        opt.zero_grad()
        loss = ember.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    f = ember.compile(step) if compiled else step
    losses = []
    for _ in range(5):
        x = ember.tensor(_rng.standard_normal((16, 8)).astype(np.float32))
        y = ember.tensor(_rng.standard_normal((16, 4)).astype(np.float32))
        losses.append(f(x, y).item())
    return step, losses, model.weight.detach().clone(), sched.get_last_lr()


def test_optimizer_step_then_scheduler_step_is_compiled():
    state = _rng.bit_generator.state
    step, eager_losses, eager_w, eager_lr = _train(False)
    _rng.bit_generator.state = state
    _, losses, w, lr = _train(True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert ember.allclose(w, eager_w, atol=1e-6) and lr == eager_lr
    x = ember.randn(16, 8)
    ex = dynamo.explain(step)(x, ember.randn(16, 4))
    # loss.backward() breaks (as in PyTorch); the resumed optimizer + scheduler part is a graph
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex.break_reasons
    assert all("try block" not in r[1] for r in ex.break_reasons)


def test_try_around_python_only_code_allows_in_place_ops():
    calls = {"n": 0}

    def f(x, cfg):
        try:
            scale = cfg["scale"]
        finally:
            calls["n"] += 1
        x.mul_(scale)
        return x + 1

    x = ember.tensor(_rng.standard_normal(4).astype(np.float32))
    ex = dynamo.explain(f)(x.clone(), {"scale": 2.0})
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
    a, b = x.clone(), x.clone()
    assert ember.allclose(ember.compile(f)(a, {"scale": 3.0}), f(b, {"scale": 3.0})) and ember.allclose(a, b)


def test_try_around_graph_ops_still_reruns_for_the_handler():
    def f(x, idx):
        try:
            y = x[idx] * 2          # out of range at run time for the second input
        except IndexError:
            y = x.sum()
        return y

    cf = ember.compile(f, dynamic=True)
    x = ember.tensor(_rng.standard_normal(5).astype(np.float32))
    assert ember.allclose(cf(x, ember.tensor([1, 3])), f(x, ember.tensor([1, 3])))
    assert ember.allclose(cf(x, ember.tensor([1, 9])), f(x, ember.tensor([1, 9])))
