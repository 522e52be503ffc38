"""The engine adopts an unshared gradient as ``.grad`` instead of copying it (PyTorch's
AccumulateGrad steals one the same way); every case where somebody else can still see the
memory must get a copy, and matrix-product gradients must arrive in the parameter's layout."""
import numpy as np
import pytest

import ember
import ember.nn as nn


def _shares(a, b):
    return np.shares_memory(a._data, b._data)


def test_two_leaves_fed_the_same_gradient_do_not_share_it():
    a = ember.randn(5, requires_grad=True)
    b = ember.randn(5, requires_grad=True)
    (a + b).sum().backward()
    assert not _shares(a.grad, b.grad)
    a.grad.add_(1.0)                      # writing one must leave the other alone
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(5, np.float32))


def test_users_gradient_argument_is_copied():
    x = ember.randn(4, requires_grad=True)
    v = ember.randn(4)
    x.backward(v)
    assert not _shares(x.grad, v)
    x.grad.zero_()
    assert float(v.abs().sum()) > 0


def test_gradient_seen_by_a_hook_is_copied():
    seen = []
    x = ember.randn(3, 3, requires_grad=True)
    x.register_hook(lambda g: seen.append(g))
    (x * 2).sum().backward()
    assert not _shares(x.grad, seen[0])


def test_gradient_also_flowing_to_another_node_is_copied():
    # y = a + c, c = b * 3: AddBackward hands the same tensor to the leaf a and to MulBackward
    a = ember.randn(6, requires_grad=True)
    b = ember.randn(6, requires_grad=True)
    seen = []
    a.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(100.0))
    (a + b * 3).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(6, 100.0, np.float32))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(6, 3.0, np.float32))
    del seen


def test_adopted_gradient_accumulates_in_place_next_time():
    x = ember.randn(8, requires_grad=True)
    (x * 2).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first
    np.testing.assert_array_equal(x.grad.numpy(), np.full(8, 5.0, np.float32))


def test_view_gradients_are_copied():
    # the gradient of x through x.t() is a transposed view; .grad gets x's own layout
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(3, 5)
    (x.t() @ w).sum().backward()
    assert x.grad.is_contiguous()
    np.testing.assert_allclose(x.grad.numpy(), (np.ones((4, 5), np.float32) @ w.numpy().T).T, rtol=1e-6)


@pytest.mark.parametrize("compiled", [False, True])
def test_linear_weight_gradients_have_the_parameters_layout(compiled):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    run = ember.compile(model) if compiled else model
    x = ember.randn(4, 16)
    run(x).pow(2).mean().backward()
    for p in model.parameters():
        assert p.grad.stride() == p.stride(), p.shape


def test_mm_gradient_layouts_follow_the_operands():
    a = ember.randn(6, 4).t().detach().requires_grad_()     # (4, 6), transposed layout
    b = ember.randn(5, 6).t().detach().requires_grad_()     # (6, 5), transposed layout
    g = ember.randn(4, 5)
    (a @ b).backward(g)
    assert a.grad.stride() == a.stride() and b.grad.stride() == b.stride()
    np.testing.assert_allclose(a.grad.numpy(), g.numpy() @ b.detach().numpy().T, rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), a.detach().numpy().T @ g.numpy(), rtol=1e-5)
