"""``ember.compile(F.gelu)``: one of ember's own functions compiled directly is one graph (the
call recorded as one operator, as torch.compile(F.gelu)); its own frame was traced, and its
internal helpers broke the graph."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dynamo


@pytest.mark.parametrize("fn,kwargs", [(F.gelu, {}), (F.gelu, {"approximate": "tanh"}), (F.silu, {}),
                                       (ember.sin, {}), (F.softmax, {"dim": -1})])
def test_ember_function_compiled_directly_is_one_graph(fn, kwargs):
    dynamo.reset()
    x = ember.randn(4, 5)
    c = ember.compile(fn)
    got = c(x, **kwargs)
    np.testing.assert_allclose(got.numpy(), fn(x, **kwargs).numpy(), rtol=1e-6, atol=1e-7)
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["compiled"] == 1, dict(dynamo.counters)
    assert c.__name__ == fn.__name__


def test_gradients_through_a_directly_compiled_function():
    dynamo.reset()
    x = ember.randn(3, 4)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    F.gelu(xe).pow(2).sum().backward()
    ember.compile(F.gelu)(xc).pow(2).sum().backward()
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_ember_modules_and_user_functions_are_compiled_as_before():
    dynamo.reset()
    m = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.GELU())
    c = ember.compile(m)
    assert isinstance(c, ember.nn.Module)
    x = ember.randn(2, 4)
    np.testing.assert_allclose(c(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6, atol=1e-7)
    assert dynamo.counters["graph_breaks"] == 0
