"""The rest of torch.sparse against torch 2.13: spdiags, spsolve (torch: CUDA only), as_sparse_gradcheck,
the legacy constructors (torch.sparse.FloatTensor, ...), the semi-structured entry points."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

from ._sparse_helpers import dense_np, np_of
from ._sparse_helpers import same_error as _err

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
warnings.filterwarnings("ignore", message=".*Sparse BSR|.*Sparse BSC|.*Sparse CSR|.*invariant checks")



def _same(e, t):
    assert repr(e) == repr(t).replace("torch.", "ember."), f"\n{e!r}\n{t!r}"
    np.testing.assert_allclose(dense_np(e).astype(np.float64), t.to_dense().detach().double().numpy())


# ---------------------------------------------------------------------- spdiags
@pytest.mark.parametrize("seed", range(8))
def test_spdiags_matches_torch(seed):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    k = int(rng.integers(1, 4))
    offs = rng.choice(np.arange(-rows + 1, cols), size=min(k, rows + cols - 1), replace=False).astype(np.int64)
    # torch reads diagonals of exactly ncols columns correctly; with fewer it writes out of bounds (or
    # crashes), with more it makes indices past the last column: ember caps at both (scipy's rule)
    length = cols
    d = rng.standard_normal((offs.shape[0], length)).astype(np.float32 if seed % 2 else np.float64)
    for lay in (None, "sparse_coo", "sparse_csr", "sparse_csc"):
        kw_e = {} if lay is None else {"layout": getattr(ember, lay)}
        kw_t = {} if lay is None else {"layout": getattr(torch, lay)}
        e = ember.sparse.spdiags(ember.tensor(d), ember.tensor(offs), (rows, cols), **kw_e)
        t = torch.sparse.spdiags(torch.tensor(d), torch.tensor(offs), (rows, cols), **kw_t)
        _same(e, t)
    # a vector of diagonals with a scalar offset
    e = ember.sparse.spdiags(ember.tensor(d[0]), ember.tensor(offs[0]), (rows, cols))
    t = torch.sparse.spdiags(torch.tensor(d[0]), torch.tensor(offs[0]), (rows, cols))
    _same(e, t)


def test_spdiags_errors_match_torch():
    d = np.random.default_rng(0).standard_normal((2, 4))
    E, T = ember, torch

    def pair(diag, offs, shape, **kw):
        kwe = {k: (getattr(ember, v) if isinstance(v, str) else v) for k, v in kw.items()}
        kwt = {k: (getattr(torch, v) if isinstance(v, str) else v) for k, v in kw.items()}
        return (lambda: E.sparse.spdiags(E.tensor(diag), E.tensor(offs), shape, **kwe),
                lambda: T.sparse.spdiags(T.tensor(diag), T.tensor(offs), shape, **kwt))
    for args, kw in [((d, [0, 0], (3, 5)), {}), ((d, [0], (3, 5)), {}), ((d, [[0, 1]], (3, 5)), {}),
                     ((d, [0, 1], (3, 5, 1)), {}), ((d[None], [0, 1], (3, 5)), {}),
                     ((d, [0, 1], (3, 5)), {"layout": "sparse_bsr"}), ((d, [0, 1], (3, 5)), {"layout": "strided"})]:
        _err(*pair(*args, **kw))
    _err(lambda: ember.sparse.spdiags(ember.tensor(d), [0, 1], (3, 5)),
         lambda: torch.sparse.spdiags(torch.tensor(d), [0, 1], (3, 5)), TypeError)


def test_spdiags_short_and_long_diagonals_follow_scipy():
    d = np.arange(1.0, 7.0).reshape(2, 3)
    e = ember.sparse.spdiags(ember.tensor(d), ember.tensor([1, -2]), (3, 4))     # diagonals shorter than ncols
    want = np.zeros((3, 4))
    want[0, 1], want[1, 2] = 2.0, 3.0       # data[k, j] at (j - offset, j) for j < 3
    want[2, 0] = 4.0
    np.testing.assert_array_equal(dense_np(e), want)
    e = ember.sparse.spdiags(ember.tensor(d), ember.tensor([0, -3]), (5, 1))     # longer: capped at ncols
    want = np.zeros((5, 1))
    want[0, 0], want[3, 0] = 1.0, 4.0
    np.testing.assert_array_equal(dense_np(e), want)


def test_spdiags_gradient():
    # torch's spdiags has no derivative (grad_fn=NotImplemented); ember's values are index_select
    # of the diagonals: checked with finite differences
    rng = np.random.default_rng(3)
    d = ember.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    offs = ember.tensor([0, -2, 1])
    w = ember.tensor(rng.standard_normal((4, 5)))
    assert ember.autograd.gradcheck(lambda d: (ember.sparse.spdiags(d, offs, (4, 5)).to_dense() * w).sin(), (d,))


# ---------------------------------------------------------------------- spsolve
@pytest.mark.parametrize("seed", range(3))
def test_spsolve(seed):
    rng = np.random.default_rng(seed)
    n = 5
    a = rng.standard_normal((n, n)) * (rng.random((n, n)) < 0.4) + n * np.eye(n)
    b = rng.standard_normal(n)
    ea = ember.tensor(a).to_sparse_csr()
    x = ember.sparse.spsolve(ea, ember.tensor(b))
    np.testing.assert_allclose(np_of(x), np.linalg.solve(a, b), rtol=1e-10)
    # torch's CPU build has no spsolve kernel (CUDA / cuDSS only): its error is the dispatcher's
    with pytest.raises(NotImplementedError, match="aten::_spsolve.*SparseCsrCPU"):
        torch.sparse.spsolve(torch.tensor(a).to_sparse_csr(), torch.tensor(b))
    with pytest.raises(NotImplementedError, match="aten::_spsolve.*SparseCPU"):
        ember.sparse.spsolve(ember.tensor(a).to_sparse(), ember.tensor(b))
    with pytest.raises(RuntimeError, match="Only left=True is supported"):
        ember.sparse.spsolve(ea, ember.tensor(b), left=False)
    # gradients through the values and the right-hand side
    v = ember.tensor(np_of(ea.values()), requires_grad=True)
    eb = ember.tensor(b, requires_grad=True)

    def f(v, eb):
        s = ember.sparse_csr_tensor(ea.crow_indices(), ea.col_indices(), v, (n, n))
        return ember.sparse.spsolve(s, eb)
    assert ember.autograd.gradcheck(f, (v, eb))


# ---------------------------------------------------------------------- as_sparse_gradcheck
@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr", "bsc"])
def test_as_sparse_gradcheck(layout):
    gc = ember.sparse.as_sparse_gradcheck(ember.autograd.gradcheck)
    tgc = torch.sparse.as_sparse_gradcheck(torch.autograd.gradcheck)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4)) * (rng.random((4, 4)) < 0.5)
    conv = {"coo": lambda x: x.to_sparse(), "csr": lambda x: x.to_sparse_csr(), "csc": lambda x: x.to_sparse_csc(),
            "bsr": lambda x: x.to_sparse_bsr((2, 2)), "bsc": lambda x: x.to_sparse_bsc((2, 2))}[layout]
    x = conv(ember.tensor(a)).requires_grad_(True)
    tx = conv(torch.tensor(a)).requires_grad_(True)
    assert gc(lambda s: s.to_dense().exp(), x) is True
    assert tgc(lambda s: s.to_dense().exp(), tx) is True
    assert gc(lambda s: s.to_dense().exp(), x, masked=True) is True
    assert gc(lambda s: (s * 3).sin(), x) is True


def test_as_sparse_gradcheck_batched_and_hybrid():
    gc = ember.sparse.as_sparse_gradcheck(ember.autograd.gradcheck)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3, 4))
    a[rng.random(a.shape) < 0.5] = 0
    w = ember.ones(4, 2, dtype=ember.float64)
    assert gc(lambda s: s.to_dense().exp(), ember.tensor(a).to_sparse(2).requires_grad_()) is True
    b = rng.standard_normal((2, 3, 4))
    assert gc(lambda s: (s @ w).exp(), ember.tensor(b).to_sparse_csr().requires_grad_()) is True
    assert gc(lambda s: s.to_dense().exp(), ember.tensor(b).to_sparse_csr(dense_dim=1).requires_grad_()) is True


def test_as_sparse_gradcheck_catches_a_wrong_gradient():
    class Wrong(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    gc = ember.sparse.as_sparse_gradcheck(ember.autograd.gradcheck)
    x = ember.tensor([[0., 1.], [2., 3.]], dtype=ember.float64).to_sparse().requires_grad_(True)
    assert gc(lambda s: Wrong.apply(s.to_dense()), x, raise_exception=False) is False
    assert gc(lambda s: Wrong.apply(s.to_dense()) * 0 + s.to_dense(), x) is True


# ---------------------------------------------------------------------- legacy constructors
@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "HalfTensor",
                                  "BFloat16Tensor", "ShortTensor", "CharTensor", "ByteTensor"])
def test_legacy_constructors(name):
    E, T = getattr(ember.sparse, name), getattr(torch.sparse, name)
    _same(E(), T())
    _same(E(2, 3), T(2, 3))
    _same(E(ember.Size([2, 3])), T(torch.Size([2, 3])))
    _same(E(size=(3, 1)), T(size=(3, 1)))
    rng = np.random.default_rng(0)
    idx = np.array([[0, 1, 1], [2, 0, 1]])
    vals = rng.standard_normal(3)
    _same(E(ember.tensor(idx), ember.tensor(vals), (2, 3)), T(torch.tensor(idx), torch.tensor(vals), (2, 3)))
    _same(E(ember.tensor(idx), ember.tensor(vals)), T(torch.tensor(idx), torch.tensor(vals)))
    _err(lambda: E([1, 2]), lambda: T([1, 2]), TypeError)
    _err(lambda: E(ember.ones(2)), lambda: T(torch.ones(2)), TypeError)
    assert E.is_sparse is True and repr(E) == repr(T).replace("torch.", "ember.")
    s = E(2, 3)
    assert isinstance(s, E) and isinstance(T(2, 3), T)
    assert not isinstance(ember.zeros(2, 3, dtype=E.dtype), E)
    other = ember.sparse.DoubleTensor if name != "DoubleTensor" else ember.sparse.FloatTensor
    assert not isinstance(s, other)


# ---------------------------------------------------------------------- semi-structured
def test_semi_structured_on_cpu():
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
    _err(lambda: ember.sparse.to_sparse_semi_structured(ember.tensor(w)),
         lambda: torch.sparse.to_sparse_semi_structured(torch.tensor(w)))
    with pytest.raises(NotImplementedError, match="semi-structured"):
        ember.sparse.SparseSemiStructuredTensor()
    assert not isinstance(ember.tensor(w), ember.sparse.SparseSemiStructuredTensor)
