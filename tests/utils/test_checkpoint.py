"""ember.utils.checkpoint: gradients equal the un-checkpointed ones; activations are recomputed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.utils.checkpoint import checkpoint, checkpoint_sequential


def _block():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3))


def _grads(model, x, fn):
    model.zero_grad()
    x.grad = None
    out = fn(x)
    (out ** 2).sum().backward()
    return [out.detach().numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_plain(use_reentrant):
    model = _block()
    x = ember.randn(4, 6, requires_grad=True)
    want = _grads(model, x, model)
    got = _grads(model, x, lambda t: checkpoint(model, t, use_reentrant=use_reentrant))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_recomputes_in_backward_and_autograd_grad():
    calls = []
    lin = nn.Linear(3, 3)

    def fn(t):
        calls.append(1)
        return lin(t).tanh()

    x = ember.randn(2, 3, requires_grad=True)
    out = checkpoint(fn, x, use_reentrant=False)
    assert len(calls) == 1
    (gx,) = ember.autograd.grad(out.sum(), [x])
    assert len(calls) == 2
    (gx_ref,) = ember.autograd.grad(fn(x).sum(), [x])
    np.testing.assert_allclose(gx.numpy(), gx_ref.numpy(), rtol=1e-6)


def test_dropout_rng_preserved_and_kwargs():
    ember.manual_seed(3)
    lin = nn.Linear(5, 5)
    drop = nn.Dropout(0.5)
    x = ember.randn(8, 5, requires_grad=True)

    def fn(t, scale=1.0):
        return drop(lin(t)) * scale

    ember.manual_seed(11)
    out = checkpoint(fn, x, use_reentrant=False, scale=2.0)
    out.sum().backward()
    g = lin.weight.grad.numpy().copy()
    lin.zero_grad()
    ember.manual_seed(11)
    fn(x, scale=2.0).sum().backward()
    np.testing.assert_allclose(g, lin.weight.grad.numpy(), rtol=1e-6)


def test_checkpoint_sequential_and_no_grad():
    model = _block()
    x = ember.randn(4, 6, requires_grad=True)
    want = _grads(model, x, model)
    got = _grads(model, x, lambda t: checkpoint_sequential(model, 2, t, use_reentrant=False))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    with ember.no_grad():
        assert not checkpoint(model, x, use_reentrant=False).requires_grad
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(model, x)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_inside_a_compiled_module_matches_eager(use_reentrant):
    """use_reentrant=False: captured (the region recomputed in the compiled backward);
    use_reentrant=True: a graph break, the checkpointed function runs uncompiled in its forward
    and in its recomputation (compiled, the forward saved other tensors than the eager
    recomputation)."""
    import copy
    import ember.nn.functional as F
    from ember.utils.checkpoint import checkpoint as ckpt

    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ember.nn.Linear(6, 6)
            self.b = ember.nn.Linear(6, 6)

        def block(self, x):
            return F.relu(self.b(x)).tanh()

        def forward(self, x):
            return ckpt(self.block, F.relu(self.a(x)), use_reentrant=use_reentrant).sum()

    ember.manual_seed(0)
    m = Net()
    c = copy.deepcopy(m)
    cm = ember.compile(c)
    for _ in range(2):
        x = ember.randn(4, 6)
        m(x).backward()
        cm(x).backward()
    for p, q in zip(m.parameters(), c.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
