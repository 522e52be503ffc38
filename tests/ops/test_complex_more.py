"""Complex inputs of logsumexp, logcumsumexp, renorm, linalg.cross, convolutions (forward and
backward, transposed too), embedding and bilinear against torch: values, gradients in torch's
convention (dL/dx + i dL/dy of a real loss), dtypes, and torch's forward-time refusal of
complex autograd for embedding / bilinear / silu."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()


def cz(*shape, dt=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)


def tnp(t):
    return t.detach().resolve_conj().numpy()


def enp(t):
    return np.asarray(t.detach()._data)


def check(tfn, efn, *arrays, atol=1e-6, rtol=1e-6):
    """Values, dtype and the gradient of every input for a random complex weighting of the output."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    es = [ember.tensor(a, requires_grad=True) for a in arrays]
    to, eo = tfn(*ts), efn(*es)
    assert str(to.dtype).replace("torch.", "") == eo.dtype.name
    np.testing.assert_allclose(enp(eo), tnp(to), atol=atol, rtol=rtol)
    w = cz(*to.shape).astype(tnp(to).dtype)
    (to * torch.tensor(w)).real.sum().backward()
    (eo * ember.tensor(w)).real.sum().backward()
    for t, e in zip(ts, es):
        np.testing.assert_allclose(enp(e.grad), tnp(t.grad), atol=atol * 10, rtol=rtol * 10)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), keep=st.booleans(), data=st.data())
def test_logsumexp_complex(shape, keep, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    check(lambda x: torch.logsumexp(x, dim, keepdim=keep), lambda x: ember.logsumexp(x, dim, keepdim=keep),
          cz(*shape))


def test_logsumexp_complex_all_dims_and_float32():
    a = cz(3, 4, dt=np.complex64)
    check(lambda x: torch.logsumexp(x, (0, 1)), lambda x: ember.logsumexp(x, (0, 1)), a, atol=1e-5, rtol=1e-5)
    assert ember.logsumexp(ember.tensor(a), 1).dtype is ember.complex64


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_logcumsumexp_complex(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = cz(*shape)
    ta, ea = torch.tensor(a), ember.tensor(a)
    to, eo = torch.logcumsumexp(ta, dim), ember.logcumsumexp(ea, dim)
    # the value is a complex logarithm: compare exp of it (the imaginary part is defined mod 2 pi)
    np.testing.assert_allclose(np.exp(enp(eo)), np.exp(tnp(to)), rtol=1e-9, atol=1e-9)
    check(lambda x: torch.logcumsumexp(x, dim).exp(), lambda x: ember.logcumsumexp(x, dim).exp(), a)


@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.5), (3, -1, 2.0), (2.5, 0, 100.0)])
def test_renorm_complex(p, dim, maxnorm):
    check(lambda x: torch.renorm(x, p, dim, maxnorm), lambda x: ember.renorm(x, p, dim, maxnorm), cz(3, 4, 2))


@pytest.mark.parametrize("xs,ys,dim", [((2, 3), (2, 3), -1), ((3, 2), (3, 1), 0), ((4, 1, 3), (1, 5, 3), -1)])
def test_cross_complex(xs, ys, dim):
    check(lambda a, b: torch.linalg.cross(a, b, dim=dim), lambda a, b: ember.linalg.cross(a, b, dim=dim),
          cz(*xs), cz(*ys))
    check(lambda a, b: torch.cross(a, b, dim=dim), lambda a, b: ember.cross(a, b, dim=dim), cz(*xs), cz(*ys))


@settings(max_examples=20, deadline=None)
@given(nd=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 1), dilation=st.integers(1, 2),
       groups=st.sampled_from([1, 2]), bias=st.booleans(), single=st.booleans())
def test_conv_complex(nd, stride, padding, dilation, groups, bias, single):
    dt = np.complex64 if single else np.complex128
    x = cz(2, 2 * groups, *([5] * nd), dt=dt)
    w = cz(2 * groups, 2, *([2] * nd), dt=dt)
    arrays = [x, w] + ([cz(2 * groups, dt=dt)] if bias else [])
    tf = getattr(TF, f"conv{nd}d")
    ef = getattr(EF, f"conv{nd}d")
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    tol = 1e-4 if single else 1e-9
    check(lambda *a: tf(*a, **kw), lambda *a: ef(*a, **kw), *arrays, atol=tol, rtol=tol)


@settings(max_examples=20, deadline=None)
@given(nd=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 1), groups=st.sampled_from([1, 2]),
       bias=st.booleans(), outpad=st.booleans())
def test_conv_transpose_complex(nd, stride, padding, groups, bias, outpad):
    x = cz(2, 2 * groups, *([4] * nd))
    w = cz(2 * groups, 3, *([3] * nd))
    arrays = [x, w] + ([cz(3 * groups)] if bias else [])
    tf = getattr(TF, f"conv_transpose{nd}d")
    ef = getattr(EF, f"conv_transpose{nd}d")
    kw = dict(stride=stride, padding=padding, groups=groups, output_padding=1 if (outpad and stride > 1) else 0)
    check(lambda *a: tf(*a, **kw), lambda *a: ef(*a, **kw), *arrays, atol=1e-9, rtol=1e-9)


def test_conv_complex_errors_match_torch():
    x, w = cz(1, 2, 5), RNG.standard_normal((3, 2, 2))
    with pytest.raises(RuntimeError):
        TF.conv1d(torch.tensor(x), torch.tensor(w))
    with pytest.raises(RuntimeError, match="expected scalar type"):
        EF.conv1d(ember.tensor(x), ember.tensor(w))


def test_conv_module_complex():
    tm = torch.nn.Conv2d(2, 3, 3, padding=1, dtype=torch.complex64)
    em = ember.nn.Conv2d(2, 3, 3, padding=1, dtype=ember.complex64)
    em.weight.data = ember.tensor(tnp(tm.weight))
    em.bias.data = ember.tensor(tnp(tm.bias))
    x = cz(1, 2, 4, 4, dt=np.complex64)
    np.testing.assert_allclose(enp(em(ember.tensor(x))), tnp(tm(torch.tensor(x))), atol=1e-5)


def test_embedding_complex_forward_and_refusal():
    w = cz(5, 3)
    idx = [[1, 2], [4, 1]]
    tw, ew = torch.tensor(w), ember.tensor(w)
    np.testing.assert_allclose(enp(EF.embedding(ember.tensor(idx), ew)), tnp(TF.embedding(torch.tensor(idx), tw)))
    # max_norm renormalises complex rows by their modulus
    tw2, ew2 = tw.clone(), ember.tensor(w.copy())
    to = TF.embedding(torch.tensor(idx), tw2, max_norm=0.5)
    eo = EF.embedding(ember.tensor(idx), ew2, max_norm=0.5)
    np.testing.assert_allclose(enp(eo), tnp(to), rtol=1e-6)
    np.testing.assert_allclose(enp(ew2), tnp(tw2), rtol=1e-6)
    # torch has no complex derivative for embedding: it refuses at the forward
    msg = "embedding does not support automatic differentiation for outputs with complex dtype."
    with pytest.raises(RuntimeError, match=msg):
        TF.embedding(torch.tensor(idx), torch.tensor(w, requires_grad=True))
    with pytest.raises(RuntimeError, match=msg):
        EF.embedding(ember.tensor(idx), ember.tensor(w, requires_grad=True))
    with ember.no_grad():
        EF.embedding(ember.tensor(idx), ember.tensor(w, requires_grad=True))
    # the dense backward kernel itself takes complex gradients (as aten's)
    g = cz(4, 3)
    tg = torch.ops.aten.embedding_dense_backward(torch.tensor(g), torch.tensor([1, 2, 1, 0]), 5, -1, False)
    from ember.ops.registry import OPS
    eg = OPS["embedding_dense_backward"].binding(ember.tensor(g), ember.tensor([1, 2, 1, 0]), 5, -1, False)
    np.testing.assert_allclose(enp(eg), tnp(tg))


def test_bilinear_complex():
    a, b, w, bias = cz(2, 3), cz(2, 4), cz(5, 3, 4), cz(5)
    to = TF.bilinear(*[torch.tensor(v) for v in (a, b, w, bias)])
    eo = EF.bilinear(*[ember.tensor(v) for v in (a, b, w, bias)])
    np.testing.assert_allclose(enp(eo), tnp(to), atol=1e-9)
    msg = "_trilinear does not support automatic differentiation for outputs with complex dtype."
    with pytest.raises(RuntimeError, match=msg):
        TF.bilinear(torch.tensor(a, requires_grad=True), torch.tensor(b), torch.tensor(w))
    with pytest.raises(RuntimeError, match=msg):
        EF.bilinear(ember.tensor(a, requires_grad=True), ember.tensor(b), ember.tensor(w))


def test_silu_complex():
    z = cz(3, 4, dt=np.complex64)
    np.testing.assert_allclose(enp(EF.silu(ember.tensor(z))), tnp(TF.silu(torch.tensor(z))), rtol=1e-5)
    msg = "silu does not support automatic differentiation for outputs with complex dtype."
    with pytest.raises(RuntimeError, match=msg):
        TF.silu(torch.tensor(z, requires_grad=True))
    with pytest.raises(RuntimeError, match=msg):
        EF.silu(ember.tensor(z, requires_grad=True))
    with pytest.raises(RuntimeError, match=msg):
        ember.nn.SiLU()(ember.tensor(z, requires_grad=True))
    with ember.no_grad():
        EF.silu(ember.tensor(z, requires_grad=True))
    # real input keeps its gradient
    x = RNG.standard_normal(5)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    TF.silu(tx).sum().backward()
    EF.silu(ex).sum().backward()
    np.testing.assert_allclose(enp(ex.grad), tnp(tx.grad), rtol=1e-9)


# ---------------------------------------------------------------------- other complex gaps closed
@pytest.mark.parametrize("name,tfn,efn,shapes", [
    ("sinc", torch.sinc, ember.sinc, [(3, 4)]),
    ("float_power", lambda a: torch.float_power(a, 2), lambda a: ember.float_power(a, 2), [(3, 4)]),
    ("float_power_t", torch.float_power, ember.float_power, [(3, 4), (4,)]),
    ("dist", lambda a, b: torch.dist(a, b), lambda a, b: ember.dist(a, b), [(3, 4), (3, 4)]),
    ("dist3", lambda a, b: torch.dist(a, b, 3), lambda a, b: ember.dist(a, b, 3), [(3, 4), (4,)]),
    ("logaddexp", torch.logaddexp, ember.logaddexp, [(3, 4), (3, 4)]),
    ("cov", torch.cov, ember.cov, [(3, 5)]),
    ("corrcoef", torch.corrcoef, ember.corrcoef, [(3, 5)]),
    ("normalize", TF.normalize, EF.normalize, [(3, 4)]),
    ("normalize_p1", lambda a: TF.normalize(a, p=1, dim=0), lambda a: EF.normalize(a, p=1, dim=0), [(3, 4)]),
])
def test_more_complex_ops(name, tfn, efn, shapes):
    check(tfn, efn, *[cz(*s) for s in shapes], atol=1e-9, rtol=1e-9)


def test_cov_complex_weights_and_real_mix():
    a = cz(3, 6)
    fw = RNG.integers(1, 4, 6)
    aw = RNG.random(6)
    tf = lambda x: torch.cov(x, correction=0, fweights=torch.tensor(fw), aweights=torch.tensor(aw))  # noqa: E731
    ef = lambda x: ember.cov(x, correction=0, fweights=ember.tensor(fw), aweights=ember.tensor(aw))  # noqa: E731
    # values only: torch's own backward of a weighted complex cov fails (an internal dtype check)
    np.testing.assert_allclose(enp(ef(ember.tensor(a))), tnp(tf(torch.tensor(a))), rtol=1e-9)
    z, r = cz(4), RNG.standard_normal(4)      # mixed: values (torch's backward of the mix fails)
    np.testing.assert_allclose(enp(ember.logaddexp(ember.tensor(z), ember.tensor(r))),
                               tnp(torch.logaddexp(torch.tensor(z), torch.tensor(r))), rtol=1e-9)
    with pytest.raises(NotImplementedError):
        torch.logaddexp2(torch.tensor(cz(2)), torch.tensor(cz(2)))
    with pytest.raises(NotImplementedError):
        ember.logaddexp2(ember.tensor(cz(2)), ember.tensor(cz(2)))


@pytest.mark.parametrize("fn", [
    lambda m, F, z: F.interpolate(z, scale_factor=2, mode="nearest"),
    lambda m, F, z: F.interpolate(z, scale_factor=2, mode="bilinear"),
    lambda m, F, z: F.interpolate(z, scale_factor=2, mode="bicubic"),
    lambda m, F, z: F.interpolate(z, scale_factor=2, mode="area"),
    lambda m, F, z: F.adaptive_avg_pool2d(z, 2),
    lambda m, F, z: F.adaptive_avg_pool1d(z[0], 2),
    lambda m, F, z: F.adaptive_avg_pool3d(z, 2),
    lambda m, F, z: F.cosine_similarity(z, z),
    lambda m, F, z: F.pdist(z[0, 0]),
])
def test_complex_refusals_as_torch(fn):
    z = cz(1, 2, 4, 4, dt=np.complex64)
    with pytest.raises((RuntimeError, NotImplementedError)) as te:
        fn(torch, TF, torch.tensor(z))
    with pytest.raises(te.type) as ee:
        fn(ember, EF, ember.tensor(z))
    assert "not implemented for" in str(ee.value) or str(ee.value) == str(te.value)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_complex(n, single, hermitian):
    """zsytf2 / zsytrs (hermitian=False) and zhetf2 / zhetrs (hermitian=True): LAPACK's pivots
    (chosen by |re| + |im|), LD and solves."""
    dt = np.complex64 if single else np.complex128
    A = cz(2, n, n, dt=dt)
    A = A + (np.conj(np.swapaxes(A, -1, -2)) if hermitian else np.swapaxes(A, -1, -2))
    if n > 1:
        A[:, 0, 0] = 0.01 * RNG.random()        # forces a pivot / 2x2 block
    tl, tp = torch.linalg.ldl_factor(torch.tensor(A), hermitian=hermitian)
    el, ep = ember.linalg.ldl_factor(ember.tensor(A), hermitian=hermitian)
    np.testing.assert_array_equal(enp(ep), tp.numpy())
    tol = 1e-4 if single else 1e-10
    np.testing.assert_allclose(np.tril(enp(el)), np.tril(tnp(tl)), atol=tol, rtol=tol)
    B = cz(2, n, 3, dt=dt)
    np.testing.assert_allclose(enp(ember.linalg.ldl_solve(el, ep, ember.tensor(B), hermitian=hermitian)),
                               tnp(torch.linalg.ldl_solve(tl, tp, torch.tensor(B), hermitian=hermitian)),
                               atol=tol * 10, rtol=tol * 10)


def test_embedding_bag_complex_refused_as_torch():
    w = cz(4, 3, dt=np.complex64)
    with pytest.raises(RuntimeError) as te:
        TF.embedding_bag(torch.tensor([1, 2]), torch.tensor(w), torch.tensor([0]))
    with pytest.raises(RuntimeError) as ee:
        EF.embedding_bag(ember.tensor([1, 2]), ember.tensor(w), ember.tensor([0]))
    assert str(ee.value) == str(te.value)
