"""nn.Embedding(sparse=True) / F.embedding(sparse=True) sparse gradients and optim.SparseAdam,
against torch 2.13."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

from ._sparse_helpers import dense_np, np_of

torch = pytest.importorskip("torch")


def _models(num, dim, seed, **kw):
    w = np.random.default_rng(seed).standard_normal((num, dim)).astype(np.float32)
    e = ember.nn.Embedding(num, dim, sparse=True, **kw)
    t = torch.nn.Embedding(num, dim, sparse=True, **kw)
    with ember.no_grad():
        e.weight.copy_(ember.tensor(w))
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w))
    return e, t


@pytest.mark.parametrize("padding_idx", [None, 0, 3])
def test_embedding_sparse_grad(padding_idx):
    e, t = _models(6, 4, 0, padding_idx=padding_idx)
    idx = np.array([[1, 3, 1], [0, 5, 3]])
    w = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    (e(ember.tensor(idx)) * ember.tensor(w)).sum().backward()
    (t(torch.from_numpy(idx)) * torch.from_numpy(w)).sum().backward()
    eg, tg = e.weight.grad, t.weight.grad
    assert eg.layout is ember.sparse_coo and tg.layout == torch.sparse_coo
    assert repr(eg) == repr(tg).replace("torch.", "ember.")
    assert eg.is_coalesced() == tg.is_coalesced()


def test_functional_embedding_sparse_and_errors():
    w = np.random.default_rng(2).standard_normal((5, 3))
    ew, tw = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    EF.embedding(ember.tensor([4, 0, 4]), ew, sparse=True).pow(2).sum().backward()
    torch.nn.functional.embedding(torch.tensor([4, 0, 4]), tw, sparse=True).pow(2).sum().backward()
    np.testing.assert_allclose(dense_np(ew.grad), tw.grad.to_dense().numpy(), rtol=1e-12)
    ew2, tw2 = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    with pytest.raises(RuntimeError) as te:
        torch.nn.functional.embedding(torch.tensor([1]), tw2, sparse=True, scale_grad_by_freq=True).sum().backward()
    with pytest.raises(RuntimeError) as ee:
        EF.embedding(ember.tensor([1]), ew2, sparse=True, scale_grad_by_freq=True).sum().backward()
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_matches_torch(maximize):
    e, t = _models(8, 3, 3)
    eo = ember.optim.SparseAdam(e.parameters(), lr=0.05, betas=(0.8, 0.95), maximize=maximize)
    to = torch.optim.SparseAdam(t.parameters(), lr=0.05, betas=(0.8, 0.95), maximize=maximize)
    rng = np.random.default_rng(4)
    for _ in range(5):
        idx = rng.integers(0, 8, size=(4, 2))
        tgt = rng.standard_normal((4, 2, 3)).astype(np.float32)
        for m, opt, mod in ((e, eo, ember), (t, to, torch)):
            opt.zero_grad()
            x = mod.tensor(idx)
            ((m(x) - mod.tensor(tgt)) ** 2).mean().backward()
            opt.step()
        np.testing.assert_allclose(np_of(e.weight), t.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    st_e, st_t = eo.state[e.weight], to.state[t.weight]
    assert st_e["step"] == st_t["step"]
    np.testing.assert_allclose(np_of(st_e["exp_avg_sq"]), st_t["exp_avg_sq"].numpy(), rtol=1e-5, atol=1e-8)


def test_sparse_adam_errors():
    p_e, p_t = ember.nn.Parameter(ember.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    for kw in ({"lr": -1}, {"eps": -1}, {"betas": (1.0, 0.9)}, {"betas": (0.9, 1.0)}):
        with pytest.raises(ValueError) as te:
            torch.optim.SparseAdam([p_t], **kw)
        with pytest.raises(ValueError) as ee:
            ember.optim.SparseAdam([p_e], **kw)
        assert str(ee.value) == str(te.value)
    p_e.grad, p_t.grad = ember.ones(2), torch.ones(2)
    with pytest.raises(RuntimeError) as te:
        torch.optim.SparseAdam([p_t]).step()
    with pytest.raises(RuntimeError) as ee:
        ember.optim.SparseAdam([p_e]).step()
    assert str(ee.value) == str(te.value)
    with pytest.raises(ValueError) as te:
        torch.optim.SparseAdam([torch.zeros(2).to_sparse().requires_grad_()])
    with pytest.raises(ValueError) as ee:
        ember.optim.SparseAdam([ember.zeros(2).to_sparse().requires_grad_()])
    assert str(ee.value) == str(te.value)


def test_zero_grad_set_to_none_false():
    e, t = _models(5, 2, 5)
    opt = ember.optim.SparseAdam(e.parameters())
    e(ember.tensor([1, 2])).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert e.weight.grad.layout is ember.sparse_coo and e.weight.grad._nnz() == 0
    e(ember.tensor([3])).sum().backward()
    assert e.weight.grad._nnz() == 1
