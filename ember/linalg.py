"""``ember.linalg``: the torch.linalg namespace (norms, inverses, solves, factorisations).

The ops live in ``ember.ops.lapack`` (LAPACK kernels) and ``ember.ops`` (composites); this
module gives them PyTorch's public names and signatures. What is done here is only argument
handling that PyTorch does in its own front end (vector right-hand sides and batch
broadcasting for ``solve``, ``upper=`` for ``cholesky``, ``ord``/``dim`` dispatch for ``norm``),
so the records keep one simple form each.

Floating-point (float32, float64) and complex (complex64, complex128) tensors. For complex
input the results are torch's: conjugate transposes where the math has adjoints (A = L L^H,
Q^H Q = I, A = U S V^H), real singular values / Hermitian eigenvalues / log|det|, a complex
slogdet sign, and gradients in torch's convention (see ember.ops.complex_ops).
"""
from __future__ import annotations

import numbers

import numpy as np

from ._state import STATE as _STATE
from .ops import api as _api
from .ops.lapack import (LinAlgError, _eig_t, _eigh_t, _qr_t, _slogdet_t, _svd_t, linalg_cholesky, linalg_cross,
                         linalg_det, linalg_eig, linalg_eigh, linalg_inv, linalg_matrix_norm, linalg_qr,
                         linalg_slogdet, linalg_solve, linalg_svd, linalg_vecdot)
from .ops.reduction import linalg_vector_norm, norm_dtype_checks


def matrix_exp(A):
    """``torch.linalg.matrix_exp``: the exponential of each square matrix (``ember.matrix_exp``)."""
    return _api.matrix_exp(A)

__all__ = ["LinAlgError", "norm", "vector_norm", "matrix_norm", "cross", "vecdot", "matmul", "inv", "det",
           "slogdet", "solve", "cholesky", "qr", "eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank",
           "matrix_exp"]


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"linalg.{name}(): the out= argument is not supported by ember")


# ---------------------------------------------------------------------- norms
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """``linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None)``: over all
    elements when ``dim`` is None."""
    _no_out("vector_norm", out)
    if isinstance(dim, numbers.Integral):
        dim = [int(dim)]
    elif dim is not None:
        dim = list(dim)
    dtype = norm_dtype_checks("linalg.vector_norm", x.dtype, dtype)
    if x.dtype.is_complex:
        # a complex tensor's norms are its moduli's (torch), computed in dtype when given
        x = (x if dtype is None else x.to(dtype)).abs()
        dtype = None
    return linalg_vector_norm.binding(x, ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """``linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None)``: ``'fro'``,
    ``'nuc'``, and ``ord`` in ``1, -1, 2, -2, inf, -inf`` (2 / -2 / 'nuc' through singular values)."""
    _no_out("matrix_norm", out)
    dim = [int(dim)] if isinstance(dim, numbers.Integral) else list(dim)
    norm_dtype_checks("linalg.matrix_norm", A.dtype, dtype)
    return linalg_matrix_norm.binding(A, ord, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """``linalg.norm(A, ord=None, dim=None, keepdim=False, *, dtype=None)``: a vector norm when
    ``dim`` is one dim (or ``A`` is 1-D), a matrix norm when it is two dims (or ``A`` is 2-D and
    ``ord`` is given); with neither ``ord`` nor ``dim``, the 2-norm of all elements."""
    _no_out("norm", out)
    if dim is not None:
        dims = [int(dim)] if isinstance(dim, numbers.Integral) else list(dim)
        if len(dims) == 1 and not isinstance(ord, str):
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {A.ndim}D.")
    if A.ndim == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


# ---------------------------------------------------------------------- products
def cross(input, other, *, dim=-1, out=None):
    """``linalg.cross(input, other, *, dim=-1)``: the cross product of 3-vectors along ``dim``."""
    _no_out("cross", out)
    return linalg_cross.binding(input, other, dim)


def vecdot(x, y, *, dim=-1, out=None):
    """``linalg.vecdot(x, y, *, dim=-1)``: dot products along ``dim``, broadcasting the rest."""
    _no_out("vecdot", out)
    return linalg_vecdot.binding(x, y, dim=dim)


def matmul(input, other, *, out=None):
    """``linalg.matmul``: an alias of ``ember.matmul``."""
    _no_out("matmul", out)
    return _api.matmul(input, other)


# ---------------------------------------------------------------------- inverses and solves
def inv(A, *, out=None):
    """``linalg.inv(A)``: the inverse of each square matrix; a singular one raises
    :class:`LinAlgError` naming the batch element and the zero pivot."""
    _no_out("inv", out)
    return linalg_inv.binding(A)


def det(A, *, out=None):
    """``linalg.det(A)``: the determinant of each square matrix."""
    _no_out("det", out)
    return linalg_det.binding(A)


def slogdet(A, *, out=None):
    """``linalg.slogdet(A) -> (sign, logabsdet)``; a singular matrix gives ``(0, -inf)``."""
    _no_out("slogdet", out)
    return _slogdet_t(*linalg_slogdet.binding(A))


def solve(A, B, *, left=True, out=None):
    """``linalg.solve(A, B, *, left=True)``: ``X`` with ``A X = B`` (``X A = B`` when not ``left``).

    ``B`` is a batch of vectors when it is 1-D or has exactly ``A``'s shape minus the last dim;
    otherwise a batch of matrices. Batch dims broadcast (by ``expand``, so the gradient sums
    over broadcast dims through expand's derivative)."""
    _no_out("solve", out)
    if A.ndim >= 2 and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.solve: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A.ndim < 2:
        raise RuntimeError("linalg.solve: The input tensor A must have at least 2 dimensions.")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B.unsqueeze(-1) if vector else B
    if not left:
        if vector:
            raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation XA = B "
                               f"({A.shape[-2]}x{A.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
        A, b = A.mT, b.mT
    n = A.shape[-1]
    if b.shape[-2] != n:
        eq = "AX = B" if left else "XA = B"
        bb = b if left else b.mT
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation {eq} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {bb.shape[-2]}x{bb.shape[-1]})")
    batch = _broadcast_batch(tuple(b.shape[:-2]), tuple(A.shape[:-2]))
    if tuple(A.shape[:-2]) != batch:
        A = A.expand(*batch, n, n)
    if tuple(b.shape[:-2]) != batch:
        b = b.expand(*batch, *b.shape[-2:])
    x = linalg_solve.binding(A, b)
    if not left:
        x = x.mT
    return x.squeeze(-1) if vector else x


def _broadcast_batch(a, b):
    """The broadcast of batch shapes ``a`` and ``b``, with torch's message (its infer_size,
    ``a`` being the right-hand side) when they do not broadcast."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                               f"non-singleton dimension {i}")
        out.append(y if x == 1 else x)
    return tuple(out)


def cholesky(A, *, upper=False, out=None):
    """``linalg.cholesky(A, *, upper=False)``: ``L`` (lower) with ``A = L L^H``, or ``U = L^H``;
    reads the lower triangle of ``A``. Not positive definite: :class:`LinAlgError`."""
    _no_out("cholesky", out)
    L = linalg_cholesky.binding(A)
    return L.mH if upper else L


# ---------------------------------------------------------------------- factorisations
def qr(A, mode="reduced", *, out=None):
    """``linalg.qr(A, mode='reduced') -> (Q, R)``; ``mode`` 'reduced', 'complete' or 'r' (then
    Q is empty). Differentiable as PyTorch's: not for mode='r', nor mode='complete' with more rows
    than columns (both raise torch's RuntimeError at backward)."""
    _no_out("qr", out)
    return _qr_t(*linalg_qr.binding(A, mode))


def eig(A, *, out=None):
    """``linalg.eig(A) -> (eigenvalues, eigenvectors)``, complex for real or complex ``A``:
    ``A V = V diag(L)``, eigenvectors of norm 1 (LAPACK geev's: largest component real). They
    are defined up to a phase each, so only losses invariant to it can be differentiated (others
    raise at backward, as in torch)."""
    _no_out("eig", out)
    return _eig_t(*linalg_eig.binding(A))


def eigvals(A, *, out=None):
    """``linalg.eigvals(A)``: the eigenvalues of ``eig`` (complex), differentiable."""
    _no_out("eigvals", out)
    return linalg_eig.binding(A)[0]


def eigh(A, UPLO="L", *, out=None):
    """``linalg.eigh(A, UPLO='L') -> (eigenvalues, eigenvectors)`` of the symmetric matrix in the
    ``UPLO`` triangle (Hermitian for complex ``A``); eigenvalues real and ascending, eigenvectors up
    to sign (a phase for complex ``A``: only phase-invariant losses are differentiable)."""
    _no_out("eigh", out)
    return _eigh_t(*linalg_eigh.binding(A, UPLO))


def eigvalsh(A, UPLO="L", *, out=None):
    """``linalg.eigvalsh(A, UPLO='L')``: the eigenvalues of ``eigh``."""
    _no_out("eigvalsh", out)
    return linalg_eigh.binding(A, UPLO)[0]


def svd(A, full_matrices=True, *, driver=None, out=None):
    """``linalg.svd(A, full_matrices=True) -> (U, S, Vh)``; singular vectors up to sign.
    ``driver`` is a CUDA-only choice in PyTorch; ember accepts only None."""
    _no_out("svd", out)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs "
                           "with cuSOLVER backend.")
    return _svd_t(*linalg_svd.binding(A, full_matrices))


def svdvals(A, *, driver=None, out=None):
    """``linalg.svdvals(A)``: the singular values, descending."""
    _no_out("svdvals", out)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs "
                           "with cuSOLVER backend.")
    return linalg_svd.binding(A, False)[1]


def _tolerance(S, A, atol, rtol):
    """The cut-off below which singular values count as zero: ``max(atol, rtol * S_max)``, with
    PyTorch's default ``rtol = eps * max(m, n)`` when neither tolerance is given (and 0 when only
    ``atol`` is)."""
    eps = float(np.finfo(A.dtype.np).eps) if hasattr(A.dtype, "np") else 1e-7
    if rtol is None:
        rtol = eps * max(A.shape[-2], A.shape[-1]) if atol is None else 0.0
    smax = S.amax(-1, keepdim=True) if S.shape[-1] > 0 else S.sum(-1, keepdim=True)
    cut = smax * rtol
    if atol is not None:
        cut = _api.maximum(cut, atol if not isinstance(atol, numbers.Number) else
                           _api.full_like(cut, float(atol)))
    return cut


def _pinv_backward(g, X, A):
    """The gradient of ``X = pinv(A)`` for ``A`` (torch's formula, also used for ``hermitian``):
    from ``dX = -X dA X + X X^H dA^H (I - A X) + (I - X A) dA^H X^H X`` (constant rank), the
    adjoint is ``-X^H G X^H + (I - A X) G^H X X^H + X^H X G^H (I - X A)``, with products grouped
    so the inner matrices are the smaller of m x m and n x n."""
    Xh, gh = X.mH, g.mH
    if A.shape[-2] <= A.shape[-1]:
        K = gh @ X                                   # (n, n) ... grouped around G^H X
        KXh = K @ Xh
        return -(X @ K).mH + KXh - (A @ X) @ KXh + (Xh @ X) @ (gh - K @ A)
    K = X @ gh                                       # X G^H
    XhK = Xh @ K
    return -(K @ X).mH + XhK - (XhK @ X) @ A + (gh - A @ K) @ X @ Xh


_PINV_FN = []


def _pinv_function():
    """The autograd Function that gives pinv torch's derivative: the SVD / eigh composite would
    differentiate the thresholded factorisation instead (a different gradient for rank-deficient
    or cut-off inputs, and a symmetrised one for ``hermitian``). Built lazily (import cycle)."""
    if not _PINV_FN:
        from .autograd.function import Function

        class LinalgPinv(Function):
            @staticmethod
            def forward(ctx, A, atol, rtol, hermitian):
                X = _pinv_values(A, atol, rtol, hermitian)
                ctx.save_for_backward(A, X)
                return X

            @staticmethod
            def backward(ctx, g):
                A, X = ctx.saved_tensors
                return _pinv_backward(g, X, A), None, None, None
        _PINV_FN.append(LinalgPinv)
    return _PINV_FN[0]


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """``linalg.pinv(A, *, atol=None, rtol=None, hermitian=False)``: the Moore-Penrose inverse
    through the SVD (eigh when ``hermitian``), singular values under the tolerance treated as 0;
    differentiable with torch's formula (:func:`_pinv_backward`)."""
    _no_out("pinv", out)
    if A.ndim < 2 or not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"linalg.pinv({A.dtype.legacy_name}{{{list(A.shape)}}}): expected a tensor with 2 "
                           f"or more dimensions of float, double, cfloat or cdouble types")
    if A.requires_grad and _STATE.grad_enabled:
        return _pinv_function().apply(A, atol, rtol, hermitian)
    return _pinv_values(A, atol, rtol, hermitian)


def _pinv_values(A, atol, rtol, hermitian):
    """pinv's value (no derivative of its own is wanted: see :func:`_pinv_function`)."""
    if hermitian:
        w, v = linalg_eigh.binding(A, "L")
        aw = w.abs()
        cut = _tolerance(aw, A, atol, rtol)
        keep = aw > cut
        winv = _api.where(keep, 1 / _api.where(keep, w, _api.ones_like(w)), _api.zeros_like(w))
        return (v * winv.unsqueeze(-2)) @ v.mH
    u, s, vh = linalg_svd.binding(A, False)
    cut = _tolerance(s, A, atol, rtol)
    keep = s > cut
    sinv = _api.where(keep, 1 / _api.where(keep, s, _api.ones_like(s)), _api.zeros_like(s))
    return (vh.mH * sinv.unsqueeze(-2)) @ u.mH


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``linalg.matrix_rank(A, *, atol=None, rtol=None, hermitian=False)``: how many singular
    values (absolute eigenvalues when ``hermitian``) exceed the tolerance; int64. torch's older
    overload ``matrix_rank(A, tol, hermitian=False)`` is kept too: ``tol`` is an absolute
    tolerance (``atol=tol, rtol=0``)."""
    _no_out("matrix_rank", out)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise TypeError("linalg.matrix_rank(): tol cannot be combined with atol or rtol")
        atol, rtol = tol, 0.0
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    s = linalg_eigh.binding(A, "L")[0].abs() if hermitian else linalg_svd.binding(A, False)[1]
    s = s.detach()
    cut = _tolerance(s, A, atol, rtol)
    return (s > cut).sum(-1)


for _fn in (vector_norm, matrix_norm, norm, cross, vecdot, matmul, inv, det, slogdet, solve, cholesky, qr, eig,
            eigvals, eigh,
            eigvalsh, svd, svdvals, pinv, matrix_rank):
    _fn.__module__ = "ember.linalg"


# the rest of torch.linalg (LU, triangular solves, lstsq, the _ex variants, LDL^T, composites)
from .ops.linalg_extra import LINALG as _EXTRA  # noqa: E402

globals().update(_EXTRA)
__all__ += list(_EXTRA)
for _fn in _EXTRA.values():
    _fn.__module__ = "ember.linalg"

# torch's out= on every linalg function (ember/ops/_out.py)
from .ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), _out_mod.LINALG, "linalg.")
