"""The rest of ``torch.linalg`` over real and complex dtypes (LDL^T: real only): LU (``lu_factor[_ex]``, ``lu``, ``lu_solve``,
``lu_unpack``), triangular solves, least squares, the ``_ex`` variants that report ``info``
instead of raising, LDL^T (Bunch-Kaufman), and composites (``multi_dot``, ``cond``,
``vander``, ``tensorinv``, ``tensorsolve``, ``householder_product``, ``matrix_power``,
``diagonal``); plus PyTorch's top-level ``lu`` / ``lu_solve`` / ``lu_unpack``.

Why numpy loops here: numpy.linalg exposes neither LU with its pivots (getrf) nor a
triangular solve (trsm) nor sytrf/sytrs, and ember depends on numpy only. So:

* LU with partial pivoting is written as LAPACK's unblocked getrf: one Python step per column,
  each a rank-1 update of *every matrix in the batch at once* (O(n) numpy calls, O(n^3) flops
  in numpy), pivots 1-based int32 as LAPACK returns them;
* a triangular solve is forward / back substitution, one row of the solution per step,
  vectorised over the batch and the right-hand sides; a zero on the diagonal gives inf/nan,
  as LAPACK's trsm does (it does not check);
* LDL^T is LAPACK's sytf2 (Bunch-Kaufman diagonal pivoting, lower storage) per matrix and
  sytrs for the solve, so ``LD`` and ``pivots`` have LAPACK's packed format.

The kernels are extern ops for the compiler (``ember.prims.coverage.EXTERN``), like the LAPACK
records in ``ember.ops.lapack``; their derivatives are written in ember ops (LU's through
triangular solves, lstsq's through ``pinv``), so they are differentiable again. Everything
else is composed of differentiable ops, so its gradient is exact by construction.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta as _M
from . import api
from ._exports import Exports
from ._helpers import sum_to
from .lapack import (LinAlgError, _batch_prefix, _c, _check_float, _check_matrix, _check_square, _edtype,
                     _first_zero_pivot, _host, _raw_complex_grad, _real_np)
from .reduction import _return_type
from .registry import defop

_export = Exports(methods_by_default=False)

_lu_factor_t = _return_type("linalg_lu_factor", ("LU", "pivots"))
_lu_factor_ex_t = _return_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_lu_t = _return_type("linalg_lu", ("P", "L", "U"))
_lu_unpack_t = _return_type("lu_unpack", ("P", "L", "U"))
_lu_with_info_t = _return_type("_lu_with_info", ("LU", "pivots", "info"))
_cholesky_ex_t = _return_type("linalg_cholesky_ex", ("L", "info"))
_inv_ex_t = _return_type("linalg_inv_ex", ("inverse", "info"))
_solve_ex_t = _return_type("linalg_solve_ex", ("result", "info"))
_lstsq_t = _return_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_ldl_factor_t = _return_type("linalg_ldl_factor", ("LD", "pivots"))
_ldl_factor_ex_t = _return_type("linalg_ldl_factor_ex", ("LD", "pivots", "info"))

# C++ type names PyTorch prints in some messages (multi_dot)
_CNAME = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
          "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
          "uint8": "unsigned char", "bool": "bool"}


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"linalg.{name}(): the out= argument is not supported by ember")


def _la():
    from .. import linalg
    return linalg


def _batch(*shapes):
    return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def _check_lapack_dtype(kernel, dt, name=None):
    """PyTorch's dispatch error for integer, bool and half-precision inputs of a LAPACK kernel
    (complex64 / complex128 are accepted: the numpy loops are dtype-generic)."""
    dt = _edtype(dt)
    if dt.is_complex:
        return
    if not dt.is_floating_point or dt.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dt.legacy_name}'")


# ---------------------------------------------------------------------- numpy kernels
def _nbatch(shape):
    """The number of matrices in a batch of shape ``(..., m, n)`` (``reshape(-1, m, n)`` cannot
    infer it when a matrix is empty)."""
    return int(np.prod(shape[:-2], dtype=np.int64))


def _lu_np(xp, a, pivot=True):
    """LU with partial pivoting of a batch ``(..., m, n)``, LAPACK getrf's right-looking
    algorithm vectorised over the batch. Returns ``(LU, pivots, info)``: ``LU`` holds ``U`` on
    and above the diagonal and the unit-lower ``L`` below it, ``pivots`` (``..., min(m, n)``) are
    1-based row interchanges (row ``j`` was swapped with row ``pivots[j] - 1`` at step ``j``),
    ``info`` is the 1-based index of the first exactly-zero pivot (0 if none). A zero pivot does
    not stop the factorisation (its column is left unscaled, as getrf does)."""
    *batch, m, n = a.shape
    k = min(m, n)
    nb = int(np.prod(batch, dtype=np.int64))
    w = a.reshape((nb, m, n)).copy()
    rows = xp.arange(nb)
    piv = xp.empty((nb, k), dtype=np.int32)
    info = xp.zeros((nb,), dtype=np.int32)
    for j in range(k):
        if pivot:
            col = w[:, j:, j]
            # LAPACK's i?amax: |x| for real, |Re x| + |Im x| for complex (izamax), so the pivots
            # are getrf's
            mag = xp.abs(col.real) + xp.abs(col.imag) if col.dtype.kind == "c" else xp.abs(col)
            p = j + xp.argmax(mag, axis=1)
            piv[:, j] = p + 1
            rj = w[rows, j].copy()
            w[rows, j] = w[rows, p]
            w[rows, p] = rj
        else:
            piv[:, j] = j + 1
        d = w[:, j, j]
        zero = d == 0
        info = xp.where((info == 0) & zero, np.int32(j + 1), info).astype(np.int32)
        if j + 1 < m:
            w[:, j + 1:, j] /= xp.where(zero, xp.ones_like(d), d)[:, None]
            if j + 1 < n:
                w[:, j + 1:, j + 1:] -= w[:, j + 1:, j:j + 1] * w[:, j:j + 1, j + 1:]
    return (w.reshape(a.shape), piv.reshape(tuple(batch) + (k,)), info.reshape(tuple(batch)))


def _perm_np(xp, piv, m):
    """The row permutation of LAPACK pivots: ``perm`` with ``(P^T A)[r] = A[perm[r]]``."""
    *batch, k = piv.shape
    nb = int(np.prod(batch, dtype=np.int64))
    flat = piv.reshape((nb, k)).astype(np.int64) - 1
    perm = xp.broadcast_to(xp.arange(m, dtype=np.int64), (nb, m)).copy()
    rows = xp.arange(nb)
    for j in range(k):
        p = flat[:, j]
        tmp = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = tmp
    return perm.reshape(tuple(batch) + (m,))


def _trsm_np(xp, t, b, upper, unit):
    """``X`` with ``T X = B`` by substitution: ``T`` (..., n, n) is read in its upper (lower)
    triangle only, with a unit diagonal when ``unit``; ``B`` (..., n, k) has ``T``'s batch
    dims. One row of ``X`` per step over the whole batch; a zero diagonal entry gives inf/nan
    (LAPACK's trsm does not check either)."""
    n = t.shape[-1]
    x = b.astype(t.dtype, copy=True)
    for i in (range(n - 1, -1, -1) if upper else range(n)):
        s = slice(i + 1, n) if upper else slice(0, i)
        if (n - i - 1 if upper else i) > 0:
            x[..., i, :] -= (t[..., i:i + 1, s] @ x[..., s, :])[..., 0, :]
        if not unit:
            x[..., i, :] /= t[..., i, i:i + 1]
    return x


def _lu_solve_np(xp, lu, piv, b):
    """``A^-1 B`` from getrf's output (``B`` with ``LU``'s batch dims)."""
    perm = _perm_np(xp, piv, lu.shape[-2])
    pb = xp.take_along_axis(b, perm[..., :, None], axis=-2)
    y = _trsm_np(xp, lu, pb, upper=False, unit=True)
    return _trsm_np(xp, lu, y, upper=True, unit=False)


# ---------------------------------------------------------------------- LU factorisation
def _check_lu(shape, dt):
    if len(shape) < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(shape)} instead")
    _check_lapack_dtype("lu_cpu", dt, "linalg.lu_factor")


def _lu_error(errors, shape, info):
    """PyTorch's error for a zero pivot ``info`` (first failing batch element)."""
    flat = np.asarray(_host(info)).reshape(-1)
    bad = np.nonzero(flat)[0]
    if not len(bad):
        return None
    i = int(bad[0])
    piv = int(flat[i])
    return RuntimeError(f"{errors}: {_batch_prefix(shape, i)}U[{piv},{piv}] is zero and using it on lu_solve "
                        f"would result in a division by zero. If you still want to perform the factorization, "
                        f"consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


@defop("linalg_lu_factor_ex(Tensor A, *, bool pivot=True, str errors='') -> (Tensor, Tensor, Tensor)",
       function=False, method=False, save=(), save_result=True, grad_fn_name="LinalgLuFactorExBackward0")
def linalg_lu_factor_ex(xp, a, pivot=True, errors=""):
    """``(LU, pivots, info)`` of ``A = P L U``. ``errors``: the public name under which a zero
    pivot raises PyTorch's error ('' returns ``info`` only, as ``lu_factor_ex``)."""
    _check_lu(a.shape, a.dtype)
    if not pivot and xp is np:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, piv, info = _lu_np(xp, a, pivot)
    if errors:
        err = _lu_error(errors, a.shape, info)
        if err is not None:
            raise err
    return _c(xp, lu), _c(xp, piv), _c(xp, info)


@linalg_lu_factor_ex.meta_fn
def _lu_factor_ex_meta(a, pivot=True, errors=""):
    _check_lu(tuple(a.shape), a.dtype)
    *b, m, n = tuple(a.shape)
    return (_M.out(tuple(a.shape), a.dtype), _M.out((*b, _M.smin(m, n)), _t.int32),
            _M.out(tuple(b), _t.int32))


def _eye(m, n, like):
    return api.eye(m, n, dtype=like.dtype, device=like.device)


def _unpack_lu(LU):
    """``L`` (m x k, unit lower) and ``U`` (k x n, upper) from getrf's packed matrix."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + _eye(m, k, LU)
    U = LU[..., :k, :].triu()
    return L, U


def _perm_matrix(pivots, m, like):
    """``P`` of ``A = P L U`` as a matrix of ``like``'s dtype: ``P[i, r] = (i == perm[r])``."""
    perm = _lu_perm.binding(pivots, m)
    ar = api.arange(m, device=like.device).unsqueeze(-1)
    return (ar == perm.unsqueeze(-2)).to(like.dtype)


def _lu_core_bw(L, U, phi_l, gU):
    """``L^-T (tril(phi_l, -1) + triu(gU U^T)) U^-T`` for square unit-lower ``L`` and upper
    ``U``: the gradient of ``B = L U`` given ``phi_l = L^T gL`` (the square LU derivative:
    ``L^-1 dB U^-1 = L^-1 dL + dU U^-1`` splits into its strictly lower and upper parts)."""
    st = linalg_solve_triangular.binding
    mid = phi_l.tril(-1) + (gU @ U.mT).triu()
    y = st(L.mT, mid, upper=True, left=True, unitriangular=True)
    return st(U.mT, y, upper=False, left=False)


def _lu_backward(P, L, U, gL, gU):
    """The gradient of ``A`` for ``A = P L U`` (``L`` m x k, ``U`` k x n, k = min(m, n)).
    Wide (m < n): ``U = [U1 U2]`` with ``U2 = L^-1 P^T A2``, so ``A2`` gets ``P L^-T gU2`` and
    ``L`` the extra ``-L^-T gU2 U2^T``. Tall (m > n): ``L = [L1; L2]`` with
    ``L2 = (P^T A)_2 U^-1``, so that block gets ``gL2 U^-T`` and ``U`` the extra
    ``-L2^T gL2 U^-T``."""
    m, n = L.shape[-2], U.shape[-1]
    gL = api.zeros_like(L) if gL is None else gL
    gU = api.zeros_like(U) if gU is None else gU
    st = linalg_solve_triangular.binding
    if m == n:
        return P @ _lu_core_bw(L, U, L.mT @ gL, gU)
    if m < n:
        U1, U2 = U[..., :, :m], U[..., :, m:]
        gU1, gU2 = gU[..., :, :m], gU[..., :, m:]
        g1 = _lu_core_bw(L, U1, L.mT @ gL - gU2 @ U2.mT, gU1)
        g2 = st(L.mT, gU2, upper=True, left=True, unitriangular=True)
        return P @ api.cat([g1, g2], -1)
    L1, L2 = L[..., :n, :], L[..., n:, :]
    gL1, gL2 = gL[..., :n, :], gL[..., n:, :]
    g2 = st(U.mT, gL2, upper=False, left=False)            # gL2 U^-T
    mid = (L1.mT @ gL1).tril(-1) + (gU @ U.mT - L2.mT @ gL2).triu()
    y = st(L1.mT, mid, upper=True, left=True, unitriangular=True)
    g1 = st(U.mT, y, upper=False, left=False)
    return P @ api.cat([g1, g2], -2)


@linalg_lu_factor_ex.derivative
def _lu_factor_ex_bw(ctx, grads):
    g = grads[0]
    if g is None:
        return (None,)
    LU, piv, _info = ctx.result
    L, U = _unpack_lu(LU)
    k = L.shape[-1]
    P = _perm_matrix(piv, LU.shape[-2], LU)
    return (_lu_backward(P, L, U, g[..., :, :k].tril(-1), g[..., :k, :].triu()),)


@defop("_lu_perm(Tensor pivots, int m) -> Tensor", function=False, method=False, tags=("nondifferentiable",))
def _lu_perm(xp, piv, m):
    """The row permutation (int64, ``(..., m)``) that LAPACK pivots describe."""
    return _c(xp, _perm_np(xp, piv, m))


@_lu_perm.meta_fn
def _lu_perm_meta(piv, m):
    return _M.out(tuple(piv.shape[:-1]) + (m,), _t.int64)


# ---------------------------------------------------------------------- triangular solve
def _trisolve_checks(a_shape, a_dt, b_shape, left):
    name = "linalg.solve_triangular"
    if len(b_shape) < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    _check_matrix(name, len(a_shape), a_dt)
    if a_shape[-1] != a_shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{a_shape[-2]} by {a_shape[-1]} matrices")
    n = a_shape[-1]
    if (b_shape[-2] if left else b_shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({a_shape[-2]}x{a_shape[-1]} and {b_shape[-2]}x{b_shape[-1]})")


@defop("linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False)"
       " -> Tensor", function=False, method=False, save=("self",), save_result=True,
       grad_fn_name="LinalgSolveTriangularBackward0")
def linalg_solve_triangular(xp, a, b, upper, left=True, unitriangular=False):
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``), ``A`` read in one triangle.
    ``A`` and ``B`` have the same batch dims (the public function broadcasts); the result has
    ``A``'s dtype, as PyTorch's."""
    _check_lapack_dtype("triangular_solve_cpu", a.dtype, "linalg.solve_triangular")
    _trisolve_checks(a.shape, a.dtype, b.shape, left)
    if left:
        x = _trsm_np(xp, a, b, upper, unitriangular)
    else:
        at = xp.swapaxes(a, -1, -2)
        x = xp.swapaxes(_trsm_np(xp, at, xp.swapaxes(b, -1, -2), not upper, unitriangular), -1, -2)
    return _c(xp, x.astype(a.dtype, copy=False))


@linalg_solve_triangular.meta_fn
def _solve_triangular_meta(a, b, upper, left=True, unitriangular=False):
    _check_lapack_dtype("triangular_solve_cpu", a.dtype, "linalg.solve_triangular")
    _trisolve_checks(tuple(a.shape), a.dtype, tuple(b.shape), left)
    return _M.out(tuple(b.shape), a.dtype)


@linalg_solve_triangular.derivative
def _solve_triangular_bw(ctx, g):
    # left: X = A^-1 B, so gB = A^-T g and gA = -gB X^T; right: X = B A^-1, gB = g A^-T and
    # gA = -X^T gB. Only the triangle that was read (its strict part when unitriangular) has
    # a gradient.
    a, _b, upper, left, unit = ctx.args
    x = ctx.result
    gb = linalg_solve_triangular.binding(a.mT, g, upper=not upper, left=left, unitriangular=unit)
    ga = None
    if ctx.needs_input_grad[0]:
        ga = -(gb @ x.mT) if left else -(x.mT @ gb)
        ga = ga.triu(1 if unit else 0) if upper else ga.tril(-1 if unit else 0)
    return (ga, gb.to(_b.dtype) if ctx.needs_input_grad[1] else None)


# ---------------------------------------------------------------------- _ex variants
@defop("linalg_inv_ex(Tensor A, *, str errors='') -> (Tensor, Tensor)", function=False, method=False, save=(),
       save_result=True, grad_fn_name="LinalgInvExBackward0")
def linalg_inv_ex(xp, a, errors=""):
    """``(inverse, info)``: ``info`` is the first zero pivot of the LU (0 if none); a singular
    element's inverse is what substitution through its LU gives (inf / nan)."""
    _check_square("linalg.inv", a.shape, a.dtype)
    info = xp.zeros(a.shape[:-2], dtype=np.int32)
    try:
        inv = xp.linalg.inv(a)
    except np.linalg.LinAlgError:
        lu, piv, info = _lu_np(xp, a)
        eye = xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)
        inv = _lu_solve_np(xp, lu, piv, eye)
        if errors:
            flat = np.asarray(_host(info)).reshape(-1)
            i = int(np.nonzero(flat)[0][0])
            raise LinAlgError(f"{errors}: {_batch_prefix(a.shape, i)}The diagonal element {int(flat[i])} is zero, "
                              f"the inversion could not be completed because the input matrix is singular.") \
                from None
    return _c(xp, inv.astype(a.dtype, copy=False)), _c(xp, info)


@linalg_inv_ex.meta_fn
def _inv_ex_meta(a, errors=""):
    _check_square("linalg.inv", a.shape, a.dtype)
    return _M.out(tuple(a.shape), a.dtype), _M.out(tuple(a.shape[:-2]), _t.int32)


@linalg_inv_ex.derivative
def _inv_ex_bw(ctx, grads):
    g = grads[0]
    if g is None:
        return (None,)
    it = ctx.result[0].mT
    return (-(it @ g @ it),)


def _solve_ex_checks(a_shape, a_dt, b_shape, b_dt):
    """linalg.solve's checks, except that ``A``'s batch dims need only broadcast to ``B``'s."""
    from .lapack import _solve_checks
    batch = tuple(b_shape[:-2])
    if len(b_shape) >= 2 and len(a_shape) >= 2:
        try:
            ok = _batch(a_shape[:-2], batch) == batch
        except ValueError:
            ok = False
        if ok:
            a_shape = batch + tuple(a_shape[-2:])
    _solve_checks(a_shape, a_dt, b_shape, b_dt)


@defop("linalg_solve_ex(Tensor A, Tensor B, *, str errors='') -> (Tensor, Tensor)", function=False,
       method=False, save=("A",), save_result=True, grad_fn_name="LinalgSolveExBackward0")
def linalg_solve_ex(xp, a, b, errors=""):
    """``(X, info)`` with ``A X = B`` for ``B`` a batch of matrices; ``A``'s batch dims
    broadcast to ``B``'s and ``info`` (first zero pivot of each LU) has ``A``'s own batch dims,
    as PyTorch's (it factorises ``A`` once)."""
    _solve_ex_checks(a.shape, a.dtype, b.shape, b.dtype)
    info = xp.zeros(a.shape[:-2], dtype=np.int32)
    try:
        x = xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        lu, piv, info = _lu_np(xp, a)
        batch = b.shape[:-2]
        x = _lu_solve_np(xp, xp.broadcast_to(lu, batch + lu.shape[-2:]),
                         xp.broadcast_to(piv, batch + piv.shape[-1:]), b)
        if errors:
            flat = np.asarray(_host(info)).reshape(-1)
            i = int(np.nonzero(flat)[0][0])
            raise LinAlgError(f"{errors}: {_batch_prefix(a.shape, i)}The solver failed because the input matrix "
                              f"is singular.") from None
    return _c(xp, x.astype(a.dtype, copy=False)), _c(xp, info)


@linalg_solve_ex.meta_fn
def _solve_ex_meta(a, b, errors=""):
    _solve_ex_checks(tuple(a.shape), a.dtype, tuple(b.shape), b.dtype)
    return _M.out(tuple(b.shape), a.dtype), _M.out(tuple(a.shape[:-2]), _t.int32)


@linalg_solve_ex.derivative
def _solve_ex_bw(ctx, grads):
    # X = A^-1 B: gB = A^-T g, gA = -gB X^T (summed over the dims A was broadcast along)
    g = grads[0]
    if g is None:
        return (None, None)
    a, _b, _e = ctx.args
    x = ctx.result[0]
    gb = linalg_solve_ex.binding(a.mT, g)[0]
    ga = sum_to(-(gb @ x.mT), tuple(a.shape)) if ctx.needs_input_grad[0] else None
    return (ga, gb if ctx.needs_input_grad[1] else None)


def _potf2_partial(m):
    """LAPACK potf2 (lower) on one matrix until it fails: ``(L, info)`` where the columns
    before the failing one are factored, the failing diagonal holds its reduced value and the
    rest is the input's lower triangle."""
    a = np.tril(np.array(m, copy=True))
    n = a.shape[0]
    for j in range(n):
        # A = L L^H: the diagonal is real (zpotf2 reads only Re a_jj)
        ajj = (a[j, j] - a[j, :j] @ np.conj(a[j, :j])).real
        if not ajj > 0:
            a[j, j] = ajj
            return a, j + 1
        ajj = math.sqrt(ajj)
        a[j, j] = ajj
        if j + 1 < n:
            a[j + 1:, j] = (a[j + 1:, j] - a[j + 1:, :j] @ np.conj(a[j, :j])) / ajj
    return a, 0


@defop("linalg_cholesky_ex(Tensor A, *, str errors='') -> (Tensor, Tensor)", function=False, method=False,
       save=(), save_result=True, grad_fn_name="LinalgCholeskyExBackward0")
def linalg_cholesky_ex(xp, a, errors=""):
    """``(L, info)``: ``info`` is the order of the first leading minor that is not positive
    definite (0 if none); for such an element ``L`` is potf2's partial factor."""
    _check_square("linalg.cholesky", a.shape, a.dtype)
    info = np.zeros(a.shape[:-2], dtype=np.int32)
    try:
        L = xp.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        h = _host(a)
        flat = h.reshape((_nbatch(h.shape),) + h.shape[-2:])
        out = np.empty_like(flat)
        finfo = info.reshape(-1)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                out[i], finfo[i] = _potf2_partial(m)
                if errors:
                    raise LinAlgError(f"{errors}: {_batch_prefix(h.shape, i)}The factorization could not be "
                                      f"completed because the input is not positive-definite (the leading minor "
                                      f"of order {finfo[i]} is not positive-definite).") from None
        L = xp.asarray(out.reshape(h.shape))
    return _c(xp, L.astype(a.dtype, copy=False)), _c(xp, xp.asarray(info))


@linalg_cholesky_ex.meta_fn
def _cholesky_ex_meta(a, errors=""):
    _check_square("linalg.cholesky", a.shape, a.dtype)
    return _M.out(tuple(a.shape), a.dtype), _M.out(tuple(a.shape[:-2]), _t.int32)


@linalg_cholesky_ex.derivative
def _cholesky_ex_bw(ctx, grads):
    # as linalg.cholesky's: L^-H (X + tril(X, -1)^H) / 2 L^-1 with X = tril(L^H gL)
    g = grads[0]
    if g is None:
        return (None,)
    L = ctx.result[0]
    linv = linalg_inv_ex.binding(L)[0]
    x = (L.mH @ g.tril()).tril()
    return (linv.mH @ (0.5 * (x + x.tril(-1).mH)) @ linv,)


_raw_complex_grad(linalg_cholesky_ex)


# ---------------------------------------------------------------------- least squares
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_checks(a_shape, a_dt, b_shape, b_dt, driver):
    if not (_edtype(a_dt).is_floating_point or _edtype(a_dt).is_complex) or _edtype(a_dt).name in ("float16", "bfloat16"):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if b_shape[-2] != a_shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")


def _lstsq_shapes(a_shape, b_shape, driver):
    *ab, m, n = a_shape
    *bb, _, k = b_shape
    res = tuple(bb) + (k,) if (m > n and driver != "gelsy") else (0,)
    rank = tuple(ab) if driver != "gels" else (0,)
    sv = tuple(ab) + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return tuple(bb) + (n, k), res, rank, sv


@defop("linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str driver='gelsy') -> "
       "(Tensor, Tensor, Tensor, Tensor)", function=False, method=False, save=("self", "b"), save_result=True,
       grad_fn_name="LinalgLstsqBackward0")
def linalg_lstsq(xp, a, b, rcond=None, driver="gelsy"):
    """``(solution, residuals, rank, singular_values)`` for ``A`` (..., m, n) whose batch dims
    broadcast to those of ``B`` (..., m, k). 'gels' solves through QR (full rank assumed: the
    minimum-norm solution through the QR of ``A^T`` when m < n); the other drivers through the
    SVD, singular values at or below ``rcond * s_max`` counting as zero (the minimum-norm
    solution of a rank-deficient problem, as gelsy/gelsd/gelss compute; gelsy's rank comes from
    a pivoted QR in LAPACK, here from the same singular-value cut). ``residuals`` are
    ``||A X - B||^2`` per column when m > n and the driver is not gelsy (the public function
    empties them for a rank-deficient gelsd/gelss problem, as PyTorch)."""
    _lstsq_checks(a.shape, a.dtype, b.shape, b.dtype, driver)
    m, n = a.shape[-2:]
    sol_shape, res_shape, rank_shape, sv_shape = _lstsq_shapes(a.shape, b.shape, driver)
    eps = float(np.finfo(a.dtype).eps)
    rc = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))
    rank = xp.zeros(rank_shape, dtype=np.int64)
    rdt = _real_np(a.dtype)            # residuals and singular values are real for complex A
    sv = xp.zeros(sv_shape, dtype=rdt)

    def adj(x):                        # the conjugate transpose (A^H in the normal equations)
        x = xp.swapaxes(x, -1, -2)
        return xp.conj(x) if x.dtype.kind == "c" else x
    if m == 0 or n == 0:
        x = xp.zeros(sol_shape, dtype=a.dtype)
    elif driver == "gels":
        if m >= n:
            q, r = xp.linalg.qr(a)
            x = _trsm_np(xp, xp.broadcast_to(r, sol_shape[:-2] + r.shape[-2:]),
                         adj(q) @ b, upper=True, unit=False)
        else:
            # A^H = QR: the minimum-norm solution is Q R^-H B
            q, r = xp.linalg.qr(adj(a))
            rt = adj(r)
            y = _trsm_np(xp, xp.broadcast_to(rt, b.shape[:-2] + rt.shape[-2:]), b, upper=False, unit=False)
            x = q @ y
    else:
        u, s, vh = xp.linalg.svd(a, full_matrices=False)
        keep = s > rc * s[..., :1]
        sinv = xp.where(keep, 1 / xp.where(keep, s, 1), 0)
        x = adj(vh) @ (sinv[..., :, None] * (adj(u) @ b))
        rank = keep.sum(-1).astype(np.int64)
        if driver in ("gelsd", "gelss"):
            sv = s
    x = xp.broadcast_to(x, sol_shape)
    if res_shape != (0,):
        r = a @ x - b
        res = (r.real * r.real + r.imag * r.imag if r.dtype.kind == "c" else r * r).sum(-2)
    else:
        res = xp.zeros((0,), dtype=rdt)
    return (_c(xp, x.astype(a.dtype, copy=False)), _c(xp, res.astype(rdt, copy=False)),
            _c(xp, rank), _c(xp, sv.astype(rdt, copy=False)))


@linalg_lstsq.meta_fn
def _lstsq_meta(a, b, rcond=None, driver="gelsy"):
    _lstsq_checks(tuple(a.shape), a.dtype, tuple(b.shape), b.dtype, driver)
    sol, res, rank, sv = _lstsq_shapes(tuple(a.shape), tuple(b.shape), driver)
    rdt = a.dtype.to_real()
    return _M.out(sol, a.dtype), _M.out(res, rdt), _M.out(rank, _t.int64), _M.out(sv, rdt)


@linalg_lstsq.derivative
def _lstsq_bw(ctx, grads):
    # Differentiable where A has full rank (as PyTorch). The solution is X = A^+ B: with
    # G = gX B^H the gradient of A^+, the pseudo-inverse's derivative
    #   dA^+ = -A^+ dA A^+ + A^+ A^+H dA^H (I - A A^+) + (I - A^+ A) dA^H A^+H A^+
    # gives gA = -gB X^H + (B - A X)(A^+ gB)^H + (A^+H X)(gX - A^+ A gX)^H, gB = A^+H gX.
    # The residuals r = ||A X - B||^2 are stationary in X, so gA += 2 (R gr) X^H, gB -= 2 R gr.
    # (Not holomorphic -- A^+ involves conj(A) -- so written in torch's complex convention;
    # for real tensors H is T.)
    gx, gres = grads[0], grads[1]
    a, b, _rcond, _driver = ctx.args
    x = ctx.result[0]
    ga = gb = None
    if gx is not None:
        pa = _la().pinv(a)
        gb = pa.mH @ gx
        ga = -(gb @ x.mH) + (b - a @ x) @ (pa @ gb).mH + (pa.mH @ x) @ (gx - pa @ (a @ gx)).mH
    if gres is not None and gres.numel() > 0:
        rg = (a @ x - b) * gres.unsqueeze(-2)
        ga = 2 * rg @ x.mH if ga is None else ga + 2 * rg @ x.mH
        gb = -2 * rg if gb is None else gb - 2 * rg
    if ga is not None:
        ga = sum_to(ga, tuple(a.shape))
    return (ga if ctx.needs_input_grad[0] else None, gb if ctx.needs_input_grad[1] else None)


_raw_complex_grad(linalg_lstsq)


# ---------------------------------------------------------------------- LDL^T (Bunch-Kaufman)
_BK_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


def _sytf2_lower(a):
    """LAPACK's sytf2 (UPLO='L') on one symmetric matrix (its lower triangle is read):
    ``P A P^T = L D L^T`` with ``D`` block diagonal (1x1 and 2x2 blocks chosen by Bunch-Kaufman
    pivoting). Returns LAPACK's packed ``LD`` (lower), 1-based pivots (negative for the two
    rows of a 2x2 block) and ``info`` (first exactly-zero ``D[i, i]``, 1-based)."""
    a = np.tril(np.array(a, dtype=np.float64 if a.dtype == np.float64 else a.dtype, copy=True))
    n = a.shape[0]
    # complex symmetric (zsytf2): the same steps, pivots chosen by |re| + |im| (LAPACK's cabs1)
    absf = (lambda v: np.abs(np.real(v)) + np.abs(np.imag(v))) if a.dtype.kind == "c" else np.abs
    ipiv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = float(absf(a[k, k]))
        if k < n - 1:
            imax = k + 1 + int(np.argmax(absf(a[k + 1:, k])))
            colmax = float(absf(a[imax, k]))
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or math.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _BK_ALPHA * colmax:
                kp = k
            else:
                # the largest off-diagonal entry in row/column imax
                rowmax = np.max(absf(a[imax, k:imax])) if imax > k else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, np.max(absf(a[imax + 1:, imax])))
                if absakk >= _BK_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif float(absf(a[imax, imax])) >= _BK_ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:
                # interchange rows and columns kk and kp of the trailing lower triangle
                if kp < n - 1:
                    tmp = a[kp + 1:, kk].copy()
                    a[kp + 1:, kk] = a[kp + 1:, kp]
                    a[kp + 1:, kp] = tmp
                tmp = a[kk + 1:kp, kk].copy()
                a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
                a[kp, kk + 1:kp] = tmp
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if kstep == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / a[k, k]
                    x = a[k + 1:, k].copy()
                    a[k + 1:, k + 1:] -= np.tril(d11 * np.outer(x, x))
                    a[k + 1:, k] *= d11
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
                wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
                a[k + 2:, k + 2:] -= np.tril(np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1))
                a[k + 2:, k] = wk
                a[k + 2:, k + 1] = wkp1
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return a, ipiv, info


def _cabs1(v):
    return np.abs(np.real(v)) + np.abs(np.imag(v))


def _hetf2_lower(a):
    """LAPACK's zhetf2 (UPLO='L'): the Bunch-Kaufman ``P A P^T = L D L^H`` of a complex Hermitian
    matrix (its lower triangle is read; D's diagonal is real). Same outputs as ``_sytf2_lower``."""
    a = np.tril(np.array(a, copy=True))
    n = a.shape[0]
    ipiv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k].real)
        if k < n - 1:
            imax = k + 1 + int(np.argmax(_cabs1(a[k + 1:, k])))
            colmax = float(_cabs1(a[imax, k]))
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or math.isnan(absakk):
            info = info or k + 1
            kp = k
            a[k, k] = a[k, k].real
        else:
            if absakk >= _BK_ALPHA * colmax:
                kp = k
            else:
                rowmax = np.max(_cabs1(a[imax, k:imax])) if imax > k else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, np.max(_cabs1(a[imax + 1:, imax])))
                if absakk >= _BK_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax].real) >= _BK_ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:
                if kp < n - 1:
                    tmp = a[kp + 1:, kk].copy()
                    a[kp + 1:, kk] = a[kp + 1:, kp]
                    a[kp + 1:, kp] = tmp
                tmp = np.conj(a[kk + 1:kp, kk])
                a[kk + 1:kp, kk] = np.conj(a[kp, kk + 1:kp])
                a[kp, kk + 1:kp] = tmp
                a[kp, kk] = np.conj(a[kp, kk])
                r1 = a[kk, kk].real
                a[kk, kk] = a[kp, kp].real
                a[kp, kp] = r1
                if kstep == 2:
                    a[k, k] = a[k, k].real
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            else:
                a[k, k] = a[k, k].real
                if kstep == 2:
                    a[k + 1, k + 1] = a[k + 1, k + 1].real
            if kstep == 1:
                if k < n - 1:
                    r1 = 1.0 / a[k, k].real
                    x = a[k + 1:, k].copy()
                    a[k + 1:, k + 1:] -= np.tril(r1 * np.outer(x, np.conj(x)))
                    idx = np.arange(k + 1, n)
                    a[idx, idx] = a[idx, idx].real
                    a[k + 1:, k] *= r1
            elif k < n - 2:
                d = abs(a[k + 1, k])
                d11 = a[k + 1, k + 1].real / d
                d22 = a[k, k].real / d
                tt = 1.0 / (d11 * d22 - 1.0)
                d21 = a[k + 1, k] / d
                d = tt / d
                wk = d * (d11 * a[k + 2:, k] - d21 * a[k + 2:, k + 1])
                wkp1 = d * (d22 * a[k + 2:, k + 1] - np.conj(d21) * a[k + 2:, k])
                a[k + 2:, k + 2:] -= np.tril(np.outer(a[k + 2:, k], np.conj(wk))
                                             + np.outer(a[k + 2:, k + 1], np.conj(wkp1)))
                a[k + 2:, k] = wk
                a[k + 2:, k + 1] = wkp1
                idx = np.arange(k + 2, n)
                a[idx, idx] = a[idx, idx].real
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return a, ipiv, info


def _ldl_solve_lower(ld, ipiv, b, hermitian):
    """LAPACK's sytrs / zhetrs (UPLO='L'): ``X`` with ``A X = B`` from sytf2's / zhetf2's ``LD``
    and pivots. ``hermitian`` (complex ``A = A^H``): the transposed solves conjugate and the
    1x1 pivots are real; otherwise ``A = A^T`` and nothing is conjugated."""
    cj = np.conj if hermitian else (lambda x: x)
    b = np.array(b, copy=True)
    n = ld.shape[0]
    k = 0
    while k < n:                        # L D Y = P B
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k].real if hermitian else ld[k, k]
            k += 1
        else:
            kp = -ipiv[k] - 1
            if kp != k + 1:
                b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2:] -= np.outer(ld[k + 2:, k], b[k]) + np.outer(ld[k + 2:, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1 = ld[k, k] / cj(akm1k)
            ak = ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1 = b[k] / cj(akm1k)
            bk = b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:                       # L^T P^T X = Y (L^H for hermitian)
        if ipiv[k] > 0:
            if k < n - 1:
                b[k] -= cj(ld[k + 1:, k]) @ b[k + 1:]
            kp = ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                b[k] -= cj(ld[k + 1:, k]) @ b[k + 1:]
                b[k - 1] -= cj(ld[k + 1:, k - 1]) @ b[k + 1:]
            kp = -ipiv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


def _ldl_not_differentiable(name):
    def bw(ctx, grads):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return bw


@defop("linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, str errors='') -> (Tensor, Tensor, Tensor)",
       function=False, method=False, save=(), grad_fn_name="LinalgLdlFactorExBackward0")
def linalg_ldl_factor_ex(xp, a, hermitian=False, errors=""):
    """``(LD, pivots, info)``: LAPACK sytrf's compact LDL^T of the symmetric matrices in the
    lower triangle of ``A`` (``hermitian`` is the same thing for real inputs)."""
    if _edtype(a.dtype).name in ("float16", "bfloat16"):
        _check_lapack_dtype("ldl_factor_kernel_cpu", a.dtype)
    _check_square("torch.linalg.ldl_factor_ex", a.shape, a.dtype)
    h = _host(a)
    flat = h.reshape((_nbatch(h.shape),) + h.shape[-2:])
    n = h.shape[-1]
    ld = np.empty_like(flat)
    piv = np.empty((flat.shape[0], n), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    factor = _hetf2_lower if (hermitian and flat.dtype.kind == "c") else _sytf2_lower
    for i, m in enumerate(flat):
        ld[i], piv[i], info[i] = factor(m)
        if errors and info[i]:
            raise LinAlgError(f"{errors}: {_batch_prefix(h.shape, i)}The factorization could not be completed "
                              f"because the block diagonal matrix D has a zero diagonal element "
                              f"D[{info[i]},{info[i]}].")
    return (_c(xp, xp.asarray(ld.reshape(h.shape).astype(h.dtype, copy=False))),
            _c(xp, xp.asarray(piv.reshape(h.shape[:-1]))), _c(xp, xp.asarray(info.reshape(h.shape[:-2]))))


@linalg_ldl_factor_ex.meta_fn
def _ldl_factor_ex_meta(a, hermitian=False, errors=""):
    _check_square("torch.linalg.ldl_factor_ex", a.shape, a.dtype)
    return (_M.out(tuple(a.shape), a.dtype), _M.out(tuple(a.shape[:-1]), _t.int32),
            _M.out(tuple(a.shape[:-2]), _t.int32))


linalg_ldl_factor_ex.derivative(_ldl_not_differentiable("linalg_ldl_factor_ex"))


def _ldl_solve_checks(ld_shape, ld_dt, piv_shape, piv_dt, b_shape, b_dt, hermitian=False):
    _check_square("torch.linalg.ldl_solve", ld_shape, ld_dt)
    if len(b_shape) < 2:
        raise RuntimeError("torch.linalg.ldl_solve: The input tensor B must have at least 2 dimensions.")
    if tuple(piv_shape) != tuple(ld_shape[:-1]):
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape to be the same, but "
                           f"got pivots with shape {list(piv_shape)} instead")
    pdt = _edtype(piv_dt)
    if pdt.is_floating_point or pdt.name == "bool" or getattr(pdt, "is_complex", False):
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected pivots to be integers. Got {pdt.legacy_name}")
    if _edtype(ld_dt) is not _edtype(b_dt):
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_edtype(b_dt).legacy_name} and A of type {_edtype(ld_dt).legacy_name} instead.")
    if b_shape[-2] != ld_shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for torch.linalg.ldl_solve: each A matrix is "
                           f"{ld_shape[-2]} by {ld_shape[-1]} but each b matrix is {b_shape[-2]} by {b_shape[-1]}")


@defop("linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor",
       function=False, method=False, save=(), grad_fn_name="LinalgLdlSolveBackward0")
def linalg_ldl_solve(xp, ld, piv, b, hermitian=False):
    """``X`` with ``A X = B`` from ``ldl_factor``'s output; ``LD``/``pivots`` batch dims broadcast
    against ``B``'s (the public function expands them)."""
    _ldl_solve_checks(ld.shape, ld.dtype, piv.shape, piv.dtype, b.shape, b.dtype, hermitian)
    hl, hp, hb = _host(ld), _host(piv), _host(b)
    batch = hb.shape[:-2]
    nb = _nbatch(hb.shape)
    fl = np.broadcast_to(hl, batch + hl.shape[-2:]).reshape((nb,) + hl.shape[-2:])
    fp = np.broadcast_to(hp, batch + hp.shape[-1:]).reshape((nb,) + hp.shape[-1:])
    fb = hb.reshape((nb,) + hb.shape[-2:])
    out = np.empty_like(fb)
    herm = bool(hermitian and fb.dtype.kind == "c")
    for i in range(fb.shape[0]):
        out[i] = _ldl_solve_lower(fl[i], fp[i], fb[i], herm)
    return _c(xp, xp.asarray(out.reshape(hb.shape)))


@linalg_ldl_solve.meta_fn
def _ldl_solve_meta(ld, piv, b, hermitian=False):
    _ldl_solve_checks(tuple(ld.shape), ld.dtype, tuple(piv.shape), piv.dtype, tuple(b.shape), b.dtype,
                      hermitian)
    return _M.out(tuple(b.shape), b.dtype)


linalg_ldl_solve.derivative(_ldl_not_differentiable("linalg_ldl_solve"))


# ====================================================================== public functions
def _vector_rhs(A, B):
    """PyTorch's rule (linalg_solve_is_vector_rhs): ``B`` is a batch of vectors when it is 1-D
    or has exactly ``A``'s shape without the last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _expand_batch(A, B):
    batch = _batch(A.shape[:-2], B.shape[:-2])
    if tuple(A.shape[:-2]) != batch:
        A = A.expand(*batch, *A.shape[-2:])
    if tuple(B.shape[:-2]) != batch:
        B = B.expand(*batch, *B.shape[-2:])
    return A, B


# ---------------------------------------------------------------------- LU
def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``linalg.lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info)``:
    ``A = P L U`` packed as LAPACK's getrf; a zero pivot is reported in ``info`` (raised only
    with ``check_errors``). ``pivot=False`` is not implemented on the CPU (as in PyTorch)."""
    _no_out("lu_factor_ex", out)
    return _lu_factor_ex_t(*linalg_lu_factor_ex.binding(
        A, pivot=pivot, errors="torch.linalg.lu_factor_ex" if check_errors else ""))


def lu_factor(A, *, pivot=True, out=None):
    """``linalg.lu_factor(A, *, pivot=True) -> (LU, pivots)``; a zero pivot (an exactly
    singular ``U``) raises PyTorch's RuntimeError."""
    _no_out("lu_factor", out)
    LU, piv, _ = linalg_lu_factor_ex.binding(A, pivot=pivot, errors="torch.linalg.lu_factor")
    return _lu_factor_t(LU, piv)


def _lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True):
    m = LU.shape[-2]
    z = api.empty((0,), dtype=LU.dtype, device=LU.device)
    P = _perm_matrix(pivots, m, LU) if unpack_pivots else z
    if unpack_data:
        L, U = _unpack_lu(LU)
    else:
        L = U = z
    return P, L, U


def lu(A, *, pivot=True, out=None):
    """``linalg.lu(A, *, pivot=True) -> (P, L, U)`` with ``A = P L U``: ``L`` (m x k) unit lower,
    ``U`` (k x n) upper, ``k = min(m, n)``; differentiable (also for rectangular ``A``)."""
    _no_out("lu", out)
    LU, piv, _ = linalg_lu_factor_ex.binding(A, pivot=pivot)
    return _lu_t(*_lu_unpack(LU, piv))


@_export
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``torch.lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) -> (P, L, U)``
    from ``lu_factor``'s output; what is not unpacked is an empty tensor."""
    if out is not None:
        raise TypeError("lu_unpack(): the out= argument is not supported by ember")
    if LU_data.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    if LU_pivots.dtype is not _t.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                           "Note: this function is intended to be used with the output produced by "
                           "torch.linalg.lu_factor")
    k = min(LU_data.shape[-2], LU_data.shape[-1])
    if unpack_pivots and (tuple(LU_pivots.shape[:-1]) != tuple(LU_data.shape[:-2]) or LU_pivots.shape[-1] > k):
        raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.shape[:-1] to be LU_data.shape[:-2] and "
                           f"LU_pivots.size(-1) <= min(LU_data.shape[-2:]), but got pivots of shape "
                           f"{list(LU_pivots.shape)}")
    return _lu_unpack_t(*_lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots))


def _row_gather(B, perm):
    """``B``'s rows in the order ``perm`` (batch dims of ``perm`` broadcast to ``B``'s)."""
    idx = perm.unsqueeze(-1).expand(*B.shape[:-2], B.shape[-2], B.shape[-1])
    return B.gather(-2, idx)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """``linalg.lu_solve(LU, pivots, B, *, left=True, adjoint=False)``: ``X`` with ``A X = B``
    (``X A = B`` when not ``left``; ``A^T`` for ``A`` when ``adjoint``) from ``lu_factor``'s
    output. A permutation and two triangular solves, so it is differentiable in ``LU`` and ``B``."""
    _no_out("lu_solve", out)
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    _check_square("torch.linalg.lu_solve", tuple(LU.shape), LU.dtype)
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if pivots.dtype is not _t.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    if pivots.ndim == 0 or pivots.shape[-1] != n:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the dimension of the "
                           "matrix")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the same, but got "
                           f"pivots with shape {list(pivots.shape)} instead")
    if LU.dtype is not B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{LU.dtype.legacy_name} and B of type {B.dtype.legacy_name} instead")
    # op(A) X = B with op the identity, the transpose or the adjoint: X A = B is A^T X^T = B^T
    # and X A^H = B is A X^H = B^H (the same for real tensors, where H is T)
    if left:
        b, op = B, ("H" if adjoint else "N")
    else:
        b, op = (B.mH, "N") if adjoint else (B.mT, "T")
    batch = _batch(LU.shape[:-2], b.shape[:-2])
    LUe = LU.expand(*batch, n, n)
    b = b.expand(*batch, *b.shape[-2:])
    perm = _lu_perm.binding(pivots, n).expand(*batch, n)
    st = linalg_solve_triangular.binding
    if op == "N":               # A X = B: X = U^-1 L^-1 P^T B
        y = st(LUe, _row_gather(b, perm), upper=False, unitriangular=True)
        x = st(LUe, y, upper=True)
    else:                       # op(A) X = B: X = P op(L)^-1 op(U)^-1 B
        LUt = LUe.mH if op == "H" else LUe.mT
        y = st(LUt, b, upper=False)
        y = st(LUt, y, upper=True, unitriangular=True)
        x = _row_gather(y, perm.argsort(-1))
    if left:
        return x
    return x.mH if adjoint else x.mT


# ---------------------------------------------------------------------- triangular solve
def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """``linalg.solve_triangular(A, B, *, upper, left=True, unitriangular=False)``: ``X`` with
    ``A X = B`` (``X A = B`` when not ``left``) reading only ``A``'s upper (lower) triangle, with
    ones on its diagonal when ``unitriangular``; batch dims broadcast. Differentiable in both."""
    _no_out("solve_triangular", out)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    if A.ndim >= 2 and B.ndim >= 2:
        A, B = _expand_batch(A, B)
    return linalg_solve_triangular.binding(A, B, upper=upper, left=left, unitriangular=unitriangular)


# ---------------------------------------------------------------------- _ex variants
def inv_ex(A, *, check_errors=False, out=None):
    """``linalg.inv_ex(A, *, check_errors=False) -> (inverse, info)``: ``info`` > 0 marks a
    singular matrix (its first zero pivot) instead of raising."""
    _no_out("inv_ex", out)
    return _inv_ex_t(*linalg_inv_ex.binding(A, errors="linalg.inv_ex" if check_errors else ""))


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``linalg.cholesky_ex(A, *, upper=False, check_errors=False) -> (L, info)``: ``info`` > 0
    is the order of the leading minor that is not positive definite."""
    _no_out("cholesky_ex", out)
    L, info = linalg_cholesky_ex.binding(A, errors="linalg.cholesky_ex" if check_errors else "")
    return _cholesky_ex_t(L.mH if upper else L, info)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``linalg.solve_ex(A, B, *, left=True, check_errors=False) -> (result, info)``:
    ``linalg.solve`` reporting a singular ``A`` in ``info`` instead of raising."""
    _no_out("solve_ex", out)
    if A.ndim < 2:
        raise RuntimeError("linalg.solve: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.solve: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    vector = _vector_rhs(A, B)
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
    batch = _batch(A.shape[:-2], b.shape[:-2])
    if tuple(b.shape[:-2]) != batch:
        b = b.expand(*batch, *b.shape[-2:])
    x, info = linalg_solve_ex.binding(A, b, errors="torch.linalg.solve_ex" if check_errors else "")
    if not left:
        x = x.mT
    return _solve_ex_t(x.squeeze(-1) if vector else x, info)


# ---------------------------------------------------------------------- least squares
def lstsq(A, B, rcond=None, *, driver=None, out=None):
    """``linalg.lstsq(A, B, rcond=None, *, driver=None) -> (solution, residuals, rank,
    singular_values)``: ``driver`` one of 'gels', 'gelsy' (the CPU default), 'gelsd', 'gelss'.
    As PyTorch: ``residuals`` only when m > n, the driver is not gelsy and every matrix has full
    rank; ``rank`` unless 'gels'; ``singular_values`` for 'gelsd' / 'gelss'; otherwise empty.
    ``B`` is a batch of vectors when it has one dim fewer than ``A``. The solution (and the
    residuals) are differentiable where ``A`` has full rank."""
    _no_out("lstsq", out)
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {A.dtype.legacy_name} and other's dtype {B.dtype.legacy_name}")
    if not (A.ndim >= B.ndim and A.ndim - B.ndim <= 1):
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    drv = "gelsy" if driver is None else driver
    _lstsq_checks(tuple(A.shape), A.dtype, tuple(b.shape), b.dtype, drv)
    batch = _batch(A.shape[:-2], b.shape[:-2])
    if tuple(b.shape[:-2]) != batch:
        b = b.expand(*batch, *b.shape[-2:])
    if tuple(A.shape[:-2]) != batch and len(A.shape) - 2 < len(batch):
        A = A.expand(*batch, *A.shape[-2:])
    x, res, rank, sv = linalg_lstsq.binding(A, b, rcond, driver=drv)
    m, n = A.shape[-2], A.shape[-1]
    if drv in ("gelsd", "gelss") and m > n and res.numel() and not bool((rank == n).all()):
        res = api.empty((0,), dtype=res.dtype, device=A.device)
    return _lstsq_t(x.squeeze(-1) if vector else x, res, rank, sv)


# ---------------------------------------------------------------------- LDL^T
def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """``linalg.ldl_factor_ex(A, *, hermitian=False, check_errors=False) -> (LD, pivots, info)``:
    LAPACK sytrf's Bunch-Kaufman factorisation ``A = P L D L^T P^T`` of the symmetric matrices in
    ``A``'s lower triangle. Not differentiable (nor is PyTorch's)."""
    _no_out("ldl_factor_ex", out)
    return _ldl_factor_ex_t(*linalg_ldl_factor_ex.binding(
        A, hermitian=hermitian, errors="torch.linalg.ldl_factor_ex" if check_errors else ""))


def ldl_factor(A, *, hermitian=False, out=None):
    """``linalg.ldl_factor(A, *, hermitian=False) -> (LD, pivots)``; an exactly singular ``D``
    raises LinAlgError (PyTorch's own check fails with an internal assert there)."""
    _no_out("ldl_factor", out)
    LD, piv, _ = linalg_ldl_factor_ex.binding(A, hermitian=hermitian, errors="torch.linalg.ldl_factor")
    return _ldl_factor_t(LD, piv)


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """``linalg.ldl_solve(LD, pivots, B, *, hermitian=False)``: ``X`` with ``A X = B`` from
    ``ldl_factor``'s output; batch dims broadcast. Not differentiable (nor is PyTorch's)."""
    _no_out("ldl_solve", out)
    if B.ndim >= 2 and LD.ndim >= 2 and tuple(pivots.shape) == tuple(LD.shape[:-1]):
        batch = _batch(LD.shape[:-2], B.shape[:-2])
        if tuple(B.shape[:-2]) != batch:
            B = B.expand(*batch, *B.shape[-2:])
    return linalg_ldl_solve.binding(LD, pivots, B, hermitian=hermitian)


# ---------------------------------------------------------------------- composites
def matrix_power(A, n, *, out=None):
    """``linalg.matrix_power(A, n)``: ``ember.matrix_power`` (repeated squaring; ``n < 0``
    inverts first)."""
    _no_out("matrix_power", out)
    return api.matrix_power(A, n)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``linalg.diagonal(A, *, offset=0, dim1=-2, dim2=-1)``: ``ember.diagonal`` with defaults
    for batches of matrices (a view)."""
    return A.diagonal(offset, dim1, dim2)


def _chain_order(dims):
    """The optimal parenthesisation of a matrix chain (the classic O(n^3) dynamic programme):
    ``split[i][j]`` is where the product of matrices i..j is split."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            best = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if best is None or c < best:
                    best, split[i][j] = c, s
            cost[i][j] = best
    return split


def multi_dot(tensors, *, out=None):
    """``linalg.multi_dot(tensors)``: the product of a chain of 2-D matrices in the cheapest
    order; the first may be a 1-D row vector and the last a 1-D column vector (whose dims are
    dropped from the result)."""
    _no_out("multi_dot", out)
    ts = list(tensors)
    n = len(ts)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(ts):
        if i == 0 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {t.ndim}D")
        if i == n - 1 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {t.ndim}D")
        if 0 < i < n - 1 and t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_CNAME.get(ts[0].dtype.name, ts[0].dtype.name)} and tensor {i} "
                               f"{_CNAME.get(t.dtype.name, t.dtype.name)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    ms = list(ts)
    if first_vec:
        ms[0] = ms[0].unsqueeze(0)
    if last_vec:
        ms[-1] = ms[-1].unsqueeze(-1)
    for i in range(n - 1):
        if ms[i].shape[-1] != ms[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(ts[i].shape)} and "
                               f"{list(ts[i + 1].shape)} cannot be multiplied")
    dims = [ms[0].shape[0]] + [m.shape[1] for m in ms]
    split = _chain_order(dims)

    def prod(i, j):
        if i == j:
            return ms[i]
        s = split[i][j]
        return api.mm(prod(i, s), prod(s + 1, j))

    res = prod(0, n - 1)
    if first_vec and last_vec:
        return res.reshape(())
    if first_vec:
        return res.squeeze(0)
    if last_vec:
        return res.squeeze(-1)
    return res


_COND_NORMS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


def cond(A, p=None, *, out=None):
    """``linalg.cond(A, p=None)``: ``||A||_p ||A^-1||_p``. For ``p`` None / 2 / -2 the ratio of
    extreme singular values (any shape); for 'fro', 'nuc', inf, -inf, 1, -1 through the inverse
    (square matrices; a singular one gives inf)."""
    _no_out("cond", out)
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if isinstance(p, str) and A.shape[-1] != A.shape[-2]:
        # torch checks squareness first for 'fro' / 'nuc' only, before the emptiness below
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if p is not None and (p not in _COND_NORMS + (2, -2) or isinstance(p, bool)):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.numel() == 0:
        # NumPy leaves the condition number of an empty matrix undefined; torch gives 0
        real = A.dtype.to_real() if A.dtype.is_complex else A.dtype
        return api.zeros(tuple(A.shape[:-2]), dtype=real, device=A.device)
    if p is None or (not isinstance(p, str) and isinstance(p, numbers.Number) and abs(p) == 2):
        s = _la().svdvals(A)
        if p is not None and p < 0:
            return s[..., -1] / s[..., 0]
        return s[..., 0] / s[..., -1]
    if p not in _COND_NORMS or isinstance(p, bool):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    name = f"linalg.cond(ord={p})"
    _check_matrix(name, A.ndim, A.dtype)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    inv, info = linalg_inv_ex.binding(A)
    la = _la()
    r = la.matrix_norm(A, p) * la.matrix_norm(inv, p)
    return api.where(info > 0, api.full_like(r, math.inf), r)


def vander(x, *, N=None):
    """``linalg.vander(x, *, N=None)``: ``x`` (..., n) to (..., n, N) with columns
    ``x^0, x^1, ..., x^(N-1)`` (a cumulative product, so differentiable everywhere); integer
    inputs give int64."""
    if N is None:
        N = x.shape[-1] if x.ndim else 1
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    xx = x if (x.dtype.is_floating_point or x.dtype.is_complex) else x.to(_t.int64)
    xe = xx.unsqueeze(-1)
    ones = api.ones_like(xe)
    return api.cat([ones, api.cumprod(xe.expand(*xe.shape[:-1], N - 1), -1)], -1)


def _prod(shape):
    r = 1
    for s in shape:
        r *= s
    return r


def tensorinv(A, ind=2, *, out=None):
    """``linalg.tensorinv(A, ind=2)``: the tensor ``X`` with ``tensordot(X, A, ind)`` the
    identity: ``A`` reshaped to a square matrix (its first ``ind`` dims vs the rest), inverted,
    reshaped to ``A.shape[ind:] + A.shape[:ind]``."""
    _no_out("tensorinv", out)
    if not isinstance(ind, numbers.Integral) or ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    lead, rest = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if _prod(lead) != _prod(rest):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {_prod(rest)} != {_prod(lead)}")
    inv = _la().inv(A.reshape(_prod(lead), _prod(rest)))
    return inv.reshape(*rest, *lead)


def tensorsolve(A, B, dims=None, *, out=None):
    """``linalg.tensorsolve(A, B, dims=None)``: ``X`` with ``tensordot(A, X, X.ndim) = B``;
    ``dims`` are dims of ``A`` moved to the end first."""
    _no_out("tensorsolve", out)
    if dims is not None:
        nd = A.ndim
        dd = [d % nd for d in dims]
        order = [i for i in range(nd) if i not in dd] + dd
        A = A.permute(tuple(order))
    lead, rest = tuple(A.shape[:B.ndim]), tuple(A.shape[B.ndim:])
    if _prod(lead) != _prod(rest):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {_prod(rest)} != {_prod(lead)}")
    x = _la().solve(A.reshape(_prod(lead), _prod(rest)), B.reshape(_prod(lead)))
    return x.reshape(tuple(rest))


def householder_product(A, tau, *, out=None):
    """``linalg.householder_product(A, tau)``: the first ``n`` columns of
    ``H_1 H_2 ... H_k`` with ``H_i = I - tau_i v_i v_i^H``, ``v_i`` column ``i`` of ``A`` below
    the diagonal with a 1 on it (LAPACK orgqr's input, e.g. from geqrf). Applied right to left
    to ``I[:, :n]`` in ember ops, so the gradient (for ``A``'s strictly lower part and ``tau``)
    is exact."""
    _no_out("householder_product", out)
    name = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got tau.ndim equal "
                           f"to {tau.ndim} and input.ndim is equal to {A.ndim}")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    k = tau.shape[-1]
    if n < k:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    _check_lapack_dtype("orgqr_cpu", A.dtype, "linalg.householder_product")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{name}: tau dtype {tau.dtype.legacy_name} does not match input dtype "
                           f"{A.dtype.legacy_name}")
    rows = api.arange(m, device=A.device)
    Q = _eye(m, n, A).expand(*A.shape[:-2], m, n)
    for i in range(k - 1, -1, -1):
        below = (rows > i).to(A.dtype)
        v = A[..., :, i] * below + (rows == i).to(A.dtype)              # (..., m)
        w = (v.conj().unsqueeze(-2) @ Q)                                # (..., 1, n) = v^H Q
        Q = Q - (tau[..., i, None] * v).unsqueeze(-1) @ w
    return Q


# ---------------------------------------------------------------------- torch.lu / torch.lu_solve
@_export(method=True, name="lu")
def _torch_lu(input, pivot=True, get_infos=False, out=None):
    """``torch.lu(A, pivot=True, get_infos=False)``: ``(LU, pivots)`` (raising on a zero pivot),
    or ``(LU, pivots, infos)`` with ``get_infos``."""
    if out is not None:
        raise TypeError("lu(): the out= argument is not supported by ember")
    if get_infos:
        return _lu_with_info_t(*linalg_lu_factor_ex.binding(input, pivot=pivot))
    LU, piv, _ = linalg_lu_factor_ex.binding(input, pivot=pivot, errors="torch.linalg.lu_factor_ex")
    return LU, piv


@_export(method=True, name="lu_solve")
def _torch_lu_solve(input, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve(b, LU_data, LU_pivots)``: ``linalg.lu_solve(LU_data, LU_pivots, b)``."""
    if out is not None:
        raise TypeError("lu_solve(): the out= argument is not supported by ember")
    return lu_solve(LU_data, LU_pivots, input)


_torch_lu.__name__ = _torch_lu.__qualname__ = "lu"
_torch_lu_solve.__name__ = _torch_lu_solve.__qualname__ = "lu_solve"
_export.install()


LINALG = {"lu_factor": lu_factor, "lu": lu, "lu_solve": lu_solve, "lu_factor_ex": lu_factor_ex, "solve_triangular": solve_triangular,
          "inv_ex": inv_ex, "cholesky_ex": cholesky_ex, "solve_ex": solve_ex, "lstsq": lstsq,
          "ldl_factor": ldl_factor, "ldl_factor_ex": ldl_factor_ex, "ldl_solve": ldl_solve,
          "matrix_power": matrix_power, "diagonal": diagonal, "multi_dot": multi_dot, "cond": cond,
          "vander": vander, "tensorinv": tensorinv, "tensorsolve": tensorsolve,
          "householder_product": householder_product}
