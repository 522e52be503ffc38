"""ember/ops/linalg_api.py vs PyTorch: the top-level linear-algebra functions and Tensor methods
(inverse, pinverse, logdet, slogdet, qr, svd, cholesky, cholesky_solve, cholesky_inverse,
triangular_solve, matrix_exp, chain_matmul, adjoint).

Values and float64 gradients on fresh random, well-conditioned inputs (uniform(-0.5, 0.5) + 3 I:
diagonally dominant with a positive diagonal, so invertible with a positive determinant), float32
values with looser tolerances, and compiled-vs-eager for a few composites."""
import warnings

import numpy as np
import pytest

import ember
from oracle import compare_with_torch as run, assert_close, needs_torch, torch

pytestmark = [needs_torch, pytest.mark.filterwarnings("ignore::UserWarning")]

RNG = np.random.default_rng()


def well(*batch, n=4):
    return RNG.uniform(-0.5, 0.5, size=(*batch, n, n)) + 3 * np.eye(n)


def spd(*batch, n=4):
    a = RNG.uniform(-0.5, 0.5, size=(*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def lower(*batch, n=4):
    return np.tril(RNG.uniform(-0.5, 0.5, size=(*batch, n, n))) + 2 * np.eye(n)


def test_inverse_pinverse_function_and_method():
    run(lambda m, a: m.inverse(a), [well(2)])
    run(lambda m, a: a.inverse(), [well()])
    run(lambda m, a: m.pinverse(a), [RNG.standard_normal((5, 3))], atol=1e-9)
    run(lambda m, a: a.pinverse(rcond=1e-10), [RNG.standard_normal((2, 3, 5))], atol=1e-9)
    run(lambda m, a: m.inverse(a), [well(2).astype(np.float32)], rtol=1e-4, atol=1e-5)


def test_logdet_slogdet():
    run(lambda m, a: m.logdet(a), [well(3)])
    run(lambda m, a: a.logdet(), [well()])
    run(lambda m, a: tuple(m.slogdet(a)), [well(2)])
    run(lambda m, a: tuple(a.slogdet()), [well()])
    # a negative determinant: logdet is NaN, slogdet's sign -1
    a = well()
    a[0] *= -1
    run(lambda m, x: m.logdet(x), [a], grad=False)
    s, l = ember.slogdet(ember.tensor(a))
    assert s.item() == -1.0 and np.isfinite(l.item())
    assert ember.slogdet(ember.tensor(a)).logabsdet is not None
    run(lambda m, a: m.logdet(a), [well(2).astype(np.float32)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("some", [True, False])
def test_qr(some):
    for shape in [(5, 3), (3, 5), (2, 4, 4)]:
        a = RNG.standard_normal(shape)
        qe, re = ember.qr(ember.tensor(a), some=some)
        qt, rt = torch.qr(torch.tensor(a), some=some)
        assert tuple(qe.shape) == tuple(qt.shape) and tuple(re.shape) == tuple(rt.shape)
        np.testing.assert_allclose(np.abs(qe.numpy()), np.abs(qt.numpy()), atol=1e-10)
        np.testing.assert_allclose(np.abs(re.numpy()), np.abs(rt.numpy()), atol=1e-10)
    # the method, and the gradient of a sign-independent function (Q R = A)
    run(lambda m, a: (lambda q, r: (q @ r, (q * q).sum(-1)))(*a.qr()), [RNG.standard_normal((5, 3))], atol=1e-9)
    assert ember.qr(ember.tensor(RNG.standard_normal((3, 3)))).Q.shape == (3, 3)


@pytest.mark.parametrize("some", [True, False])
def test_svd(some):
    for shape in [(5, 3), (3, 5), (2, 4, 3)]:
        a = RNG.standard_normal(shape)
        ue, se, ve = ember.svd(ember.tensor(a), some=some)
        ut, st, vt = torch.svd(torch.tensor(a), some=some)
        for x, y in ((ue, ut), (se, st), (ve, vt)):
            assert tuple(x.shape) == tuple(y.shape)
        np.testing.assert_allclose(se.numpy(), st.numpy(), atol=1e-10)
        k = min(shape[-2:])
        # A = U diag(S) V^T with V (not V^H)
        rec = ue.numpy()[..., :, :k] * se.numpy()[..., None, :] @ np.swapaxes(ve.numpy()[..., :, :k], -1, -2)
        np.testing.assert_allclose(rec, a, atol=1e-10)
        np.testing.assert_allclose(np.abs(ve.numpy()[..., :, :k]), np.abs(vt.numpy()[..., :, :k]), atol=1e-8)
    # the gradient of the singular values, and of a sign-invariant product, through the method
    run(lambda m, a: a.svd()[1], [RNG.standard_normal((4, 3))], atol=1e-9)
    run(lambda m, a: (lambda u, s, v: (u * s.unsqueeze(-2)) @ v.mT)(*m.svd(a)), [RNG.standard_normal((2, 4, 3))],
        atol=1e-9)


def test_svd_no_uv():
    a = RNG.standard_normal((2, 5, 3))
    oe, ot = run(lambda m, x: m.svd(x, compute_uv=False)[1], [a], atol=1e-9)
    ue, _, ve = ember.svd(ember.tensor(a), compute_uv=False)
    assert tuple(ue.shape) == (2, 5, 5) and tuple(ve.shape) == (2, 3, 3)
    assert not ue.numpy().any() and not ve.numpy().any()


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    run(lambda m, a: m.cholesky(a, upper=upper), [spd(2)])
    run(lambda m, a: a.cholesky(upper), [spd()])
    run(lambda m, a: m.cholesky(a, upper), [spd().astype(np.float32)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve(upper):
    def tri(*batch):
        L = lower(*batch)
        return np.swapaxes(L, -1, -2) if upper else L
    run(lambda m, b, L: m.cholesky_solve(b, L, upper), [RNG.standard_normal((4, 2)), tri()])
    run(lambda m, b, L: b.cholesky_solve(L, upper=upper), [RNG.standard_normal((3, 4, 2)), tri(3)])
    # batch dims broadcast
    run(lambda m, b, L: m.cholesky_solve(b, L, upper), [RNG.standard_normal((2, 4, 3)), tri(1)])
    # through a factorisation
    run(lambda m, b, A: m.cholesky_solve(b, m.linalg.cholesky(A, upper=upper), upper),
        [RNG.standard_normal((4, 2)), spd()])
    run(lambda m, b, L: m.cholesky_solve(b, L, upper),
        [RNG.standard_normal((4, 2)).astype(np.float32), tri().astype(np.float32)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse(upper):
    def tri(*batch):
        L = lower(*batch)
        return np.swapaxes(L, -1, -2) if upper else L
    run(lambda m, L: m.cholesky_inverse(L, upper), [tri()])
    run(lambda m, L: L.cholesky_inverse(upper=upper), [tri(2)])
    run(lambda m, A: m.cholesky_inverse(m.linalg.cholesky(A)), [spd()])
    run(lambda m, L: m.cholesky_inverse(L, upper), [tri().astype(np.float32)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_triangular_solve(upper, transpose, unitriangular):
    run(lambda m, b, A: tuple(m.triangular_solve(b, A, upper, transpose, unitriangular)),
        [RNG.standard_normal((4, 3)), well()])
    run(lambda m, b, A: tuple(b.triangular_solve(A, upper=upper, transpose=transpose, unitriangular=unitriangular)),
        [RNG.standard_normal((2, 4, 3)), well(1)])
    res = ember.triangular_solve(ember.tensor(RNG.standard_normal((4, 1))), ember.tensor(well()))
    assert res.solution.shape == (4, 1) and res.cloned_coefficient.shape == (4, 4)


def test_matrix_exp():
    run(lambda m, a: m.matrix_exp(a), [RNG.standard_normal((4, 4))], rtol=1e-10, atol=1e-10)
    run(lambda m, a: m.linalg.matrix_exp(a), [RNG.standard_normal((2, 4, 4))], rtol=1e-10, atol=1e-10)
    # large norms take the scaling-and-squaring path
    run(lambda m, a: a.matrix_exp(), [RNG.standard_normal((2, 3, 3)) * 4], rtol=1e-9, atol=1e-8)
    run(lambda m, a: m.matrix_exp(a), [RNG.standard_normal((3, 3)).astype(np.float32)], rtol=1e-4, atol=1e-5)
    # exp(0) = I, exp of a diagonal matrix, 1x1, and an empty batch
    z = ember.matrix_exp(ember.zeros(3, 3))
    np.testing.assert_array_equal(z.numpy(), np.eye(3, dtype=np.float32))
    d = RNG.standard_normal(3)
    np.testing.assert_allclose(ember.matrix_exp(ember.tensor(np.diag(d))).numpy(), np.diag(np.exp(d)), rtol=1e-12)
    assert tuple(ember.matrix_exp(ember.zeros(0, 2, 2)).shape) == (0, 2, 2)
    with pytest.raises(RuntimeError):
        ember.matrix_exp(ember.zeros(2, 3))


def test_matrix_exp_double_backward():
    a = RNG.standard_normal((3, 3)) * 0.5
    ae = ember.tensor(a, requires_grad=True)
    at = torch.tensor(a, requires_grad=True)
    ge, = ember.autograd.grad(ember.matrix_exp(ae).sum(), [ae], create_graph=True)
    gt, = torch.autograd.grad(torch.matrix_exp(at).sum(), [at], create_graph=True)
    assert_close(ge, gt, rtol=1e-9, atol=1e-9)
    gge, = ember.autograd.grad((ge * ge).sum(), [ae])
    ggt, = torch.autograd.grad((gt * gt).sum(), [at])
    assert_close(gge, ggt, rtol=1e-8, atol=1e-8)


def test_chain_matmul_and_adjoint():
    mats = [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal((2, 5))]
    run(lambda m, a, b, c: m.chain_matmul(a, b, c), mats)
    run(lambda m, a: m.chain_matmul(a), mats[:1])
    run(lambda m, a: m.adjoint(a), [RNG.standard_normal((2, 3, 4))])
    run(lambda m, a: a.adjoint(), [RNG.standard_normal((3, 4))])
    x = ember.randn(3, 4)
    assert x.adjoint()._base is x or x.adjoint().data_ptr() == x.data_ptr()
    with pytest.raises(RuntimeError):
        ember.adjoint(ember.randn(3))
    with pytest.raises(RuntimeError):
        ember.chain_matmul(ember.randn(3), ember.randn(3))


def test_compiled_matches_eager():
    A = ember.tensor(well(2))
    L = ember.tensor(lower())
    b = ember.tensor(RNG.standard_normal((2, 4, 3)))

    def f(A, L, b):
        x = ember.triangular_solve(b, A, upper=False)[0]
        y = ember.cholesky_solve(b, L)
        return x + y, ember.logdet(A), ember.matrix_exp(A * 0.3), ember.cholesky_inverse(L)

    ember.compiler.reset()
    eager = f(A, L, b)
    comp = ember.compile(f)(A, L, b)
    for a, e in zip(comp, eager):
        assert tuple(a.shape) == tuple(e.shape)
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-10, atol=1e-10)
    # and the gradients through the compiled graph
    Ae = ember.tensor(well(), requires_grad=True)

    def g(A):
        return (ember.matrix_exp(A * 0.3) * ember.inverse(A)).sum() + ember.logdet(A)
    ge, = ember.autograd.grad(g(Ae), [Ae])
    gc, = ember.autograd.grad(ember.compile(g)(Ae), [Ae])
    np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-9, atol=1e-9)
