"""Seed 001 - "PyTorch Internals: Autograd Engine, Graphs, and Performance".

The article has a single code example, ``compiled_model = torch.compile(model)``;
the rest is prose. We run that example on a small model, plus the concrete,
CPU-checkable claims the prose makes about eager PyTorch (ephemeral graph,
define-by-run control flow, custom Functions, gradient checkpointing,
zero_grad, no_grad, DataLoader, dispatch on dtype/device).

Not run (the article has no code for them): TorchScript (torch.jit.trace/script), CUDA AMP,
quantization, torch.profiler, TorchServe/ONNX/mobile.
"""

import warnings

import numpy as np
import pytest

from seedlib import require_compile, seed_all, to_np


def _model(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_torch_compile_example(lib):
    require_compile(lib)
    torch = lib.torch
    seed_all(lib)
    model = _model(lib)
    x = torch.randn(5, 8)

    compiled_model = torch.compile(model)

    # "preserving the dynamic eager behavior": same values, same gradients
    eager_out = model(x)
    out = compiled_model(x)
    np.testing.assert_allclose(to_np(out), to_np(eager_out), rtol=1e-5, atol=1e-6)

    out.sum().backward()
    compiled_grads = [to_np(p.grad).copy() for p in model.parameters()]
    model.zero_grad()
    eager_out.sum().backward()
    for got, want in zip(compiled_grads, (to_np(p.grad) for p in model.parameters())):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    # a second call with a new batch size still matches eager
    x2 = torch.randn(3, 8)
    np.testing.assert_allclose(to_np(compiled_model(x2)), to_np(model(x2)), rtol=1e-5, atol=1e-6)


def test_graph_is_discarded_after_backward(lib):
    """'the gradient graph is discarded after the backward pass'"""
    torch = lib.torch
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_graph_rebuilt_each_iteration_with_python_control_flow(lib):
    """define-by-run: standard Python control flow picks the graph per iteration"""
    torch = lib.torch
    w = torch.tensor(3.0, requires_grad=True)
    grads = []
    for step in range(4):
        out = w * w if step % 2 == 0 else w * 5
        out.backward()
        grads.append(w.grad.item())
        w.grad = None
    assert grads == [6.0, 5.0, 6.0, 5.0]


def test_custom_backward_via_autograd_function(lib):
    """'Developers can also create custom backward functions by subclassing
    torch.autograd.Function'"""
    torch = lib.torch

    class ClippedIdentity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clamp(-0.5, 0.5)

    x = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)
    (ClippedIdentity.apply(x) * torch.tensor([0.1, -3.0, 1.0])).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), [0.1, -0.5, 0.5], rtol=1e-6)


def test_reverse_mode_is_vjp_without_jacobian(lib):
    """backward with a vector computes v^T J (checked against the explicit Jacobian)"""
    torch = lib.torch
    seed_all(lib)
    A = torch.randn(4, 3)
    x = torch.randn(3, requires_grad=True)
    v = torch.randn(4)
    y = torch.tanh(A @ x)
    y.backward(v)
    Av, xv, vv = (to_np(t).astype(np.float64) for t in (A, x, v))
    J = (1 - np.tanh(Av @ xv) ** 2)[:, None] * Av
    np.testing.assert_allclose(to_np(x.grad), vv @ J, rtol=1e-4, atol=1e-6)


def test_gradient_checkpointing_matches(lib):
    """'gradient checkpointing (torch.utils.checkpoint) trades compute for memory'"""
    torch = lib.torch
    checkpoint = lib.mod("utils.checkpoint").checkpoint
    seed_all(lib)
    block = _model(lib)
    x = torch.randn(6, 8, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = checkpoint(block, x, use_reentrant=False)
    out.pow(2).sum().backward()
    got = [to_np(p.grad).copy() for p in block.parameters()] + [to_np(x.grad).copy()]
    block.zero_grad()
    x.grad = None
    ref = block(x)
    np.testing.assert_allclose(to_np(out), to_np(ref), rtol=1e-6, atol=1e-6)
    ref.pow(2).sum().backward()
    want = [to_np(p.grad) for p in block.parameters()] + [to_np(x.grad)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_zero_grad_prevents_accumulation(lib):
    """'be sure to zero out gradients (optimizer.zero_grad()) to prevent
    accumulation from multiple passes'"""
    torch = lib.torch
    nn = lib.nn
    seed_all(lib)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    model(x).sum().backward()
    g1 = to_np(model.weight.grad).copy()
    model(x).sum().backward()
    np.testing.assert_allclose(to_np(model.weight.grad), 2 * g1, rtol=1e-6)
    opt.zero_grad()
    model(x).sum().backward()
    np.testing.assert_allclose(to_np(model.weight.grad), g1, rtol=1e-6)


def test_no_grad_builds_no_graph(lib):
    torch = lib.torch
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert (x * 2).grad_fn is not None


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_batches(lib, workers):
    """'Use torch.utils.data.DataLoader with multiple workers and pinned memory (pin_memory=True)'
    - batching over a TensorDataset, in the main process and in two worker processes; without
    an accelerator both libraries warn that pinned memory is not used and batch as usual."""
    torch = lib.torch
    data = lib.mod("utils.data")
    xs = torch.arange(10).float()
    ys = torch.arange(10) * 2
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found"):
        loader = data.DataLoader(data.TensorDataset(xs, ys), batch_size=4, shuffle=False, num_workers=workers,
                                 pin_memory=True)
        batches = [(to_np(a).tolist(), to_np(b).tolist()) for a, b in loader]
    assert batches == [([0.0, 1.0, 2.0, 3.0], [0, 2, 4, 6]),
                       ([4.0, 5.0, 6.0, 7.0], [8, 10, 12, 14]),
                       ([8.0, 9.0], [16, 18])]


def test_dispatch_by_dtype(lib):
    """'dispatches based on the device ... and then on the data type'"""
    torch = lib.torch
    a = torch.tensor([[1, 2], [3, 4]])
    assert torch.matmul(a, a).dtype == torch.int64
    assert to_np(torch.matmul(a, a)).tolist() == [[7, 10], [15, 22]]
    b = a.double()
    assert torch.matmul(b, b).dtype == torch.float64
    assert (a + 0.5).dtype == torch.float32  # int tensor + Python float -> default float
    assert a.device.type == "cpu"


def test_move_to_cuda(lib):
    torch = lib.torch
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available():
        pytest.skip("needs a CUDA device ('.to(\"cuda\")' performance tip)")
    x = torch.randn(64, 64)
    y = x.to("cuda")
    assert y.device.type == "cuda"
    np.testing.assert_allclose(to_np((y @ y).cpu()), to_np(x @ x), rtol=1e-4, atol=1e-4)
