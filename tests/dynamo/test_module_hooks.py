"""Module hooks under ember.compile: a compiled call runs them as eager does.

Calling a module inlined its ``forward`` and guarded that it had no hooks; a module that had
them when traced (registered before compile, or on a submodule after it) was compiled without
them -- the call that traced it returned the hook-less result, silently -- and recompiled on
every call. A module with hooks now breaks the graph there: ``Module.__call__`` runs the hooks
eagerly and the forward's own frame is compiled."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _data(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _times_ten(mod, inp, out):
    return out * 10


def _zero_input(mod, inp):
    return (inp[0] * 0 + 1,)


def _model():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 2))


def _same(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("where", ["top", "submodule"])
@pytest.mark.parametrize("when", ["before compile", "after compile"])
@pytest.mark.parametrize("kind", ["forward", "pre"])
def test_hooks_run_like_eager(where, when, kind):
    dynamo.reset()
    m = _model()
    target = m if where == "top" else m[0]

    def add():
        if kind == "forward":
            return target.register_forward_hook(_times_ten)
        return target.register_forward_pre_hook(_zero_input)

    handle = add() if when == "before compile" else None
    cm = ember.compile(m)
    x = _data(3, 4)
    _same(cm(x), m(x))
    if handle is None:
        handle = add()
    for seed in (1, 2):
        x = _data(3, 4, seed=seed)
        _same(cm(x), m(x))
    handle.remove()
    _same(cm(x), m(x))                    # and without it again


def test_hook_gradients_match_eager():
    m = _model()
    m[0].register_forward_hook(_times_ten)
    cm = ember.compile(m)
    x, xe = _data(3, 4, seed=5).requires_grad_(), _data(3, 4, seed=5).requires_grad_()
    cm(x).pow(2).sum().backward()
    grads = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    m(xe).pow(2).sum().backward()
    for g, p in zip(grads, m.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
