"""Session 48: linalg / fft / complex edge cases against PyTorch (values, errors, gradients).

Each test draws seeded random data and compares with torch on the same input."""
import math

import numpy as np
import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _rand(*shape, seed=0, complex_=False):
    rs = np.random.RandomState(seed)
    x = rs.standard_normal(shape)
    if complex_:
        x = x + 1j * rs.standard_normal(shape)
    return x


def _close(e, t, rtol=1e-7, atol=1e-9):
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), t.numpy(), rtol=rtol, atol=atol)


def _grads(fn_name, make, x_np, *, loss_seed=7):
    """d/dx of sum(f(x) * w) in both libraries (w a fixed random weight, complex for complex outputs)."""
    torch = _torch()
    out = []
    for lib in (torch, ember):
        x = lib.tensor(x_np.copy(), requires_grad=True)
        y = make(lib)(x)
        rs = np.random.RandomState(loss_seed)
        w = rs.standard_normal(tuple(y.shape))
        if y.dtype.is_complex:
            w = w + 1j * rs.standard_normal(tuple(y.shape))
        loss = (y * lib.tensor(w).to(y.dtype)).real.sum() if y.dtype.is_complex else (y * lib.tensor(w)).sum()
        g, = lib.autograd.grad(loss, x)
        out.append(g.detach().numpy())
    return out


# ---------------------------------------------------------------------- empty matrices
@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (2, 0, 3), (2, 3, 0)])
@pytest.mark.parametrize("ord", [1, 2, math.inf, "fro", "nuc"])
def test_matrix_norm_of_empty_matrices_is_zero(shape, ord):
    torch = _torch()
    x = _rand(*shape)
    _close(ember.linalg.matrix_norm(ember.tensor(x), ord), torch.linalg.matrix_norm(torch.tensor(x), ord))
    _close(ember.linalg.matrix_norm(ember.tensor(x), ord, keepdim=True),
           torch.linalg.matrix_norm(torch.tensor(x), ord, keepdim=True))


@pytest.mark.parametrize("ord", [-1, -2, -math.inf])
def test_matrix_norm_negative_ord_of_empty_raises(ord):
    torch = _torch()
    with pytest.raises(IndexError):
        torch.linalg.matrix_norm(torch.zeros(0, 0), ord)
    with pytest.raises(IndexError):
        ember.linalg.matrix_norm(ember.zeros(0, 0), ord)


@pytest.mark.parametrize("shape", [(0, 0), (4, 0, 0), (0, 3, 3), (2, 0, 3)])
@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"])
def test_cond_of_empty_input(shape, p):
    torch = _torch()
    x = _rand(*shape, seed=1)
    try:
        want = torch.linalg.cond(torch.tensor(x), p)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match="square"):
            ember.linalg.cond(ember.tensor(x), p)
        assert "square" in str(e)
        return
    _close(ember.linalg.cond(ember.tensor(x), p), want)


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 2, 2)])
def test_matrix_exp_of_empty_input(shape):
    torch = _torch()
    x = _rand(*shape)
    _close(ember.linalg.matrix_exp(ember.tensor(x)), torch.linalg.matrix_exp(torch.tensor(x)))


# ---------------------------------------------------------------------- matrix_rank / norms
@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank_tol_overload(hermitian):
    torch = _torch()
    x = _rand(3, 5, 5, seed=2)
    x = x @ np.swapaxes(x, -1, -2) if hermitian else x
    for tol in (0.5, 2.0, 10.0):
        want = torch.linalg.matrix_rank(torch.tensor(x), tol, hermitian)
        got = ember.linalg.matrix_rank(ember.tensor(x), tol, hermitian)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        got = ember.linalg.matrix_rank(ember.tensor(x), tol=tol, hermitian=hermitian)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("fn", ["vector_norm", "matrix_norm", "norm"])
@pytest.mark.parametrize("in_dt,dt", [("complex64", "float64"), ("complex64", "float32"), ("float32", "complex128"),
                                      ("float32", "float16"), ("float64", "float32"), ("complex128", "complex64")])
def test_norm_dtype_argument_errors(fn, in_dt, dt):
    torch = _torch()
    x = _rand(3, 4, seed=3, complex_=in_dt.startswith("complex")).astype(in_dt)
    with pytest.raises(RuntimeError) as te:
        getattr(torch.linalg, fn)(torch.tensor(x), dtype=getattr(torch, dt))
    with pytest.raises(RuntimeError) as ee:
        getattr(ember.linalg, fn)(ember.tensor(x), dtype=getattr(ember, dt))
    assert str(ee.value) == str(te.value)


@pytest.mark.parametrize("ord", [2, 3, math.inf])
def test_complex_vector_norm_with_complex_dtype(ord):
    torch = _torch()
    x = _rand(3, 4, seed=4, complex_=True).astype(np.complex64)
    want = torch.linalg.vector_norm(torch.tensor(x), ord, dtype=torch.complex128)
    _close(ember.linalg.vector_norm(ember.tensor(x), ord, dtype=ember.complex128), want)
    _close(ember.norm(ember.tensor(x), dtype=ember.complex128), torch.norm(torch.tensor(x), dtype=torch.complex128))


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("dim,keepdim", [(None, False), ((0, 2), False), ((2, 0), True)])
def test_torch_norm_nuclear(complex_, dim, keepdim):
    torch = _torch()
    x = _rand(3, 4, 5, seed=5, complex_=complex_) if dim is not None else _rand(4, 5, seed=5, complex_=complex_)
    want = torch.norm(torch.tensor(x), "nuc", dim=dim, keepdim=keepdim)
    _close(ember.norm(ember.tensor(x), "nuc", dim=dim, keepdim=keepdim), want, rtol=1e-6)
    g_t, g_e = _grads("norm", lambda L: (lambda a: L.norm(a, "nuc", dim=dim, keepdim=keepdim)), x)
    np.testing.assert_allclose(g_e, g_t, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------- pinv gradient
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("case", ["hermitian_spd", "hermitian_indefinite", "rtol_cut", "atol_cut", "rank_deficient",
                                  "wide", "tall_batched"])
def test_pinv_gradient_matches_torch(complex_, case):
    x = {"hermitian_spd": lambda: (lambda a: a @ np.conj(a.T) + 4 * np.eye(4))(_rand(4, 4, seed=6, complex_=complex_)),
         "hermitian_indefinite": lambda: _rand(4, 4, seed=6, complex_=complex_),
         "rtol_cut": lambda: _rand(5, 4, seed=6, complex_=complex_),
         "atol_cut": lambda: _rand(2, 3, 5, seed=6, complex_=complex_),
         "rank_deficient": lambda: _rand(5, 2, seed=6, complex_=complex_) @ _rand(2, 4, seed=8, complex_=complex_),
         "wide": lambda: _rand(2, 3, 5, seed=6, complex_=complex_),
         "tall_batched": lambda: _rand(2, 5, 3, seed=6, complex_=complex_)}[case]()
    kw = {"hermitian_spd": dict(hermitian=True), "hermitian_indefinite": dict(hermitian=True),
          "rtol_cut": dict(rtol=0.5), "atol_cut": dict(atol=1.0)}.get(case, {})
    g_t, g_e = _grads("pinv", lambda L: (lambda a: L.linalg.pinv(a, **kw)), x)
    np.testing.assert_allclose(g_e, g_t, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("complex_", [False, True])
def test_pinv_double_backward(complex_):
    torch = _torch()
    x = _rand(4, 3, seed=9, complex_=complex_)
    hs = []
    for lib in (torch, ember):
        a = lib.tensor(x, requires_grad=True)
        g, = lib.autograd.grad(lib.linalg.pinv(a).abs().pow(2).sum(), a, create_graph=True)
        h, = lib.autograd.grad(g.abs().sum(), a)
        hs.append(h.detach().numpy())
    np.testing.assert_allclose(hs[1], hs[0], rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------- matrix_power(A, 0)
@pytest.mark.parametrize("complex_", [False, True])
def test_matrix_power_zero_stays_on_graph(complex_):
    torch = _torch()
    x = _rand(2, 3, 3, seed=10, complex_=complex_)
    g_t, g_e = _grads("matrix_power", lambda L: (lambda a: L.linalg.matrix_power(a, 0)), x)
    np.testing.assert_array_equal(g_e, g_t)
    inf = np.full((3, 3), np.inf)
    _close(ember.linalg.matrix_power(ember.tensor(inf), 0), torch.linalg.matrix_power(torch.tensor(inf), 0))


# ---------------------------------------------------------------------- solve batch broadcast errors
@pytest.mark.parametrize("a,b", [((2, 3, 3), (5, 3, 2)), ((4, 2, 3, 3), (5, 1, 3, 2)), ((4, 1, 3, 3), (3, 1, 3, 2))])
def test_solve_batch_broadcast_error(a, b):
    torch = _torch()
    A, B = _rand(*a, seed=11), _rand(*b, seed=12)
    with pytest.raises(RuntimeError) as te:
        torch.linalg.solve(torch.tensor(A), torch.tensor(B))
    with pytest.raises(RuntimeError) as ee:
        ember.linalg.solve(ember.tensor(A), ember.tensor(B))
    assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- fft of an empty dim
@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "ihfft", "fftn", "rfftn", "ihfftn", "fft2"])
@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_fft_of_an_empty_transformed_dim_raises(fn, shape):
    torch = _torch()
    x = _rand(*shape, seed=13)
    if fn.endswith("2") and len(shape) < 2:
        pytest.skip("2-D transform of a 1-D input")
    with pytest.raises(RuntimeError) as te:
        getattr(torch.fft, fn)(torch.tensor(x))
    with pytest.raises(RuntimeError) as ee:
        getattr(ember.fft, fn)(ember.tensor(x))
    assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- angle at 0
def test_angle_gradient_at_zero():
    torch = _torch()
    rs = np.random.RandomState(14)
    z = rs.standard_normal(6) + 1j * rs.standard_normal(6)
    z[[1, 4]] = 0
    g_t, g_e = _grads("angle", lambda L: L.angle, z)
    assert np.isfinite(g_e).all()
    np.testing.assert_allclose(g_e, g_t, rtol=1e-12, atol=1e-12)
    signed = np.array([0j, complex(-0.0, 0.0), complex(0.0, -0.0), complex(-0.0, -0.0)])
    _close(ember.angle(ember.tensor(signed)), torch.angle(torch.tensor(signed)))


# ---------------------------------------------------------------------- vector_norm(ord=0) gradient
def test_vector_norm_ord0_gradient_is_undefined():
    torch = _torch()
    x = _rand(2, 5, seed=15)
    for lib in (torch, ember):
        a = lib.tensor(x, requires_grad=True)
        with pytest.raises(RuntimeError, match="not have been used in the graph"):
            lib.autograd.grad(lib.linalg.vector_norm(a, 0), a)
        a = lib.tensor(x, requires_grad=True)
        assert lib.autograd.grad(lib.linalg.vector_norm(a, 0, dim=1).sum(), a, allow_unused=True) == (None,)
        a = lib.tensor(x, requires_grad=True)
        (lib.linalg.vector_norm(a, 0) + (a * 3).sum()).backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.full(x.shape, 3.0))


# ---------------------------------------------------------------------- python scalar ** complex tensor
@pytest.mark.parametrize("base", [0.5 + 0.5j, -1.5 - 0.5j, 1j, -2.0, 2.0])
def test_scalar_base_pow_complex_exponent_gradient(base):
    rs = np.random.RandomState(16)
    z = rs.standard_normal(5) + 1j * rs.standard_normal(5)
    g_t, g_e = _grads("rpow", lambda L: (lambda a: base ** a), z)
    np.testing.assert_allclose(g_e, g_t, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- sgn gradient at tiny |z|
def test_sgn_gradient_at_tiny_and_special_values():
    rs = np.random.RandomState(17)
    z = rs.standard_normal(8) + 1j * rs.standard_normal(8)
    z[:4] *= np.array([1e-300, 3e-200, 1e-170, 1e300])
    z[4] = 0
    g_t, g_e = _grads("sgn", lambda L: L.sgn, z)
    assert np.isfinite(g_e).all()
    np.testing.assert_allclose(g_e, g_t, rtol=1e-12, atol=0)
    torch = _torch()
    _close(ember.sgn(ember.tensor(z)), torch.sgn(torch.tensor(z)), rtol=1e-15, atol=1e-15)
