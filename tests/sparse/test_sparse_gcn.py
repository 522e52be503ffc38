"""A two-layer GCN on a random graph (normalised sparse adjacency @ features), trained a few
steps with Adam: ember's losses and weights follow torch 2.13's, through ``ember.sparse.mm``,
``adj @ x`` and a CSR adjacency."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _graph(n=30, e=90, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    idx = np.concatenate([np.stack([src, dst]), np.stack([dst, src]), np.stack([np.arange(n)] * 2)], axis=1)
    deg = np.bincount(idx[0], minlength=n).astype(np.float64)
    vals = (1.0 / np.sqrt(deg[idx[0]] * deg[idx[1]])).astype(np.float32)     # duplicates stay: uncoalesced
    return idx, vals, n


@pytest.mark.parametrize("form", ["sparse.mm", "matmul", "csr"])
def test_gcn_training_matches_torch(form):
    idx, vals, n = _graph()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    w1 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((16, 3)) * 0.3).astype(np.float32)
    y = rng.integers(0, 3, n)
    losses = {}
    weights = {}
    for m in (ember, torch):
        adj = m.sparse_coo_tensor(m.tensor(idx), m.tensor(vals), (n, n))
        if form == "csr":
            adj = adj.to_sparse_csr()
        W1 = m.tensor(w1).requires_grad_()
        W2 = m.tensor(w2).requires_grad_()
        X, Y = m.tensor(x), m.tensor(y)
        opt = m.optim.Adam([W1, W2], lr=0.05)
        prop = (lambda a, h: m.sparse.mm(a, h)) if form == "sparse.mm" else (lambda a, h: a @ h)
        out = []
        for _ in range(6):
            opt.zero_grad()
            h = m.relu(prop(adj, X @ W1))
            logits = prop(adj, h @ W2)
            loss = m.nn.functional.cross_entropy(logits, Y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[m.__name__] = out
        weights[m.__name__] = (np.asarray(W1.detach()._data) if m is ember else W1.detach().numpy())
    np.testing.assert_allclose(losses["ember"], losses["torch"], rtol=1e-5)
    np.testing.assert_allclose(weights["ember"], weights["torch"], rtol=1e-4, atol=1e-5)
