"""Dense linear algebra through LAPACK (numpy.linalg): inv, det, solve, cholesky, qr, eigh, svd, ...

These ops have no decomposition into prims (a factorisation is not a loop nest the inductor
should write): they are kernel ops listed in ``ember.prims.coverage.EXTERN``, and a compiled
graph calls their eager kernels as extern calls. Their derivatives are written in ember ops.

Design notes:

* every kernel takes a batch of square (or, for qr/svd, rectangular) matrices in the last two
  dims and returns C-contiguous arrays, which is what the meta functions promise;
* numpy.linalg reports a singular or indefinite input without saying where; PyTorch names
  the batch element and the zero pivot / leading minor. Those details are found again on the
  error path only (a small LU with partial pivoting, or Cholesky of growing leading blocks),
  so the normal path costs nothing extra;
* the public entry points with PyTorch's signatures are in ``ember.linalg``; here are only
  the records, plus ``ember.det`` / ``Tensor.det`` and ``ember.cross`` / ``Tensor.cross``,
  which live in the top-level namespace and must exist without importing ``ember.linalg``.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from .reduction import _return_type, linalg_vector_norm
from .registry import defcomposite, defop


class LinAlgError(RuntimeError):
    """A linear-algebra routine met an input it cannot factorise (singular, not positive
    definite). A RuntimeError subclass, as PyTorch's ``torch.linalg.LinAlgError`` is, so code
    catching RuntimeError keeps working."""


LinAlgError.__module__ = "ember.linalg"

_slogdet_t = _return_type("linalg_slogdet", ("sign", "logabsdet"))
_eigh_t = _return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_qr_t = _return_type("linalg_qr", ("Q", "R"))
_svd_t = _return_type("linalg_svd", ("U", "S", "Vh"))
_eig_t = _return_type("linalg_eig", ("eigenvalues", "eigenvectors"))


def _real_np(dt):
    """The real numpy dtype of a (possibly complex) numpy dtype: what |z|, singular values,
    Hermitian eigenvalues and log|det| are stored in."""
    return np.dtype(dt).type(0).real.dtype


def _raw_complex_grad(op):
    """Marks an op whose derivative is written directly in torch's convention for complex
    tensors (conjugate transposes where the math has adjoints): the op is not holomorphic (its
    outputs involve conj(A): |det|, A = L L^H, Q^H Q = I, ...), so the engine must not apply the
    holomorphic ``conj(formula(conj g))`` rule. For real tensors ``mH`` is ``mT`` and the
    formulas are the real ones."""
    op.complex_grad = "raw"
    return op


def _phase_check(imdiag, name, what):
    """torch's check that a loss does not depend on the arbitrary phases of complex singular /
    eigen vectors (``v -> v e^{i phi}``): the imaginary part of diag(V^H gV) (which is the
    loss's derivative along that phase) must vanish. Lax tolerances, as torch's."""
    imdiag = imdiag.detach()
    if imdiag.numel() and float(imdiag.abs().amax()) > 1e-2:
        raise RuntimeError(f"{name}: The {what} in the complex case are specified up to multiplication by "
                           f"e^{{i phi}}. The specified loss function depends on this quantity, so it is "
                           f"ill-defined.")


# ---------------------------------------------------------------------- argument checks
def _edtype(dt):
    """An ember dtype from a numpy dtype or an ember dtype (kernels see numpy, metas ember)."""
    return dt if isinstance(dt, _t.dtype) else _t.from_numpy_dtype(dt)


def _check_float(name, dt, what="input"):
    dt = _edtype(dt)
    if dt.is_complex:
        return          # complex64 / complex128: LAPACK's c/z routines through numpy.linalg
    if not dt.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as {what}. "
                           f"Got {dt.legacy_name}")
    if dt.name in ("float16", "bfloat16"):
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {dt.legacy_name}")


def _check_matrix(name, ndim, dt, what="A"):
    if ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {what} must have at least 2 dimensions.")
    _check_float(name, dt)


def _check_square(name, shape, dt):
    _check_matrix(name, len(shape), dt)
    if shape[-1] != shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{shape[-2]} by {shape[-1]} matrices")


def _batch_prefix(shape, i):
    return f"(Batch element {i}): " if len(shape) > 2 else ""


def _first_zero_pivot(m):
    """1-based index of the first exactly-zero pivot of LU with partial pivoting (LAPACK's
    getrf ``info``), 0 when there is none. Only run on the error path, on host data."""
    a = np.array(m, dtype=np.float64, copy=True)
    n = a.shape[0]
    first = 0
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            first = first or k + 1
            continue
        if p != k:
            a[[k, p]] = a[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return first


def _host(x):
    return x if isinstance(x, np.ndarray) else x.get()


def _singular_error(name, a, msg):
    """PyTorch's LinAlgError for the first batch element whose LU has a zero pivot."""
    h = _host(a)
    flat = h.reshape((-1,) + h.shape[-2:])
    for i, m in enumerate(flat):
        piv = _first_zero_pivot(m)
        if piv:
            return LinAlgError(f"{name}: {_batch_prefix(h.shape, i)}" + msg.format(piv=piv))
    return LinAlgError(f"{name}: the input matrix is singular")


def _c(xp, x):
    """A C-contiguous array (what the meta functions promise); 0-d results stay 0-d, which
    ``ascontiguousarray`` would make 1-d."""
    x = xp.asarray(x)
    return x if x.flags.c_contiguous else xp.ascontiguousarray(x)


# ---------------------------------------------------------------------- inv
@defop("linalg_inv(Tensor A) -> Tensor", function=False, method=False, save=(), save_result=True,
       grad_fn_name="LinalgInvExBackward0")
def linalg_inv(xp, a):
    _check_square("linalg.inv", a.shape, a.dtype)
    try:
        return _c(xp, xp.linalg.inv(a))
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.inv", a, "The diagonal element {piv} is zero, the inversion could not "
                              "be completed because the input matrix is singular.") from None


@linalg_inv.derivative
def _inv_bw(ctx, g):
    # d(A^-1) = -A^-1 dA A^-1, so the gradient is -A^-T g A^-T (holomorphic: for complex A the
    # engine's conj(formula(conj g)) makes it torch's -A^-H g A^-H)
    ainv_t = ctx.result.mT
    return (-(ainv_t @ g @ ainv_t),)


# ---------------------------------------------------------------------- det / slogdet
@defop("linalg_det(Tensor A) -> Tensor", function=False, method=False, save_result=True,
       grad_fn_name="LinalgDetBackward0")
def linalg_det(xp, a):
    _check_square("linalg.det", a.shape, a.dtype)
    return _c(xp, xp.linalg.det(a).astype(a.dtype, copy=False))


@linalg_det.derivative
def _det_bw(ctx, g):
    # d det A = det A tr(A^-1 dA): the gradient is g det(A) A^-T, the transposed adjugate. A
    # singular A has no inverse but an adjugate (as PyTorch, the gradient is finite there):
    # from A = U S V^T, det(A) A^-T = det(U) det(V^T) U diag(prod_{j != i} s_j) V^T.
    (a,) = ctx.args
    try:
        inv = linalg_inv.binding(a)
    except LinAlgError:
        return (g[..., None, None] * _adjugate_t(a),)
    return (((g * ctx.result)[..., None, None]) * inv.mT,)


def _adjugate_t(a):
    """The transposed adjugate of (a batch of) square matrices, through the SVD: defined for
    singular matrices too (the cofactor matrix)."""
    u, s, vh = linalg_svd.binding(a, False)
    n = s.shape[-1]
    others = s.unsqueeze(-2).expand(*s.shape[:-1], n, n)
    eye = _eye_like(n, s).bool()
    p = others.masked_fill(eye, 1.0).prod(-1)          # p_i: the product of the other singular values
    sign = linalg_det.binding(u) * linalg_det.binding(vh)
    if u.dtype.is_complex:      # A^-T = conj(U) S^-1 conj(Vh) for unitary U, Vh
        u, vh = u.conj(), vh.conj()
    return sign[..., None, None] * ((u * p.unsqueeze(-2)) @ vh)


@defop("linalg_slogdet(Tensor A) -> Tensor, Tensor", function=False, method=False, save_result=True,
       grad_fn_name="LinalgSlogdetBackward0")
def linalg_slogdet(xp, a):
    """``(sign, log|det A|)``: the sign is complex (``det / |det|``) for complex ``A``, the log
    always real."""
    _check_square("linalg.slogdet", a.shape, a.dtype)
    sign, logabs = xp.linalg.slogdet(a)
    return (_c(xp, sign.astype(a.dtype, copy=False)),
            _c(xp, logabs.astype(_real_np(a.dtype), copy=False)))


@linalg_slogdet.derivative
def _slogdet_bw(ctx, grads):
    # d log|det A| = Re tr(A^-1 dA) and d sign = sign * i Im tr(A^-1 dA). Their adjoints (torch's
    # convention): gA = (g_abs - i Im(conj(g_sign) sign)) A^-H. A real determinant's sign is
    # piecewise constant, so only log|det A| has a gradient, g A^-T. (Singular A: the inverse's
    # LinAlgError, as for det.)
    (a,) = ctx.args
    g_sign, g = grads
    if a.dtype.is_complex and g_sign is not None:
        sign = ctx.result[0]
        im = (g_sign.conj() * sign).imag
        g = (api.zeros_like(im) if g is None else g) - 1j * im
    if g is None:
        return (None,)
    return (g[..., None, None] * linalg_inv.binding(a).mH,)


_raw_complex_grad(linalg_slogdet)


# ---------------------------------------------------------------------- solve
def _solve_checks(a_shape, a_dt, b_shape, b_dt):
    _check_square("linalg.solve", a_shape, a_dt)
    if len(b_shape) < 2:
        raise RuntimeError("linalg.solve: The input tensor B must have at least 2 dimensions.")
    if _edtype(a_dt) is not _edtype(b_dt):
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_edtype(a_dt).legacy_name} and B of type "
                           f"{_edtype(b_dt).legacy_name} instead")
    if b_shape[-2] != a_shape[-1] or tuple(a_shape[:-2]) != tuple(b_shape[:-2]):
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({a_shape[-2]}x{a_shape[-1]} and {b_shape[-2]}x{b_shape[-1]})")


@defop("linalg_solve(Tensor A, Tensor B) -> Tensor", function=False, method=False, save_result=True,
       grad_fn_name="LinalgSolveExBackward0")
def linalg_solve(xp, a, b):
    """``X`` with ``A X = B`` for a batch of matrices ``B`` whose batch dims equal ``A``'s (the
    public ``linalg.solve`` broadcasts and handles vectors and ``left=False`` around it)."""
    _solve_checks(a.shape, a.dtype, b.shape, b.dtype)
    try:
        return _c(xp, xp.linalg.solve(a, b))
    except np.linalg.LinAlgError:
        h = _host(a)
        flat = h.reshape((-1,) + h.shape[-2:])
        for i, m in enumerate(flat):
            if _first_zero_pivot(m):
                raise LinAlgError(f"torch.linalg.solve: {_batch_prefix(h.shape, i)}The solver failed because "
                                  f"the input matrix is singular.") from None
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None


@linalg_solve.derivative
def _solve_bw(ctx, g):
    # X = A^-1 B: gB = A^-T g, gA = -gB X^T
    a, b = ctx.args
    gb = linalg_solve.binding(a.mT, g)
    ga = -(gb @ ctx.result.mT) if ctx.needs_input_grad[0] else None
    return (ga, gb if ctx.needs_input_grad[1] else None)


# ---------------------------------------------------------------------- cholesky
@defop("linalg_cholesky(Tensor A) -> Tensor", function=False, method=False, save=(), save_result=True,
       grad_fn_name="LinalgCholeskyExBackward0")
def linalg_cholesky(xp, a):
    """The lower factor ``L`` of ``A = L L^H``; only the lower triangle of ``A`` is read."""
    _check_square("linalg.cholesky", a.shape, a.dtype)
    try:
        return _c(xp, xp.linalg.cholesky(a))
    except np.linalg.LinAlgError:
        h = _host(a)
        flat = h.reshape((-1,) + h.shape[-2:])
        for i, m in enumerate(flat):
            for k in range(1, m.shape[0] + 1):
                try:
                    np.linalg.cholesky(m[:k, :k])
                except np.linalg.LinAlgError:
                    raise LinAlgError(f"linalg.cholesky: {_batch_prefix(h.shape, i)}The factorization could not "
                                      f"be completed because the input is not positive-definite (the leading "
                                      f"minor of order {k} is not positive-definite).") from None
        raise LinAlgError("linalg.cholesky: the input is not positive-definite") from None


@linalg_cholesky.derivative
def _cholesky_bw(ctx, g):
    # A = L L^H, dA Hermitian: with X = tril(L^H gL), the gradient is
    # L^-H (X + tril(X, -1)^H) / 2 L^-1 -- Hermitian off the diagonal, the diagonal of X halved
    # as it is (for complex A its imaginary part stays: torch's convention).
    return (_cholesky_grad(ctx.result, g),)


def _cholesky_grad(L, g):
    linv = linalg_inv.binding(L)
    x = (L.mH @ g.tril()).tril()
    return linv.mH @ (0.5 * (x + x.tril(-1).mH)) @ linv


_raw_complex_grad(linalg_cholesky)


# ---------------------------------------------------------------------- qr
@defop("linalg_qr(Tensor A, str mode='reduced') -> Tensor, Tensor", function=False, method=False,
       save=(), save_result=True, grad_fn_name="LinalgQrBackward0")
def linalg_qr(xp, a, mode="reduced"):
    _check_qr(a.ndim, a.dtype, mode)
    if mode == "r":
        r = xp.linalg.qr(a, mode="r")
        return xp.zeros((0,), dtype=a.dtype), _c(xp, r)
    q, r = xp.linalg.qr(a, mode=mode)
    return _c(xp, q), _c(xp, r)


def _check_qr(ndim, dt, mode):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           f"'r', or 'complete'")
    _check_matrix("linalg.qr", ndim, dt)


@linalg_qr.derivative
def _qr_bw(ctx, grads):
    # A = QR with Q^H Q = I and R upper triangular with a real diagonal (LAPACK's Householder
    # QR). For a tall or square A (m >= n, reduced): with M = R gR^H - gQ^H Q, the gradient is
    # (gQ + Q sym(M)) R^-H, where sym(M) copies M's strictly lower triangle onto its upper one
    # (conjugated) and keeps Re diag(M) (Q^H dQ is skew-Hermitian and dR R^-1 upper triangular
    # with a real diagonal, which fixes everything but that triangle and the imaginary
    # diagonal). For a wide A = [X | Y] (m < n): Q, U = qr(X) and V = Q^H Y, so Y's gradient is
    # Q gV and X's is the square case with gQ + Y gV^H.
    (a, mode) = ctx.args
    q, r = ctx.result
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                           "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                           "through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    gq, gr = grads
    gq = api.zeros_like(q) if gq is None else gq
    gr = api.zeros_like(r) if gr is None else gr
    if m >= n:
        return (_qr_square_bw(q, r, gq, gr),)
    y = q @ r[..., m:]          # = A's last n - m columns (A itself is not saved)
    gu, gv = gr[..., :m], gr[..., m:]
    gx = _qr_square_bw(q, r[..., :m], gq + y @ gv.mH, gu)
    return (api.cat([gx, q @ gv], -1),)


def _qr_square_bw(q, r, gq, gr):
    """The QR gradient for ``Q`` (m x n) and square ``R`` (n x n), m >= n."""
    mm = r @ gr.mH - gq.mH @ q
    low = mm.tril(-1)
    d = mm.diagonal(0, -2, -1)
    sym = low + low.mH + (d.real if d.dtype.is_complex else d).diag_embed()
    return (gq + q @ sym) @ linalg_inv.binding(r).mH


_raw_complex_grad(linalg_qr)


# ---------------------------------------------------------------------- eigh
def _check_uplo(uplo):
    if uplo not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")


@defop("linalg_eigh(Tensor A, str UPLO='L') -> Tensor, Tensor", function=False, method=False, save=(),
       save_result=True, grad_fn_name="LinalgEighBackward0")
def linalg_eigh(xp, a, UPLO="L"):
    """Eigenvalues (ascending, real) and orthonormal eigenvectors of the symmetric (Hermitian)
    matrix stored in the ``UPLO`` triangle of ``A``."""
    _check_uplo(UPLO)
    _check_square("linalg.eigh", a.shape, a.dtype)
    w, v = xp.linalg.eigh(a, UPLO=UPLO)
    return _c(xp, w), _c(xp, v)


def _eye_like(n, like):
    return api.eye(n, dtype=like.dtype, device=like.device)


@linalg_eigh.derivative
def _eigh_bw(ctx, grads):
    # A = V diag(w) V^H. With M the skew-Hermitian part of V^H gV, divided off the diagonal by
    # E_ij = w_j - w_i, and gw on the diagonal: gA = V M V^H (needs distinct eigenvalues;
    # repeated ones give inf/nan, as in PyTorch). Complex eigenvectors are defined up to a
    # phase each; a loss that depends on it is refused as torch does.
    gw, gv = grads
    w, v = ctx.result
    n = w.shape[-1]
    eye = _eye_like(n, w)
    if gv is not None:
        vtg = v.mH @ gv
        if vtg.dtype.is_complex:
            _phase_check(vtg.diagonal(0, -2, -1).imag, "linalg_eigh_backward", "eigenvectors")
        m = 0.5 * (vtg - vtg.mH)
        e = w.unsqueeze(-2) - w.unsqueeze(-1)
        m = m / (e + eye) * (1 - eye)
        if gw is not None:
            m = m + gw.diag_embed()
    else:
        m = gw.diag_embed()
    if m.dtype is not v.dtype:
        m = m.to(v.dtype)
    return (v @ m @ v.mH,)


_raw_complex_grad(linalg_eigh)


# ---------------------------------------------------------------------- svd
@defop("linalg_svd(Tensor A, bool full_matrices=True) -> (Tensor, Tensor, Tensor)", function=False,
       method=False, save=(), save_result=True, grad_fn_name="LinalgSvdBackward0")
def linalg_svd(xp, a, full_matrices=True):
    """``U, S, Vh`` with ``A = U diag(S) Vh``, ``S`` descending (real for complex ``A``)."""
    _check_matrix("linalg.svd", a.ndim, a.dtype)
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return _c(xp, u), _c(xp, s.astype(_real_np(a.dtype), copy=False)), _c(xp, vh)


@linalg_svd.derivative
def _svd_bw(ctx, grads):
    # With the reduced factors (k = min(m, n)): gS alone gives U diag(gS) Vh. The singular
    # vectors' part follows from U^T dU and V^T dV being skew; it divides by
    # E_ij = S_j^2 - S_i^2 (distinct singular values needed), and for a non-square A adds the
    # component of gU (m > n) or gV (m < n) outside the span of the reduced factors.
    # Complex A: the same with conjugate transposes; U^H dU and V^H dV have imaginary diagonals
    # of which only the difference is fixed (the phase of each singular pair), so the loss must
    # not depend on it (torch's check: Im diag(U^H gU) = -Im diag(V^H gV)) and the diagonal
    # gets i Im diag(U^H gU) / S.
    gu, gs, gvh = grads
    u, s, vh = ctx.result
    (a, full) = ctx.args
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    u = u[..., :k]
    vh = vh[..., :k, :]
    if gu is not None:
        gu = gu[..., :k]
    if gvh is not None:
        gvh = gvh[..., :k, :]
    if gu is None and gvh is None:
        return ((u * gs.unsqueeze(-2)) @ vh,)
    cplx = u.dtype.is_complex
    v = vh.mH
    gv = gvh.mH if gvh is not None else None
    eye = _eye_like(k, s)
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye
    inner = None
    im_u = im_v = None
    if gu is not None:
        utgu = u.mH @ gu
        if cplx:
            im_u = utgu.diagonal(0, -2, -1).imag
        inner = (utgu - utgu.mH) * s.unsqueeze(-2)
    if gv is not None:
        vtgv = v.mH @ gv
        if cplx:
            im_v = vtgv.diagonal(0, -2, -1).imag
        t = s.unsqueeze(-1) * (vtgv - vtgv.mH)
        inner = t if inner is None else inner + t
    if cplx:
        zero = api.zeros_like(s)
        _phase_check((zero if im_u is None else im_u) + (zero if im_v is None else im_v), "svd_backward",
                     "singular vectors")
    inner = inner / e * (1 - eye)
    if gs is not None:
        inner = inner + gs.diag_embed()
    if im_u is not None:
        inner = inner + (1j * (im_u / s)).diag_embed()
    if m > n and gu is not None:
        ga = u @ inner
        gus = gu / s.unsqueeze(-2)
        ga = ga + gus - u @ (u.mH @ gus)
        return (ga @ vh,)
    if m < n and gv is not None:
        gvs = gv / s.unsqueeze(-2)
        ga = inner @ vh + (gvs - v @ (vh @ gvs)).mH
        return (u @ ga,)
    return (u @ inner @ vh,)


_raw_complex_grad(linalg_svd)


# ---------------------------------------------------------------------- eig
def _complex_np(dt):
    dt = np.dtype(dt)
    return dt if dt.kind == "c" else np.dtype(np.complex64 if dt == np.float32 else np.complex128)


@defop("linalg_eig(Tensor A) -> (Tensor, Tensor)", function=False, method=False, save=(), save_result=True,
       grad_fn_name="LinalgEigBackward0")
def linalg_eig(xp, a):
    """Eigenvalues and right eigenvectors of a general square matrix, always complex (a real
    matrix may have complex eigenpairs). LAPACK's geev through numpy: eigenvectors of norm 1 with
    their largest component real, in geev's order -- what torch returns too."""
    _check_square("linalg.eig", a.shape, a.dtype)
    cdt = _complex_np(a.dtype)
    h = _host(a)
    if not np.isfinite(h).all():
        raise RuntimeError("linalg.eig: input tensor should not contain infs or NaNs.")
    w, v = np.linalg.eig(h)
    return _c(xp, xp.asarray(w.astype(cdt, copy=False))), _c(xp, xp.asarray(v.astype(cdt, copy=False)))


@linalg_eig.derivative
def _eig_bw(ctx, grads):
    # A = V diag(L) V^-1, columns of V of norm 1. In torch's convention:
    # gA = V^-H (diag(gL) + P(V^H gV) / conj(E)) V^H with E_ij = L_j - L_i (1 on the diagonal)
    # and P(X) = X - V^H V diag(Re diag X), the projection onto the tangent space of matrices
    # with unit-norm columns. Each eigenvector's phase is arbitrary: a loss depending on it
    # (Im diag(V^H gV) != 0) is refused as torch does. Distinct eigenvalues needed.
    gl, gv = grads
    lam, v = ctx.result
    vh = v.mH
    if gv is None:
        inner = gl.diag_embed()
    else:
        vhgv = vh @ gv
        d = vhgv.diagonal(0, -2, -1)
        _phase_check(d.imag, "linalg_eig_backward", "eigenvectors")
        vhgv = vhgv - vh @ (v * d.real.unsqueeze(-2))
        n = lam.shape[-1]
        eye = _eye_like(n, lam)
        econj = (lam.unsqueeze(-2) - lam.unsqueeze(-1)).conj() + eye
        inner = vhgv / econj
        if gl is not None:
            inner = inner * (1 - eye) + gl.diag_embed()
    return (linalg_solve.binding(vh, inner @ vh),)


_raw_complex_grad(linalg_eig)


# ---------------------------------------------------------------------- composites
def _ldt(dt):
    return _edtype(dt).legacy_name


@defcomposite("linalg_cross(Tensor self, Tensor other, int dim=-1) -> Tensor", function=False, method=False)
def linalg_cross(a, b, dim=-1):
    """``a x b`` along ``dim`` (length 3), broadcasting the other dims."""
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {_ldt(a.dtype)} but found {_ldt(b.dtype)}")
    d = dim + a.ndim if dim < 0 else dim
    if not 0 <= d < a.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-a.ndim}, {a.ndim - 1}], "
                         f"but got {dim})")
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {a.shape[d]} and {b.shape[d]}")
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return api.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@defcomposite("linalg_vecdot(Tensor x, Tensor y, *, int dim=-1) -> Tensor", function=False, method=False)
def linalg_vecdot(x, y, dim=-1):
    """``sum(conj(x) * y, dim)``: the inner product, conjugate-linear in ``x`` as torch's."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_ldt(x.dtype)} and y of type {_ldt(y.dtype)} instead")
    return ((x.conj() if x.dtype.is_complex else x) * y).sum(dim)


def _matrix_norm_checks(a, ord, dim):
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_ldt(a.dtype)}")
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    d0, d1 = (d + a.ndim if d < 0 else d for d in dim)
    for d in dim:
        if not -a.ndim <= d < a.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-a.ndim}, {a.ndim - 1}], "
                             f"but got {d})")
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if not (ord in ("fro", "nuc") or (isinstance(ord, numbers.Number) and not isinstance(ord, bool)
                                      and float(ord) in (1.0, -1.0, 2.0, -2.0, math.inf, -math.inf))):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return d0, d1


@defcomposite("linalg_matrix_norm(Tensor self, Scalar|str ord='fro', int[] dim=[-2, -1], bool keepdim=False, *, "
              "ScalarType? dtype=None) -> Tensor", function=False, method=False)
def linalg_matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):
    """Frobenius, nuclear, and the operator norms induced by the 1-, 2- and inf-norms."""
    dim = list(dim)
    d0, d1 = _matrix_norm_checks(a, ord, dim)
    if dtype is not None:
        a = a.to(_t.as_dtype(dtype))
    if ord == "fro" and a.dtype.is_complex:
        a = a.abs()     # a complex matrix's Frobenius norm is its moduli's (real)
    if ord == "fro":
        return linalg_vector_norm.binding(a, 2, [d0, d1], keepdim)
    if ord == "nuc" or abs(float(ord)) == 2:
        # singular values of the matrices moved to the last two dims
        s = linalg_svd.binding(api.movedim(a, (d0, d1), (-2, -1)), False)[1]
        # the largest of no singular values (an empty matrix) is 0, as torch's; the smallest raises
        r = s.sum(-1) if ord == "nuc" or (ord > 0 and s.shape[-1] == 0) else (s.amax(-1) if ord > 0 else s.amin(-1))
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return r
    p = float(ord)
    # 1-norm: largest column sum (sum over the rows d0, then max over the columns d1);
    # inf-norm: the same with the roles swapped
    s_dim, m_dim = (d0, d1) if abs(p) == 1 else (d1, d0)
    r = a.abs().sum(s_dim, keepdim=True)
    if p > 0:   # the largest of no (non-negative) sums is 0, as torch's; the smallest raises
        r = r.sum(m_dim, keepdim=True) if r.shape[m_dim] == 0 else r.amax(m_dim, keepdim=True)
    else:
        r = r.amin(m_dim, keepdim=True)
    if not keepdim:
        r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    return r


# ---------------------------------------------------------------------- top-level entry points
def det(input):
    """``det(input)``: the determinant of each matrix (``linalg.det``)."""
    return linalg_det.binding(input)


def cross(input, other, dim=None):
    """``cross(input, other, dim=None)``: with ``dim=None`` the first dim of size 3, with
    PyTorch's deprecation warning (``linalg.cross`` defaults to the last dim)."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
                      "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change "
                      "to agree with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross.binding(input, other, dim)


for _fn in (det, cross):
    _fn.__module__ = "ember"
    setattr(api, _fn.__name__, _fn)
    setattr(Tensor, _fn.__name__, _fn)


# ---------------------------------------------------------------------- meta functions
from . import _meta as _M  # noqa: E402


@linalg_inv.meta_fn
def _inv_meta(a):
    _check_square("linalg.inv", a.shape, a.dtype)
    return _M.out(tuple(a.shape), a.dtype)


@linalg_det.meta_fn
def _det_meta(a):
    _check_square("linalg.det", a.shape, a.dtype)
    return _M.out(tuple(a.shape[:-2]), a.dtype)


@linalg_slogdet.meta_fn
def _slogdet_meta(a):
    _check_square("linalg.slogdet", a.shape, a.dtype)
    return _M.out(tuple(a.shape[:-2]), a.dtype), _M.out(tuple(a.shape[:-2]), a.dtype.to_real())


@linalg_solve.meta_fn
def _solve_meta(a, b):
    _solve_checks(tuple(a.shape), a.dtype, tuple(b.shape), b.dtype)
    return _M.out(tuple(b.shape), a.dtype)


@linalg_cholesky.meta_fn
def _cholesky_meta(a):
    _check_square("linalg.cholesky", a.shape, a.dtype)
    return _M.out(tuple(a.shape), a.dtype)


@linalg_qr.meta_fn
def _qr_meta(a, mode="reduced"):
    _check_qr(a.ndim, a.dtype, mode)
    *b, m, n = tuple(a.shape)
    k = _M.smin(m, n)
    if mode == "r":
        return _M.out((0,), a.dtype), _M.out((*b, k, n), a.dtype)
    if mode == "complete":
        return _M.out((*b, m, m), a.dtype), _M.out((*b, m, n), a.dtype)
    return _M.out((*b, m, k), a.dtype), _M.out((*b, k, n), a.dtype)


@linalg_eigh.meta_fn
def _eigh_meta(a, UPLO="L"):
    _check_uplo(UPLO)
    _check_square("linalg.eigh", a.shape, a.dtype)
    return _M.out(tuple(a.shape[:-1]), a.dtype.to_real()), _M.out(tuple(a.shape), a.dtype)


@linalg_svd.meta_fn
def _svd_meta(a, full_matrices=True):
    _check_matrix("linalg.svd", a.ndim, a.dtype)
    *b, m, n = tuple(a.shape)
    k = _M.smin(m, n)
    rdt = a.dtype.to_real()
    if full_matrices:
        return _M.out((*b, m, m), a.dtype), _M.out((*b, k), rdt), _M.out((*b, n, n), a.dtype)
    return _M.out((*b, m, k), a.dtype), _M.out((*b, k), rdt), _M.out((*b, k, n), a.dtype)


@linalg_eig.meta_fn
def _eig_meta(a):
    _check_square("linalg.eig", a.shape, a.dtype)
    cdt = a.dtype.to_complex()
    return _M.out(tuple(a.shape[:-1]), cdt), _M.out(tuple(a.shape), cdt)
