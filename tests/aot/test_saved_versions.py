"""Values a compiled graph saves for its backward keep the version counters of the tensors
whose memory they are: an in-place write to a compiled function's output (or input) after the
forward, before the backward, raises like eager instead of differentiating the written values.

Before: the compiled forward returned ``exp(x)`` twice, as the output and as the saved value,
in two tensors with counters of their own; ``y.mul_(2)`` then made the backward read 2 exp(x),
and x.grad came out 4 exp(x) (eager raises: "modified by an inplace operation")."""
import numpy as np
import pytest

import ember


def _exp(x):
    return x.exp()


def _exp_t(x):                 # the output is a view (transpose) of the saved buffer
    return x.exp().t()


def _sigmoid_sum(x, w):        # saves its input w's memory (through a view)
    return (x * w.t()).sigmoid().sum()


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_exp, _exp_t], ids=lambda f: f.__name__)
def test_writing_to_a_saved_output_before_backward_raises(fn, backend):
    for compiled in (False, True):
        f = ember.compile(fn, backend=backend) if compiled else fn
        x = ember.tensor(_data(3, 4), requires_grad=True)
        y = f(x)
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_writing_to_an_input_saved_through_a_view_raises(backend):
    for compiled in (False, True):
        f = ember.compile(_sigmoid_sum, backend=backend) if compiled else _sigmoid_sum
        x = ember.tensor(_data(3, 4, seed=1), requires_grad=True)
        w = ember.tensor(_data(4, 3, seed=2))
        loss = f(x, w)
        w.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_exp, _exp_t], ids=lambda f: f.__name__)
def test_unwritten_outputs_still_differentiate_like_eager(fn, backend):
    """The shared counters change nothing when nothing is written (and a write after the
    backward is allowed)."""
    cf = ember.compile(fn, backend=backend)
    for seed in range(3):
        xs = [ember.tensor(_data(3, 4, seed=seed), requires_grad=True) for _ in range(2)]
        ys = [cf(xs[0]), fn(xs[1])]
        for y in ys:
            (y * y).sum().backward()
            y.detach().mul_(0.0)
        np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-5, atol=1e-6)
