"""bfloat16 through kernels that used ``dtype.kind == 'f'`` (ml_dtypes' bfloat16
has kind 'V') or numpy's matmul (which returns float32 for bfloat16), and the
double backward of binary_cross_entropy. Values against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from oracle import needs_torch, to_torch, torch

pytestmark = needs_torch


def _bf16(*shape):
    return ember.randn(*shape).to(ember.bfloat16)


def _close(a, t, tol=2e-2):
    assert a.dtype is ember.bfloat16
    assert str(t.dtype) == "torch.bfloat16"
    np.testing.assert_allclose(a.float().numpy(), t.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["mm", "bmm", "mv", "matmul"])
def test_matmul_family_keeps_bfloat16(name):
    a, b = _bf16(3, 4, 5), _bf16(3, 5, 6)
    args = {"mm": (a[0], b[0]), "bmm": (a, b), "mv": (a[0], b[0, :, 0]), "matmul": (a, b[0])}[name]
    out = getattr(ember, name)(*args)
    ref = getattr(torch, name)(*[to_torch(x) for x in args])
    _close(out, ref)


@pytest.mark.parametrize("fn", ["max_pool2d", "avg_pool2d", "conv2d"])
def test_pool_and_conv_accept_bfloat16(fn):
    x = _bf16(2, 3, 8, 8)
    if fn == "conv2d":
        w = _bf16(4, 3, 3, 3)
        out, ref = F.conv2d(x, w, padding=1), torch.nn.functional.conv2d(to_torch(x), to_torch(w), padding=1)
    else:
        out, ref = getattr(F, fn)(x, 2), getattr(torch.nn.functional, fn)(to_torch(x), 2)
    _close(out, ref, tol=5e-2)


@pytest.mark.parametrize("reduce", ["mean", "amax", "amin", "sum"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_bfloat16(reduce, include_self):
    src = _bf16(7)
    idx = ember.randint(0, 3, (7,))
    base = _bf16(3)
    out = base.scatter_reduce(0, idx, src, reduce, include_self=include_self)
    ref = to_torch(base).scatter_reduce(0, to_torch(idx), to_torch(src), reduce, include_self=include_self)
    _close(out, ref)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_double_backward(reduction, weighted):
    x = (ember.rand(6, dtype=ember.float64) * 0.8 + 0.1).requires_grad_()
    y = ember.rand(6, dtype=ember.float64).requires_grad_()
    w = ember.rand(6, dtype=ember.float64) + 0.5 if weighted else None

    def loss(x, y):
        out = F.binary_cross_entropy(x, y, weight=w, reduction=reduction)
        return out if reduction != "none" else out.sum()
    assert ember.autograd.gradgradcheck(loss, (x, y))
    gx, gy = ember.autograd.grad(loss(x, y), (x, y), create_graph=True)
    h = ember.autograd.grad((gx * gx).sum() + (gx * gy).sum(), (x, y))
    tx, ty = to_torch(x, True), to_torch(y, True)
    tl = torch.nn.functional.binary_cross_entropy(tx, ty, weight=None if w is None else to_torch(w),
                                                  reduction=reduction)
    tl = tl if reduction != "none" else tl.sum()
    tgx, tgy = torch.autograd.grad(tl, (tx, ty), create_graph=True)
    th = torch.autograd.grad((tgx * tgx).sum() + (tgx * tgy).sum(), (tx, ty))
    for a, b in zip(h, th):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-8, atol=1e-10)
