"""Random numbers drawn inside a compiled function are new at every call and follow manual_seed.

rand/randn/randint (and rand_like, randn_like, randint_like, bernoulli, normal built on them)
made their arrays outside the dispatcher, so a traced graph held the first call's numbers as
a constant: every compiled call returned them again (aot_eager and inductor alike). They now
fill through the ``_random`` op (Philox in a graph, seeded per call); randperm and multinomial
are ops kept whole whose eager kernel draws at every call."""
from __future__ import annotations

import numpy as np
import pytest

import ember

DRAWS = {
    "rand": lambda x: ember.rand(64) + x * 0,
    "randn": lambda x: ember.randn(8, 8).reshape(64) + x * 0,
    "randint": lambda x: ember.randint(0, 1000, (64,)) + x * 0,
    "rand_like": lambda x: ember.rand_like(x),
    "randn_like": lambda x: ember.randn_like(x) * 2,
    "randint_like": lambda x: ember.randint_like(x, 5, 1000),
    "bernoulli": lambda x: ember.bernoulli(x.sigmoid()),
    "normal": lambda x: ember.normal(x, 1.0),
    "randperm": lambda x: ember.randperm(64) + x * 0,
    "multinomial": lambda x: ember.multinomial(x.softmax(0), 8).float(),
    "uniform_": lambda x: ember.empty(64).uniform_(-1, 1) + x,
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(DRAWS))
def test_each_call_draws_new_numbers_and_manual_seed_repeats_them(name, backend):
    fn = DRAWS[name]
    f = ember.compile(fn, backend=backend)
    x = ember.randn(64)
    calls = [f(x).numpy().copy() for _ in range(3)]
    assert not np.array_equal(calls[0], calls[1]) or not np.array_equal(calls[1], calls[2]), \
        f"{name}: the compiled function returned the same draw on every call"
    ember.manual_seed(123)
    a = f(x).numpy().copy()
    ember.manual_seed(123)
    b = f(x).numpy().copy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_draws_have_the_right_distribution(backend):
    f = ember.compile(lambda x: (ember.rand(20000) + x * 0, ember.randn(20000) + x * 0,
                                 ember.randint(3, 7, (20000,)) + x * 0), backend=backend)
    u, z, k = (t.numpy() for t in f(ember.zeros(1)))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
    assert set(np.unique(k)) == {3, 4, 5, 6}


def test_eager_draws_are_unchanged_and_new_tensors_start_at_version_0():
    ember.manual_seed(5)
    a = (ember.rand(3), ember.randn(3), ember.randint(0, 10, (3,)))
    ember.manual_seed(5)
    b = (ember.empty(3).uniform_(), ember.empty(3).normal_(), ember.empty(3, dtype=ember.int64).random_(0, 10))
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert p._version == 0
    assert ember.rand(2, requires_grad=True).requires_grad
