"""Indexing with Python lists under ember.compile(fullgraph=True): captured as one graph with the
eager values and gradients (a list index once sent the index check into endless recursion)."""
import numpy as np
import pytest

import ember


@pytest.mark.parametrize("index", [
    lambda x: x[[1, 0, 2]],
    lambda x: x[:, [0, 2]],
    lambda x: x[[0, 2], [1, 1]],
    lambda x: x[[[0, 1], [2, 2]]],
    lambda x: x[..., [2, 0]] * 2,
])
def test_list_indices_compile_as_one_graph(index):
    ember.dynamo.reset()
    x = ember.randn(3, 4, requires_grad=True)
    want = index(x)
    want.sum().backward()
    gx = x.grad.clone()
    x.grad = None
    got = ember.compile(index, fullgraph=True)(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    got.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), gx.numpy(), rtol=1e-6)


def test_bool_list_index_runs_eagerly_with_eager_values():
    """A list of bools is a mask: its result's size depends on the values, so that code runs
    eagerly (a graph break), with eager's result."""
    ember.dynamo.reset()
    x = ember.randn(3, 4)
    f = lambda x: x[[True, False, True]] * 2   # noqa: E731
    np.testing.assert_allclose(ember.compile(f)(x).numpy(), f(x).numpy())
