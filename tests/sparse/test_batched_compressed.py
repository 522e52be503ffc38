"""Batched (and hybrid) compressed tensors against torch 2.13: batch dims before the compressed
dims for CSR/CSC/BSR/BSC -- construction, to_dense, dense -> compressed with dense_dim,
conversions, repr, and batched sparse @ dense (torch's CPU kernels refuse batched products, so
those are compared with torch's dense matmul)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

from ._sparse_helpers import dense_np, np_of
from ._sparse_helpers import same_error as _err, same_as_torch as _same, torch_pair as _pair

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
warnings.filterwarnings("ignore", message=".*Sparse BSR|.*Sparse BSC|.*Sparse CSR|.*invariant checks")


def _batched(seed, batch=(3,), rows=4, cols=6, k=5, block=(1, 1), dense=(), dt=np.float64):
    """A dense array ``(*batch, rows, cols, *dense)`` with exactly ``k`` nonzero entries (blocks of
    ``block``) per batch element, at random positions: every batch element has the same nnz."""
    rng = np.random.default_rng(seed)
    nr, nc = rows // block[0], cols // block[1]
    B = int(np.prod(batch))
    x = np.zeros((B, nr, block[0], nc, block[1]) + dense, dt)
    for b in range(B):
        for p in rng.choice(nr * nc, size=k, replace=False):
            r, c = divmod(int(p), nc)
            v = rng.standard_normal((block[0], block[1]) + dense)
            v[v == 0] = 0.5
            x[b, r, :, c, :] = v
    return x.reshape(batch + (rows, cols) + dense)





@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["csr", "csc"])
@pytest.mark.parametrize("batch", [(3,), (2, 2)])
def test_dense_to_batched(seed, layout, batch):
    x = _batched(seed, batch, k=4 + seed, dt=np.float32 if seed == 1 else np.float64)
    e, t = _pair(x)
    es, ts = getattr(e, f"to_sparse_{layout}")(), getattr(t, f"to_sparse_{layout}")()
    _same(es, ts)
    comp = "crow_indices" if layout == "csr" else "ccol_indices"
    np.testing.assert_array_equal(np_of(getattr(es, comp)()), getattr(ts, comp)().numpy())
    ec, tc = es.to_sparse_coo(), ts.to_sparse_coo()
    assert repr(ec) == repr(tc).replace("torch.", "ember.")
    other = "csc" if layout == "csr" else "csr"
    _same(getattr(es, f"to_sparse_{other}")(), getattr(ts, f"to_sparse_{other}")())


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("layout", ["bsr", "bsc"])
def test_dense_to_batched_blocked(seed, layout):
    x = _batched(seed, (2,), rows=4, cols=6, k=3, block=(2, 3))
    e, t = _pair(x)
    es, ts = getattr(e, f"to_sparse_{layout}")((2, 3)), getattr(t, f"to_sparse_{layout}")((2, 3))
    _same(es, ts)
    other = "bsc" if layout == "bsr" else "bsr"
    _same(getattr(es, f"to_sparse_{other}")((2, 3)), getattr(ts, f"to_sparse_{other}")((2, 3)))
    ec, tc = es.to_sparse_coo(), ts.to_sparse_coo()
    assert repr(ec) == repr(tc).replace("torch.", "ember.")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_dense_dim(seed, layout):
    x = _batched(seed, (), rows=4, cols=5, k=6, dense=(3,))
    e, t = _pair(x)
    _same(getattr(e, f"to_sparse_{layout}")(dense_dim=1), getattr(t, f"to_sparse_{layout}")(dense_dim=1))
    lay = getattr(ember, f"sparse_{layout}")
    _same(e.to_sparse(layout=lay, dense_dim=1), t.to_sparse(layout=getattr(torch, f"sparse_{layout}"), dense_dim=1))
    # hybrid COO (sparse_dim 2) -> compressed keeps the dense dim
    _same(getattr(e.to_sparse(2), f"to_sparse_{layout}")(), getattr(t.to_sparse(2), f"to_sparse_{layout}")())
    _err(lambda: e.to_sparse_csr(dense_dim=2), lambda: t.to_sparse_csr(dense_dim=2))
    _err(lambda: e.to_sparse().to_sparse_csr(), lambda: t.to_sparse().to_sparse_csr())


def test_batched_errors_match_torch():
    x = _batched(0, (3,), k=4)
    x[1] = 0
    x[1, 0, 0] = 1.0
    e, t = _pair(x)
    _err(lambda: e.to_sparse_csr(), lambda: t.to_sparse_csr())
    y = _batched(1, (3,), k=4)
    e, t = _pair(y)
    _err(lambda: e.to_sparse_csr().to_sparse_bsr((2, 3)), lambda: t.to_sparse_csr().to_sparse_bsr((2, 3)))
    _err(lambda: e.to_sparse_bsr((3, 3)), lambda: t.to_sparse_bsr((3, 3)))


@pytest.mark.parametrize("seed", range(3))
def test_batched_factories(seed):
    rng = np.random.default_rng(seed)
    x = _batched(seed, (2,), k=5)
    t = torch.from_numpy(x).to_sparse_csr()
    args_t = (t.crow_indices(), t.col_indices(), t.values())
    args_e = tuple(ember.tensor(a.numpy()) for a in args_t)
    _same(ember.sparse_csr_tensor(*args_e, (2, 4, 6), check_invariants=True),
          torch.sparse_csr_tensor(*args_t, (2, 4, 6), check_invariants=True))
    _same(ember.sparse_csr_tensor(*args_e), torch.sparse_csr_tensor(*args_t))
    _same(ember.sparse_compressed_tensor(*args_e, layout=ember.sparse_csr),
          torch.sparse_compressed_tensor(*args_t, layout=torch.sparse_csr))
    # hybrid + batched values
    vt = torch.from_numpy(rng.standard_normal(tuple(t.values().shape) + (2,)))
    ve = ember.tensor(vt.numpy())
    _same(ember.sparse_csr_tensor(args_e[0], args_e[1], ve, (2, 4, 6, 2), check_invariants=True),
          torch.sparse_csr_tensor(args_t[0], args_t[1], vt, (2, 4, 6, 2), check_invariants=True))
    bad_t = [((3, 4, 6),), ((2, 4, 6, 1),)]
    for (size,) in bad_t:
        _err(lambda: ember.sparse_csr_tensor(*args_e, size, check_invariants=True),
             lambda: torch.sparse_csr_tensor(*args_t, size, check_invariants=True))
    crow = args_t[0].clone()
    crow[1, 0] = 1
    _err(lambda: ember.sparse_csr_tensor(ember.tensor(crow.numpy()), args_e[1], args_e[2], check_invariants=True),
         lambda: torch.sparse_csr_tensor(crow, args_t[1], args_t[2], check_invariants=True))
    col = args_t[1].clone()
    col[0, 0] = 9
    _err(lambda: ember.sparse_csr_tensor(args_e[0], ember.tensor(col.numpy()), args_e[2], (2, 4, 6),
                                         check_invariants=True),
         lambda: torch.sparse_csr_tensor(args_t[0], col, args_t[2], (2, 4, 6), check_invariants=True))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["csr", "csc", "bsr", "bsc"])
def test_batched_matmul(seed, layout):
    rng = np.random.default_rng(seed)
    block = (2, 2) if layout in ("bsr", "bsc") else (1, 1)
    x = _batched(seed, (3,), rows=4, cols=6, k=3, block=block)
    e = ember.tensor(x)
    es = getattr(e, f"to_sparse_{layout}")(*((block,) if layout[0] == "b" else ()))
    d3 = rng.standard_normal((3, 6, 2))
    d2 = rng.standard_normal((6, 2))
    np.testing.assert_allclose(np_of(es @ ember.tensor(d3)), torch.matmul(torch.tensor(x), torch.tensor(d3)).numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np_of(ember.matmul(es, ember.tensor(d2))),
                               torch.matmul(torch.tensor(x), torch.tensor(d2)).numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        es @ ember.tensor(rng.standard_normal((3, 5, 2)))


def test_batched_matmul_gradients():
    rng = np.random.default_rng(5)
    x = _batched(2, (2,), rows=3, cols=4, k=4)
    t = torch.from_numpy(x).to_sparse_csr()
    v = rng.standard_normal(tuple(t.values().shape))
    d = rng.standard_normal((2, 4, 3))
    ev, ed = ember.tensor(v, requires_grad=True), ember.tensor(d, requires_grad=True)
    es = ember.sparse_csr_tensor(ember.tensor(t.crow_indices().numpy()), ember.tensor(t.col_indices().numpy()), ev,
                                 (2, 3, 4))
    ((es @ ed) ** 2).sum().backward()
    # torch has neither a batched sparse matmul nor the to_dense backward of a batched CSR tensor on
    # the CPU: the gradients of sum((A @ d)^2) from A = torch's to_dense, written densely
    a = torch.sparse_csr_tensor(t.crow_indices(), t.col_indices(), torch.tensor(v), (2, 3, 4)).to_dense().numpy()
    y = a @ d
    ga = 2 * y @ d.transpose(0, 2, 1)
    coo = torch.sparse_csr_tensor(t.crow_indices(), t.col_indices(), torch.tensor(v), (2, 3, 4)).to_sparse_coo()
    bi, ri, ci = coo.indices().numpy()
    np.testing.assert_allclose(np_of(ev.grad).reshape(-1), ga[bi, ri, ci], rtol=1e-12)
    np.testing.assert_allclose(np_of(ed.grad), a.transpose(0, 2, 1) @ (2 * y), rtol=1e-12)

    def f(vals, dd):
        s = ember.sparse_csr_tensor(ember.tensor(t.crow_indices().numpy()),
                                    ember.tensor(t.col_indices().numpy()), vals, (2, 3, 4))
        return (s @ dd).tanh()
    assert ember.autograd.gradcheck(f, (ev, ed))


def test_batched_to_dense_gradient_is_batched_sparse():
    x = _batched(4, (2,), k=3)
    e = ember.tensor(x).to_sparse_csr().requires_grad_()
    w = np.random.default_rng(0).standard_normal(x.shape)
    (e.to_dense() * ember.tensor(w)).sum().backward()
    g = e.grad
    assert g.layout is ember.sparse_csr and tuple(g.shape) == x.shape
    np.testing.assert_allclose(dense_np(g), np.where(x != 0, w, 0))


def test_batched_values_ops():
    x = _batched(6, (2,), k=4)
    e, t = _pair(x)
    es, ts = e.to_sparse_csr(), t.to_sparse_csr()
    _same(es * 3, ts * 3)
    _same(es.transpose(1, 2), ts.transpose(1, 2))
    _same(es.clone(), ts.clone())
    _same(es.to(ember.float32), ts.to(torch.float32))
    np.testing.assert_allclose(np_of(es.sum()), ts.sum().numpy())


def test_to_sparse_dense_dim_rules_match_torch():
    x = _batched(3, (2,), rows=3, cols=4, k=12)
    e, t = _pair(x)
    ec, tc = e.to_sparse_csr(), t.to_sparse_csr()
    eo, to = e.to_sparse(2), t.to_sparse(2)
    # dense -> COO with dense_dim: the trailing dims stay dense
    assert repr(e.to_sparse(dense_dim=1)) == repr(t.to_sparse(dense_dim=1)).replace("torch.", "ember.")
    assert repr(e.to_sparse(layout=ember.sparse_coo, dense_dim=1)) == \
        repr(t.to_sparse(layout=torch.sparse_coo, dense_dim=1)).replace("torch.", "ember.")
    _err(lambda: e.to_sparse(2, dense_dim=1), lambda: t.to_sparse(2, dense_dim=1), TypeError)
    # a sparse source takes no dense_dim
    for fe, ft in [(lambda s: s.to_sparse_csc(dense_dim=0), lambda s: s.to_sparse_csc(dense_dim=0)),
                   (lambda s: s.to_sparse_csr(dense_dim=1), lambda s: s.to_sparse_csr(dense_dim=1))]:
        _err(lambda: fe(ec), lambda: ft(tc))
        _err(lambda: fe(eo), lambda: ft(to))
    _err(lambda: ec.to_sparse(layout=ember.sparse_csc, dense_dim=0),
         lambda: tc.to_sparse(layout=torch.sparse_csc, dense_dim=0))
    _err(lambda: ec.to_sparse(layout=ember.sparse_coo, dense_dim=0),
         lambda: tc.to_sparse(layout=torch.sparse_coo, dense_dim=0))
    _err(lambda: eo.to_sparse(layout=ember.sparse_coo, dense_dim=1),
         lambda: to.to_sparse(layout=torch.sparse_coo, dense_dim=1))
    # layout=strided: the dense tensor
    np.testing.assert_array_equal(np_of(ec.to_sparse(layout=ember.strided)), tc.to_sparse(layout=torch.strided).numpy())
    assert e.to_sparse(layout=ember.strided) is e
