"""ember.linalg vs PyTorch: norms, products, inverses, solves, factorisations; values, gradients,
finite differences, errors, and a compiled graph calling the LAPACK kernels as extern calls."""
import logging
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, gradcheck_fn, needs_torch, torch

SET = settings(max_examples=8, deadline=None)
batches = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
DTYPES = ("float32", "float64")
TOL = {"float32": (2e-4, 2e-4), "float64": (1e-9, 1e-9)}


def rng():
    return np.random.default_rng()


def general(batch, n, dtype="float64"):
    """A well-conditioned general square matrix (random plus n on the diagonal)."""
    return (rng().standard_normal(batch + (n, n)) + n * np.eye(n)).astype(dtype)


def spd(batch, n, dtype="float64"):
    a = rng().standard_normal(batch + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def rect(shape, dtype="float64"):
    return rng().standard_normal(shape).astype(dtype)


def both(fn, arrays, dtype, grad=True, rtol=None, atol=None):
    """fn(m, *tensors) under ember and torch: outputs, then gradients of sum(out * cotangent)."""
    r, a = TOL[dtype]
    rtol, atol = rtol or r, atol or a
    es = [ember.tensor(x, requires_grad=grad) for x in arrays]
    ts = [torch.tensor(x, requires_grad=grad) for x in arrays]
    oe, ot = fn(ember, *es), fn(torch, *ts)
    oes = oe if isinstance(oe, tuple) else (oe,)
    ots = ot if isinstance(ot, tuple) else (ot,)
    for x, y in zip(oes, ots):
        assert_close(x, y, rtol, atol)
    if grad:
        cots = [rng().standard_normal(tuple(y.shape)) for y in ots]
        le = sum((x * ember.tensor(c, dtype=x.dtype)).sum() for x, c in zip(oes, cots))
        lt = sum((y * torch.tensor(c, dtype=y.dtype)).sum() for y, c in zip(ots, cots))
        ge = ember.autograd.grad(le, es)
        gt = torch.autograd.grad(lt, ts)
        for x, y in zip(ge, gt):
            assert_close(x, y, rtol * 10, atol * 10)
    return oe, ot


# ---------------------------------------------------------------------- norms
MATRIX_ORDS = ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norm(dtype, ord):
    x = rect((2, 4, 3), dtype)
    both(lambda m, a: m.linalg.matrix_norm(a, ord), [x], dtype)
    both(lambda m, a: m.linalg.matrix_norm(a, ord, dim=(2, 0), keepdim=True), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, ord, dim=(0, 1)), [x], dtype)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_dispatch_and_vector_norm(dtype):
    x = rect((3, 4), dtype)
    v = rect((5,), dtype)
    both(lambda m, a: m.linalg.norm(a), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, keepdim=True), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, 3, dim=1), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, math.inf, dim=(0,)), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, 1), [x], dtype)            # 2-D + ord: a matrix norm
    both(lambda m, a: m.linalg.norm(a, "nuc"), [x], dtype)
    both(lambda m, a: m.linalg.norm(a, 1), [v], dtype)            # 1-D + ord: a vector norm
    both(lambda m, a: m.linalg.vector_norm(a, 0.5, dim=0), [x], dtype)
    both(lambda m, a: m.linalg.vector_norm(a, dim=(0, 1), keepdim=True), [x], dtype)
    e = ember.linalg.norm(ember.tensor(x), dtype=ember.float64)
    assert e.dtype is ember.float64


@needs_torch
def test_norm_errors():
    for fn in (lambda m: m.linalg.norm(m.ones(2, 2, 2), "fro"),
               lambda m: m.linalg.norm(m.ones(2, 2, 2), 2),
               lambda m: m.linalg.matrix_norm(m.ones(3)),
               lambda m: m.linalg.matrix_norm(m.ones(3, 3), 3),
               lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=(0, 0)),
               lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=(0,)),
               lambda m: m.linalg.matrix_norm(m.ones(3, 3, dtype=m.int32))):
        with pytest.raises(RuntimeError) as te:
            fn(torch)
        with pytest.raises(RuntimeError) as ee:
            fn(ember)
        assert str(ee.value) == str(te.value)


def test_matrix_norm_gradcheck():
    for ord in MATRIX_ORDS:
        assert gradcheck_fn(lambda m, a: m.linalg.matrix_norm(a, ord), [rect((2, 3, 4))])


# ---------------------------------------------------------------------- cross / vecdot / matmul
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_vecdot_matmul(dtype):
    a, b = rect((4, 3), dtype), rect((2, 1, 3), dtype)
    both(lambda m, x, y: m.linalg.cross(x, y[0]), [a, b], dtype)
    both(lambda m, x, y: m.linalg.cross(x.unsqueeze(0), y), [a, b], dtype)   # broadcast
    c, d = rect((3, 5), dtype), rect((3, 1), dtype)
    both(lambda m, x, y: m.linalg.cross(x, y, dim=0), [c, d], dtype)
    both(lambda m, x, y: m.cross(x, y, dim=0), [c, d], dtype)
    both(lambda m, x, y: x.cross(y, dim=0), [c, d], dtype)
    both(lambda m, x, y: m.linalg.vecdot(x, y), [rect((3, 4), dtype), rect((4,), dtype)], dtype)
    both(lambda m, x, y: m.linalg.vecdot(x, y, dim=0), [rect((3, 4), dtype), rect((3, 1), dtype)], dtype)
    both(lambda m, x, y: m.linalg.matmul(x, y), [rect((2, 3, 4), dtype), rect((4, 5), dtype)], dtype)
    assert gradcheck_fn(lambda m, x, y: m.linalg.cross(x, y), [rect((2, 3)), rect((2, 3))])


@needs_torch
def test_cross_default_dim_and_errors():
    a, b = rect((4, 3, 2)), rect((4, 3, 2))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        e = ember.cross(ember.tensor(a), ember.tensor(b))
    with pytest.warns(UserWarning):
        t = torch.cross(torch.tensor(a), torch.tensor(b))
    assert_close(e, t)
    for fn in (lambda m: m.linalg.cross(m.ones(3, 2), m.ones(3, 2)),
               lambda m: m.linalg.cross(m.ones(4, 3), m.ones(2, 1, 3)),
               lambda m: m.linalg.cross(m.ones(3), m.ones(3, dtype=m.float64)),
               lambda m: m.linalg.vecdot(m.ones(3), m.ones(3, dtype=m.float64))):
        with pytest.raises(RuntimeError) as te:
            fn(torch)
        with pytest.raises(RuntimeError) as ee:
            fn(ember)
        assert str(ee.value).split("\n")[0] == str(te.value).split("\n")[0]


# ---------------------------------------------------------------------- inv / det / slogdet / solve / cholesky
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, n=st.integers(1, 4))
def test_inv_det_slogdet(dtype, batch, n):
    a = general(batch, n, dtype)
    both(lambda m, x: m.linalg.inv(x), [a], dtype)
    both(lambda m, x: m.linalg.det(x), [a], dtype)
    both(lambda m, x: m.det(x), [a], dtype)
    both(lambda m, x: x.det(), [a], dtype)
    both(lambda m, x: tuple(m.linalg.slogdet(x)), [a], dtype)
    both(lambda m, x: m.linalg.slogdet(-x).logabsdet, [a], dtype)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, n=st.integers(1, 4), k=st.integers(1, 3))
def test_solve(dtype, batch, n, k):
    a = general(batch, n, dtype)
    both(lambda m, x, y: m.linalg.solve(x, y), [a, rect(batch + (n, k), dtype)], dtype)
    both(lambda m, x, y: m.linalg.solve(x, y), [a, rect(batch + (n,), dtype)], dtype)        # batch of vectors
    both(lambda m, x, y: m.linalg.solve(x, y), [a, rect((n,), dtype)], dtype)                # one vector
    both(lambda m, x, y: m.linalg.solve(x, y, left=False), [a, rect(batch + (k, n), dtype)], dtype)
    both(lambda m, x, y: m.linalg.solve(x, y), [a, rect((2,) + batch + (n, k), dtype)], dtype)  # broadcast B
    both(lambda m, x, y: m.linalg.solve(x, y), [general((), n, dtype), rect(batch + (n, k), dtype)], dtype)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, n=st.integers(1, 4))
def test_cholesky(dtype, batch, n):
    a = spd(batch, n, dtype)
    both(lambda m, x: m.linalg.cholesky(x), [a], dtype)
    both(lambda m, x: m.linalg.cholesky(x, upper=True), [a], dtype)
    # only the lower triangle is read: garbage above the diagonal changes nothing
    junk = a + np.triu(rect(batch + (n, n), dtype), 1)
    assert_close(ember.linalg.cholesky(ember.tensor(junk)), torch.linalg.cholesky(torch.tensor(a)),
                 *TOL[dtype])


def test_lapack_gradcheck():
    a, b = general((2,), 3), rect((2, 3, 2))
    assert gradcheck_fn(lambda m, x: m.linalg.inv(x), [a])
    assert gradcheck_fn(lambda m, x: m.linalg.det(x), [a])
    assert gradcheck_fn(lambda m, x: m.linalg.slogdet(x)[1], [a])
    assert gradcheck_fn(lambda m, x, y: m.linalg.solve(x, y), [a, b])
    assert gradcheck_fn(lambda m, x, y: m.linalg.solve(x, y[..., 0]), [a, b])
    # cholesky reads one triangle: check it as a function of a symmetric input
    assert gradcheck_fn(lambda m, x: m.linalg.cholesky(x + x.mT), [spd((2,), 3) / 2])
    assert gradcheck_fn(lambda m, x: m.linalg.cholesky(x + x.mT, upper=True), [spd((), 3) / 2])


def test_second_derivative_of_inv_and_det():
    a = general((), 3)
    x = ember.tensor(a, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda t: ember.linalg.inv(t), [x])
    assert ember.autograd.gradgradcheck(lambda t: ember.linalg.det(t), [x])


# ---------------------------------------------------------------------- errors
def _singular(batch=()):
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    if not batch:
        return s
    return np.stack([np.eye(2), s])


@needs_torch
def test_singular_and_indefinite_errors():
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    assert issubclass(torch.linalg.LinAlgError, RuntimeError)
    z3 = np.diag([1.0, 1.0, 0.0])
    indef = np.array([[1.0, 2.0], [2.0, 1.0]])
    cases = [(lambda m, x: m.linalg.inv(x), _singular()),
             (lambda m, x: m.linalg.inv(x), _singular((2,))),
             (lambda m, x: m.linalg.inv(x), _singular()[None]),
             (lambda m, x: m.linalg.inv(x), z3),
             (lambda m, x: m.linalg.solve(x, m.ones(2, dtype=x.dtype)), _singular()),
             (lambda m, x: m.linalg.solve(x, m.ones(2, 2, dtype=x.dtype)), _singular((2,))),
             (lambda m, x: m.linalg.cholesky(x), indef),
             (lambda m, x: m.linalg.cholesky(x), np.stack([np.eye(2), indef])),
             (lambda m, x: m.linalg.cholesky(x), -np.eye(3))]
    for fn, arr in cases:
        with pytest.raises(torch.linalg.LinAlgError) as te:
            fn(torch, torch.tensor(arr))
        with pytest.raises(ember.linalg.LinAlgError) as ee:
            fn(ember, ember.tensor(arr))
        assert str(ee.value) == str(te.value)
    # singular matrices still have a determinant and a log-determinant
    s = _singular()
    assert ember.linalg.det(ember.tensor(s)).item() == 0.0
    sign, logabs = ember.linalg.slogdet(ember.tensor(s))
    assert sign.item() == 0.0 and logabs.item() == -math.inf


@needs_torch
def test_shape_and_dtype_errors():
    cases = [lambda m: m.linalg.inv(m.ones(2, 3)),
             lambda m: m.linalg.inv(m.ones(3)),
             lambda m: m.linalg.inv(m.ones(3, 3, dtype=m.int32)),
             lambda m: m.linalg.inv(m.ones(3, 3, dtype=m.float16)),
             lambda m: m.linalg.det(m.ones(2, 3)),
             lambda m: m.linalg.det(m.ones(3)),
             lambda m: m.linalg.slogdet(m.ones(2, 3)),
             lambda m: m.linalg.solve(m.ones(2, 3), m.ones(2)),
             lambda m: m.linalg.solve(m.ones(3, 3), m.ones(2)),
             lambda m: m.linalg.solve(m.ones(3, 3), m.ones(2, 4)),
             lambda m: m.linalg.solve(m.ones(3, 3), m.ones(3, 4, dtype=m.float64)),
             lambda m: m.linalg.cholesky(m.ones(2, 3)),
             lambda m: m.linalg.cholesky(m.ones(3, 3, dtype=m.int32)),
             lambda m: m.linalg.qr(m.ones(3)),
             lambda m: m.linalg.qr(m.ones(3, 3), mode="x"),
             lambda m: m.linalg.eigh(m.ones(2, 3)),
             lambda m: m.linalg.eigh(m.ones(3, 3), UPLO="X"),
             lambda m: m.linalg.svd(m.ones(3)),
             lambda m: m.linalg.svd(m.ones(3, 3, dtype=m.int32)),
             lambda m: m.linalg.matrix_rank(m.ones(3))]
    for fn in cases:
        with pytest.raises(RuntimeError) as te:
            fn(torch)
        with pytest.raises(RuntimeError) as ee:
            fn(ember)
        assert type(ee.value) is RuntimeError and str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- factorisations
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, m=st.integers(1, 5), n=st.integers(1, 5))
def test_qr_svd_reconstruct(dtype, batch, m, n):
    r, a_ = TOL[dtype]
    x = rect(batch + (m, n), dtype)
    k = min(m, n)
    X = ember.tensor(x)
    for mode in ("reduced", "complete"):
        q, rr = ember.linalg.qr(X, mode=mode)
        tq, tr = torch.linalg.qr(torch.tensor(x), mode=mode)
        assert tuple(q.shape) == tuple(tq.shape) and tuple(rr.shape) == tuple(tr.shape)
        assert_close(q @ rr, x, r, a_)
        assert_close(q.mT @ q, np.broadcast_to(np.eye(q.shape[-1]), batch + (q.shape[-1],) * 2), r, a_)
        assert_close(rr, np.triu(rr._data), 0, 0)
        assert_close(rr.abs(), tr.abs(), r * 10, a_ * 10)   # R is unique up to the signs of its rows
    q, rr = ember.linalg.qr(X, mode="r")
    assert tuple(q.shape) == (0,) and tuple(rr.shape) == batch + (k, n)
    for full in (True, False):
        u, s, vh = ember.linalg.svd(X, full_matrices=full)
        tu, ts, tvh = torch.linalg.svd(torch.tensor(x), full_matrices=full)
        assert [tuple(t.shape) for t in (u, s, vh)] == [tuple(t.shape) for t in (tu, ts, tvh)]
        assert_close(s, ts, r, a_)
        assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], x, r * 10, a_ * 10)
    assert_close(ember.linalg.svdvals(X), torch.linalg.svdvals(torch.tensor(x)), r, a_)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, n=st.integers(1, 5))
def test_eigh(dtype, batch, n):
    r, a_ = TOL[dtype]
    x = rect(batch + (n, n), dtype)
    sym = x + np.swapaxes(x, -1, -2)
    for uplo, src in (("L", np.tril(sym)), ("U", np.triu(sym))):   # reads only the UPLO triangle
        w, v = ember.linalg.eigh(ember.tensor(src), UPLO=uplo)
        tw = torch.linalg.eigvalsh(torch.tensor(sym))
        assert_close(w, tw, r * 10, a_ * 10)
        assert_close(ember.tensor(sym) @ v, v * w.unsqueeze(-2), r * 10, a_ * 10)
        assert_close(v.mT @ v, np.broadcast_to(np.eye(n), batch + (n, n)), r * 10, a_ * 10)
        assert_close(ember.linalg.eigvalsh(ember.tensor(src), UPLO=uplo), tw, r * 10, a_ * 10)


def _sign_free_eigh(m, x):
    """Functions of eigh's outputs that do not depend on the eigenvectors' signs."""
    w, v = m.linalg.eigh(x)
    return w, (v * v).sum(-2), v @ (w.unsqueeze(-1) * v.mT)


def _sign_free_svd(m, x):
    u, s, vh = m.linalg.svd(x, full_matrices=False)
    return s, u.abs(), vh.abs(), (u * s.unsqueeze(-2)) @ vh


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 3), (2, 3, 5)])
def test_spectral_gradients(dtype, shape):
    x = rect(shape, dtype)
    both(lambda m, a: m.linalg.svdvals(a), [x], dtype)
    both(_sign_free_svd, [x], dtype)
    s = rect(shape[:-1] + (shape[-2],), dtype)
    s = s + np.swapaxes(s, -1, -2)
    both(lambda m, a: m.linalg.eigvalsh(a), [s], dtype)
    both(_sign_free_eigh, [s], dtype)


def test_spectral_gradcheck():
    s = rect((2, 3, 3))
    assert gradcheck_fn(lambda m, a: m.linalg.eigvalsh(a + a.mT), [s])
    assert gradcheck_fn(lambda m, a: _sign_free_eigh(m, a + a.mT), [s])
    for shape in ((3, 3), (4, 2), (2, 4)):
        assert gradcheck_fn(lambda m, a: m.linalg.svdvals(a), [rect(shape)])
        assert gradcheck_fn(lambda m, a: _sign_free_svd(m, a), [rect(shape)])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv_and_rank(dtype):
    r, a_ = TOL[dtype]
    for shape in ((4, 3), (2, 3, 5), (3, 3)):
        x = rect(shape, dtype)
        both(lambda m, a: m.linalg.pinv(a), [x], dtype, rtol=r * 10, atol=a_ * 10)
        both(lambda m, a: m.linalg.matrix_rank(a), [x], dtype, grad=False)
    low = rect((5, 2), dtype) @ rect((2, 4), dtype)          # rank 2
    both(lambda m, a: m.linalg.matrix_rank(a), [low], dtype, grad=False)
    both(lambda m, a: m.linalg.pinv(a), [low], dtype, grad=False, rtol=r * 100, atol=a_ * 100)
    both(lambda m, a: m.linalg.matrix_rank(a, atol=1.0, rtol=0.0), [x], dtype, grad=False)
    sym = spd((), 4, dtype)
    both(lambda m, a: m.linalg.pinv(a, hermitian=True), [sym], dtype, grad=False, rtol=r * 10, atol=a_ * 10)
    # hermitian=True is defined on symmetric inputs: compare gradients along symmetric directions
    both(lambda m, a: m.linalg.pinv(a + a.mT, hermitian=True), [sym], dtype, rtol=r * 10, atol=a_ * 10)
    both(lambda m, a: m.linalg.matrix_rank(a, hermitian=True), [sym], dtype, grad=False)


def _qr_fixed_signs(m, a, mode):
    """Q and R with R's diagonal made positive: unique for a full-rank A, so the two libraries'
    factors (and their gradients) compare whatever signs each LAPACK call picks."""
    q, r = m.linalg.qr(a, mode=mode)
    k = min(a.shape[-2], a.shape[-1])
    d = r[..., :k, :k].diagonal(0, -2, -1).sign()     # (Q has k columns, R k rows in the modes tested)
    return q * d.unsqueeze(-2), r * d.unsqueeze(-1)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@SET
@given(batch=batches, m=st.integers(1, 5), n=st.integers(1, 5), complete=st.booleans())
def test_qr_backward_vs_torch(dtype, batch, m, n, complete):
    """Tall, square and wide inputs, reduced and (where differentiable) complete mode."""
    mode = "complete" if complete and m <= n else "reduced"
    x = rect(batch + (m, n), dtype)
    both(lambda mod, a: _qr_fixed_signs(mod, a, mode), [x], dtype)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4), (2, 3, 2)])
def test_qr_backward_finite_differences(shape):
    x = rect(shape)
    assert gradcheck_fn(lambda m, a: m.linalg.qr(a), [x])


def test_qr_backward_errors_as_torch():
    x = ember.tensor(rect((4, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="when mode='complete' and nrows > ncols"):
        sum(t.sum() for t in ember.linalg.qr(x, mode="complete")).backward()
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        ember.linalg.qr(x, mode="r")[1].sum().backward()


def test_return_types():
    x = ember.tensor(spd((), 3))
    sd = ember.linalg.slogdet(x)
    assert sd._fields == ("sign", "logabsdet") and sd.sign is sd[0]
    assert ember.linalg.eigh(x)._fields == ("eigenvalues", "eigenvectors")
    assert ember.linalg.qr(x)._fields == ("Q", "R")
    assert ember.linalg.svd(x)._fields == ("U", "S", "Vh")


# ---------------------------------------------------------------------- compiled
def test_compiled_inv_solve_det(caplog):
    ember.dynamo.reset()

    def f(a, b):
        return (ember.linalg.solve(a, b).sum() + ember.linalg.inv(a).pow(2).sum()
                + ember.linalg.det(a).sum())

    cf = ember.compile(f, backend="inductor")
    a_np, b_np = general((2,), 3), rect((2, 3, 2))
    A = ember.tensor(a_np, requires_grad=True)
    B = ember.tensor(b_np, requires_grad=True)
    with caplog.at_level(logging.DEBUG, logger="ember"):
        oc = cf(A, B)
        gc = ember.autograd.grad(oc, [A, B])
    assert "running it eagerly" not in caplog.text
    oe = f(A, B)
    ge = ember.autograd.grad(oe, [A, B])
    assert_close(oc, oe, 1e-10, 1e-10)
    for x, y in zip(gc, ge):
        assert_close(x, y, 1e-10, 1e-10)
    ember.dynamo.reset()


def test_compiled_multi_output_factorisations_forward_and_backward(caplog):
    """slogdet, eigh, qr, svd and cholesky (multi-output extern kernels) inside compiled graphs;
    the training graph's backward once failed to compile ("derivative for 'prims.pow' is not
    implemented": its shape propagation ran the prims with grad mode on) and ran eagerly."""
    g = np.random.default_rng(4)
    m = g.standard_normal((3, 4, 4))
    a_np = m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4)

    def f(a):
        s, ld = ember.linalg.slogdet(a)
        w, v = ember.linalg.eigh(a)
        q, r = ember.linalg.qr(a)
        sv = ember.linalg.svdvals(a)
        return (s * ld).sum() + w.pow(2).sum() + (q @ r).sum() + sv.sum() + ember.linalg.cholesky(a).sum()

    def g_(a):     # differentiable parts only
        q, r = ember.linalg.qr(a)
        return ember.linalg.slogdet(a)[1].sum() + ember.linalg.eigvalsh(a).pow(2).sum() + ember.linalg.svdvals(a).sum() \
            + (q * r).sum()

    ember.dynamo.reset()
    x = ember.tensor(a_np)
    with caplog.at_level(logging.DEBUG, logger="ember"):
        got = ember.compile(f, backend="inductor")(x)
        xa = ember.tensor(a_np, requires_grad=True)
        gc = ember.autograd.grad(ember.compile(g_, backend="inductor")(xa), xa)[0]
    assert "running it eagerly" not in caplog.text
    assert_close(got, f(x), 1e-10, 1e-10)
    xe = ember.tensor(a_np, requires_grad=True)
    assert_close(gc, ember.autograd.grad(g_(xe), xe)[0], 1e-10, 1e-10)
    ember.dynamo.reset()


def _numeric_det_grad(a, h=1e-5):
    """Central differences of det in float64 (det is a polynomial: accurate to ~h^2)."""
    g = np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        up, dn = a.copy(), a.copy()
        up[idx] += h
        dn[idx] -= h
        g[idx] = (np.linalg.det(up).sum() - np.linalg.det(dn).sum()) / (2 * h)
    return g


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("rank_deficit", [0, 1, 2, 4])
def test_det_backward_at_singular_matrices_is_the_adjugate(shape, rank_deficit):
    # at a singular A there is no A^-1 but an adjugate (nonzero at rank n-1): the derivative
    # of det there, as float64 finite differences show (PyTorch's LU path returns 0 for some
    # numerically singular inputs, so it is not the reference here)
    rng = np.random.default_rng(rank_deficit)
    a = rng.standard_normal(shape)
    u, s, vt = np.linalg.svd(a)
    s[..., shape[-1] - rank_deficit:] = 0
    a = (u * s[..., None, :]) @ vt
    x = ember.tensor(a, requires_grad=True)
    ember.linalg.det(x).sum().backward()
    assert_close(x.grad.numpy(), _numeric_det_grad(a), 1e-7, 1e-7)


def test_det_backward_at_an_exactly_singular_matrix_is_finite():
    x = ember.tensor(_singular(), requires_grad=True)
    ember.linalg.det(x).backward()
    assert np.isfinite(x.grad.numpy()).all() and np.abs(x.grad.numpy()).max() > 0
