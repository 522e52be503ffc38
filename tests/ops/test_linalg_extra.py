"""The rest of ember.linalg vs PyTorch (ember/ops/linalg_extra.py): LU (lu_factor[_ex], lu,
lu_solve, lu_unpack, torch.lu / torch.lu_solve), solve_triangular, lstsq, the _ex variants,
LDL^T, multi_dot, cond, vander, tensorinv / tensorsolve, householder_product, matrix_power,
diagonal: values, gradients (against torch and float64 finite differences), errors, and one
compiled-vs-eager check per family."""
import logging
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, gradcheck_fn, needs_torch, torch

pytest.importorskip("torch")

SET = settings(max_examples=6, deadline=None)
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


def tri(batch, n, upper, dtype="float64"):
    a = general(batch, n, dtype)
    return np.triu(a) if upper else np.tril(a)


def rect(shape, dtype="float64"):
    return rng().standard_normal(shape).astype(dtype)


def both(fn, arrays, dtype, grad=True, rtol=None, atol=None, grad_mask=None, skip_out=()):
    """fn(m, *tensors) under ember and torch: outputs, then gradients of sum(out * cotangent)
    over the floating outputs (``skip_out``: output positions not compared / not used)."""
    r, a = TOL[dtype]
    rtol, atol = rtol or r, atol or a
    mask = grad_mask or [x.dtype.kind == "f" for x in arrays]
    es = [ember.tensor(x, requires_grad=grad and g) for x, g in zip(arrays, mask)]
    ts = [torch.tensor(x, requires_grad=grad and g) for x, g in zip(arrays, mask)]
    oe, ot = fn(ember, *es), fn(torch, *ts)
    oes = tuple(oe) if isinstance(oe, tuple) else (oe,)
    ots = tuple(ot) if isinstance(ot, tuple) else (ot,)
    assert len(oes) == len(ots)
    for i, (x, y) in enumerate(zip(oes, ots)):
        if i not in skip_out:
            assert_close(x, y, rtol, atol, msg=f"output {i}")
    if grad:
        pairs = [(x, y) for i, (x, y) in enumerate(zip(oes, ots))
                 if i not in skip_out and y.dtype.is_floating_point and y.requires_grad and x.requires_grad
                 and y.numel()]
        if not pairs:
            return oe, ot
        cots = [rng().standard_normal(tuple(y.shape)) for _, y in pairs]
        le = sum((x * ember.tensor(c, dtype=x.dtype)).sum() for (x, _), c in zip(pairs, cots))
        lt = sum((y * torch.tensor(c, dtype=y.dtype)).sum() for (_, y), c in zip(pairs, cots))
        ge = ember.autograd.grad(le, [e for e in es if e.requires_grad])
        gt = torch.autograd.grad(lt, [t for t in ts if t.requires_grad])
        for x, y in zip(ge, gt):
            assert_close(x, y, rtol * 10, atol * 10, msg="gradient")
    return oe, ot


def raises_like(fn, arrays, exc=RuntimeError):
    """ember and torch raise the same exception type with the same message."""
    with pytest.raises(Exception) as te:
        fn(torch, *[torch.tensor(a) for a in arrays])
    with pytest.raises(exc) as ee:
        fn(ember, *[ember.tensor(a) for a in arrays])
    assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- LU
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (2, 3, 5), (1, 0, 0)])
def test_lu_factor_and_lu(dtype, shape):
    a = rect(shape, dtype) + (np.eye(shape[-2], shape[-1]) * 3).astype(dtype)
    both(lambda m, x: tuple(m.linalg.lu_factor(x)), [a], dtype)
    both(lambda m, x: tuple(m.linalg.lu_factor_ex(x)), [a], dtype)
    both(lambda m, x: tuple(m.linalg.lu(x)), [a], dtype)
    LU, piv = ember.linalg.lu_factor(ember.tensor(a))
    assert piv.dtype is ember.int32 and LU.grad_fn is None
    P, L, U = ember.linalg.lu(ember.tensor(a))
    assert_close(P @ L @ U, a, *TOL[dtype])


@needs_torch
@settings(max_examples=6, deadline=None)
@given(batch=batches, n=st.integers(1, 5))
def test_lu_solve_batches(batch, n):
    a, b = general(batch, n), rect(batch + (n, 2))

    def f(m, x, y):
        LU, piv = m.linalg.lu_factor(x)
        return (m.linalg.lu_solve(LU, piv, y), m.linalg.lu_solve(LU, piv, y, adjoint=True),
                m.linalg.lu_solve(LU, piv, y.mT, left=False),
                m.linalg.lu_solve(LU, piv, y.mT, left=False, adjoint=True))
    both(f, [a, b], "float64")


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_unpack_and_torch_lu(dtype):
    a = general((2,), 4, dtype)
    b = rect((2, 4, 3), dtype)
    both(lambda m, x: tuple(m.lu_unpack(*m.linalg.lu_factor(x))), [a], dtype)
    both(lambda m, x: tuple(m.lu_unpack(*m.linalg.lu_factor(x), unpack_data=False)), [a], dtype)
    both(lambda m, x: tuple(m.lu_unpack(*m.linalg.lu_factor(x), unpack_pivots=False)), [a], dtype)
    both(lambda m, x: tuple(m.lu(x)), [a], dtype, grad=False)
    both(lambda m, x: tuple(m.lu(x, get_infos=True)), [a], dtype, grad=False)
    both(lambda m, x, y: x.lu_solve(*m.linalg.lu_factor(y)), [b, a], dtype)
    both(lambda m, x, y: m.lu_solve(x, *y.lu()), [b, a], dtype)
    # broadcasting of LU's and B's batch dims
    both(lambda m, x, y: m.linalg.lu_solve(*m.linalg.lu_factor(x), y), [general((2, 1), 3, dtype),
                                                                      rect((4, 3, 2), dtype)], dtype)


def test_lu_gradcheck():
    gradcheck_fn(lambda m, x: m.linalg.lu(x).L.sum() * 0 + m.linalg.lu(x).U.square().sum()
                 + m.linalg.lu(x).L.square().sum(), [general((), 4)])
    for shape in [(5, 3), (3, 5)]:
        a = rect(shape) + 3 * np.eye(*shape)
        gradcheck_fn(lambda m, x: tuple(m.linalg.lu(x))[1:], [a])
    LU, piv = ember.linalg.lu_factor(ember.tensor(general((), 3)))
    gradcheck_fn(lambda m, x, y: m.linalg.lu_solve(x, piv, y, adjoint=True), [LU.numpy(), rect((3, 2))])


@needs_torch
def test_lu_singular_and_errors():
    s = np.zeros((2, 3, 3))
    s[:, 0, 0] = 1
    s[1] = np.eye(3)
    both(lambda m, x: tuple(m.linalg.lu_factor_ex(x)), [s], "float64", grad=False)
    raises_like(lambda m, x: m.linalg.lu_factor(x), [s])
    raises_like(lambda m, x: m.linalg.lu_factor(x), [s[0]])
    raises_like(lambda m, x: m.linalg.lu_factor_ex(x, check_errors=True), [s])
    raises_like(lambda m, x: m.linalg.lu_factor(x, pivot=False), [general((), 3)])
    raises_like(lambda m, x: m.linalg.lu_factor(x), [rect((3,))])
    raises_like(lambda m, x: m.linalg.lu_factor(x), [np.ones((3, 3), dtype=np.int32)], NotImplementedError)
    with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
        ember.linalg.lu_factor(ember.eye(3, dtype=ember.bfloat16))
    lu, piv = (general((), 3), np.array([1, 2, 3], dtype=np.int32))
    raises_like(lambda m, x, p, b: m.linalg.lu_solve(x, p, b), [lu, piv, rect((3,))])
    raises_like(lambda m, x, p, b: m.linalg.lu_solve(x, p, b), [lu, piv, rect((4, 2))])
    raises_like(lambda m, x, p, b: m.linalg.lu_solve(x, p, b), [lu, piv.astype(np.int64), rect((3, 2))])
    raises_like(lambda m, x, p, b: m.linalg.lu_solve(x, p, b), [lu, piv, rect((3, 2), "float32")])
    raises_like(lambda m, x, p, b: m.linalg.lu_solve(x, p, b), [lu, piv[:2], rect((3, 2))])
    raises_like(lambda m, x, p: m.lu_unpack(x, p), [lu, piv.astype(np.int64)])
    with pytest.raises(TypeError, match="argument 'out' must be tuple of Tensors"):   # (LU, pivots) is a pair
        ember.linalg.lu_factor(ember.tensor(lu), out=ember.tensor(lu))


# ---------------------------------------------------------------------- triangular solve
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(dtype, upper, left, unit):
    a = general((2,), 4, dtype)          # the other triangle is read by neither
    b = rect((2, 4, 3) if left else (2, 3, 4), dtype)
    both(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
         [a, b], dtype)


@needs_torch
@settings(max_examples=6, deadline=None)
@given(ba=batches, bb=batches, n=st.integers(1, 4))
def test_solve_triangular_broadcasts(ba, bb, n):
    try:
        np.broadcast_shapes(ba, bb)
    except ValueError:
        return
    both(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=False), [general(ba, n), rect(bb + (n, 2))],
         "float64")


def test_solve_triangular_gradcheck_and_zero_diagonal():
    gradcheck_fn(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True, left=False),
                 [general((2,), 3), rect((2, 2, 3))])
    gradcheck_fn(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=False, unitriangular=True),
                 [general((), 3), rect((3, 2))])
    if torch is not None:
        z = np.triu(general((), 3))
        z[1, 1] = 0
        both(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), [z, rect((3, 2))], "float64",
             grad=False)


@needs_torch
def test_solve_triangular_errors_and_old_api():
    a, b = general((), 3), rect((3, 2))
    raises_like(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True, left=False), [a, b])
    raises_like(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), [a, rect((3,))])
    raises_like(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), [rect((3, 4)), b])
    raises_like(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), [a, rect((4, 2))])
    raises_like(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True),
                [a.astype(np.int32), b.astype(np.int32)], NotImplementedError)
    # mixed dtypes: the result has A's dtype (as PyTorch)
    both(lambda m, x, y: m.linalg.solve_triangular(x, y, upper=True), [a.astype("float32"), b], "float32",
         grad=False)
    both(lambda m, x, y: tuple(m.triangular_solve(y, x, upper=False)), [a, b], "float64")


# ---------------------------------------------------------------------- _ex variants
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_ex_variants(dtype):
    a, p, b = general((2,), 3, dtype), spd((2,), 3, dtype), rect((2, 3, 2), dtype)
    both(lambda m, x: tuple(m.linalg.inv_ex(x)), [a], dtype)
    both(lambda m, x: tuple(m.linalg.cholesky_ex(x)), [p], dtype)
    both(lambda m, x: tuple(m.linalg.cholesky_ex(x, upper=True)), [p], dtype)
    both(lambda m, x, y: tuple(m.linalg.solve_ex(x, y)), [a, b], dtype)
    both(lambda m, x, y: tuple(m.linalg.solve_ex(x, y.mT, left=False)), [a, b], dtype)
    both(lambda m, x, y: tuple(m.linalg.solve_ex(x, y[..., 0])), [a, b], dtype)
    both(lambda m, x, y: tuple(m.linalg.solve_ex(x, y)), [general((2, 1), 3, dtype), rect((4, 3, 2), dtype)],
         dtype)


def test_ex_gradcheck():
    gradcheck_fn(lambda m, x: m.linalg.inv_ex(x).inverse, [general((2,), 3)])
    gradcheck_fn(lambda m, x: m.linalg.cholesky_ex(x @ x.mT).L, [general((), 3)])
    gradcheck_fn(lambda m, x, y: m.linalg.solve_ex(x, y).result, [general((2, 1), 3), rect((3, 3, 2))])


@needs_torch
def test_ex_singular_info_and_errors():
    s = np.zeros((2, 3, 3))
    s[:, 0, 0] = 1
    s[0] = np.eye(3)
    npd = -np.stack([np.eye(3), np.eye(3)])
    npd[0] = spd((), 3)
    one = np.ones(3)
    # results of a singular element are not compared (LAPACK leaves them undefined)
    oe, ot = both(lambda m, x: tuple(m.linalg.inv_ex(x)), [s], "float64", grad=False, skip_out=(0,))
    assert_close(oe[0][0], ot[0][0])
    oe, ot = both(lambda m, x, y: tuple(m.linalg.solve_ex(x, y)), [s, one], "float64", grad=False, skip_out=(0,))
    assert_close(oe[0][0], ot[0][0])
    oe, ot = both(lambda m, x: tuple(m.linalg.cholesky_ex(x)), [npd], "float64", grad=False, skip_out=(0,))
    assert_close(oe[0][0], ot[0][0])
    raises_like(lambda m, x: m.linalg.inv_ex(x, check_errors=True), [s], ember.linalg.LinAlgError)
    raises_like(lambda m, x, y: m.linalg.solve_ex(x, y, check_errors=True), [s, one], ember.linalg.LinAlgError)
    raises_like(lambda m, x: m.linalg.cholesky_ex(x, check_errors=True), [npd[::-1].copy()],
                ember.linalg.LinAlgError)
    raises_like(lambda m, x: m.linalg.inv_ex(x), [rect((3, 4))])
    raises_like(lambda m, x: m.linalg.cholesky_ex(x), [rect((3, 4))])
    raises_like(lambda m, x, y: m.linalg.solve_ex(x, y, left=False), [general((), 3), rect((3, 2))])


# ---------------------------------------------------------------------- lstsq
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(2, 5, 3), (2, 3, 5), (4, 4)])
def test_lstsq(dtype, driver, shape):
    # the diagonal shift keeps the matrix well conditioned: with + 2 I a 4x4 normal draw was now and
    # then near singular, and float32 gradients (magnitudes ~5e3) then differed by ~1% between libraries
    a = rect(shape, dtype) + (np.eye(shape[-2], shape[-1]) * max(shape[-2:])).astype(dtype)
    b = rect(shape[:-1] + (2,), dtype)
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == "float32" else {}
    both(lambda m, x, y: tuple(m.linalg.lstsq(x, y, driver=driver)), [a, b], dtype, **tol)
    both(lambda m, x, y: tuple(m.linalg.lstsq(x, y[..., 0], driver=driver)), [a, b], dtype, **tol)


@needs_torch
def test_lstsq_broadcast_rank_deficient_and_errors():
    a, b = rect((1, 5, 3)), rect((2, 5, 2))
    both(lambda m, x, y: tuple(m.linalg.lstsq(x, y, driver="gelsd")), [a, b], "float64")
    both(lambda m, x, y: tuple(m.linalg.lstsq(x, y, driver="gelsd")), [rect((2, 5, 3)), b[:1]], "float64")
    d = rect((2, 5, 3))
    d[..., 2] = d[..., 1]                      # rank 2: minimum-norm solution, no residuals
    for drv in ("gelsy", "gelsd", "gelss"):
        both(lambda m, x, y: tuple(m.linalg.lstsq(x, y, driver=drv)), [d, b], "float64", grad=False,
             rtol=1e-7, atol=1e-7)
    both(lambda m, x, y: tuple(m.linalg.lstsq(x, y, rcond=0.5, driver="gelsd")), [a[0], b[0]], "float64",
         grad=False)
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y, driver="foo"), [a, b])
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y), [a, b[:, :4]])
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y), [a[0, 0], b])
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y), [a[0], b])
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y), [a, b.astype("float32")])
    raises_like(lambda m, x, y: m.linalg.lstsq(x, y), [a.astype(np.int32), b.astype(np.int32)])


def test_lstsq_gradcheck():
    gradcheck_fn(lambda m, x, y: m.linalg.lstsq(x, y).solution, [rect((2, 5, 3)), rect((2, 5, 2))])
    gradcheck_fn(lambda m, x, y: m.linalg.lstsq(x, y).solution, [rect((3, 5)), rect((3, 2))])
    gradcheck_fn(lambda m, x, y: m.linalg.lstsq(x, y, driver="gelsd").residuals, [rect((5, 3)), rect((5, 2))])


# ---------------------------------------------------------------------- LDL^T
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_ldl(dtype):
    sym = rect((3, 5, 5), dtype)
    sym = sym + np.swapaxes(sym, -1, -2)           # indefinite: 2x2 pivots occur
    b = rect((3, 5, 2), dtype)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == "float32" else dict(rtol=1e-8, atol=1e-8)
    both(lambda m, x: tuple(m.linalg.ldl_factor(x)), [sym], dtype, grad=False, **tol)
    both(lambda m, x: tuple(m.linalg.ldl_factor_ex(x, hermitian=True)), [sym], dtype, grad=False, **tol)
    both(lambda m, x, y: m.linalg.ldl_solve(*m.linalg.ldl_factor(x), y), [sym, b], dtype, grad=False, **tol)
    X = ember.linalg.ldl_solve(*ember.linalg.ldl_factor(ember.tensor(sym)), ember.tensor(b))
    assert_close(ember.tensor(sym) @ X, b, **tol)


@needs_torch
def test_ldl_errors_and_backward():
    sym = spd((), 4)
    raises_like(lambda m, x: m.linalg.ldl_factor(x), [rect((3, 4))])
    raises_like(lambda m, x: m.linalg.ldl_factor(x), [rect((4,))])
    raises_like(lambda m, x: m.linalg.ldl_factor(x), [np.ones((3, 3), np.int32)])
    LD, piv = torch.linalg.ldl_factor(torch.tensor(sym))
    raises_like(lambda m, x, p, y: m.linalg.ldl_solve(x, p, y), [LD.numpy(), piv.numpy(), rect((3, 2))])
    raises_like(lambda m, x, p, y: m.linalg.ldl_solve(x, p, y), [LD.numpy(), piv.numpy(), rect((4, 2), "float32")])
    raises_like(lambda m, x, p, y: m.linalg.ldl_solve(x, p, y), [LD.numpy(), piv.numpy()[:3], rect((4, 2))])
    raises_like(lambda m, x, p, y: m.linalg.ldl_solve(x, p, y), [LD.numpy(), piv.numpy() * 1.0, rect((4, 2))])
    with pytest.raises(NotImplementedError, match="\"ldl_factor_kernel_cpu\" not implemented for 'BFloat16'"):
        ember.linalg.ldl_factor(ember.tensor(sym).bfloat16())     # (the message torch gives)
    info = ember.linalg.ldl_factor_ex(ember.zeros(2, 3, 3, dtype=ember.float64)).info
    both(lambda m, x: tuple(m.linalg.ldl_factor_ex(x)), [np.zeros((2, 0, 0))], "float64", grad=False)
    assert info.tolist() == [1, 1]
    with pytest.raises(ember.linalg.LinAlgError, match="zero diagonal element"):
        ember.linalg.ldl_factor(ember.zeros(3, 3))
    x = ember.tensor(sym, requires_grad=True)
    LD, _ = ember.linalg.ldl_factor(x)
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex is not implemented"):
        LD.sum().backward()


# ---------------------------------------------------------------------- composites
@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_dot(dtype):
    shapes = [(3, 10), (10, 2), (2, 7), (7, 4)]
    both(lambda m, *xs: m.linalg.multi_dot(xs), [rect(s, dtype) for s in shapes], dtype)
    both(lambda m, *xs: m.linalg.multi_dot(list(xs)), [rect(s, dtype) for s in [(10,), (10, 2), (2,)]], dtype)
    both(lambda m, *xs: m.linalg.multi_dot(list(xs)), [rect(s, dtype) for s in [(10,), (10, 2)]], dtype)
    both(lambda m, *xs: m.linalg.multi_dot(list(xs)), [rect(s, dtype) for s in [(3, 10), (10,)]], dtype)
    gradcheck_fn(lambda m, *xs: m.linalg.multi_dot(xs), [rect(s) for s in shapes])


@needs_torch
def test_multi_dot_errors():
    a = rect((3, 3), "float32")
    raises_like(lambda m, x: m.linalg.multi_dot([x]), [a])
    raises_like(lambda m: m.linalg.multi_dot([]), [])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y]), [a, rect((2, 2), "float32")])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y]), [rect((3,), "float32"), rect((2, 2), "float32")])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y]), [a, rect((2, 3, 3), "float32")])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y]), [rect((2, 3, 3), "float32"), a])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y]), [a, a.astype("float64")])
    raises_like(lambda m, x, y: m.linalg.multi_dot([x, y, x]), [a, rect((3,), "float32")])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1])
def test_cond(dtype, p):
    # PyTorch's own backward fails for fro / +-inf / +-1 (an in-place op on inv_ex's saved
    # output): those gradients are checked by finite differences below
    both(lambda m, x: m.linalg.cond(x, p), [general((2,), 4, dtype)], dtype, rtol=1e-3 if dtype == "float32"
         else None, grad=p in (None, 2, -2, "nuc"))
    if p in (None, 2, -2):
        both(lambda m, x: m.linalg.cond(x, p), [rect((2, 3, 5), dtype)], dtype,
             rtol=1e-3 if dtype == "float32" else None)


@needs_torch
def test_cond_singular_errors_gradcheck():
    z = np.zeros((2, 3, 3))
    z[0] = general((), 3)
    both(lambda m, x: m.linalg.cond(x, "fro"), [z], "float64", grad=False)
    raises_like(lambda m, x: m.linalg.cond(x, "fro"), [rect((3, 4))])
    raises_like(lambda m, x: m.linalg.cond(x, 1), [rect((3,))])
    raises_like(lambda m, x: m.linalg.cond(x), [rect((3,))])
    raises_like(lambda m, x: m.linalg.cond(x, 3), [general((), 3)])
    gradcheck_fn(lambda m, x: m.linalg.cond(x), [general((), 3)])
    for p in ("nuc", "fro", 1, -math.inf):
        gradcheck_fn(lambda m, x: m.linalg.cond(x, p), [general((), 3)])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES + ("int64",))
def test_vander(dtype):
    x = rect((2, 4), "float64")
    x = (x * 3).astype(dtype) if dtype == "int64" else x.astype(dtype)
    both(lambda m, v: m.linalg.vander(v), [x], dtype if dtype != "int64" else "float64",
         grad=dtype != "int64")
    both(lambda m, v: m.linalg.vander(v, N=6), [x[0]], dtype if dtype != "int64" else "float64",
         grad=dtype != "int64")
    raises_like(lambda m, v: m.linalg.vander(v, N=1), [x])
    raises_like(lambda m, v: m.linalg.vander(v), [np.array(2.0)])
    xz = np.array([0.0, 1.5, -2.0])
    gradcheck_fn(lambda m, v: m.linalg.vander(v), [xz])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_tensorinv_tensorsolve(dtype):
    a = general((), 24, dtype).reshape(4, 6, 8, 3)
    both(lambda m, x: m.linalg.tensorinv(x, ind=2), [a], dtype, rtol=1e-3 if dtype == "float32" else None)
    both(lambda m, x: m.linalg.tensorinv(x, ind=1), [general((), 6, dtype).reshape(6, 2, 3)], dtype)
    a2 = general((), 6, dtype).reshape(2, 3, 6)
    both(lambda m, x, y: m.linalg.tensorsolve(x, y), [a2, rect((2, 3), dtype)], dtype)
    a3 = np.moveaxis(general((), 6, dtype).reshape(6, 2, 3), 0, 2).copy()
    both(lambda m, x, y: m.linalg.tensorsolve(x, y, dims=(2,)), [a3.reshape(2, 3, 6), rect((2, 3), dtype)], dtype)
    raises_like(lambda m, x: m.linalg.tensorinv(x, ind=0), [a])
    raises_like(lambda m, x: m.linalg.tensorinv(x, ind=2), [rect((4, 6, 8, 2))])
    raises_like(lambda m, x, y: m.linalg.tensorsolve(x, y), [rect((2, 3, 5)), rect((2, 3))])
    gradcheck_fn(lambda m, x, y: m.linalg.tensorsolve(x, y), [general((), 6).reshape(2, 3, 6), rect((2, 3))])
    gradcheck_fn(lambda m, x: m.linalg.tensorinv(x, ind=1), [general((), 4).reshape(4, 2, 2)])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [((5, 3), (3,)), ((2, 4, 4), (2, 2)), ((4, 2), (0,))])
def test_householder_product(dtype, shape):
    ashape, tshape = shape
    both(lambda m, x, t: m.linalg.householder_product(x, t), [rect(ashape, dtype), rect(tshape, dtype)], dtype)


@needs_torch
def test_householder_product_geqrf_errors_gradcheck():
    a = rect((5, 3))
    qr, tau = torch.geqrf(torch.tensor(a))
    q = ember.linalg.householder_product(ember.tensor(qr.numpy()), ember.tensor(tau.numpy()))
    assert_close(q, torch.linalg.qr(torch.tensor(a)).Q)
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((3, 4)), rect((2,))])
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((4, 3)), rect((4,))])
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((4, 3)), rect((2, 2))])
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((2, 4, 3)), rect((3, 2))])
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((4,)), rect((2,))])
    raises_like(lambda m, x, t: m.linalg.householder_product(x, t), [rect((4, 3), "float32"), rect((2,))])
    gradcheck_fn(lambda m, x, t: m.linalg.householder_product(x, t), [rect((4, 3)), rect((2,))])


@needs_torch
@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 5])
def test_matrix_power_and_diagonal(n):
    both(lambda m, x: m.linalg.matrix_power(x, n), [general((2,), 3)], "float64")
    both(lambda m, x: m.linalg.diagonal(x, offset=1), [rect((2, 3, 4))], "float64")
    both(lambda m, x: m.linalg.diagonal(x, dim1=0, dim2=2), [rect((2, 3, 4))], "float64")


# ---------------------------------------------------------------------- compiled vs eager
def _compiled_matches(f, args, caplog, tol=1e-10):
    """``f`` compiled with the inductor equals eager, forward and backward, without running
    the frame eagerly."""
    ember.dynamo.reset()
    cf = ember.compile(f, backend="inductor")
    ins = [ember.tensor(a, requires_grad=a.dtype.kind == "f") for a in args]
    with caplog.at_level(logging.DEBUG, logger="ember"):
        oc = cf(*ins)
        gc = ember.autograd.grad(oc, [x for x in ins if x.requires_grad])
    assert "running it eagerly" not in caplog.text
    oe = f(*ins)
    ge = ember.autograd.grad(oe, [x for x in ins if x.requires_grad])
    assert_close(oc, oe, tol, tol)
    for x, y in zip(gc, ge):
        assert_close(x, y, tol, tol)
    ember.dynamo.reset()


def test_compiled_lu_family(caplog):
    def f(a, b):
        LU, piv = ember.linalg.lu_factor(a)
        P, L, U = ember.linalg.lu(a)
        return ember.linalg.lu_solve(LU, piv, b).sum() + (L * U).sum() + P.sum()
    _compiled_matches(f, [general((2,), 3), rect((2, 3, 2))], caplog)


def test_compiled_solve_triangular_and_ex(caplog):
    def f(a, b):
        x = ember.linalg.solve_triangular(a, b, upper=True, left=True)
        inv, info = ember.linalg.inv_ex(a)
        s, info2 = ember.linalg.solve_ex(a, b)
        L, info3 = ember.linalg.cholesky_ex(a @ a.mT)
        return x.sum() + inv.sum() + s.sum() + L.sum() + (info + info2 + info3).sum()
    _compiled_matches(f, [general((2,), 3), rect((2, 3, 2))], caplog)


def test_compiled_lstsq_and_composites(caplog):
    def f(a, b, c, t):
        sol = ember.linalg.lstsq(a, b).solution
        md = ember.linalg.multi_dot([c, c.mT, c])
        return (sol.sum() + md.sum() + ember.linalg.cond(c @ c.mT + 3 * ember.eye(3, dtype=c.dtype))
                + ember.linalg.vander(t).sum() + ember.linalg.householder_product(a[0], t[:2]).sum()
                + ember.linalg.matrix_power(c @ c.mT, 2).sum())
    _compiled_matches(f, [rect((2, 5, 3)), rect((2, 5, 2)), rect((3, 4)), rect((3,))], caplog, tol=1e-9)


def test_compiled_ldl_forward(caplog):
    sym = rect((4, 4))
    sym = sym + sym.T

    def f(a, b):
        LD, piv = ember.linalg.ldl_factor(a)
        return ember.linalg.ldl_solve(LD, piv, b) * 2

    ember.dynamo.reset()
    cf = ember.compile(f, backend="inductor")
    a, b = ember.tensor(sym), ember.tensor(rect((4, 2)))
    with caplog.at_level(logging.DEBUG, logger="ember"):
        oc = cf(a, b)
    assert "running it eagerly" not in caplog.text
    assert_close(oc, f(a, b), 1e-12, 1e-12)
    ember.dynamo.reset()
