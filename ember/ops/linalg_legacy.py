"""PyTorch's older top-level linear algebra: ``geqrf`` / ``orgqr`` / ``ormqr`` (LAPACK's
Householder QR, and their Tensor methods), and the functions torch 2 removed (``matrix_rank``,
``solve``, ``lstsq``, ``eig``, ``symeig``), which raise torch's RuntimeError naming the
``torch.linalg`` replacement -- so old code fails with the same advice it gets under torch.

``geqrf`` is numpy's ``qr(mode="raw")`` (LAPACK geqrf; numpy hands back the factor transposed,
its Fortran layout, which is undone here). Like torch's, it has no derivative. ``orgqr`` is
``linalg.householder_product`` and ``ormqr`` applies the reflectors one at a time in ember ops,
so both are differentiable in ``input``, ``tau`` and ``other``.
"""
from __future__ import annotations

import numpy as np

from . import _meta as _M
from . import api
from ._exports import Exports
from .lapack import _c, _host
from .linalg_extra import _check_lapack_dtype, _edtype, householder_product
from .reduction import _return_type
from .registry import defop

_export = Exports(methods_by_default=True)
_geqrf_t = _return_type("geqrf", ("a", "tau"))


# ---------------------------------------------------------------------- geqrf
def _geqrf_checks(shape, dt):
    if len(shape) < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _check_lapack_dtype("geqrf_cpu", dt)


@defop("geqrf_raw(Tensor self) -> (Tensor, Tensor)", function=False, method=False, save=(),
       grad_fn_name="GeqrfBackward0")
def geqrf_raw(xp, a):
    """``(a, tau)`` of LAPACK geqrf for every matrix of the batch: R on and above the diagonal,
    the Householder vectors (unit diagonal implied) below it."""
    _geqrf_checks(a.shape, a.dtype)
    h = _host(a)
    m, n = h.shape[-2:]
    k = min(m, n)
    if h.size == 0:
        return _c(xp, xp.asarray(h.copy())), _c(xp, xp.zeros(h.shape[:-2] + (k,), dtype=h.dtype))
    raw, tau = np.linalg.qr(h, mode="raw")          # raw: (..., n, m), the factor transposed
    return (_c(xp, xp.asarray(np.swapaxes(raw, -1, -2).astype(h.dtype, copy=False))),
            _c(xp, xp.asarray(tau.astype(h.dtype, copy=False))))


@geqrf_raw.meta_fn
def _geqrf_meta(a):
    _geqrf_checks(a.shape, a.dtype)
    k = min(a.shape[-2], a.shape[-1])
    return _M.out(tuple(a.shape), a.dtype), _M.out(tuple(a.shape[:-2]) + (k,), a.dtype)


def _geqrf_backward(ctx, grads):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


geqrf_raw.derivative(_geqrf_backward)


@_export
def geqrf(input, *, out=None):
    """``torch.geqrf(A)``: ``(a, tau)``, LAPACK's compact Householder QR (see the module)."""
    if out is not None:
        from ._out import call_with_out
        return call_with_out("geqrf", geqrf, (input,), {}, out, 2)
    return _geqrf_t(*geqrf_raw.binding(input))


# ---------------------------------------------------------------------- orgqr / ormqr
@_export
def orgqr(input, input2, *, out=None):
    """``torch.orgqr(A, tau)``: an alias of ``linalg.householder_product``."""
    if out is not None:
        from ._out import call_with_out
        return call_with_out("orgqr", orgqr, (input, input2), {}, out)
    return householder_product(input, input2)


def _ormqr_checks(A, tau, C, left):
    name = "torch.ormqr"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if C.ndim < 2:
        raise RuntimeError(f"{name}: other must have at least 2 dimensions.")
    side = -2 if left else -1
    if C.shape[side] != A.shape[-2]:
        raise RuntimeError(f"{name}: other.shape[{side}] must be equal to input.shape[-2]")
    if tau.ndim >= 1 and tau.shape[-1] != min(C.shape[side], A.shape[-1]):
        raise RuntimeError(f"{name}: tau.shape[-1] must be equal to min(other.shape[-2], input.shape[-1])")
    if A.ndim - tau.ndim != 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if A.ndim != C.ndim:
        raise RuntimeError(f"{name}: Expected other to have the same number of dimensions as input, but got "
                           f"other.ndim equal to {C.ndim} and input.ndim is equal to {A.ndim}")
    if A.ndim > 2:
        if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
            raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                               f"{list(tau.shape[:-1])}")
        if tuple(C.shape[:-2]) != tuple(A.shape[:-2]):
            raise RuntimeError(f"{name}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
                               f"{list(C.shape[:-2])}")
    for what, t in (("tau", tau), ("other", C)):
        if t.dtype is not A.dtype:
            raise RuntimeError(f"{name}: Expected input and {what} to have the same dtype, but input has dtype"
                               f"{_edtype(A.dtype).legacy_name} and {what} has dtype {_edtype(t.dtype).legacy_name}")
    _check_lapack_dtype("ormqr_cpu", A.dtype)


@_export
def ormqr(input, input2, input3, left=True, transpose=False, *, out=None):
    """``torch.ormqr(A, tau, C, left=True, transpose=False)``: ``op(Q) C`` (``left``) or
    ``C op(Q)``, ``Q = H_1 ... H_k`` the full (m x m) product of geqrf's reflectors
    ``H_i = I - tau_i v_i v_i^H`` and ``op`` the conjugate transpose when ``transpose``. Q is
    never formed: each reflector is applied to ``C`` as a rank-1 update."""
    if out is not None:
        from ._out import call_with_out
        return call_with_out("ormqr", ormqr, (input, input2, input3, left, transpose), {}, out)
    A, tau, C = input, input2, input3
    _ormqr_checks(A, tau, C, left)
    m, k = A.shape[-2], tau.shape[-1]
    rows = api.arange(m, device=A.device)
    # Q C applies H_k first; Q^H C applies H_1^H first; C Q applies H_1 first; C Q^H applies H_k^H first
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for i in order:
        v = A[..., :, i] * (rows > i).to(A.dtype) + (rows == i).to(A.dtype)          # (..., m)
        t = tau[..., i, None, None]
        if transpose and t.dtype.is_complex:
            t = t.conj()
        if left:                                   # H C = C - t v (v^H C)
            C = C - (t * v.unsqueeze(-1)) @ (v.conj().unsqueeze(-2) @ C)
        else:                                      # C H = C - t (C v) v^H
            C = C - (C @ v.unsqueeze(-1)) @ (t * v.conj().unsqueeze(-2))
    return C


# ---------------------------------------------------------------------- removed in torch 2
_REMOVED = "This function was deprecated since version 1.9 and is now removed. "


@_export(method=False)
def matrix_rank(input, tol=None, symmetric=False, *, out=None):
    """Removed in torch 2: raises torch's RuntimeError pointing at ``linalg.matrix_rank``."""
    raise RuntimeError(_REMOVED.rstrip(" ") + "\nPlease use the `torch.linalg.matrix_rank` function instead. "
                       "The parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.")


@_export
def solve(input, A, *, out=None):
    """Removed in torch 2: raises torch's RuntimeError pointing at ``linalg.solve``."""
    raise RuntimeError(
        _REMOVED + "`torch.solve` is deprecated in favor of `torch.linalg.solve`. "
        "`torch.linalg.solve` has its arguments reversed and does not return the LU factorization.\n\n"
        "To get the LU factorization see `torch.lu`, which can be used with `torch.lu_solve` or `torch.lu_unpack`.\n"
        "X = torch.solve(B, A).solution should be replaced with:\nX = torch.linalg.solve(A, B)")


@_export
def lstsq(input, A, *, out=None):
    """Removed in torch 2: raises torch's RuntimeError pointing at ``linalg.lstsq``."""
    raise RuntimeError(
        _REMOVED + "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n"
        "`torch.linalg.lstsq` has reversed arguments and does not return the QR decomposition in the returned "
        "tuple (although it returns other information about the problem).\n\n"
        "To get the QR decomposition consider using `torch.linalg.qr`.\n\n"
        "The returned solution in `torch.lstsq` stored the residuals of the solution in the last m - n columns "
        "of the returned value whenever m > n. In torch.linalg.lstsq, the residuals are in the field "
        "'residuals' of the returned named tuple.\n\n"
        "The unpacking of the solution, as in\nX, _ = torch.lstsq(B, A).solution[:A.size(1)]\n"
        "should be replaced with:\nX = torch.linalg.lstsq(A, B).solution")


@_export
def eig(input, eigenvectors=False, *, e=None, v=None):
    """Removed in torch 2: raises torch's RuntimeError pointing at ``linalg.eig`` / ``eigvals``."""
    raise RuntimeError(
        _REMOVED + "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real "
        "tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\n"
        "L_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) should be "
        "replaced with:\nL_complex, V_complex = torch.linalg.eig(A)")


@_export
def symeig(input, eigenvectors=False, upper=True, *, out=None):
    """Removed in torch 2: raises torch's RuntimeError pointing at ``linalg.eigh`` / ``eigvalsh``."""
    raise RuntimeError(
        _REMOVED + "The default behavior has changed from using the upper triangular portion of the matrix by "
        "default to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should be "
        "replaced with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\n"
        "L, V = torch.symeig(A, eigenvectors=True) should be replaced with:\n"
        "L, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')")


_export.install()
