"""An input that does not require grad, written in place by the graph with values that do,
gets the graph's autograd history (as an eager in-place op gives it): gradients flow through it."""
import numpy as np
import pytest

import ember


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_index_add_into_plain_input_keeps_history(backend):
    lin = ember.nn.Linear(3, 3)
    x = ember.randn(5, 3)
    idx = ember.tensor([0, 2, 1, 2, 0])

    def f(out, x):
        out.index_add_(0, idx, lin(x))
        return out * 2

    def run(fn):
        out = ember.randn(3, 3)
        r = fn(out, x)
        assert out.requires_grad and out.grad_fn is not None
        (r.pow(2).sum() + out.sum()).backward()
        g = lin.weight.grad.clone(), lin.bias.grad.clone()
        lin.zero_grad(set_to_none=True)
        return r, out, g

    ember.manual_seed(3)
    r, out, g = run(f)
    ember.compiler.reset()
    ember.manual_seed(3)
    r2, out2, g2 = run(ember.compile(f, backend=backend))
    assert type(out2.grad_fn).__name__ == "CopyBackwards"
    np.testing.assert_allclose(r2.detach().numpy(), r.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out2.detach().numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(g, g2):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-5)


def test_mutation_only_graph_returns_nothing():
    """The graph's only effect is the in-place update: the input still gets a grad_fn."""
    w = ember.randn(3, requires_grad=True)

    def f(out, x):
        out.add_(x * w)

    ember.compiler.reset()
    out = ember.zeros(2, 3)
    x = ember.randn(2, 3)
    ember.compile(f, backend="aot_eager")(out, x)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.sum(0).numpy(), rtol=1e-6)
