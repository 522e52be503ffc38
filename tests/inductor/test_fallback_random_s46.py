"""``ember.inductor.config.fallback_random`` (``torch._inductor.config.fallback_random``): compiled
random numbers equal eager's, draw for draw.

By default the compiled graph draws from Philox in its kernels (same distribution, another
stream); with the knob the random ops stay whole and run their eager kernels in program order
(ops with no Philox form -- multinomial, randperm, poisson -- always did: they are externs).
"""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.inductor import config


@pytest.fixture
def fallback_random(monkeypatch):
    monkeypatch.setattr(config, "fallback_random", True)
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _same(a, b):
    np.testing.assert_array_equal(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()))


def test_pointwise_draws_equal_eager(fallback_random, strict_lowering):
    def f(x):
        a = ember.rand_like(x)
        b = ember.randn(x.shape)
        return F.dropout(x, 0.4) * a - b, ember.bernoulli(a)

    x = ember.randn(6, 7)
    cf = ember.compile(f)
    for seed in (0, 1, 2):
        ember.manual_seed(seed)
        want = f(x)
        ember.manual_seed(seed)
        got = cf(x)
        for w, g in zip(want, got):
            _same(w, g)


def test_training_with_dropout_equals_eager(fallback_random, strict_lowering):
    ember.manual_seed(7)
    m = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.3), nn.GELU(), nn.Linear(16, 3), nn.Dropout(0.2))
    cm = ember.compile(m)
    for seed in range(3):
        x = ember.randn(8, 5)
        ember.manual_seed(seed)
        out_e = m(x)
        out_e.square().sum().backward()
        grads_e = [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        ember.manual_seed(seed)
        out_c = cm(x)
        out_c.square().sum().backward()
        grads_c = [p.grad.numpy().copy() for p in m.parameters()]
        m.zero_grad()
        np.testing.assert_allclose(out_c.detach().numpy(), out_e.detach().numpy(), rtol=1e-5, atol=1e-6)
        for ge, gc in zip(grads_e, grads_c):
            np.testing.assert_allclose(gc, ge, rtol=1e-4, atol=1e-6)


def test_ops_without_decomposition_are_externs_drawing_eagers_numbers(strict_lowering):
    # default config: multinomial, randperm and poisson have no Philox form: each is an extern
    # call of its eager kernel (strict_lowering: no eager fallback), so the numbers are eager's
    def f(p, x):
        return ember.multinomial(p, 3), ember.randperm(9), ember.poisson(x.abs()) * 2 + x

    p = ember.rand(3, 6) + 0.1
    x = ember.randn(4, 5)
    cf = ember.compile(f)
    for seed in (3, 4):
        ember.manual_seed(seed)
        want = f(p, x)
        ember.manual_seed(seed)
        got = cf(p, x)
        for w, g in zip(want, got):
            _same(w, g)


def test_knob_is_part_of_the_cache_key(monkeypatch):
    def f(x):
        return ember.rand_like(x) * 3 + x

    x = ember.randn(5, 4)
    ember.compiler.reset()
    ember.compile(f)(x)                       # cached with Philox
    monkeypatch.setattr(config, "fallback_random", True)
    ember.compiler.reset()
    try:
        ember.manual_seed(11)
        want = f(x)
        ember.manual_seed(11)
        got = ember.compile(f)(x)
        _same(want, got)
    finally:
        ember.compiler.reset()


def test_default_still_draws_in_kernels():
    # without the knob the draw is Philox in the generated code (no eager op in the wrapper)
    ember.compiler.reset()

    def f(x):
        return F.dropout(x, 0.5) + 1

    x = ember.randn(64, 64)
    ember.manual_seed(0)
    out = ember.compile(f)(x).numpy()
    kept = out != 1
    assert 0.4 < kept.mean() < 0.6
    np.testing.assert_allclose(out[kept], x.numpy()[kept] * 2 + 1, rtol=1e-6)


def test_reachable_under_torchs_name(monkeypatch):
    monkeypatch.setattr(config, "fallback_random", False)
    ember._inductor.config.fallback_random = True
    assert config.fallback_random is True
