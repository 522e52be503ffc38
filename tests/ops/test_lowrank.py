"""svd_lowrank / pca_lowrank / lobpcg against torch. The algorithms draw random sketches (ember's
generator is not torch's), so the comparisons are of what is determined: singular values and
subspaces of matrices whose rank is at most q (where the randomized result is exact), the
extreme eigenvalues and eigenspaces (projectors), and the gradients of those values."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()


def enp(t):
    return np.asarray(t.detach()._data)


def low_rank(m, n, r, batch=()):
    return RNG.standard_normal(batch + (m, r)) @ RNG.standard_normal(batch + (r, n))


def proj(U):
    return U @ np.swapaxes(U, -1, -2).conj()


@settings(max_examples=20, deadline=None)
@given(m=st.integers(2, 9), n=st.integers(2, 9), batch=st.sampled_from([(), (2,)]), niter=st.integers(0, 3),
       data=st.data())
def test_svd_lowrank_exact_rank(m, n, batch, niter, data):
    q = data.draw(st.integers(1, min(m, n)))
    r = data.draw(st.integers(1, q))
    A = low_rank(m, n, r, batch)
    ta, ea = torch.tensor(A, requires_grad=True), ember.tensor(A, requires_grad=True)
    tU, tS, tV = torch.svd_lowrank(ta, q=q, niter=niter)
    eU, eS, eV = ember.svd_lowrank(ea, q=q, niter=niter)
    assert tuple(eU.shape) == tuple(tU.shape) and tuple(eS.shape) == tuple(tS.shape)
    assert tuple(eV.shape) == tuple(tV.shape) and eS.dtype is ember.float64
    np.testing.assert_allclose(enp(eS)[..., :r], tS.detach().numpy()[..., :r], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(proj(enp(eU)[..., :r]), proj(tU.detach().numpy()[..., :r]), atol=1e-7)
    np.testing.assert_allclose(proj(enp(eV)[..., :r]), proj(tV.detach().numpy()[..., :r]), atol=1e-7)
    np.testing.assert_allclose(enp(eU[..., :r] * eS[..., None, :r] @ eV[..., :r].mT), A, atol=1e-8)
    # the gradient of the singular values is determined (U_i V_i^T) when the sketch has full
    # rank (q == r); with q > r the QR of a rank-deficient sketch has no derivative (torch: nan)
    if q != r:
        return
    tS[..., :r].sum().backward()
    eS[..., :r].sum().backward()
    np.testing.assert_allclose(enp(ea.grad), ta.grad.numpy(), atol=1e-6)


def test_svd_lowrank_float32_complex_and_M():
    A = low_rank(7, 5, 2).astype(np.float32)
    U, S, V = ember.svd_lowrank(ember.tensor(A), q=3)
    assert U.dtype is ember.float32
    np.testing.assert_allclose(enp(S)[:2], torch.svd_lowrank(torch.tensor(A), q=3)[1].numpy()[:2], rtol=1e-4)
    Z = low_rank(6, 6, 2) + 1j * low_rank(6, 6, 2)   # rank <= 4
    tS = torch.svd_lowrank(torch.tensor(Z), q=5)[1].numpy()
    eS = enp(ember.svd_lowrank(ember.tensor(Z), q=5)[1])
    np.testing.assert_allclose(eS[:4], tS[:4], rtol=1e-8)
    # M: the factorization of A - M
    M = RNG.standard_normal((1, 5))
    B = low_rank(7, 5, 2) + M
    tS = torch.svd_lowrank(torch.tensor(B), q=3, M=torch.tensor(M))[1].numpy()
    eS = enp(ember.svd_lowrank(ember.tensor(B), q=3, M=ember.tensor(M))[1])
    np.testing.assert_allclose(eS[:2], tS[:2], rtol=1e-8)


@pytest.mark.parametrize("center", [True, False])
def test_pca_lowrank(center):
    A = low_rank(10, 5, 2) + (3.0 if center else 0.0)
    ta, ea = torch.tensor(A, requires_grad=True), ember.tensor(A, requires_grad=True)
    tU, tS, tV = torch.pca_lowrank(ta, q=2, center=center)
    eU, eS, eV = ember.pca_lowrank(ea, q=2, center=center)
    k = 2
    np.testing.assert_allclose(enp(eS)[:k], tS.detach().numpy()[:k], rtol=1e-8)
    np.testing.assert_allclose(proj(enp(eV)[:, :k]), proj(tV.detach().numpy()[:, :k]), atol=1e-7)
    tS[:k].sum().backward()
    eS[:k].sum().backward()
    np.testing.assert_allclose(enp(ea.grad), ta.grad.numpy(), atol=1e-6)
    assert tuple(ember.pca_lowrank(ember.tensor(A))[1].shape) == tuple(torch.pca_lowrank(torch.tensor(A))[1].shape)


def test_lowrank_errors():
    A = RNG.standard_normal((4, 3))
    for fn, exc in ((lambda m, a: m.svd_lowrank(a, q=-1), RuntimeError),
                    (lambda m, a: m.pca_lowrank(a, q=5), ValueError), (lambda m, a: m.pca_lowrank(a, q=-1), ValueError),
                    (lambda m, a: m.pca_lowrank(a, niter=-1), ValueError)):
        with pytest.raises(exc) as te:
            fn(torch, torch.tensor(A))
        with pytest.raises(exc) as ee:
            fn(ember, ember.tensor(A))
        assert str(te.value) == str(ee.value)
    # no range check in svd_lowrank itself (torch): q above min(m, n), negative niter
    for kw in (dict(q=4), dict(q=7), dict(niter=-1)):
        t = torch.svd_lowrank(torch.tensor(A), **kw)
        e = ember.svd_lowrank(ember.tensor(A), **kw)
        assert [tuple(x.shape) for x in t] == [tuple(x.shape) for x in e]
        np.testing.assert_allclose(enp(e[1]), t[1].numpy(), rtol=1e-8)   # q >= rank: exact


def sym_with_gap(m):
    """A symmetric matrix with well separated extreme eigenvalues."""
    Q = np.linalg.qr(RNG.standard_normal((m, m)))[0]
    ev = np.concatenate([[-9.0, -7.0, -5.0], RNG.uniform(-2, 2, m - 6), [5.0, 7.0, 9.0]])
    return (Q * ev) @ Q.T


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k,n", [(1, None), (2, None), (2, 3)])
def test_lobpcg_standard(largest, k, n):
    M = sym_with_gap(15)
    tm, em = torch.tensor(M, requires_grad=True), ember.tensor(M, requires_grad=True)
    tE, tX = torch.lobpcg(tm, k=k, n=n, largest=largest)
    eE, eX = ember.lobpcg(em, k=k, n=n, largest=largest)
    assert tuple(eE.shape) == tuple(tE.shape) and tuple(eX.shape) == tuple(tX.shape)
    np.testing.assert_allclose(enp(eE), tE.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(proj(enp(eX)), proj(tX.detach().numpy()), atol=1e-5)
    # a loss of the values and of the (sign-invariant) eigenvector projectors
    w = RNG.standard_normal(k)
    W = RNG.standard_normal((15, 15))
    (tE * torch.tensor(w)).sum().backward(retain_graph=True)
    (eE * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(enp(em.grad), tm.grad.numpy(), atol=1e-5)
    tm.grad = None
    em2 = ember.tensor(M, requires_grad=True)
    tE, tX = torch.lobpcg(tm, k=k, n=n, largest=largest)
    eE, eX = ember.lobpcg(em2, k=k, n=n, largest=largest)
    ((tX @ tX.mT) * torch.tensor(W)).sum().backward()
    ((eX @ eX.mT) * ember.tensor(W)).sum().backward()
    np.testing.assert_allclose(enp(em2.grad), tm.grad.numpy(), atol=1e-5)


def test_lobpcg_generalized_and_initial_guess():
    M = sym_with_gap(12)
    C = RNG.standard_normal((12, 12))
    Bm = C @ C.T + 12 * np.eye(12)
    X0 = RNG.standard_normal((12, 2))
    tE, tX = torch.lobpcg(torch.tensor(M), B=torch.tensor(Bm), X=torch.tensor(X0))
    eE, eX = ember.lobpcg(ember.tensor(M), B=ember.tensor(Bm), X=ember.tensor(X0))
    np.testing.assert_allclose(enp(eE), tE.numpy(), atol=1e-6)
    x = enp(eX)
    np.testing.assert_allclose(x.T @ Bm @ x, np.eye(2), atol=1e-8)        # B-orthonormal
    np.testing.assert_allclose(M @ x, Bm @ x * enp(eE), atol=1e-5)
    # a preconditioner changes the path, not the answer
    iK = np.linalg.inv(M - 10 * np.eye(12))
    eE2, _ = ember.lobpcg(ember.tensor(M), k=1, iK=ember.tensor(iK), largest=True)
    np.testing.assert_allclose(enp(eE2), [np.linalg.eigvalsh(M)[-1]], atol=1e-6)
    eE3, _ = ember.lobpcg(ember.tensor(M.astype(np.float32)), k=1)
    assert eE3.dtype is ember.float32
    # torch has no derivative for B != I: the backward raises its ValueError
    for mod in (torch, ember):
        a = mod.tensor(M, requires_grad=True)
        E, _ = mod.lobpcg(a, B=mod.tensor(Bm), k=1)
        with pytest.raises(ValueError, match="does not support backward with B != I"):
            E.sum().backward()


def test_lobpcg_errors():
    M = sym_with_gap(6)
    with pytest.raises(ValueError, match="LOBPCG algorithm is not applicable"):
        torch.lobpcg(torch.tensor(M), k=3)
    with pytest.raises(ValueError, match="LOBPCG algorithm is not applicable"):
        ember.lobpcg(ember.tensor(M), k=3)
    with pytest.raises(ValueError, match="square"):
        ember.lobpcg(ember.tensor(RNG.standard_normal((6, 5))))
    with pytest.raises(ValueError, match="square"):
        ember.lobpcg(ember.tensor(RNG.standard_normal(6)))
    with pytest.raises(ValueError, match="method"):
        ember.lobpcg(ember.tensor(M), method="fancy")
    with pytest.raises(TypeError):
        ember.lobpcg(M)


def test_lobpcg_batched():
    M = np.stack([sym_with_gap(12) for _ in range(3)]).reshape(3, 12, 12)
    tm, em = torch.tensor(M, requires_grad=True), ember.tensor(M, requires_grad=True)
    tE, tX = torch.lobpcg(tm, k=2)
    eE, eX = ember.lobpcg(em, k=2)
    assert tuple(eE.shape) == tuple(tE.shape) == (3, 2) and tuple(eX.shape) == tuple(tX.shape)
    np.testing.assert_allclose(enp(eE), tE.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(proj(enp(eX)), proj(tX.detach().numpy()), atol=1e-5)
    W = RNG.standard_normal((12, 12))
    (tE.sum() + ((tX @ tX.mT) * torch.tensor(W)).sum()).backward()
    (eE.sum() + ((eX @ eX.mT) * ember.tensor(W)).sum()).backward()
    np.testing.assert_allclose(enp(em.grad), tm.grad.numpy(), atol=1e-5)
