"""Gradients through sparse tensors against torch 2.13: sparse.mm (dense and sparse operand
grads), to_dense, sparse_coo_tensor(indices, values) -> values, sparse.sum, softmax, to_sparse,
elementwise ops, on random tensors with duplicate indices and hybrid layouts."""
from __future__ import annotations

import numpy as np
import pytest

import ember

from ._sparse_helpers import dense_np, ember_coo, np_of, random_coo_arrays, torch_coo

torch = pytest.importorskip("torch")


def _pair(seed, shape, sd=None, dup=True, dt=np.float64, **kw):
    rng = np.random.default_rng(seed)
    idx, vals = random_coo_arrays(rng, shape, sd, duplicates=dup, dtype=dt)
    return ember_coo(idx, vals, shape, **kw), torch_coo(torch, idx, vals, shape, **kw)


def _same_sparse_grad(eg, tg):
    """Same layout, same pattern (PyTorch's coalesced pattern of the input), same values."""
    assert eg is not None and tg is not None
    assert eg.layout is ember.sparse_coo and tg.layout == torch.sparse_coo
    assert eg._nnz() == tg._nnz() and eg.is_coalesced() == tg.is_coalesced()
    ec, tc = eg.coalesce(), tg.coalesce()
    np.testing.assert_array_equal(np_of(ec.indices()), tc.indices().numpy())
    np.testing.assert_allclose(np_of(ec.values()), tc.values().numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dup", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_mm_grads(dup, seed):
    e, t = _pair(seed, (7, 5), dup=dup, requires_grad=True)
    d = np.random.default_rng(seed + 10).standard_normal((5, 4))
    ed, td = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    w = np.random.default_rng(seed + 20).standard_normal((7, 4))
    eo, to = ember.sparse.mm(e, ed), torch.sparse.mm(t, td)
    (eo * ember.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np_of(ed.grad), td.grad.numpy(), rtol=1e-10)
    _same_sparse_grad(e.grad, t.grad)
    assert e.grad.requires_grad is False and e.grad.grad_fn is None


@pytest.mark.parametrize("form", ["mm", "matmul", "at", "method"])
def test_mm_forms_grads(form):
    e, t = _pair(3, (4, 6), requires_grad=True)
    d = np.random.default_rng(4).standard_normal((6, 3))
    ed, td = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    f = {"mm": lambda s, x, m: m.mm(s, x), "matmul": lambda s, x, m: m.matmul(s, x),
         "at": lambda s, x, m: s @ x, "method": lambda s, x, m: s.mm(x)}[form]
    f(e, ed, ember).pow(2).sum().backward()
    f(t, td, torch).pow(2).sum().backward()
    np.testing.assert_allclose(np_of(ed.grad), td.grad.numpy(), rtol=1e-10)
    # torch.mm's MmBackward0 gives the sparse operand a dense gradient (torch.sparse.mm a sparse one)
    assert e.grad.layout is ember.strided and t.grad.layout == torch.strided
    np.testing.assert_allclose(np_of(e.grad), t.grad.numpy(), rtol=1e-10)
    assert e.grad.grad_fn is None


@pytest.mark.parametrize("shape,sd", [((5, 6), None), ((4, 3, 2), 2), ((6, 3), 1)])
def test_to_dense_grad_is_sparse(shape, sd):
    e, t = _pair(5, shape, sd, requires_grad=True)
    w = np.random.default_rng(6).standard_normal(shape)
    (e.to_dense() * ember.tensor(w)).sum().backward()
    (t.to_dense() * torch.tensor(w)).sum().backward()
    _same_sparse_grad(e.grad, t.grad)
    # a second backward accumulates (sparse + sparse)
    (e.to_dense() * ember.tensor(w)).sum().backward()
    (t.to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(dense_np(e.grad), dense_np(t.grad), rtol=1e-10)


def test_values_grad_through_sparse_coo_tensor():
    rng = np.random.default_rng(7)
    idx, vals = random_coo_arrays(rng, (5, 4), duplicates=True)
    ev, tv = ember.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
    es = ember.sparse_coo_tensor(ember.tensor(idx), ev, (5, 4))
    ts = torch.sparse_coo_tensor(torch.tensor(idx), tv, (5, 4))
    assert es.requires_grad and es.grad_fn is not None
    es.to_dense().pow(2).sum().backward()
    ts.to_dense().pow(2).sum().backward()
    np.testing.assert_allclose(np_of(ev.grad), tv.grad.numpy(), rtol=1e-10)
    ev.grad = None
    tv.grad = None
    es = ember.sparse_coo_tensor(ember.tensor(idx), ev, (5, 4))
    ts = torch.sparse_coo_tensor(torch.tensor(idx), tv, (5, 4))
    d = rng.standard_normal((4, 3))
    ember.sparse.mm(es, ember.tensor(d)).sum().backward()
    torch.sparse.mm(ts, torch.tensor(d)).sum().backward()
    np.testing.assert_allclose(np_of(ev.grad), tv.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("dims", [None, 0, 1, (0, 1)])
def test_sparse_sum_grad(dims):
    e, t = _pair(8, (5, 6), requires_grad=True)
    er = ember.sparse.sum(e) if dims is None else ember.sparse.sum(e, dims)
    tr = torch.sparse.sum(t) if dims is None else torch.sparse.sum(t, dims)
    w = np.random.default_rng(9).standard_normal(tuple(tr.shape))
    if tr.layout == torch.strided:
        (er * ember.tensor(w)).sum().backward()
        (tr * torch.tensor(w)).sum().backward()
    else:
        (er.to_dense() * ember.tensor(w)).sum().backward()
        (tr.to_dense() * torch.tensor(w)).sum().backward()
    _same_sparse_grad(e.grad, t.grad)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_grad(fn, dim):
    e, t = _pair(10, (5, 6), requires_grad=True)
    w = np.random.default_rng(11).standard_normal((5, 6))
    (getattr(ember.sparse, fn)(e, dim).to_dense() * ember.tensor(w)).sum().backward()
    (getattr(torch.sparse, fn)(t, dim).to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(dense_np(e.grad), dense_np(t.grad), rtol=1e-8, atol=1e-10)


def test_to_sparse_grad_is_dense():
    x = np.random.default_rng(12).standard_normal((4, 5))
    x[x < 0.2] = 0
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    d = np.random.default_rng(13).standard_normal((5, 2))
    ember.sparse.mm(ex.to_sparse(), ember.tensor(d)).sum().backward()
    torch.sparse.mm(tx.to_sparse(), torch.tensor(d)).sum().backward()
    assert ex.grad.layout is ember.strided
    np.testing.assert_allclose(np_of(ex.grad), tx.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("op", ["mul_scalar", "neg", "add", "dense_add", "mul_dense", "abs_", "sub"])
def test_elementwise_grads(op):
    e, t = _pair(14, (5, 4), requires_grad=True)
    e2, t2 = _pair(15, (5, 4), requires_grad=True)
    d = np.random.default_rng(16).standard_normal((5, 4))
    ed, td = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    f = {"mul_scalar": lambda s, s2, x: (s * 3).to_dense(), "neg": lambda s, s2, x: (-s).to_dense(),
         "add": lambda s, s2, x: (s + s2).to_dense(), "dense_add": lambda s, s2, x: x + s,
         "mul_dense": lambda s, s2, x: (s * x).to_dense(), "abs_": lambda s, s2, x: s.abs().to_dense(),
         "sub": lambda s, s2, x: x - s2 - s}[op]
    w = np.random.default_rng(17).standard_normal((5, 4))
    (f(e, e2, ed) * ember.tensor(w)).sum().backward()
    (f(t, t2, td) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(dense_np(e.grad), dense_np(t.grad), rtol=1e-8)
    for a, b in ((e2, t2), (ed, td)):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(dense_np(a.grad), dense_np(b.grad), rtol=1e-8)


def test_dense_and_sparse_grads_accumulate_to_dense():
    """A leaf reached by a sparse and a dense gradient ends with their (dense) sum, as torch."""
    x = np.random.default_rng(18).standard_normal((4, 4))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    es, ts = _pair(19, (4, 4))
    for X, S, m in ((ex, es, ember), (tx, ts, torch)):
        y = (X * 2).sum() + m.sparse.sum(S * X)
        y.backward()
    np.testing.assert_allclose(dense_np(ex.grad), dense_np(tx.grad), rtol=1e-10)


def test_float32_grads():
    e, t = _pair(20, (6, 6), dt=np.float32, requires_grad=True)
    d = np.random.default_rng(21).standard_normal((6, 2)).astype(np.float32)
    ed, td = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    ember.sparse.mm(e, ed).sum().backward()
    torch.sparse.mm(t, td).sum().backward()
    assert e.grad.dtype is ember.float32 and ed.grad.dtype is ember.float32
    np.testing.assert_allclose(np_of(ed.grad), td.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(dense_np(e.grad), dense_np(t.grad), rtol=1e-5)


def test_zero_preserving_unary_grad():
    """(PyTorch has no derivative of sin for sparse inputs; ember's is the dense one, masked.)"""
    e, t = _pair(22, (5, 4), requires_grad=True)
    w = np.random.default_rng(23).standard_normal((5, 4))
    (e.sin().to_dense() * ember.tensor(w)).sum().backward()
    x = t.detach().to_dense().numpy()
    mask = x != 0
    np.testing.assert_allclose(dense_np(e.grad), np.where(mask, w * np.cos(x), 0), rtol=1e-10)
    assert e.grad.layout is ember.sparse_coo


def test_backward_twice_through_values():
    """The sparse-from-values node saves no tensors, so a second backward through it works
    (PyTorch's SparseCooTensorWithDimsAndTensorsBackward0 raises there: it frees its indices)."""
    rng = np.random.default_rng(24)
    idx, vals = random_coo_arrays(rng, (3, 3))
    ev = ember.tensor(vals, requires_grad=True)
    es = ember.sparse_coo_tensor(ember.tensor(idx), ev, (3, 3))
    es.to_dense().sum().backward()
    es.to_dense().sum().backward()
    np.testing.assert_allclose(np_of(ev.grad), 2 * np.ones_like(vals))


@pytest.mark.parametrize("coalesced", [False, True])
@pytest.mark.parametrize("op", ["mm", "to_dense", "sum", "sum1", "mul", "softmax"])
def test_sparse_grad_pattern_and_flag(op, coalesced):
    """The gradient of a sparse leaf has the coalesced pattern of the input; PyTorch marks it
    coalesced only for the full sparse.sum."""
    grads = []
    for m in (ember, torch):
        rng = np.random.default_rng(30)
        idx, vals = random_coo_arrays(rng, (4, 5), duplicates=True)
        S = (ember_coo if m is ember else lambda *a: torch_coo(torch, *a))(idx, vals, (4, 5))
        if coalesced:
            S = S.coalesce()
        S.requires_grad_()
        f = {"mm": lambda S: m.sparse.mm(S, m.ones(5, 2, dtype=m.float64)).sum(),
             "to_dense": lambda S: S.to_dense().sum(), "sum": lambda S: m.sparse.sum(S),
             "sum1": lambda S: m.sparse.sum(S, 1).to_dense().sum(), "mul": lambda S: (S * 2).to_dense().sum(),
             "softmax": lambda S: (m.sparse.softmax(S, 1).to_dense() * m.arange(5.0, dtype=m.float64)).sum()}[op]
        f(S).backward()
        grads.append(S.grad)
    _same_sparse_grad(*grads)


def test_dense_grads_of_a_sparse_leaf_accumulate():
    """torch.mm gives a sparse leaf dense gradients; two backward passes add them (as torch)."""
    grads = []
    for m in (ember, torch):
        rng = np.random.default_rng(31)
        idx, vals = random_coo_arrays(rng, (3, 4))
        S = (ember_coo if m is ember else lambda *a: torch_coo(torch, *a))(idx, vals, (3, 4))
        S.requires_grad_()
        d = m.tensor(np.random.default_rng(32).standard_normal((4, 2)))
        for _ in range(2):
            m.mm(S, d).sum().backward()
        (S.to_dense() * 3).sum().backward()      # and a sparse one on top
        grads.append(S.grad)
    assert grads[0].layout is ember.strided and grads[1].layout == torch.strided
    np.testing.assert_allclose(np_of(grads[0]), grads[1].numpy(), rtol=1e-12)
