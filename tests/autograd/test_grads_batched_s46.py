"""``ember.autograd.grad(..., is_grads_batched=True)``: a batch of vector-Jacobian products.

The flag was accepted and ignored: the batched grad_outputs met the unbatched outputs and the
call raised "Mismatch in shape". Checked against PyTorch and against one unbatched ``grad`` per
batch entry (float64), with create_graph (a second derivative through the batched result).
"""
import numpy as np
import pytest

import ember


def _data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _f(lib, x, w):
    return (x @ w).tanh(), (x * x).sum(-1)


def test_matches_unbatched_grads_and_torch():
    xn, wn = _data(0, 3, 4), _data(1, 4, 5)
    g1, g2 = _data(2, 6, 3, 5), _data(3, 6, 3)
    x = ember.tensor(xn, requires_grad=True)
    w = ember.tensor(wn, requires_grad=True)
    ys = _f(ember, x, w)
    gx, gw = ember.autograd.grad(ys, (x, w), (ember.tensor(g1), ember.tensor(g2)), is_grads_batched=True)
    assert gx.shape == (6, 3, 4) and gw.shape == (6, 4, 5)
    for b in range(6):
        ex, ew = ember.autograd.grad(_f(ember, x, w), (x, w), (ember.tensor(g1[b]), ember.tensor(g2[b])))
        np.testing.assert_allclose(gx[b].numpy(), ex.numpy(), rtol=1e-12)
        np.testing.assert_allclose(gw[b].numpy(), ew.numpy(), rtol=1e-12)
    torch = pytest.importorskip("torch")
    xt = torch.tensor(xn, requires_grad=True)
    wt = torch.tensor(wn, requires_grad=True)
    tx, tw = torch.autograd.grad(_f(torch, xt, wt), (xt, wt), (torch.tensor(g1), torch.tensor(g2)),
                                 is_grads_batched=True)
    np.testing.assert_allclose(gx.numpy(), tx.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gw.numpy(), tw.numpy(), rtol=1e-10)


def test_jacobian_rows_and_second_derivative():
    xn = _data(4, 5)
    x = ember.tensor(xn, requires_grad=True)
    y = x.sin() * x
    (jac,) = ember.autograd.grad(y, x, ember.eye(5, dtype=ember.float64), is_grads_batched=True,
                                 create_graph=True)
    np.testing.assert_allclose(jac.detach().numpy(), np.diag(np.cos(xn) * xn + np.sin(xn)), rtol=1e-12)
    (h,) = ember.autograd.grad(jac.diagonal().sum(), x)      # d/dx of the diagonal
    np.testing.assert_allclose(h.numpy(), -np.sin(xn) * xn + 2 * np.cos(xn), rtol=1e-12)


def test_unused_input_and_retain_graph():
    x = ember.tensor(_data(5, 3), requires_grad=True)
    z = ember.tensor(_data(6, 3), requires_grad=True)
    y = x.exp()
    gx, gz = ember.autograd.grad(y, (x, z), ember.tensor(_data(7, 2, 3)), is_grads_batched=True,
                                 allow_unused=True)
    assert gz is None and gx.shape == (2, 3)
    with pytest.raises(RuntimeError):          # the graph was freed by the last entry
        ember.autograd.grad(y, x, ember.ones(3, dtype=ember.float64))
    y = x.exp()
    _, gz = ember.autograd.grad(y, (x, z), ember.tensor(_data(8, 2, 3)), is_grads_batched=True,
                                materialize_grads=True)
    assert gz.shape == (2, 3) and not gz.numpy().any()


def test_bad_grad_outputs_name_the_problem():
    x = ember.tensor(_data(9, 3), requires_grad=True)
    y = x * 2, x.sum()
    with pytest.raises(RuntimeError, match="same batch size"):
        ember.autograd.grad(y, x, (ember.ones(2, 3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)),
                            is_grads_batched=True)
    with pytest.raises(RuntimeError, match="needs a tensor grad_output"):
        ember.autograd.grad(x * 2, x, None, is_grads_batched=True)
