"""Random ops in graphs with symbolic sizes compile (dropout under dynamic shapes): prims.rng_seed,
a 0-d seed with no size, falls back to its kernel in a dynamic graph too (it sent the whole graph
to eager: "rng_seed has no lowering and dynamic shapes need one")."""
from __future__ import annotations

import logging

import numpy as np

import ember
import ember.nn.functional as F


def test_dropout_compiles_with_dynamic_shapes(caplog):
    f = ember.compile(lambda x: F.dropout(x, 0.5, training=True) * 3, dynamic=True)
    with caplog.at_level(logging.INFO, logger="ember.inductor"):
        outs = [f(ember.ones(n, 64)) for n in (8, 12, 20, 20)]
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    for y, n in zip(outs, (8, 12, 20, 20)):
        a = y.numpy()
        assert a.shape == (n, 64)
        assert set(np.unique(a)) <= {0.0, 6.0}           # dropped, or kept and scaled by 1/(1-p)
        assert 0.3 < (a == 0).mean() < 0.7
    assert not np.array_equal(outs[2].numpy(), outs[3].numpy())   # a new mask at every call


def test_training_with_dropout_and_changing_lengths_matches_eager_statistics(caplog):
    lin = ember.nn.Linear(16, 16)
    def step(x):
        return F.dropout(lin(x).relu(), 0.2, training=True).sum()
    cf = ember.compile(step)
    with caplog.at_level(logging.INFO, logger="ember.inductor"):
        for n in (5, 9, 13):                             # the second length makes it dynamic
            x = ember.randn(n, 16)
            cf(x).backward()
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    assert lin.weight.grad is not None and bool(ember.isfinite(lin.weight.grad).all())
