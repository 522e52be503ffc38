"""ember.linalg on complex tensors, and linalg.eig / eigvals, against PyTorch: values and
gradients (torch.autograd.grad) on random well-conditioned data. Losses are real: ``abs`` or
``Re(out * w)`` with a fixed random complex ``w``; for outputs defined only up to a phase
(eig / eigh eigenvectors, singular vectors) only phase-invariant losses, and the phase-dependent
ones must raise as in torch."""
import logging

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(20261129)


def cz(*shape, dt=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)


def rz(*shape, dt=np.float64):
    return RNG.standard_normal(shape).astype(dt)


def well(*shape, dt=np.complex128):
    """A well-conditioned square matrix (random plus a multiple of the identity)."""
    n = shape[-1]
    a = cz(*shape, dt=dt) if np.dtype(dt).kind == "c" else rz(*shape, dt=dt)
    return (a + 3 * np.eye(n)).astype(dt)


def hpd(*shape, dt=np.complex128):
    """A Hermitian positive-definite matrix."""
    a = cz(*shape, dt=dt) if np.dtype(dt).kind == "c" else rz(*shape, dt=dt)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dt)


def enp(t):
    return np.asarray(t.detach()._data)


def tnp(t):
    return t.detach().resolve_conj().numpy()


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


WEIGHTS = {}


def weight(m, t, i):
    """A fixed random weight of ``t``'s shape (complex for complex outputs), the same for both
    modules."""
    key = (tuple(t.shape), t.dtype.is_complex, i)
    if key not in WEIGHTS:
        rng = np.random.default_rng(hash(key) % 2**32)
        w = rng.standard_normal(t.shape)
        if t.dtype.is_complex:
            w = w + 1j * rng.standard_normal(t.shape)
        WEIGHTS[key] = w
    w = np.asarray(WEIGHTS[key])
    return m.from_numpy(w.astype(np.complex128 if t.dtype.is_complex else np.float64)).to(t.dtype)


def wloss(m, outs):
    """sum_i Re(out_i * w_i): depends on every output's phase (not for gauge-dependent outputs)."""
    total = 0
    for i, o in enumerate(_flat(outs)):
        if o is None:
            continue
        p = o * weight(m, o, i)
        total = total + (p.real if o.dtype.is_complex else p).sum()
    return total


def absloss(m, outs):
    """sum_i sum |out_i| * w_i: invariant to the phases of columns / rows."""
    total = 0
    for i, o in enumerate(_flat(outs)):
        if o is None:
            continue
        a = o.abs()
        total = total + (a * weight(m, a, i)).sum()
    return total


def compare(f, arrays, loss=wloss, rtol=1e-7, atol=1e-9, grad=True, check_values=True):
    """Run ``f(m, *tensors)`` under torch and ember: same dtypes, values, and gradients of
    ``loss`` w.r.t. every input (values compared elsewhere when not ``check_values``)."""
    tin = [torch.from_numpy(a.copy()).requires_grad_(grad) for a in arrays]
    ein = [ember.from_numpy(a.copy()).requires_grad_(grad) for a in arrays]
    tout, eout = f(torch, *tin), f(ember, *ein)
    for t, e in zip(_flat(tout), _flat(eout)):
        assert str(t.dtype).replace("torch.", "") == e.dtype.name
        assert tuple(t.shape) == tuple(e.shape)
        if check_values:
            np.testing.assert_allclose(enp(e), tnp(t), rtol=rtol, atol=atol)
    if not grad:
        return
    tg = torch.autograd.grad(loss(torch, tout), tin)
    eg = ember.autograd.grad(loss(ember, eout), ein)
    for t, e in zip(tg, eg):
        assert str(t.dtype).replace("torch.", "") == e.dtype.name
        np.testing.assert_allclose(enp(e), tnp(t), rtol=rtol * 100, atol=atol * 100)


# ---------------------------------------------------------------------- eig / eigvals
def match_eig(el, ev, tl, tv, tol):
    """ember's and torch's eigenpairs agree up to order and a phase per eigenvector. Both call
    LAPACK's geev, but torch's LAPACK (MKL) and numpy's (OpenBLAS) may order close eigenvalues
    differently and flip the sign of a real matrix's real eigenvectors."""
    el, ev, tl, tv = (np.asarray(x).reshape((-1,) + np.shape(x)[-2 if i % 2 else -1:])
                      for i, x in enumerate((el, ev, tl, tv)))
    for b in range(el.shape[0]):
        used = set()
        for j in range(el.shape[1]):
            k = min((i for i in range(el.shape[1]) if i not in used), key=lambda i: abs(el[b, i] - tl[b, j]))
            used.add(k)
            np.testing.assert_allclose(el[b, k], tl[b, j], rtol=tol, atol=tol)
            x, y = ev[b, :, k], tv[b, :, j]
            ph = np.vdot(x, y)
            np.testing.assert_allclose(abs(ph), 1, rtol=tol, atol=tol)
            np.testing.assert_allclose(x * ph, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", ["complex128", "float64", "complex64", "float32"])
def test_eig_values_match_torch(kind):
    dt = np.dtype(kind)
    a = cz(3, 5, 5, dt=dt) if dt.kind == "c" else rz(3, 5, 5, dt=dt)
    tol = 1e-4 if dt in (np.float32, np.complex64) else 1e-10
    tl, tv = torch.linalg.eig(torch.from_numpy(a))
    res = ember.linalg.eig(ember.from_numpy(a))
    assert type(res).__name__ == "linalg_eig" and res._fields == ("eigenvalues", "eigenvectors")
    el, ev = res
    assert el.dtype.name == str(tl.dtype)[6:] and ev.dtype.name == str(tv.dtype)[6:]
    assert tuple(el.shape) == (3, 5) and tuple(ev.shape) == (3, 5, 5)
    match_eig(enp(el), enp(ev), tnp(tl), tnp(tv), tol)
    np.testing.assert_allclose(np.linalg.norm(enp(ev), axis=-2), 1, rtol=tol)
    # A V = V diag(L)
    np.testing.assert_allclose(a @ enp(ev), enp(ev) * enp(el)[..., None, :], rtol=tol * 10, atol=tol * 10)
    np.testing.assert_array_equal(enp(ember.linalg.eigvals(ember.from_numpy(a))), enp(el))


def test_eig_real_matrix_with_real_spectrum_is_complex():
    a = hpd(4, 4, dt=np.float64)
    el, ev = ember.linalg.eig(ember.from_numpy(a))
    assert el.dtype is ember.complex128 and ev.dtype is ember.complex128
    tl, tv = torch.linalg.eig(torch.from_numpy(a))
    match_eig(enp(el), enp(ev), tnp(tl), tnp(tv), 1e-10)


def eig_loss(m, out):
    """Invariant to the eigenpairs' order and to each eigenvector's phase: sum_j f(L_j) plus
    sum_ij |V_ij| w_i Re(L_j)."""
    lam, v = out
    c = m.from_numpy(np.array([0.3 - 0.7j]))
    w = m.from_numpy(np.arange(1.0, v.shape[-2] + 1))
    first = (lam * lam * c).real.sum() + lam.abs().sum()
    return first + (v.abs() * w.unsqueeze(-1) * lam.real.unsqueeze(-2)).sum()


@pytest.mark.parametrize("kind", ["complex128", "float64"])
def test_eig_gradients(kind):
    dt = np.dtype(kind)
    a = cz(2, 4, 4) if dt.kind == "c" else rz(2, 4, 4)
    compare(lambda m, x: m.linalg.eig(x), [a], loss=eig_loss, check_values=False)
    compare(lambda m, x: m.linalg.eigvals(x), [a], loss=lambda m, lam: eig_loss(m, (lam, lam[..., None, :] * 0)),
            check_values=False)


def test_eig_phase_dependent_loss_raises():
    x = ember.from_numpy(cz(4, 4)).requires_grad_()
    v = ember.linalg.eig(x).eigenvectors
    with pytest.raises(RuntimeError, match="linalg_eig_backward: The eigenvectors in the complex case"):
        ember.autograd.grad(wloss(ember, v), [x])


def test_eig_errors():
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        ember.linalg.eig(ember.randn(3, 4))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor"):
        ember.linalg.eig(ember.ones(3, 3, dtype=ember.int64))
    # torch 2.13 keeps Tensor.eig only to say where it went (ember/ops/linalg_legacy.py)
    with pytest.raises(RuntimeError, match="linalg.eig"):
        ember.randn(3, 3).eig()


# ---------------------------------------------------------------------- inverses, determinants, solves
def test_inv_det():
    compare(lambda m, x: m.linalg.inv(x), [well(2, 4, 4)])
    compare(lambda m, x: m.linalg.det(x), [well(2, 4, 4)])
    compare(lambda m, x: m.det(x), [well(3, 3)])


def test_det_singular_complex_gradient():
    a = cz(4, 2) @ cz(2, 4)     # rank 2: det 0, gradient the (zero) adjugate
    b = cz(3, 1) @ cz(1, 3) + np.diag([0, 1.0, 1j]) @ cz(3, 3) * 0   # rank 1
    a3 = cz(3, 2) @ cz(2, 3)                                           # rank 2 of 3: adjugate != 0
    for m in (a, a3):
        compare(lambda m_, x: m_.linalg.det(x), [m], atol=1e-8)
    del b


def test_slogdet():
    compare(lambda m, x: m.linalg.slogdet(x), [well(2, 4, 4)])
    compare(lambda m, x: m.linalg.slogdet(x).logabsdet, [well(4, 4)])
    compare(lambda m, x: m.linalg.slogdet(x).sign, [well(4, 4)])
    s = ember.linalg.slogdet(ember.from_numpy(well(3, 3)))
    assert s.sign.dtype is ember.complex128 and s.logabsdet.dtype is ember.float64


def test_solve():
    compare(lambda m, a, b: m.linalg.solve(a, b), [well(2, 4, 4), cz(2, 4, 3)])
    compare(lambda m, a, b: m.linalg.solve(a, b), [well(4, 4), cz(4)])
    compare(lambda m, a, b: m.linalg.solve(a, b, left=False), [well(4, 4), cz(2, 4)])


def test_matmul():
    compare(lambda m, a, b: m.linalg.matmul(a, b), [cz(2, 3, 4), cz(4, 5)])


# ---------------------------------------------------------------------- factorisations
def test_cholesky():
    compare(lambda m, x: m.linalg.cholesky(x), [hpd(2, 4, 4)])
    compare(lambda m, x: m.linalg.cholesky(x, upper=True), [hpd(4, 4)])
    # A built from B in the graph: a loss of a Hermitian A's factor is well defined
    compare(lambda m, b: m.linalg.cholesky(b @ b.mH + 4 * m.eye(4, dtype=b.dtype)), [cz(4, 4)])


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5), (2, 4, 3)])
def test_qr(shape):
    compare(lambda m, x: m.linalg.qr(x), [cz(*shape)])


def test_qr_complete():
    compare(lambda m, x: m.linalg.qr(x, mode="complete"), [cz(3, 5)])
    compare(lambda m, x: m.linalg.qr(x, mode="r").R, [cz(5, 3)], grad=False)


def test_eigh():
    a = hpd(2, 4, 4)
    for uplo in ("L", "U"):
        compare(lambda m, x: m.linalg.eigvalsh(x, UPLO=uplo), [a + np.tril(cz(4, 4), -1) * 0.1])
        # eigenvectors up to a phase (LAPACK builds differ): values compared as |V|
        compare(lambda m, x: (lambda w, v: (w, v.abs()))(*m.linalg.eigh(x, UPLO=uplo)), [a])
        compare(lambda m, x: m.linalg.eigh(x, UPLO=uplo), [a], loss=lambda m, o: wloss(m, o[0]) + absloss(m, o[1]),
                check_values=False)
    w, v = ember.linalg.eigh(ember.from_numpy(a))
    assert w.dtype is ember.float64 and v.dtype is ember.complex128
    x = ember.from_numpy(a).requires_grad_()
    with pytest.raises(RuntimeError, match="linalg_eigh_backward: The eigenvectors in the complex case"):
        ember.autograd.grad(wloss(ember, ember.linalg.eigh(x)[1]), [x])


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = cz(*shape)
    tol = dict(rtol=1e-7, atol=1e-9)
    # the singular vectors' phases differ between LAPACK builds only by a common phase per pair:
    # compare U S Vh, S and |U|, |Vh| (phase-invariant) rather than U and Vh
    el = ember.linalg.svd(ember.from_numpy(a), full_matrices=full)
    tu, ts, tvh = torch.linalg.svd(torch.from_numpy(a), full_matrices=full)
    assert el.S.dtype is ember.float64 and el.U.dtype is ember.complex128
    np.testing.assert_allclose(enp(el.S), tnp(ts), **tol)
    k = min(shape[-2:])
    np.testing.assert_allclose(np.abs(enp(el.U)[..., :k]), np.abs(tnp(tu)[..., :k]), **tol)
    if not full:
        compare(lambda m, x: m.linalg.svd(x, full_matrices=False), [a],
                loss=lambda m, o: wloss(m, o.S) + absloss(m, (o.U, o.Vh)))
        compare(lambda m, x: m.linalg.svdvals(x), [a])
        # U diag(S) Vh reconstructs A: a phase-invariant function of U and Vh together
        compare(lambda m, x: (lambda u, s, vh: (u * s.unsqueeze(-2)) @ vh)(*m.linalg.svd(x, full_matrices=False)),
                [a])


def test_svd_phase_dependent_loss_raises():
    x = ember.from_numpy(cz(4, 3)).requires_grad_()
    with pytest.raises(RuntimeError, match="svd_backward: The singular vectors in the complex case"):
        ember.autograd.grad(wloss(ember, ember.linalg.svd(x, full_matrices=False).U), [x])


def test_pinv_rank_norms():
    compare(lambda m, x: m.linalg.pinv(x), [cz(2, 5, 3)])
    # torch differentiates pinv by the general pinv formula even when hermitian=True, ember
    # through eigh (the Hermitian part): equal for a Hermitian matrix built in the graph
    compare(lambda m, x: m.linalg.pinv(x + x.mH, hermitian=True), [cz(4, 4)])
    a = cz(5, 2) @ cz(2, 4)
    assert int(ember.linalg.matrix_rank(ember.from_numpy(a))) == int(torch.linalg.matrix_rank(torch.from_numpy(a))) == 2
    assert int(ember.linalg.matrix_rank(ember.from_numpy(hpd(3, 3)), hermitian=True)) == 3
    x = cz(2, 4, 3)
    for ord in ("fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf")):
        compare(lambda m, t: m.linalg.matrix_norm(t, ord=ord), [x])
    compare(lambda m, t: m.linalg.norm(t), [x])
    compare(lambda m, t: m.linalg.norm(t, dim=(-2, -1)), [x])
    compare(lambda m, t: m.linalg.vector_norm(t, 3, dim=-1), [x])
    compare(lambda m, t: m.linalg.norm(t[0], ord="nuc"), [x])


def test_complex64():
    a = well(3, 3, dt=np.complex64)
    compare(lambda m, x: m.linalg.inv(x), [a], rtol=1e-4, atol=1e-5)
    compare(lambda m, x: m.linalg.svdvals(x), [a], rtol=1e-4, atol=1e-5)
    compare(lambda m, x: m.linalg.slogdet(x), [a], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- top-level functions
def test_torch_level_functions():
    compare(lambda m, x: m.logdet(x), [well(2, 3, 3)])
    compare(lambda m, x: m.inverse(x), [well(3, 3)])
    compare(lambda m, x: (lambda u, s, v: (u * s.unsqueeze(-2)) @ v.mH)(*m.svd(x)), [cz(4, 3)])
    compare(lambda m, x: m.svd(x).S, [cz(3, 4)])
    compare(lambda m, b, x: m.cholesky_solve(b, m.linalg.cholesky(x @ x.mH + 3 * m.eye(3, dtype=x.dtype))),
            [cz(3, 2), cz(3, 3)])
    compare(lambda m, b, x: m.cholesky_solve(b, m.linalg.cholesky(x @ x.mH + 3 * m.eye(3, dtype=x.dtype),
                                                                    upper=True), upper=True), [cz(3, 2), cz(3, 3)])
    compare(lambda m, x: m.cholesky_inverse(m.linalg.cholesky(x @ x.mH + 3 * m.eye(3, dtype=x.dtype))), [cz(3, 3)])
    compare(lambda m, x: m.linalg.matrix_exp(x), [0.5 * cz(2, 3, 3)])
    compare(lambda m, x: m.matrix_exp(x), [3 * cz(4, 4)], rtol=1e-6)


# ---------------------------------------------------------------------- LU, triangular solves, lstsq, _ex
def test_lu_factor_and_lu():
    a = cz(2, 4, 4)
    compare(lambda m, x: m.linalg.lu_factor(x), [a])       # pivots: izamax's |Re| + |Im| as LAPACK
    compare(lambda m, x: m.linalg.lu(x), [a])
    for shape in ((5, 3), (3, 5)):
        compare(lambda m, x: m.linalg.lu(x), [cz(*shape)])
    compare(lambda m, x: m.linalg.lu_factor_ex(x), [a])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(left, adjoint):
    a, b = well(2, 4, 4), cz(2, 4, 3) if left else cz(2, 3, 4)
    compare(lambda m, x, y: m.linalg.lu_solve(*m.linalg.lu_factor(x), y, left=left, adjoint=adjoint), [a, b])
    compare(lambda m, x, y: m.lu_solve(y, *m.linalg.lu_factor(x)), [a, cz(2, 4, 2)])


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular(upper, left):
    a = well(2, 4, 4)
    b = cz(2, 4, 3) if left else cz(2, 3, 4)
    compare(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=upper, left=left), [a, b])
    compare(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=True), [a, b])


def test_ex_variants():
    compare(lambda m, x: m.linalg.inv_ex(x), [well(2, 3, 3)])
    compare(lambda m, x, y: m.linalg.solve_ex(x, y), [well(2, 3, 3), cz(2, 3, 2)])
    compare(lambda m, x: m.linalg.cholesky_ex(x), [hpd(2, 3, 3)])
    compare(lambda m, x: m.linalg.cholesky_ex(x, upper=True), [hpd(3, 3)])
    # not positive definite: info and potf2's partial factor, as torch
    bad = hpd(4, 4)
    bad[2, 2] = -5
    compare(lambda m, x: m.linalg.cholesky_ex(x), [bad], grad=False)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq(shape, driver):
    a, b = cz(*shape), cz(shape[0], 2)
    if driver == "gels" or shape[0] >= shape[1]:
        compare(lambda m, x, y: m.linalg.lstsq(x, y, driver=driver), [a, b])
    else:
        # an underdetermined problem's solution by a gels-free driver: values (torch's CPU
        # gelsy/gelsd/gelss give the minimum-norm solution too) and its gradient
        compare(lambda m, x, y: m.linalg.lstsq(x, y, driver=driver).solution, [a, b])


def test_composites():
    compare(lambda m, x: m.linalg.cond(x), [well(2, 3, 3)])
    # torch's own backward of cond(A, 'fro') for complex A fails (an in-place write on inv_ex's
    # saved output): values only
    compare(lambda m, x: m.linalg.cond(x, "fro"), [well(3, 3)], grad=False)
    compare(lambda m, x: m.linalg.matrix_power(x, 3), [cz(3, 3)])
    compare(lambda m, x: m.linalg.matrix_power(x, -2), [well(3, 3)])
    compare(lambda m, x, y, z: m.linalg.multi_dot([x, y, z]), [cz(2, 3), cz(3, 4), cz(4, 2)])
    compare(lambda m, x: m.linalg.vander(x), [cz(4)])
    compare(lambda m, x: m.linalg.tensorinv(x, 1), [well(4, 4).reshape(4, 2, 2)])
    compare(lambda m, x, y: m.linalg.tensorsolve(x, y), [well(6, 6).reshape(6, 2, 3), cz(6)])
    compare(lambda m, x, t: m.linalg.householder_product(x, t), [cz(4, 3), cz(3)])
    compare(lambda m, x: m.linalg.vecdot(x, x.conj() * 2), [cz(3, 4)])


def test_ldl_complex_hermitian():
    """zhetf2 / zhetrs (complex LDL^T tested more in tests/ops/test_complex_more.py)."""
    a = hpd(3, 3)
    tl, tp = torch.linalg.ldl_factor(torch.from_numpy(a), hermitian=True)
    el, ep = ember.linalg.ldl_factor(ember.from_numpy(a), hermitian=True)
    np.testing.assert_array_equal(np.asarray(ep._data), tp.numpy())
    np.testing.assert_allclose(np.tril(np.asarray(el._data)), np.tril(tl.numpy()), atol=1e-10)


# ---------------------------------------------------------------------- under ember.compile
def test_compiled_complex_linalg_matches_eager(caplog):
    """Graphs with complex values run with eager ops (ember.aot's complex fallback), so the
    compiled function's values and gradients are eager's: complex input, and a real input whose
    eigen-decomposition is complex. The eager gradients are torch's."""
    def g(m, z, x):
        lam = m.linalg.eigvals(x)
        w, v = m.linalg.eigh(z @ z.mH)
        s = m.linalg.slogdet(z)
        return ((lam * lam).real.sum() + w.sum() + v.abs().sum() + s.logabsdet + s.sign.real
                + m.linalg.svdvals(m.linalg.inv(z)).sum() + m.linalg.solve(z, z.conj()).abs().sum())

    def f(z, x):
        return g(ember, z, x)

    z = ember.from_numpy(well(4, 4)).requires_grad_()
    x = ember.from_numpy(rz(4, 4)).requires_grad_()
    e = f(z, x)
    ge = ember.autograd.grad(e, [z, x])
    ember.compiler.reset()
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        c = ember.compile(f)(z, x)
    assert "complex" in caplog.text       # captured, and run with eager ops
    gc = ember.autograd.grad(c, [z, x])
    assert float(c) == pytest.approx(float(e), rel=1e-12)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(enp(a), enp(b), rtol=1e-10, atol=1e-12)
    compare(g, [enp(z), enp(x)], loss=lambda m, o: o)
