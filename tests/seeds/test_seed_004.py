"""Seed 004 - "PyTorch Internals: Autograd, Dispatch, and Runtime".

The article has no code examples; these tests check its concrete claims:
the four steps of ``loss.backward()``, custom gradients through
``torch.autograd.Function``, one API mapping to per-dtype/per-device kernels,
host-side reads, and eager vs compiled mode giving the same results.
"""

import numpy as np
import pytest

from seedlib import require_compile, seed_all, to_np


def test_backward_four_steps(lib):
    torch = lib.torch
    seed_all(lib)
    w = torch.randn(3, requires_grad=True)
    b = torch.randn(1, requires_grad=True)
    x = torch.randn(5, 3)
    order = []
    loss = ((x @ w + b) ** 2).mean()
    # 1. gradients are seeded at the loss tensor (implicitly 1.0)
    # 2. the graph is traversed in reverse topological order
    for node in (loss.grad_fn, loss.grad_fn.next_functions[0][0]):
        node.register_hook(lambda gi, go, _n=type(node).__name__: order.append(_n))
    loss.backward()
    assert order == ["MeanBackward0", "PowBackward0"]
    # 3. each node applies its local rule; 4. leaves accumulate into .grad
    xv, wv, bv = (to_np(t).astype(np.float64) for t in (x, w, b))
    r = xv @ wv + bv
    np.testing.assert_allclose(to_np(w.grad), 2 * r @ xv / 5, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(to_np(b.grad), [2 * r.sum() / 5], rtol=1e-4, atol=1e-6)
    loss2 = ((x @ w + b) ** 2).mean()
    loss2.backward()
    np.testing.assert_allclose(to_np(w.grad), 4 * r @ xv / 5, rtol=1e-4, atol=1e-6)


def test_custom_gradient_function(lib):
    torch = lib.torch

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    Square.apply(x).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), [2.0, -4.0, 1.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_one_api_many_kernels(lib, dtype):
    """The same ``torch.matmul`` serves every dtype (the dispatcher picks the kernel)."""
    torch = lib.torch
    rng = np.random.default_rng()
    a = rng.integers(-5, 5, size=(3, 4))
    b = rng.integers(-5, 5, size=(4, 2))
    ta = torch.tensor(a.tolist(), dtype=getattr(torch, dtype))
    tb = torch.tensor(b.tolist(), dtype=getattr(torch, dtype))
    out = torch.matmul(ta, tb)
    assert out.dtype == getattr(torch, dtype)
    np.testing.assert_array_equal(to_np(out), a @ b)


def test_host_side_reads(lib):
    """'.item()' / '.tolist()' read tensor values on the host."""
    torch = lib.torch
    t = torch.tensor([1.5, 2.5])
    assert t.sum().item() == 4.0
    assert isinstance(t.sum().item(), float)
    assert t.tolist() == [1.5, 2.5]


def test_cuda_is_asynchronous_but_results_match(lib):
    torch = lib.torch
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available():
        pytest.skip("needs a CUDA device (asynchronous execution + synchronize)")
    x = torch.randn(256, 256)
    y = x.to("cuda")
    z = y @ y
    torch.cuda.synchronize()
    np.testing.assert_allclose(to_np(z.cpu()), to_np(x @ x), rtol=1e-3, atol=1e-3)


def test_eager_vs_compiled(lib):
    require_compile(lib)
    """'In compiled mode (torch.compile) portions of the program may be captured
    and optimized as graphs' - with the same results as eager."""
    torch = lib.torch
    seed_all(lib)

    def f(x, y):
        a = torch.sin(x) + y
        if a.sum() > 0:  # data-dependent branch: a graph break
            a = a * 2
        return torch.relu(a).sum(dim=0)

    cf = torch.compile(f)
    for _ in range(3):
        x, y = torch.randn(4, 5), torch.randn(4, 5)
        np.testing.assert_allclose(to_np(cf(x, y)), to_np(f(x, y)), rtol=1e-5, atol=1e-6)
