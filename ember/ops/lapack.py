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


# ---------------------------------------------------------------------- argument checks
def _edtype(dt):
    """An ember dtype from a numpy dtype or an ember dtype (kernels see numpy, metas ember)."""
    return dt if isinstance(dt, _t.dtype) else _t.from_numpy_dtype(dt)


def _check_float(name, dt, what="input"):
    dt = _edtype(dt)
    if dt.is_complex:
        raise RuntimeError(f"{name}: complex tensors are not supported by ember's linear algebra (got "
                           f"{dt.legacy_name}); ember.linalg is real-only")
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
    # d(A^-1) = -A^-1 dA A^-1, so the gradient is -A^-T g A^-T
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
    return sign[..., None, None] * ((u * p.unsqueeze(-2)) @ vh)


@defop("linalg_slogdet(Tensor A) -> Tensor, Tensor", function=False, method=False, save_result=True,
       grad_fn_name="LinalgSlogdetBackward0")
def linalg_slogdet(xp, a):
    _check_square("linalg.slogdet", a.shape, a.dtype)
    sign, logabs = xp.linalg.slogdet(a)
    return (_c(xp, sign.astype(a.dtype, copy=False)),
            _c(xp, logabs.astype(a.dtype, copy=False)))


@linalg_slogdet.derivative
def _slogdet_bw(ctx, grads):
    # the sign of a real determinant is piecewise constant: only log|det A| has a gradient,
    # g A^-T (singular A: the inverse's LinAlgError, as for det)
    (a,) = ctx.args
    g = grads[1]
    if g is None:
        return (None,)
    return (g[..., None, None] * linalg_inv.binding(a).mT,)


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
    """The lower factor ``L`` of ``A = L L^T``; only the lower triangle of ``A`` is read."""
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


def _phi(x):
    """The lower triangle with its diagonal halved (the map in the Cholesky derivative)."""
    return x.tril() - 0.5 * x.diagonal(0, -2, -1).diag_embed()


@linalg_cholesky.derivative
def _cholesky_bw(ctx, g):
    # A = L L^T, dA symmetric: with P = Phi(L^T gL), the gradient is S = L^-T P L^-1,
    # symmetrised (A's perturbations are symmetric).
    L = ctx.result
    linv = linalg_inv.binding(L)
    s = linv.mT @ _phi(L.mT @ g.tril()) @ linv
    return (0.5 * (s + s.mT),)


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
    # A = QR with Q^T Q = I and R upper triangular. For a tall or square A (m >= n, reduced):
    # with M = R gR^T - gQ^T Q, the gradient is (gQ + Q sym(M)) R^-T, where sym(M) copies M's
    # strictly lower triangle onto its upper one (Q^T dQ is skew and dR R^-1 upper triangular,
    # which fixes everything but that triangle). For a wide A = [X | Y] (m < n): Q, U = qr(X)
    # and V = Q^T Y, so Y's gradient is Q gV and X's is the square case with gQ + Y gV^T.
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
    gx = _qr_square_bw(q, r[..., :m], gq + y @ gv.mT, gu)
    return (api.cat([gx, q @ gv], -1),)


def _qr_square_bw(q, r, gq, gr):
    """The QR gradient for ``Q`` (m x n) and square ``R`` (n x n), m >= n."""
    mm = r @ gr.mT - gq.mT @ q
    low = mm.tril(-1)
    sym = low + low.mT + mm.diagonal(0, -2, -1).diag_embed()
    return (gq + q @ sym) @ linalg_inv.binding(r).mT


# ---------------------------------------------------------------------- eigh
def _check_uplo(uplo):
    if uplo not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")


@defop("linalg_eigh(Tensor A, str UPLO='L') -> Tensor, Tensor", function=False, method=False, save=(),
       save_result=True, grad_fn_name="LinalgEighBackward0")
def linalg_eigh(xp, a, UPLO="L"):
    """Eigenvalues (ascending) and orthonormal eigenvectors of the symmetric matrix stored in the
    ``UPLO`` triangle of ``A``."""
    _check_uplo(UPLO)
    _check_square("linalg.eigh", a.shape, a.dtype)
    w, v = xp.linalg.eigh(a, UPLO=UPLO)
    return _c(xp, w), _c(xp, v)


def _eye_like(n, like):
    return api.eye(n, dtype=like.dtype, device=like.device)


@linalg_eigh.derivative
def _eigh_bw(ctx, grads):
    # A = V diag(w) V^T. With M the skew part of V^T gV, divided off the diagonal by
    # E_ij = w_j - w_i, and gw on the diagonal: gA = V M V^T (needs distinct eigenvalues;
    # repeated ones give inf/nan, as in PyTorch).
    gw, gv = grads
    w, v = ctx.result
    n = w.shape[-1]
    eye = _eye_like(n, w)
    if gv is not None:
        vtg = v.mT @ gv
        m = 0.5 * (vtg - vtg.mT)
        e = w.unsqueeze(-2) - w.unsqueeze(-1)
        m = m / (e + eye) * (1 - eye)
        if gw is not None:
            m = m + gw.diag_embed()
    else:
        m = gw.diag_embed()
    return (v @ m @ v.mT,)


# ---------------------------------------------------------------------- svd
@defop("linalg_svd(Tensor A, bool full_matrices=True) -> (Tensor, Tensor, Tensor)", function=False,
       method=False, save=(), save_result=True, grad_fn_name="LinalgSvdBackward0")
def linalg_svd(xp, a, full_matrices=True):
    """``U, S, Vh`` with ``A = U diag(S) Vh``, ``S`` descending."""
    _check_matrix("linalg.svd", a.ndim, a.dtype)
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return _c(xp, u), _c(xp, s), _c(xp, vh)


@linalg_svd.derivative
def _svd_bw(ctx, grads):
    # With the reduced factors (k = min(m, n)): gS alone gives U diag(gS) Vh. The singular
    # vectors' part follows from U^T dU and V^T dV being skew; it divides by
    # E_ij = S_j^2 - S_i^2 (distinct singular values needed), and for a non-square A adds the
    # component of gU (m > n) or gV (m < n) outside the span of the reduced factors.
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
    v = vh.mT
    gv = gvh.mT if gvh is not None else None
    eye = _eye_like(k, s)
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye
    inner = None
    if gu is not None:
        utgu = u.mT @ gu
        inner = (utgu - utgu.mT) * s.unsqueeze(-2)
    if gv is not None:
        vtgv = v.mT @ gv
        t = s.unsqueeze(-1) * (vtgv - vtgv.mT)
        inner = t if inner is None else inner + t
    inner = inner / e * (1 - eye)
    if gs is not None:
        inner = inner + gs.diag_embed()
    if m > n and gu is not None:
        ga = u @ inner
        gus = gu / s.unsqueeze(-2)
        ga = ga + gus - u @ (u.mT @ gus)
        return (ga @ vh,)
    if m < n and gv is not None:
        gvs = gv / s.unsqueeze(-2)
        ga = inner @ vh + (gvs - v @ (vh @ gvs)).mT
        return (u @ ga,)
    return (u @ inner @ vh,)


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
    """``sum(x * y, dim)`` (real tensors: no conjugation)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_ldt(x.dtype)} and y of type {_ldt(y.dtype)} instead")
    return (x * y).sum(dim)


def _matrix_norm_checks(a, ord, dim):
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not a.dtype.is_floating_point:
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
    if ord == "fro":
        return linalg_vector_norm.binding(a, 2, [d0, d1], keepdim)
    if ord == "nuc" or abs(float(ord)) == 2:
        # singular values of the matrices moved to the last two dims
        s = linalg_svd.binding(api.movedim(a, (d0, d1), (-2, -1)), False)[1]
        r = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord > 0 else s.amin(-1))
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return r
    p = float(ord)
    # 1-norm: largest column sum (sum over the rows d0, then max over the columns d1);
    # inf-norm: the same with the roles swapped
    s_dim, m_dim = (d0, d1) if abs(p) == 1 else (d1, d0)
    r = a.abs().sum(s_dim, keepdim=True)
    r = r.amax(m_dim, keepdim=True) if p > 0 else r.amin(m_dim, keepdim=True)
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
    return _M.out(tuple(a.shape[:-2]), a.dtype), _M.out(tuple(a.shape[:-2]), a.dtype)


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
    return _M.out(tuple(a.shape[:-1]), a.dtype), _M.out(tuple(a.shape), a.dtype)


@linalg_svd.meta_fn
def _svd_meta(a, full_matrices=True):
    _check_matrix("linalg.svd", a.ndim, a.dtype)
    *b, m, n = tuple(a.shape)
    k = _M.smin(m, n)
    if full_matrices:
        return _M.out((*b, m, m), a.dtype), _M.out((*b, k), a.dtype), _M.out((*b, n, n), a.dtype)
    return _M.out((*b, m, k), a.dtype), _M.out((*b, k), a.dtype), _M.out((*b, k, n), a.dtype)
