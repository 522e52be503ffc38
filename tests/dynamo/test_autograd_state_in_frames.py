"""Autograd state changed inside a compiled frame, and backward called from one.

A compiled graph is functional: it cannot create a leaf of the caller's autograd graph
(``ember.ones(3, requires_grad=True)``, ``x.detach().requires_grad_()``) or flip an input's
``requires_grad``; traced, the flag was lost (the result had no grad_fn, the input's flag stayed
False: silent). Those calls break the graph and run eagerly. And a whole training step
compiled at once (forward, ``loss.backward()``, ``opt.step()``): the backward runs at a graph
break with the frame hook on, and the hook traced the compiled backward's own wrapper as user
code (an IndexError from its buffer pool)."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _data(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _detached_leaf(x):
    x = x.detach().requires_grad_()
    return (x * x).sum(), x


def _flag_on_input(x):
    x.requires_grad_(True)
    return (x * x).sum()


def _new_leaf(x):
    w = ember.ones(3, requires_grad=True)
    return (x * w).sum(), w


def _new_leaf_from_data(x):
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return (x * w).sum(), w


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_leaf_made_inside_the_frame_gets_its_gradient(backend):
    for fn in (_detached_leaf, _new_leaf, _new_leaf_from_data):
        got = ember.compile(fn, backend=backend)(_data(3))
        want = fn(_data(3))
        for (y, leaf) in (got, want):
            assert y.requires_grad and leaf.requires_grad and leaf.is_leaf
            y.backward()
        np.testing.assert_allclose(got[1].grad.numpy(), want[1].grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_requires_grad_set_on_an_input_inside_the_frame(backend):
    x, xe = _data(3, seed=1), _data(3, seed=1)
    y = ember.compile(_flag_on_input, backend=backend)(x)
    ye = _flag_on_input(xe)
    assert x.requires_grad and y.requires_grad
    y.backward()
    ye.backward()
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def test_autograd_state_calls_are_graph_breaks():
    dynamo.reset()
    ember.compile(_flag_on_input, backend="aot_eager")(_data(3))
    assert any("requires_grad_" in why for _, why in dynamo.fallback_reasons)


def _model_and_opt():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                            ember.nn.Linear(16, 1))
    return m, ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_whole_training_step_compiled_matches_eager(backend):
    runs = []
    for compiled in (False, True):
        m, opt = _model_and_opt()

        def step(x):
            loss = m(x).pow(2).mean()
            loss.backward()
            ember.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
            opt.step()
            opt.zero_grad()
            return loss

        dynamo.reset()
        f = ember.compile(step, backend=backend) if compiled else step
        losses = [f(_data(4, 8, seed=10 + i)).item() for i in range(4)]
        runs.append((losses, [p.detach().numpy().copy() for p in m.parameters()]))
        if compiled:    # one break, at backward(); clipping, step and zero_grad compile
            assert [why for _, why in dynamo.fallback_reasons if "backward" not in why] == []
    (le, pe), (lc, pc) = runs
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_compiled_backward_wrapper_is_not_traced():
    dynamo.reset()
    m, opt = _model_and_opt()

    @ember.compile
    def step(x):
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss

    step(_data(4, 8))
    traced = [where for where, _ in dynamo.fallback_reasons]
    assert not any("wrapper" in w or w.startswith("call ") for w in traced), traced


def _reassign_grads(p, g):
    p.grad = g * 2
    q = p.grad + 1                  # reads the value written above
    p.grad = None
    return q, p.grad is None


def test_grad_assignment_is_replayed_and_seen_by_later_reads():
    dynamo.reset()
    p, g = _data(3, seed=3).requires_grad_(), _data(3, seed=4)
    q, none = ember.compile(_reassign_grads, backend="aot_eager")(p, g)
    np.testing.assert_allclose(q.numpy(), (g * 2 + 1).numpy(), rtol=1e-6)
    assert none is True and p.grad is None
    assert not dynamo.fallback_reasons

    def wrong_size(p, g):
        p.grad = g
        return g.sum()
    with pytest.raises(RuntimeError, match="different size"):
        ember.compile(wrong_size, backend="aot_eager")(_data(3).requires_grad_(), _data(4))


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_compiles_without_a_break(set_to_none):
    dynamo.reset()
    m, opt = _model_and_opt()
    m(_data(4, 8)).sum().backward()
    ember.compile(lambda: opt.zero_grad(set_to_none=set_to_none), backend="aot_eager")()
    assert not dynamo.fallback_reasons, dynamo.fallback_reasons
    for p in m.parameters():
        assert (p.grad is None) if set_to_none else not p.grad.numpy().any()


def _grad_inside(x, w):
    a = x * w                       # under the caller's no_grad: no grad
    with ember.enable_grad():
        b = (x * w).sin()           # grad on here
    return a, b


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_enable_grad_inside_a_frame_called_under_no_grad(backend):
    """The aot layer picked its inference graph from the grad mode at the call (off) and the
    ops under enable_grad() lost their grad_fn, silently."""
    cf = ember.compile(_grad_inside, backend=backend)
    x = _data(3, seed=6)
    runs = []
    for f in (cf, _grad_inside):
        w = _data(3, seed=7).requires_grad_()
        with ember.no_grad():
            a, b = f(x, w)
        assert not a.requires_grad and b.requires_grad
        b.sum().backward()
        runs.append((a.numpy(), b.detach().numpy(), w.grad.numpy()))
    for got, want in zip(*runs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
