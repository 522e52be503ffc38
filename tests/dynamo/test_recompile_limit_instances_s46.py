"""The recompile limit counts entries per set of objects the frame's arguments are guarded to be.

A block's ``forward`` with a graph break inside (an ``.item()``, a print, data-dependent control
flow) is compiled as its own frame for each layer, guarded on ``self``'s identity. Counting every
entry, a 12-layer model sent layers 9-12 to eager for good ("hit the recompile limit (8)");
PyTorch counts the entries of the same guarded objects, bounded by an accumulated limit.
"""
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.dynamo import config, convert_frame


class Block(nn.Module):
    def __init__(self, k=1.0):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.k = k

    def forward(self, x):
        y = self.fc(x).relu() * self.k
        if y.sum().item() > 1e9:       # a graph break inside every layer
            y = y * 2
        return x + y


def _forward_entries():
    return [e for code, c in list(convert_frame._caches.items()) if code is Block.forward.__code__
            for e in c.entries if e.fn is not None]


def test_twelve_layers_each_compiled_not_eager():
    ember.compiler.reset()
    layers = [Block() for _ in range(12)]

    def run(x):
        for b in layers:
            x = b(x)
        return x

    cf = ember.compile(run)
    x = ember.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            np.testing.assert_allclose(cf(x).detach().numpy(), run(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    # (the loop's own resume function, guarded on the remaining layers, may hit it: PyTorch
    # runs that loop eagerly too)
    assert not [w for w in caught if " forward (" in str(w.message)]
    assert len(_forward_entries()) == 12


def test_one_instance_still_limited(monkeypatch):
    # changing a guarded constant of the same module: the limit applies as before
    ember.compiler.reset()
    monkeypatch.setattr(config, "recompile_limit", 3)
    b = Block()

    def run(x):
        return b(x)

    cf = ember.compile(run)
    x = ember.randn(2, 8)
    with pytest.warns(convert_frame.RecompileLimitExceeded):
        for k in range(6):
            b.k = float(k + 1) if k % 2 else k + 1     # int/float alternating: each a new guard
            np.testing.assert_allclose(cf(x).detach().numpy(), b(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(_forward_entries()) <= 3


def test_accumulated_limit_bounds_all_instances(monkeypatch):
    ember.compiler.reset()
    monkeypatch.setattr(config, "accumulated_recompile_limit", 5)
    layers = [Block() for _ in range(8)]

    def run(x):
        for b in layers:
            x = b(x)
        return x

    cf = ember.compile(run)
    x = ember.randn(3, 8)
    with pytest.warns(convert_frame.RecompileLimitExceeded):
        np.testing.assert_allclose(cf(x).detach().numpy(), run(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(_forward_entries()) == 5


def test_torch_names_reach_the_knob(monkeypatch):
    monkeypatch.setattr(config, "accumulated_recompile_limit", 256)
    ember._dynamo.config.accumulated_cache_size_limit = 17
    assert config.accumulated_recompile_limit == 17
    assert ember._dynamo.config.accumulated_recompile_limit == 17
