"""PyTorch's top-level linear-algebra functions and their Tensor methods, over ``ember.linalg``
and the LAPACK records of ``ember.ops.lapack`` (so autograd, fake tensors and the compiler need
nothing new), plus ``matrix_exp``, a kernel op:

* ``inverse``, ``pinverse`` (``rcond``), ``logdet``, ``slogdet``, ``qr`` (``some``), ``svd``
  (``U, S, V``; ``some``, ``compute_uv``), ``cholesky`` (``upper``), ``cholesky_solve``,
  ``cholesky_inverse``, ``triangular_solve``, ``chain_matmul``, ``adjoint``;
* ``matrix_exp``: scaling and squaring with the [13/13] Pade approximant (Higham 2005) in the
  kernel; its derivative is the exact Frechet derivative read off the exponential of the block
  matrix ``[[A^T, G], [0, A^T]]`` (what PyTorch does), written with ``matrix_exp`` itself, so it
  is differentiable again.

Not here: ``lu`` / ``lu_unpack`` / ``lu_solve`` (ember has no LU factorisation op yet).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta as _M
from . import api
from .lapack import _check_square, _svd_t, linalg_qr, linalg_slogdet, linalg_svd
from .reduction import _return_type
from ._exports import Exports
from .registry import defop

_export = Exports(methods_by_default=True)
_EXPORTS, _METHODS = _export.functions, _export.methods

_qr_t = _return_type("qr", ("Q", "R"))
_svd_old_t = _return_type("svd", ("U", "S", "V"))
_slogdet_old_t = _return_type("slogdet", ("sign", "logabsdet"))
_trisolve_t = _return_type("triangular_solve", ("solution", "cloned_coefficient"))


def _la():
    from .. import linalg
    return linalg


def _check_2d(name, A):
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")


def _batch(*shapes):
    return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))


# ---------------------------------------------------------------------- inverses, determinants
@_export
def inverse(input, *, out=None):
    """``torch.inverse``: an alias of ``linalg.inv``."""
    return _la().inv(input, out=out)


@_export
def pinverse(input, rcond=1e-15):
    """``torch.pinverse(input, rcond=1e-15)``: ``linalg.pinv`` with ``rcond`` as the relative
    tolerance (and no absolute one)."""
    return _la().pinv(input, rtol=rcond)


@_export
def slogdet(input):
    """``torch.slogdet(A) -> (sign, logabsdet)``."""
    return _slogdet_old_t(*linalg_slogdet.binding(input))


@_export
def logdet(input):
    """``log(det A)``: NaN where the determinant is negative, -inf where it is zero (from
    ``slogdet``, so the gradient is ``A^-T`` where the determinant is positive). Complex ``A``:
    the complex logarithm ``log|det A| + log(sign)`` (principal branch), as torch."""
    sign, logabs = linalg_slogdet.binding(input)
    if sign.dtype.is_complex:
        return logabs.to(sign.dtype) + api.log(sign)
    return api.where(sign < 0, api.full_like(logabs, float("nan")), logabs)


# ---------------------------------------------------------------------- factorisations
@_export
def qr(input, some=True, *, out=None):
    """``torch.qr(A, some=True) -> (Q, R)``: ``linalg.qr`` in mode 'reduced' (``some``) or
    'complete'."""
    if out is not None:
        raise TypeError("qr(): the out= argument is not supported by ember")
    return _qr_t(*linalg_qr.binding(input, "reduced" if some else "complete"))


@_export
def svd(input, some=True, compute_uv=True, *, out=None):
    """``torch.svd(A, some=True, compute_uv=True) -> (U, S, V)``: ``V`` (not ``Vh``) with
    ``A = U diag(S) V^H``; reduced when ``some``. Without ``compute_uv``, U and V are zero
    matrices of shapes (m, m) and (n, n) and S still has its gradient."""
    if out is not None:
        raise TypeError("svd(): the out= argument is not supported by ember")
    if input.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    if not compute_uv:
        *b, m, n = tuple(input.shape)
        S = linalg_svd.binding(input, False)[1]
        z = dict(dtype=input.dtype, device=input.device)
        return _svd_old_t(api.zeros((*b, m, m), **z), S, api.zeros((*b, n, n), **z))
    U, S, Vh = linalg_svd.binding(input, not some)
    return _svd_old_t(U, S, Vh.mH)


@_export
def cholesky(input, upper=False, *, out=None):
    """``torch.cholesky(A, upper=False)``: ``linalg.cholesky``."""
    return _la().cholesky(input, upper=upper, out=out)


def _tri_straight(L, upper):
    """``L``'s triangle as its value, while the gradient flows to the whole of ``L`` (PyTorch's
    cholesky_solve / cholesky_inverse read one triangle but their derivatives are the formula
    for the full ``L L^T``)."""
    other = L.tril(-1) if upper else L.triu(1)
    return L - other.detach()


def _chol_product(L, upper):
    T = _tri_straight(L, upper)
    return T.mH @ T if upper else T @ T.mH


@_export
def cholesky_solve(input, input2, upper=False, *, out=None):
    """``torch.cholesky_solve(B, L, upper=False)``: ``X`` with ``A X = B`` where
    ``A = L L^H`` (``U^H U`` when ``upper``); batch dims broadcast."""
    if out is not None:
        raise TypeError("cholesky_solve(): the out= argument is not supported by ember")
    if input.ndim < 2 or input2.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} dimensions instead"
                           if input.ndim < 2 else
                           f"u should have at least 2 dimensions, but has {input2.ndim} dimensions instead")
    if input.dtype is not input2.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{input.dtype.legacy_name} and A of type {input2.dtype.legacy_name} instead.")
    A = _chol_product(input2, upper)
    batch = _batch(A.shape[:-2], input.shape[:-2])
    A = A.expand(*batch, *A.shape[-2:])
    return _la().solve(A, input.expand(*batch, *input.shape[-2:]))


@_export
def cholesky_inverse(input, upper=False, *, out=None):
    """``torch.cholesky_inverse(L, upper=False)``: ``(L L^H)^-1`` (``(U^H U)^-1`` when ``upper``)."""
    if out is not None:
        raise TypeError("cholesky_inverse(): the out= argument is not supported by ember")
    _check_square("cholesky_inverse", input.shape, input.dtype)
    return _la().inv(_chol_product(input, upper))


@_export
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """``torch.triangular_solve(b, A, upper=True, transpose=False, unitriangular=False)
    -> (solution, cloned_coefficient)``: ``X`` with ``op(T) X = b``, ``T`` the upper (lower)
    triangle of ``A`` (unit diagonal when ``unitriangular``), ``op`` the transpose when
    ``transpose``. Only the triangle read gets a gradient, as in PyTorch."""
    if out is not None:
        raise TypeError("triangular_solve(): the out= argument is not supported by ember")
    if input.ndim < 2:
        raise RuntimeError(f"torch.triangular_solve: Expected b to have at least 2 dimensions, but it has "
                           f"{input.ndim} dimensions instead")
    if A.ndim < 2:
        raise RuntimeError(f"torch.triangular_solve: Expected A to have at least 2 dimensions, but it has "
                           f"{A.ndim} dimensions instead")
    if input.dtype is not A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{input.dtype.legacy_name} and A of type {A.dtype.legacy_name} instead.")
    _check_square("torch.triangular_solve", A.shape, A.dtype)
    if input.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for triangular_solve: each A matrix is "
                           f"{A.shape[-2]} by {A.shape[-1]} but each b matrix is "
                           f"{input.shape[-2]} by {input.shape[-1]}")
    n = A.shape[-1]
    if unitriangular:
        eye = api.eye(n, dtype=A.dtype, device=A.device)
        T = (A.triu(1) if upper else A.tril(-1)) + eye
    else:
        T = A.triu() if upper else A.tril()
    if transpose:
        T = T.mT
    batch = _batch(A.shape[:-2], input.shape[:-2])
    X = _la().solve(T.expand(*batch, n, n), input.expand(*batch, *input.shape[-2:]))
    return _trisolve_t(X, A.expand(*batch, n, n).clone())


# ---------------------------------------------------------------------- products, adjoint
@_export(method=False)
def chain_matmul(*matrices, out=None):
    """``torch.chain_matmul(*matrices)``: the product of 2-D matrices, left to right (one matrix:
    a copy)."""
    if out is not None:
        raise TypeError("chain_matmul(): the out= argument is not supported by ember")
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    res = matrices[0]
    for m in matrices[1:]:
        res = api.mm(res, m)
    return res


@_export
def adjoint(input):
    """The conjugate transpose of the last two dims (a view of a real tensor; a complex one is
    conjugated, which ember materialises)."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. "
                           f"Got {input.ndim}-D tensor.")
    out = input.transpose(-2, -1)
    return api.conj(out) if input.dtype.is_complex else out


# ---------------------------------------------------------------------- matrix_exp
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm_one(xp, a):
    """exp of one float64 matrix: [13/13] Pade with scaling and squaring (Higham 2005)."""
    n = a.shape[-1]
    norm = float(xp.abs(a).sum(0).max()) if n else 0.0
    if not math.isfinite(norm):
        return xp.full_like(a, np.nan)
    s = max(0, int(math.ceil(math.log2(norm / _THETA13)))) if norm > _THETA13 else 0
    if s:
        a = a * (2.0 ** -s)
    b = _PADE13
    eye = xp.eye(n, dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _check_mexp(shape, dt):
    dt = dt if isinstance(dt, _t.dtype) else _t.from_numpy_dtype(dt)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise RuntimeError("linalg.matrix_exp: A must be batches of square matrices, but they are "
                           + (f"{shape[-2]} by {shape[-1]} matrices" if len(shape) >= 2 else
                              f"{shape[-1] if shape else 1} by 1 matrices"))
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as input. "
                           f"Got {dt.legacy_name}")


@defop("matrix_exp(Tensor self) -> Tensor", save=(), tags=())
def matrix_exp(xp, a):
    """The matrix exponential of each square matrix in the last two dims (computed in float64 or
    complex128; the derivative below is holomorphic, so complex A needs nothing more)."""
    _check_mexp(a.shape, a.dtype)
    dt = a.dtype
    if a.size == 0:     # 0 x 0 matrices (or an empty batch): nothing to exponentiate
        return xp.empty_like(a)
    flat = a.reshape((-1,) + a.shape[-2:]).astype(np.complex128 if dt.kind == "c" else np.float64)
    out = xp.empty_like(flat)
    for i in range(flat.shape[0]):
        out[i] = _expm_one(xp, flat[i])
    return xp.ascontiguousarray(out.reshape(a.shape).astype(dt, copy=False))


@matrix_exp.derivative(save=("self",))
def _matrix_exp_bw(ctx, g):
    # the Frechet derivative L(A^T, G) = exp([[A^T, G], [0, A^T]])[:n, n:]
    (a,) = ctx.args
    n = a.shape[-1]
    at = a.mT
    top = api.cat([at, g], -1)
    bottom = api.cat([api.zeros_like(at), at], -1)
    big = api.cat([top, bottom], -2)
    return (matrix_exp.binding(big)[..., :n, n:],)


@matrix_exp.meta_fn
def _matrix_exp_meta(a):
    _check_mexp(tuple(a.shape), a.dtype)
    return _M.out(tuple(a.shape), a.dtype)


# ---------------------------------------------------------------------- exports
_export.install()
