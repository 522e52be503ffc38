"""Randomized low-rank factorizations and the LOBPCG eigensolver, as torch's
``svd_lowrank``, ``pca_lowrank`` and ``lobpcg``.

``svd_lowrank`` is Halko, Martinsson & Tropp's randomized range finder (a Gaussian sketch
``A R``, ``niter`` rounds of subspace iteration re-orthonormalised by QR) followed by the SVD of
the small projected matrix ``Q^H A``. It is written in ember ops, so its results are
differentiable like torch's. Its results depend on the random sketch (ember's generator is
not torch's): they agree with torch's up to the approximation error, exactly when
``rank(A) <= q``.

``lobpcg`` is Knyazev's locally optimal block preconditioned conjugate gradient method for
the extreme eigenpairs of a symmetric (generalized) problem ``A X = B X diag(E)``: each step
is a Rayleigh-Ritz projection onto the span of the current vectors, their (preconditioned)
residuals and the previous search directions, with the basis B-orthonormalised through the
eigendecomposition of its Gram matrix (dropping directions that became dependent). The
iteration runs on float64 numpy arrays; the derivative is torch's (A is taken as
``(A + A^T) / 2``): the eigenvalues' ``x x^T`` and the eigenvectors' ``-(A - E_i)^+ g x_i^T``
(from the full eigendecomposition of A in the backward), and, as torch, none for B != I
(the backward raises torch's ValueError).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._exports import Exports

_export = Exports()


def _linalg():
    from .. import linalg
    return linalg


def _check_int(name, fn, v, lo=0):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name}(={v}) must be non-negative integer" if lo == 0 else
                         f"{fn}: {name} must be an integer >= {lo}, got {v!r}")


def _approximate_basis(A, q, niter, M=None):
    """An orthonormal (m, q) basis ``Q`` with ``Q Q^H A ~ A``: the range of ``A R`` for a Gaussian
    ``R``, refined by ``niter`` rounds of subspace iteration (QR after each product)."""
    la = _linalg()
    n = A.shape[-1]
    R = api.randn(tuple(A.shape[:-2]) + (n, q), dtype=A.dtype, device=A.device)
    X = api.matmul(A, R)
    if M is not None:
        X = X - api.matmul(M, R)
    Q = la.qr(X).Q
    AH = A.mH
    MH = M.mH if M is not None else None
    for _ in range(niter):
        X = api.matmul(AH, Q)
        if MH is not None:
            X = X - api.matmul(MH, Q)
        Q = la.qr(X).Q
        X = api.matmul(A, Q)
        if M is not None:
            X = X - api.matmul(M, Q)
        Q = la.qr(X).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    la = _linalg()
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(tuple(A.shape))
    if m < n:       # factor the wider side's adjoint (the basis is of its columns)
        A = A.mH
        M = M.mH if M is not None else None
    Q = _approximate_basis(A, q, niter, M)
    B = api.matmul(Q.mH, A)
    if M is not None:
        B = B - api.matmul(Q.mH, M)
    U, S, Vh = la.svd(B, full_matrices=False)
    V = Vh.mH
    U = api.matmul(Q, U)
    if m < n:
        U, V = V, U
    return U, S, V


@_export
def svd_lowrank(A, q=6, niter=2, M=None):
    """``(U, S, V)`` with ``A - M ~ U diag(S) V^H`` of rank ``q`` (default 6), by the randomized
    range finder with ``niter`` subspace iterations (see the module docstring); batched over
    leading dims, differentiable."""
    if not isinstance(A, Tensor):
        raise TypeError(f"svd_lowrank(): argument 'A' (position 1) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise ValueError(f"svd_lowrank: A must have at least 2 dimensions, got {A.ndim}")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise ValueError(f"svd_lowrank: A must be a floating point or complex tensor, got {A.dtype.name}")
    q = 6 if q is None else q
    for name, v in (("q", q), ("niter", niter)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"svd_lowrank(): argument '{name}' must be int, not {type(v).__name__}")
    # as torch: no range check here (a q above min(m, n) gives min(m, n) factors, a negative q
    # fails creating the sketch, a negative niter runs no subspace iteration)
    if q < 0:
        shape = list(A.shape[:-2]) + [A.shape[-1], int(q)]
        raise RuntimeError(f"Trying to create tensor with negative dimension {q}: {shape}")
    return _svd_lowrank(A, int(q), max(int(niter), 0), M)


@_export
def pca_lowrank(A, q=None, center=True, niter=2):
    """``(U, S, V)``: the principal components of the rows of ``A`` (its columns centered when
    ``center``) from ``svd_lowrank`` with ``q`` (default ``min(6, m, n)``) components."""
    if not isinstance(A, Tensor):
        raise TypeError(f"pca_lowrank(): argument 'A' (position 1) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise ValueError(f"pca_lowrank: A must have at least 2 dimensions, got {A.ndim}")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif isinstance(q, bool) or not isinstance(q, numbers.Integral) or q < 0 or q > min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if isinstance(niter, bool) or not isinstance(niter, numbers.Integral) or niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, int(q), int(niter), None)
    c = A.mean(dim=-2, keepdim=True)
    return _svd_lowrank(A - c, int(q), int(niter), None)


# ---------------------------------------------------------------------- LOBPCG
def _b_orthonormal(S, BS, rtol):
    """A B-orthonormal basis of span(S) (columns of S, B S given): S V d^-1/2 over the
    eigenpairs (d, V) of the Gram matrix S^T B S whose d is not negligible."""
    G = S.T @ BS
    G = (G + G.T) / 2
    d, V = np.linalg.eigh(G)
    keep = d > rtol * max(d.max(initial=0.0), np.finfo(np.float64).tiny)
    T = V[:, keep] / np.sqrt(d[keep])
    return S @ T, BS @ T


def _lobpcg_np(A, B, X, iK, k, largest, tol, niter):
    m, n = X.shape
    Bmul = (lambda Z: Z) if B is None else (lambda Z: B @ Z)
    eps = np.finfo(np.float64).eps
    X, BX = _b_orthonormal(X, Bmul(X), eps * m)
    if X.shape[1] < n:
        raise ValueError("lobpcg: the initial approximation X must have linearly independent columns")
    P = None

    def ritz(Z, BZ):
        H = Z.T @ (A @ Z)
        H = (H + H.T) / 2
        theta, Y = np.linalg.eigh(H)
        order = np.argsort(-theta if largest else theta, kind="stable")[:n]
        return theta[order], Z @ Y[:, order], BZ @ Y[:, order]

    E, X, BX = ritz(X, BX)
    A_norm = np.linalg.norm(A, 2) if m <= 512 else np.linalg.norm(A)
    B_norm = 1.0 if B is None else (np.linalg.norm(B, 2) if m <= 512 else np.linalg.norm(B))
    it = 0
    while True:
        AX = A @ X
        R = AX - BX * E
        rerr = np.linalg.norm(R, axis=0) / (np.linalg.norm(X, axis=0) * (A_norm + np.abs(E) * B_norm))
        converged = int(np.sum(rerr[:k] < tol))
        if converged >= k or (niter >= 0 and it >= niter):
            break
        active = rerr >= tol
        W = R[:, active]
        if iK is not None:
            W = iK @ W
        # keep the new directions B-orthogonal to X, so the projected problem stays well posed
        W = W - X @ (BX.T @ W)
        parts = [X, W] + ([P[:, active]] if P is not None else [])
        S = np.concatenate(parts, axis=1)
        Z, BZ = _b_orthonormal(S, Bmul(S), eps * m * 10)
        Xn_E, Xn, BXn = ritz(Z, BZ)
        P = Xn - X @ (BX.T @ Xn)     # the step taken, less its component along the old X
        E, X, BX = Xn_E, Xn, BXn
        it += 1
    return E[:k], X[:, :k]


def _partial_eigen_backward(a_sym, E, X, gE, gX):
    """The gradient with respect to a symmetric A of a loss of k of its eigenpairs (E, X): the
    eigenvalues give ``x_i gE_i x_i^T``; each eigenvector moves by ``dx_i = -(A - E_i)^+ dA x_i``
    (the pseudo-inverse on the complement of x_i, from the full eigendecomposition of A), so
    it gives ``-(A - E_i)^+ gX_i x_i^T``. Symmetrised, as torch (which symmetrises A)."""
    m, k = X.shape
    G = np.zeros((m, m))
    if gE is not None:
        G += (X * gE) @ X.T
    if gX is not None:
        w, U = np.linalg.eigh(a_sym)
        D = w[:, None] - E[None, :]                          # (m, k)
        own = np.argmin(np.abs(D), axis=0)                  # the eigenvalue each E_i is
        D[own, np.arange(k)] = np.inf
        Y = U @ ((U.T @ gX) / D)                              # columns (A - E_i)^+ gX_i
        G -= Y @ X.T
    return (G + G.T) / 2


def _lobpcg_autograd(A, B, E, V, dt):
    """(E, X) attached to A (and B) with torch's lobpcg derivative: the partial eigenspace
    backward for A; B != I has none in torch either (its ValueError)."""
    from ..autograd import Function

    a_sym = np.asarray(((A.detach() + A.detach().mT) / 2).to(_t.float64).cpu()._data)
    m, k = V.shape[-2:]

    class LOBPCGAutogradFunction(Function):
        @staticmethod
        def forward(ctx, a, *b):
            return api.tensor(E, dtype=dt, device=A.device), api.tensor(V, dtype=dt, device=A.device)

        @staticmethod
        def backward(ctx, gE, gX):
            if B is not None:
                raise ValueError("lobpcg.backward does not support backward with B != I yet.")
            ge = None if gE is None else np.asarray(gE.detach().to(_t.float64).cpu()._data)
            gx = None if gX is None else np.asarray(gX.detach().to(_t.float64).cpu()._data)
            a3, e2, v3 = a_sym.reshape(-1, m, m), E.reshape(-1, k), V.reshape(-1, m, k)
            ge2 = None if ge is None else ge.reshape(-1, k)
            gx3 = None if gx is None else gx.reshape(-1, m, k)
            g = np.stack([_partial_eigen_backward(a3[i], e2[i], v3[i], None if ge2 is None else ge2[i],
                                                  None if gx3 is None else gx3[i]) for i in range(a3.shape[0])])
            g = g.reshape(a_sym.shape)
            return (api.tensor(g, dtype=A.dtype, device=A.device),) + ((None,) if B is not None else ())

    return LOBPCGAutogradFunction.apply(A, *([B] if B is not None else []))


@_export
def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None, method=None,
           tracker=None, ortho_iparams=None, ortho_fparams=None, ortho_bparams=None):
    """The ``k`` largest (``largest=True``, default) or smallest eigenpairs ``(E, X)`` of the
    symmetric generalized problem ``A X = B X diag(E)`` (``B`` symmetric positive definite,
    identity by default) by LOBPCG (module docstring). ``X`` (m, n) is the initial guess
    (default: ``n`` random columns, ``n`` defaulting to ``k``), ``iK`` a preconditioner
    matrix, ``niter`` the iteration limit (default 1000; -1: until converged), ``tol`` the
    relative residual target (default sqrt of the dtype's eps). ``method`` "basic" and
    "ortho" run the same iteration here; ``tracker`` is called with a dict of the state
    after each step; the ``ortho_*params`` of torch's orthogonalisation are accepted and
    have no effect. A batch (*, m, m) is solved matrix by matrix (B, iK and X broadcast)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"lobpcg(): argument 'A' (position 1) must be Tensor, not {type(A).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"lobpcg: A must be a (batch of) square matrices (*, m, m), got shape {list(A.shape)}")
    if not A.dtype.is_floating_point or A.dtype.is_complex:
        raise ValueError(f"lobpcg: A must be a real floating point tensor, got {A.dtype.name}")
    if method not in (None, "basic", "ortho"):
        raise ValueError(f"lobpcg: method must be 'basic' or 'ortho', got {method!r}")
    m = A.shape[-1]
    batch = tuple(A.shape[:-2])
    for name, M in (("B", B), ("iK", iK)):
        if M is not None and (not isinstance(M, Tensor) or tuple(M.shape[-2:]) != (m, m)):
            raise ValueError(f"lobpcg: {name} must be a (*, {m}, {m}) tensor like A, got "
                             f"{list(M.shape) if isinstance(M, Tensor) else type(M).__name__}")
    if X is not None:
        if not isinstance(X, Tensor) or X.ndim < 2 or X.shape[-2] != m:
            raise ValueError(f"lobpcg: X must be a (*, {m}, n) tensor, got "
                             f"{list(X.shape) if isinstance(X, Tensor) else type(X).__name__}")
        n = X.shape[-1]
        k = n if k is None else k
    else:
        k = 1 if k is None else k
        n = k if n is None else n
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"lobpcg: {name} must be a positive integer, got {v!r}")
    if k > n:
        raise ValueError(f"lobpcg: k (={k}) must not exceed the number of columns of X / n (={n})")
    if m < 3 * n:
        raise ValueError(f"LOBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than "
                         f"3 x the number of requested eigenpairs (={n})")
    largest = True if largest is None else bool(largest)
    niter = 1000 if niter is None else int(niter)
    tol = float(np.finfo(A.dtype.np).eps) ** 0.5 if tol is None else float(tol)
    dt = A.dtype
    def arr(t, shape):
        return None if t is None else np.broadcast_to(np.asarray(t.detach().to(_t.float64).cpu()._data),
                                                      batch + shape).reshape((-1,) + shape)
    a64 = arr(A, (m, m))
    a64 = (a64 + np.swapaxes(a64, -1, -2)) / 2
    b64, ik64 = arr(B, (m, m)), arr(iK, (m, m))
    x0 = arr(api.randn(batch + (m, n), dtype=_t.float64) if X is None else X, (m, n))
    # each matrix of a batch is solved on its own
    pairs = [_lobpcg_np(a64[i], None if b64 is None else b64[i], x0[i], None if ik64 is None else ik64[i],
                        int(k), largest, tol, niter) for i in range(a64.shape[0])]
    E = np.stack([p[0] for p in pairs]).reshape(batch + (int(k),))
    V = np.stack([p[1] for p in pairs]).reshape(batch + (m, int(k)))
    if tracker is not None:
        tracker({"E": E, "X": V, "k": k, "n": n})
    from ..autograd import is_grad_enabled
    if is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in (A, B)):
        return _lobpcg_autograd(A, B, E, V, dt)
    return api.tensor(E, dtype=dt, device=A.device), api.tensor(V, dtype=dt, device=A.device)


_export.install()
