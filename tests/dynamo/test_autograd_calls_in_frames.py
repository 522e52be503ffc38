"""ember.autograd.grad / backward called inside a compiled function: a graph break, as in
PyTorch; with create_graph=True the result is differentiable again (gradient penalties).

Before: dynamo recorded autograd.grad as one graph node and aot's trace of it raised "element 0
of tensors does not require grad"; create_graph=True at a break recursed without end (the eager
double backward re-ran the graph module with the frame hook on, which compiled it again)."""
from __future__ import annotations

import numpy as np
import pytest

import ember


def _grad_only(x):
    return ember.autograd.grad((x ** 3).sum(), x)[0]


def _with_create_graph(x):
    return ember.autograd.grad((x ** 3).sum(), x, create_graph=True)[0]


def _double(x):
    g, = ember.autograd.grad((x ** 3).sum(), x, create_graph=True)
    return ember.autograd.grad(g.sum(), x)[0]


def _penalty(x):
    g, = ember.autograd.grad((x ** 2).sum(), x, create_graph=True)
    return (x.sin() * 2).sum() + g.norm()


def _functional_backward(x):
    ember.autograd.backward([(x ** 3).sum()])
    return x.grad * 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_grad_only, _with_create_graph, _double, _penalty, _functional_backward])
def test_autograd_calls_in_a_compiled_function_match_eager(fn, backend):
    a = np.random.default_rng(0).standard_normal(5).astype(np.float32)
    xe, xc = ember.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    want = fn(xe)
    got = ember.compile(fn, backend=backend)(xc)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert got.requires_grad == want.requires_grad
    if want.requires_grad:                  # differentiable once more, with the same gradient
        xe.grad = xc.grad = None
        gw, = ember.autograd.grad(want.sum(), xe)
        gc, = ember.autograd.grad(got.sum(), xc)
        np.testing.assert_allclose(gc.numpy(), gw.numpy(), rtol=1e-5, atol=1e-6)
