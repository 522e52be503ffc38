"""``dynamic=True`` graphs that were silently compiled once per shape (aot's per-shape fallback
is always correct, so value comparisons never saw it) or recompiled per size; each now compiles
one graph for every size (the ``strict_dynamic`` fixture makes the per-shape fallback raise):

* an in-place op on a view of a tensor with symbolic sizes (functionalization wrote the view
  into its base through a constant index array, which symbolic sizes do not have: it now
  computes the positions in the graph, ``proxy_tensor._put_strided``);
* a clone of a strided view with symbolic sizes (``_dense_order`` called ``int()`` on the
  sizes expecting a TypeError; a SymInt specialises instead: a recompile per size);
* a stepped slice's backward (its pad asked ``amount == 0`` of a size's parity: a guard, a
  recompile for the other parity)."""
import numpy as np
import pytest

import ember
import ember.nn as nn


def _rand(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _view_writes(x):
    y = x * 2
    y[:, 1:].add_(1)
    y.t()[0].mul_(3)          # a column, through a transpose
    y[::2].sub_(0.5)          # every other row: the count depends on the size's parity
    return y.sin()


def _input_view_write(a):
    a[2::2].mul_(0.5)
    return ember.abs(a)


SIZES = (5, 8, 11, 6)


@pytest.mark.parametrize("fn,shape", [(_view_writes, lambda n: (n, n + 2)), (_input_view_write, lambda n: (n,))])
def test_inplace_on_views_compiles_once_for_every_size(fn, shape, strict_dynamic):
    ember.dynamo.reset()
    c = ember.compile(fn, dynamic=True)
    for i, n in enumerate(SIZES):
        x = _rand(*shape(n), seed=i)
        xe, xc = x.clone(), x.clone()
        np.testing.assert_allclose(c(xc).numpy(), fn(xe).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(xc.numpy(), xe.numpy())     # the input written as eagerly
    assert ember.dynamo.counters["recompiles"] == 0
    assert ember.dynamo.counters["eager_fallback"] == 0


def test_inplace_on_views_in_training_compiles_once_for_every_size(strict_dynamic):
    ember.manual_seed(0)
    lin = nn.Linear(7, 7)

    def f(x):
        y = lin(x) * 2
        y[:, 1:].mul_(x[:, :-1].sigmoid())
        y[::2].add_(1)
        return y.tanh()

    ember.dynamo.reset()
    c = ember.compile(f, dynamic=True)
    for i, n in enumerate(SIZES):
        x = _rand(n, 7, seed=i)
        grads = []
        for fn in (f, c):
            xi = x.clone().requires_grad_(True)
            fn(xi).pow(2).sum().backward()
            grads.append((xi.grad.numpy().copy(), lin.weight.grad.numpy().copy()))
            lin.zero_grad()
        for g, w in zip(*grads):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert ember.dynamo.counters["recompiles"] == 0


def test_stepped_slice_backward_does_not_guard_on_parity(strict_dynamic):
    def f(x):
        return (x[::3] * 2).sum() + x.t()[1:].contiguous().exp().sum()

    ember.dynamo.reset()
    c = ember.compile(f, dynamic=True)
    for i, n in enumerate((7, 9, 10, 12, 14)):
        x = _rand(n, 4, seed=i)
        xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        f(xe).backward()
        c(xc).backward()
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert ember.dynamo.counters["recompiles"] == 0
