"""A float learning rate changed by a scheduler, read unspecialized after its first change, must
stay in the graph wherever the optimizer uses it -- including as ``add_``'s ``alpha``
(``p.add_(d_p, alpha=-lr)``, SGD's update) and behind ``isinstance(lr, Tensor)`` tests.

Before: ``alpha`` became a 0-d tensor graph input, which the op read back with ``.item()`` (a
graph break in every step's update, per parameter), and ``isinstance`` guarded the float's
value, so the next learning rate recompiled until the limit."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
from ember import dynamo, nn

from .test_optimizer_compile import OPTIMIZERS


@pytest.mark.parametrize("name", ["sgd-plain", "sgd-momentum", "sgd-nesterov", "adamw", "rmsprop"])
def test_a_scheduled_lr_in_a_training_step_stays_in_one_graph_and_matches_eager(name):
    dynamo.reset()
    ember.manual_seed(7)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    ref = copy.deepcopy(model)
    opt, opt_ref = OPTIMIZERS[name](model), OPTIMIZERS[name](ref)
    scheds = [ember.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in (opt, opt_ref)]

    def train_step(m, o, x):
        o.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        o.step()
        return loss

    compiled = ember.compile(train_step)
    breaks = []
    for i in range(8):
        x = ember.randn(5, 6)
        compiled(model, opt, x)
        train_step(ref, opt_ref, x)
        for s in scheds:
            s.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        if i == 2:
            breaks.append(dynamo.counters["graph_breaks"])
            recompiles = dynamo.counters["recompiles"]
    # steps 3..7 ran new learning rates on the graphs compiled by step 2: no new break or recompile
    assert dynamo.counters["graph_breaks"] == breaks[0], dynamo.counters
    assert dynamo.counters["recompiles"] == recompiles, dynamo.counters
    assert dynamo.counters["eager_fallback"] == 0
    # the only breaks are the backward's (one per compile of train_step)
    breaks = [r for _, r in dynamo.convert_frame.fallback_reasons if r.startswith("graph break")]
    assert breaks and all("backward" in r for r in breaks), breaks
