"""Seed 002 - "How does PyTorch's Autograd work?".

Examples:
1. basic scalar differentiation           -> prints tensor(8.)
2. vector differentiation, two inputs     -> as written, ``z`` is a 3-vector, so
   ``z.backward()`` raises PyTorch's "grad can be implicitly created only for
   scalar outputs"; we check that error, and the gradients the article
   describes via an explicit ``z.backward(torch.ones_like(z))``.
3. custom loss function                   -> gradients checked against numpy
"""

import numpy as np
import pytest

from seedlib import norm, seed_all, to_np


def test_example1_scalar(lib, capsys):
    torch = lib.torch
    x = torch.tensor(2.0, requires_grad=True)
    y = x**2
    z = 2*y + 1

    z.backward()
    print(x.grad)  # Output: tensor(8.)
    assert norm(capsys.readouterr().out) == "tensor(8.)\n"


def test_example2_vector_as_written_raises(lib):
    torch = lib.torch
    seed_all(lib)
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    z = x*y + torch.sum(x)

    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        z.backward()
    # nothing was accumulated by the failed call
    assert x.grad is None and y.grad is None


def test_example2_vector_gradients(lib, capsys):
    torch = lib.torch
    seed_all(lib)
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    z = x*y + torch.sum(x)

    z.backward(torch.ones_like(z))
    print(x.grad)  # Gradient of z w.r.t. x
    print(y.grad)  # Gradient of z w.r.t. y

    xv, yv = to_np(x), to_np(y)
    # d/dx_j sum_i (x_i y_i + sum_k x_k) = y_j + 3 ;  d/dy_j = x_j
    np.testing.assert_allclose(to_np(x.grad), yv + 3.0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_np(y.grad), xv, rtol=0, atol=0)
    out = capsys.readouterr().out
    assert out == f"{x.grad!r}\n{y.grad!r}\n"
    assert out.count("tensor([") == 2


def test_example3_custom_loss(lib, capsys):
    torch = lib.torch
    seed_all(lib)
    x = torch.randn(2, requires_grad=True)
    weights = torch.randn(2, requires_grad=True)

    def custom_loss(x, weights):
        return torch.sum(weights*x**2)

    loss = custom_loss(x, weights)
    loss.backward()

    print(x.grad)
    print(weights.grad)

    xv, wv = to_np(x).astype(np.float64), to_np(weights).astype(np.float64)
    np.testing.assert_allclose(to_np(loss), np.sum(wv * xv**2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(x.grad), 2 * wv * xv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(weights.grad), xv**2, rtol=1e-5, atol=1e-6)
    assert type(loss.grad_fn).__name__ == "SumBackward0"
    assert capsys.readouterr().out == f"{x.grad!r}\n{weights.grad!r}\n"
