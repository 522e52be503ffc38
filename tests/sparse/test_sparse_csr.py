"""CSR / CSC tensors against torch 2.13: factories, conversions, accessors, printing,
to_dense, products and values-level ops on random matrices; invariant errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember

from ._sparse_helpers import dense_np, np_of

torch = pytest.importorskip("torch")


def _dense(seed, shape=(6, 5), density=0.4, dt=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dt)
    x[rng.random(shape) > density] = 0
    return x


def _same_csr(e, t):
    assert repr(e) == repr(t).replace("torch.", "ember."), f"\n{e!r}\n{t!r}"
    assert e._nnz() == t._nnz() and tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(np_of(e.values()), t.values().detach().numpy())
    np.testing.assert_allclose(dense_np(e), t.to_dense().detach().numpy())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("density", [0.0, 0.3, 0.8])
def test_conversions_match_torch(seed, dt, density):
    x = _dense(seed, (6, 5), density, dt)
    ex, tx = ember.tensor(x), torch.from_numpy(x)
    ec, tc = ex.to_sparse_csr(), tx.to_sparse_csr()
    assert ec.layout is ember.sparse_csr and ec.is_sparse_csr and not ec.is_sparse
    _same_csr(ec, tc)
    np.testing.assert_array_equal(np_of(ec.crow_indices()), tc.crow_indices().numpy())
    np.testing.assert_array_equal(np_of(ec.col_indices()), tc.col_indices().numpy())
    ek, tk = ex.to_sparse_csc(), tx.to_sparse_csc()
    _same_csr(ek, tk)
    np.testing.assert_array_equal(np_of(ek.ccol_indices()), tk.ccol_indices().numpy())
    np.testing.assert_array_equal(np_of(ek.row_indices()), tk.row_indices().numpy())
    # between layouts
    _same_csr(ex.to_sparse().to_sparse_csr(), tx.to_sparse().to_sparse_csr())
    _same_csr(ec.to_sparse_csc(), tc.to_sparse_csc())
    _same_csr(ek.to_sparse_csr(), tk.to_sparse_csr())
    _same_csr(ex.to_sparse(layout=ember.sparse_csr), tx.to_sparse(layout=torch.sparse_csr))
    for s, r in ((ec, tc), (ek, tk)):
        eo, to = s.to_sparse_coo(), r.to_sparse_coo()
        assert eo.is_coalesced() == to.is_coalesced()
        assert repr(eo) == repr(to).replace("torch.", "ember.")


def test_factories_and_printing():
    crow, col, val = [0, 2, 2, 3], [1, 3, 0], [1.5, -2.0, 3.25]
    e = ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(val), (3, 4))
    t = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(val), (3, 4))
    _same_csr(e, t)
    e = ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(val))
    t = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(val))
    _same_csr(e, t)
    e = ember.sparse_csc_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(val, dtype=ember.float64),
                                (4, 3))
    t = torch.sparse_csc_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(val, dtype=torch.float64),
                                (4, 3))
    _same_csr(e, t)
    e = ember.sparse_compressed_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(val), (3, 4),
                                       layout=ember.sparse_csr, requires_grad=True)
    t = torch.sparse_compressed_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(val), (3, 4),
                                       layout=torch.sparse_csr, requires_grad=True)
    assert repr(e) == repr(t).replace("torch.", "ember.")
    e = ember.sparse_csr_tensor(ember.tensor([0, 0, 0]), ember.tensor([], dtype=ember.int64), ember.tensor([]))
    t = torch.sparse_csr_tensor(torch.tensor([0, 0, 0]), torch.tensor([], dtype=torch.long), torch.tensor([]))
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert tuple(e.shape) == tuple(t.shape)


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_products_and_ops(layout):
    x = _dense(3)
    conv = f"to_sparse_{layout}"
    e, t = getattr(ember.tensor(x), conv)(), getattr(torch.from_numpy(x), conv)()
    d = np.random.default_rng(4).standard_normal((5, 3))
    ref = (t @ torch.from_numpy(d)).numpy()
    np.testing.assert_allclose(np_of(e @ ember.tensor(d)), ref, rtol=1e-12)
    np.testing.assert_allclose(np_of(ember.sparse.mm(e, ember.tensor(d))), ref, rtol=1e-12)
    np.testing.assert_allclose(np_of(ember.mm(e, ember.tensor(d))), ref, rtol=1e-12)
    for er, tr in ((e * 2, t * 2), (-e, -t), (e.abs(), t.abs()), (e + e, t + t)):
        assert er.layout == (ember.sparse_csr if layout == "csr" else ember.sparse_csc)
        np.testing.assert_allclose(dense_np(er), tr.to_dense().numpy())
    np.testing.assert_allclose(np_of(e.sum()), t.sum().numpy())
    _err(lambda: ember.sparse.sum(e), lambda: torch.sparse.sum(t))
    et, tt = e.t(), t.t()
    assert str(et.layout).split(".")[1] == str(tt.layout).split(".")[1]
    np.testing.assert_allclose(dense_np(et), tt.to_dense().numpy())


def test_csr_grads():
    x = _dense(5)
    ex = ember.tensor(x).to_sparse_csr().requires_grad_()
    tx = torch.from_numpy(x).to_sparse_csr().requires_grad_()
    d = np.random.default_rng(6).standard_normal((5, 2))
    ed, td = ember.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    ember.sparse.mm(ex, ed).pow(2).sum().backward()
    torch.sparse.mm(tx, td).pow(2).sum().backward()
    np.testing.assert_allclose(np_of(ed.grad), td.grad.numpy(), rtol=1e-10)
    assert ex.grad.layout is ember.sparse_csr and tx.grad.layout == torch.sparse_csr
    np.testing.assert_allclose(dense_np(ex.grad), tx.grad.to_dense().numpy(), rtol=1e-10)


def test_sampled_addmm():
    x = _dense(7, (4, 5))
    e, t = ember.tensor(x).to_sparse_csr(), torch.from_numpy(x).to_sparse_csr()
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    er = ember.sparse.sampled_addmm(e, ember.tensor(a), ember.tensor(b), beta=0.5, alpha=2.0)
    tr = torch.sparse.sampled_addmm(t, torch.from_numpy(a), torch.from_numpy(b), beta=0.5, alpha=2.0)
    assert er.layout is ember.sparse_csr
    np.testing.assert_allclose(dense_np(er), tr.to_dense().numpy(), rtol=1e-12)


def _err(fe, ft, exc=RuntimeError, same_message=True):
    with pytest.raises(exc) as te:
        ft()
    with pytest.raises(exc) as ee:
        fe()
    if same_message:
        assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("crow,col,size", [
    ([1, 1, 2], [0, 1], (2, 2)),       # crow[0] != 0
    ([0, 1, 3], [0, 1], (2, 2)),       # crow[-1] != nnz
    ([0, 2, 2], [1, 0], (2, 2)),       # unsorted columns in a row
    ([0, 1, 2], [0, 5], (2, 2)),       # column out of range
])
def test_invariant_errors(crow, col, size):
    _err(lambda: ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor([1., 2.]), size,
                                         check_invariants=True),
         lambda: torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor([1., 2.]), size,
                                         check_invariants=True))


def test_layout_errors():
    c = ember.eye(3).to_sparse_csr()
    tc = torch.eye(3).to_sparse_csr()
    _err(lambda: c.coalesce(), lambda: tc.coalesce())
    _err(lambda: c.is_coalesced(), lambda: tc.is_coalesced())
    _err(lambda: ember.sparse_compressed_tensor(ember.tensor([0, 1]), ember.tensor([0]), ember.tensor([1.]), (1, 1)),
         lambda: torch.sparse_compressed_tensor(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1.]), (1, 1)))
    with pytest.raises(NotImplementedError, match="SparseCsrCPU"):
        ember.sparse.softmax(c, 1)
    with pytest.raises(NotImplementedError, match="cumsum.*SparseCsrCPU|SparseCsrCPU.*cumsum"):
        c.cumsum(0)
    assert ember.eye(3).to_sparse_bsr((1, 1)).layout is ember.sparse_bsr     # (tests/sparse/test_bsr_bsc.py)
