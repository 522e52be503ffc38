"""The eager fast paths of small-tensor ops (ember/ops/_native_small.py, ember/nn/_eager_fast.py,
the interpolation-table cache, the nll_loss selection shortcut) against torch and against the
paths they short-cut: values and indices bit for bit where the fast path promises it, gradients,
strided inputs, float32/float64, and the fallback path (no native library / a composite run)."""
import ctypes

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn import _eager_fast
from ember.ops import _native_small

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _pair(a, requires_grad=False):
    e = ember.tensor(a)
    t = torch.tensor(a)
    if requires_grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


@pytest.fixture
def no_native(monkeypatch):
    """Run the numpy formulations the native loops replace."""
    monkeypatch.setattr(_native_small, "lib", lambda: None)


@pytest.fixture
def no_fast(monkeypatch):
    """Run the functional composites instead of their eager fast paths."""
    monkeypatch.setattr(_eager_fast, "plain", lambda *a: False)


def _both(fn, monkeypatch):
    """fn() with the fast path, then with the fallback (library off, composites forced)."""
    fast = fn()
    with monkeypatch.context() as m:
        m.setattr(_native_small, "lib", lambda: None)
        m.setattr(_eager_fast, "plain", lambda *a: False)
        slow = fn()
    return fast, slow


def _same(a, b):
    a, b = _np(a), _np(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    # same bits (signed zeros, NaN positions)
    if a.dtype.kind == "f":
        assert np.array_equal(np.signbit(a), np.signbit(b))


# ---------------------------------------------------------------------- erfinv
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (8, 8), (3, 5, 7)])
def test_erfinv_matches_torch_and_numpy_path(dtype, shape, monkeypatch):
    rng = np.random.default_rng(hash((shape, np.dtype(dtype).name)) % 2**32)
    a = rng.uniform(-1, 1, shape).astype(dtype)
    if a.ndim and a.size > 3:
        a.reshape(-1)[:4] = [1.0, -1.0, 0.0, np.nan]      # the special cases
    e, t = _pair(a)
    fast, slow = _both(lambda: ember.erfinv(e), monkeypatch)
    want = torch.erfinv(t).numpy()
    # the native series (float32 ~correctly rounded, float64 within 3 ulp) and the numpy
    # formulation's Halley steps (~1 ulp) agree to a few ulp; NaN positions and signed zeros match
    np.testing.assert_array_max_ulp(_np(fast), _np(slow), maxulp=1 if dtype == np.float32 else 4)
    assert np.array_equal(np.signbit(_np(fast)) | np.isnan(_np(fast)), np.signbit(_np(slow)) | np.isnan(_np(slow)))
    tol = dict(rtol=2e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(_np(fast), want, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_erfinv_strided_and_grad(dtype):
    rng = np.random.default_rng(3)
    a = rng.uniform(-0.95, 0.95, (6, 10)).astype(dtype)
    e, t = _pair(a, requires_grad=True)
    ev, tv = e.t()[::2], t.t()[::2]          # a non-contiguous view
    out_e, out_t = ember.erfinv(ev), torch.erfinv(tv)
    np.testing.assert_allclose(_np(out_e), _np(out_t), rtol=2e-6 if dtype == np.float32 else 1e-13)
    g = rng.standard_normal(out_t.shape).astype(dtype)
    out_e.backward(ember.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-5 if dtype == np.float32 else 1e-12)
    # inference under no_grad takes the native loop on the same view
    with ember.no_grad():
        _same(ember.erfinv(ev), out_e)


def test_erfinv_large_uses_native_loop(monkeypatch):
    # the vectorised native loop serves every size (no cap): a large array reaches it too
    calls = []
    real = _native_small.lib

    def spy():
        calls.append(1)
        return real()
    monkeypatch.setattr(_native_small, "lib", spy)
    a = np.random.default_rng(0).uniform(-1, 1, 70000)
    got = ember.erfinv(ember.tensor(a)).numpy()
    assert calls
    np.testing.assert_array_max_ulp(got, torch.erfinv(torch.tensor(a)).numpy(), maxulp=4)


# ---------------------------------------------------------------------- topk
def _ties(rng, shape, dtype):
    """Few distinct values (ties everywhere), NaNs and signed zeros for floats."""
    a = rng.integers(-3, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[rng.random(shape) < 0.15] = np.nan
        z = a == 0
        a[z] = np.where(rng.random(z.sum()) < 0.5, -0.0, 0.0)
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_equals_the_stable_sort_path(dtype, largest, monkeypatch):
    rng = np.random.default_rng(7)
    for shape, dim in [((9,), 0), ((4, 50), -1), ((4, 50), 0), ((3, 40, 5), 1), ((2, 3, 4), 2)]:
        a = _ties(rng, shape, dtype)
        for src in (a, np.swapaxes(a, 0, -1)):
            e = ember.tensor(src) if src is a else ember.tensor(a).transpose(0, -1)
            n = e.shape[dim]
            for k in sorted({0, 1, 3, n // 2, n - 1, n}):
                if not 0 <= k <= n:
                    continue
                fast, slow = _both(lambda: ember.topk(e, k, dim, largest), monkeypatch)
                _same(fast[0], slow[0])
                _same(fast[1], slow[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_topk_matches_torch_and_grad(dtype):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((6, 300)).astype(dtype)         # distinct values: torch's indices are unique
    for k, largest, dim in [(5, True, -1), (5, False, -1), (3, True, 0), (300, True, 1)]:
        e, t = _pair(a, requires_grad=True)
        ve, ie = ember.topk(e, k, dim, largest)
        vt, it = torch.topk(t, k, dim, largest)
        _same(ve, vt)
        _same(ie, it)
        g = rng.standard_normal(vt.shape).astype(dtype)
        ve.backward(ember.tensor(g))
        vt.backward(torch.tensor(g))
        _same(e.grad, t.grad)


def test_topk_nan_is_largest_like_torch():
    a = np.array([[1.0, np.nan, 3.0, -np.inf, np.inf, 2.0]], np.float32)
    e, t = _pair(a)
    for largest in (True, False):
        ve, ie = ember.topk(e, 3, largest=largest)
        vt, it = torch.topk(t, 3, largest=largest)
        _same(ve, vt)
        _same(ie, it)


# ---------------------------------------------------------------------- max pooling
_POOL_CASES = [  # (spatial, kernel, stride, padding, dilation, ceil_mode)
    ((8, 8), 2, None, 0, 1, False),
    ((9, 7), 3, 2, 1, 1, False),
    ((9, 7), 3, 2, 1, 1, True),
    ((10, 11), (3, 2), (2, 1), (1, 0), (2, 1), True),
    ((7,), 3, 2, 1, 1, True),
    ((5, 6, 7), 2, 2, 1, 1, False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("case", _POOL_CASES)
def test_max_pool_equals_numpy_path(dtype, case, monkeypatch):
    sp, k, s, p, d, ceil = case
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(sp)]
    rng = np.random.default_rng(5)
    a = _ties(rng, (2, 3) + sp, dtype)
    views = [ember.tensor(a), ember.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2),
             ember.tensor(a)[:, ::2]]
    if len(sp) == 2:
        views.append(ember.tensor(a).contiguous(memory_format=ember.channels_last))
    for e in views:
        fast, slow = _both(lambda: fn(e, k, s, p, d, ceil, return_indices=True), monkeypatch)
        _same(fast[0], slow[0])
        _same(fast[1], slow[1])
        assert fast[0].stride() == slow[0].stride() and fast[1].stride() == slow[1].stride()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _POOL_CASES)
def test_max_pool_matches_torch_with_grad(dtype, case):
    sp, k, s, p, d, ceil = case
    nd = len(sp)
    fe = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    ft = {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}[nd]
    a = np.random.default_rng(9).standard_normal((2, 3) + sp).astype(dtype)
    e, t = _pair(a, requires_grad=True)
    oe, ie = fe(e, k, s, p, d, ceil, return_indices=True)
    ot, it = ft(t, k, s, p, d, ceil, return_indices=True)
    _same(oe, ot)
    _same(ie, it)
    g = np.random.default_rng(10).standard_normal(ot.shape).astype(dtype)
    oe.backward(ember.tensor(g))
    ot.backward(torch.tensor(g))
    np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-6)


def test_max_pool_nan_and_all_minus_inf_windows():
    a = np.full((1, 1, 4, 4), -np.inf, np.float32)
    a[0, 0, 1, 2] = np.nan
    e, t = _pair(a)
    for pad in (0, 1):
        oe, ie = F.max_pool2d(e, 2, 2, pad, return_indices=True)
        ot, it = TF.max_pool2d(t, 2, 2, pad, return_indices=True)
        _same(oe, ot)
        _same(ie, it)        # a window of -inf keeps an input position, never a padding one


# ---------------------------------------------------------------------- scaled_dot_product_attention
def _sdpa_inputs(rng, shape_q, shape_kv, dtype):
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal(shape_kv).astype(dtype)
    v = rng.standard_normal(shape_kv[:-1] + (shape_kv[-1] + 1,)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((1, 1, 8, 8), (1, 1, 8, 8)), ((2, 3, 5, 4), (2, 3, 7, 4)),
                                    ((3, 1, 6), (3, 9, 6)), ((2, 2, 2, 3, 4), (2, 2, 2, 5, 4))])
@pytest.mark.parametrize("variant", ["plain", "causal", "bool_mask", "float_mask", "scale", "transposed"])
def test_sdpa_fast_path_equals_composite_and_torch(dtype, shapes, variant, monkeypatch):
    rng = np.random.default_rng(abs(hash((shapes, variant))) % 2**32)
    q, k, v = _sdpa_inputs(rng, *shapes, dtype)
    kw_e, kw_t = {}, {}
    L, S = q.shape[-2], k.shape[-2]
    if variant == "causal":
        kw_e = kw_t = {"is_causal": True}
    elif variant == "bool_mask":
        m = rng.random((L, S)) < 0.7
        m[:, 0] = True
        kw_e, kw_t = {"attn_mask": ember.tensor(m)}, {"attn_mask": torch.tensor(m)}
    elif variant == "float_mask":
        m = rng.standard_normal(q.shape[:-1] + (S,)).astype(dtype)
        kw_e, kw_t = {"attn_mask": ember.tensor(m)}, {"attn_mask": torch.tensor(m)}
    elif variant == "scale":
        kw_e = kw_t = {"scale": 0.37}
    qe, ke, ve = (ember.tensor(x) for x in (q, k, v))
    qt, kt, vt = (torch.tensor(x) for x in (q, k, v))
    if variant == "transposed":          # non-contiguous q/k/v views
        qe, ke, ve = (ember.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2))).transpose(-1, -2)
                      for x in (q, k, v))
    fast, slow = _both(lambda: F.scaled_dot_product_attention(qe, ke, ve, **kw_e), monkeypatch)
    _same(fast, slow)
    want = TF.scaled_dot_product_attention(qt, kt, vt, **kw_t)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_np(fast), _np(want), **tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_grad_unchanged(dtype):
    rng = np.random.default_rng(2)
    q, k, v = _sdpa_inputs(rng, (2, 2, 5, 4), (2, 2, 6, 4), dtype)
    es = [ember.tensor(x).requires_grad_() for x in (q, k, v)]
    ts = [torch.tensor(x).requires_grad_() for x in (q, k, v)]
    oe = F.scaled_dot_product_attention(*es, is_causal=True)
    ot = TF.scaled_dot_product_attention(*ts, is_causal=True)
    assert oe.grad_fn is not None
    g = rng.standard_normal(ot.shape).astype(dtype)
    oe.backward(ember.tensor(g))
    ot.backward(torch.tensor(g))
    for a, b in zip(es, ts):
        np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=1e-4 if dtype == np.float32 else 1e-10,
                                   atol=1e-5 if dtype == np.float32 else 1e-12)
    with ember.no_grad():               # the fast path under no_grad: the same forward values
        _same(F.scaled_dot_product_attention(*es, is_causal=True), oe)


def test_sdpa_fast_path_declines_what_it_does_not_cover(monkeypatch):
    calls = []
    real = _eager_fast._bmm
    monkeypatch.setattr(_eager_fast, "_bmm", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(4)
    q, k, v = (ember.tensor(x) for x in _sdpa_inputs(rng, (2, 3, 4), (2, 5, 4), np.float32))
    F.scaled_dot_product_attention(q, k, v)
    assert calls                                          # covered
    calls.clear()
    F.scaled_dot_product_attention(q, k[:1], v[:1])       # broadcast batch dims: the composite
    with pytest.raises(RuntimeError):                     # mixed dtypes: the composite's error
        F.scaled_dot_product_attention(q, k.double(), v)
    assert not calls
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=ember.ones(4, 5, dtype=ember.bool), is_causal=True)


# ---------------------------------------------------------------------- cross_entropy / nll_loss
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["plain", "weight", "ignore", "ignore_inside", "1d", "spatial", "strided"])
def test_cross_entropy_fast_path(dtype, reduction, case, monkeypatch):
    rng = np.random.default_rng(abs(hash((case, reduction))) % 2**32)
    N, C = 8, 5
    x = rng.standard_normal((N, C)).astype(dtype)
    y = rng.integers(0, C, N)
    kw = {"reduction": reduction}
    if case == "weight":
        kw["weight"] = rng.random(C).astype(dtype)
    elif case == "ignore":
        y[::3] = -100
    elif case == "ignore_inside":
        kw["ignore_index"] = 2
    elif case == "1d":
        x, y = x[0], y[0]
    elif case == "spatial":
        x = rng.standard_normal((N, C, 3, 2)).astype(dtype)
        y = rng.integers(0, C, (N, 3, 2))
    xe, xt = _pair(x)
    ye, yt = ember.tensor(y), torch.tensor(y)
    if case == "strided":
        xe, xt = ember.tensor(np.ascontiguousarray(x.T)).t(), torch.tensor(x)
    kwe = {k: ember.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    kwt = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    fast, slow = _both(lambda: F.cross_entropy(xe, ye, **kwe), monkeypatch)
    _same(fast, slow)
    want = TF.cross_entropy(xt, yt, **kwt)
    np.testing.assert_allclose(_np(fast), _np(want), rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_grad_and_errors(dtype):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((6, 4)).astype(dtype)
    y = rng.integers(0, 4, 6)
    w = rng.random(4).astype(dtype)
    xe, xt = _pair(x, requires_grad=True)
    le = F.cross_entropy(xe, ember.tensor(y), weight=ember.tensor(w))
    lt = TF.cross_entropy(xt, torch.tensor(y), weight=torch.tensor(w))
    le.backward()
    lt.backward()
    np.testing.assert_allclose(_np(xe.grad), _np(xt.grad), rtol=1e-5 if dtype == np.float32 else 1e-12)
    bad = y.copy()
    bad[2] = 4
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(ember.tensor(x), ember.tensor(bad))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(6\) to match target batch_size \(5\)"):
        F.cross_entropy(ember.tensor(x), ember.tensor(y[:5]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        F.cross_entropy(ember.tensor(x), ember.tensor(y.astype(np.int32)))


# ---------------------------------------------------------------------- interpolate
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,kw", [("nearest", {}), ("nearest-exact", {}), ("bilinear", {}),
                                     ("bilinear", {"align_corners": True}), ("bicubic", {})])
def test_interpolate_cached_tables(dtype, mode, kw):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 5, 7)).astype(dtype)
    e, t = _pair(a, requires_grad=True)
    for size_kw in ({"scale_factor": 2}, {"size": (9, 4)}, {"scale_factor": 1.7}):
        first = F.interpolate(e, mode=mode, **size_kw, **kw)
        again = F.interpolate(e, mode=mode, **size_kw, **kw)      # from the cached tables
        _same(first, again)
        want = TF.interpolate(t, mode=mode, **size_kw, **kw)
        np.testing.assert_allclose(_np(again), _np(want), rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-6 if dtype == np.float32 else 1e-12)
        g = rng.standard_normal(want.shape).astype(dtype)
        e.grad = None
        t.grad = None
        again.backward(ember.tensor(g))
        want.backward(torch.tensor(g))
        np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-5 if dtype == np.float32 else 1e-12)


def test_interpolation_tables_are_copies():
    from ember.nn import functional as Fm
    m1 = Fm._linear_matrix_cached(5, 10, False, 2.0)
    m1[...] = 123.0                       # a caller writing into its table ...
    np.testing.assert_array_equal(Fm._linear_matrix_cached(5, 10, False, 2.0), Fm._linear_matrix(5, 10, False, 2.0))
    i1 = Fm._nearest_index_cached(4, 9, None, False)
    i1[...] = 0                           # ... never reaches the cache
    np.testing.assert_array_equal(Fm._nearest_index_cached(4, 9, None, False), Fm._nearest_index(4, 9, None, False))


def test_resample_channels_last_layout():
    a = np.random.default_rng(12).standard_normal((2, 3, 4, 5)).astype(np.float32)
    e = ember.tensor(a).contiguous(memory_format=ember.channels_last)
    t = torch.tensor(a).contiguous(memory_format=torch.channels_last)
    oe = F.interpolate(e, scale_factor=2, mode="bilinear")
    ot = TF.interpolate(t, scale_factor=2, mode="bilinear")
    assert oe.stride() == ot.stride()
    np.testing.assert_allclose(_np(oe), _np(ot), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- conv2d (per-call overhead)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [1, 3])
@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"dilation": (2, 1), "padding": (2, 0)},
                                {"groups": 2}, {"padding": "same"}])
def test_conv2d_small_matches_torch(dtype, N, kw):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((N, 4, 8, 7)).astype(dtype)
    w = rng.standard_normal((6, 4 // kw.get("groups", 1), 3, 3)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)
    xe, xt = _pair(x, requires_grad=True)
    we, wt = _pair(w, requires_grad=True)
    be, bt = _pair(b)
    for xv_e, xv_t in ((xe, xt), (xe.transpose(-1, -2).contiguous().transpose(-1, -2), xt)):
        oe = F.conv2d(xv_e, we, be, **kw)
        ot = TF.conv2d(xv_t, wt, bt, **kw)
        tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(_np(oe), _np(ot), **tol)
    g = rng.standard_normal(ot.shape).astype(dtype)
    oe.backward(ember.tensor(g))
    ot.backward(torch.tensor(g))
    np.testing.assert_allclose(_np(xe.grad), _np(xt.grad), **tol)
    np.testing.assert_allclose(_np(we.grad), _np(wt.grad), **tol)


def test_conv2d_argument_errors_unchanged():
    x, w = ember.randn(1, 2, 5, 5), ember.randn(3, 2, 3, 3)
    with pytest.raises(RuntimeError, match="non-positive stride is not supported"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(RuntimeError, match="negative padding is not supported"):
        F.conv2d(x, w, padding=-1)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero"):
        F.conv2d(x, w, dilation=(1, 0))
    with pytest.raises(RuntimeError, match=r"expected stride to be a single integer value or a list of 2 values"):
        F.conv2d(x, w, stride=(1, 1, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_erfinv_layout_equals_numpy_path(dtype, monkeypatch):
    a = np.random.default_rng(14).uniform(-1, 1, (4, 6, 5)).astype(dtype)
    base = ember.tensor(a)
    for v in (base, base.permute(2, 0, 1), base.permute(2, 0, 1)[:, ::2], base[:, 1:5:2].transpose(0, 2)):
        fast, slow = _both(lambda: ember.erfinv(v), monkeypatch)
        assert fast.stride() == slow.stride()
        np.testing.assert_array_max_ulp(_np(fast), _np(slow), maxulp=1 if dtype == np.float32 else 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_fast_path_extreme_logits(dtype, reduction, monkeypatch):
    rng = np.random.default_rng(15)
    x = (rng.standard_normal((40, 30)) * 30).astype(dtype)
    x[0, :] = -np.inf
    x[1, 3] = np.inf
    x[2, 4] = np.nan
    x[3, :] = 1e30 if dtype == np.float64 else 1e30
    y = rng.integers(0, 30, 40)
    xe, ye = ember.tensor(x), ember.tensor(y)
    with np.errstate(all="ignore"):
        fast, slow = _both(lambda: F.cross_entropy(xe, ye, reduction=reduction), monkeypatch)
    _same(fast, slow)
    want = TF.cross_entropy(torch.tensor(x[4:]), torch.tensor(y[4:]), reduction=reduction)
    got = F.cross_entropy(ember.tensor(x[4:]), ember.tensor(y[4:]), reduction=reduction)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_topk_non_dense_outer_and_inner_dims(monkeypatch):
    a = _ties(np.random.default_rng(16), (4, 6, 9, 3), np.float32)
    base = ember.tensor(a)
    for v, dim in [(base[:, ::2], -1), (base[:, ::2], 2), (base[:, :, ::3], 0), (base.permute(3, 0, 2, 1), 2)]:
        for largest in (True, False):
            fast, slow = _both(lambda: ember.topk(v, 2, dim, largest), monkeypatch)
            _same(fast[0], slow[0])
            _same(fast[1], slow[1])


# ---------------------------------------------------------------------- convolution thread count
_CONV_CASES = [((2, 3, 8, 8), (4, 3, 3, 3), {"padding": 1}), ((3, 6, 9, 9), (6, 3, 3, 3), {"groups": 2, "stride": 2}),
               ((5, 16, 12, 12), (16, 16, 1, 1), {}), ((7, 4, 20), (6, 4, 3), {"padding": 1}),
               ((2, 4, 30), (6, 4, 3), {}), ((4, 32, 6, 6), (8, 32, 3, 3), {"padding": 1})]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("sx,sw,kw", _CONV_CASES)
def test_small_conv_serial_same_values(sx, sw, kw, threads, dtype, monkeypatch):
    """A small convolution runs on the calling thread (no OpenMP team to wake): forward, input and
    weight gradients bit for bit those of the thread count the process has, and torch's values."""
    from ember.inductor import config
    from ember.ops import _conv_native as cn
    if cn.lib() is None:
        pytest.skip("no native convolution library (no C++ compiler)")
    monkeypatch.setattr(config, "threads", threads)
    rng = np.random.default_rng(7)
    xa, wa = rng.standard_normal(sx).astype(dtype), rng.standard_normal(sw).astype(dtype)
    ga = None
    conv = F.conv2d if len(sx) == 4 else F.conv1d
    seen = []
    real_call = cn._call
    monkeypatch.setattr(cn, "_call", lambda kind, dt, *a: (seen.append((kind, int(np.ctypeslib.as_array(
        ctypes.cast(a[1], ctypes.POINTER(ctypes.c_int64)), (24,))[20]))), real_call(kind, dt, *a)))
    res = []
    for macs in (cn._SERIAL_MACS, 0):      # 0: every call uses the process's thread count (before)
        monkeypatch.setattr(cn, "_SERIAL_MACS", macs)
        x, w = ember.tensor(xa, requires_grad=True), ember.tensor(wa, requires_grad=True)
        y = conv(x, w, **kw)
        if ga is None:
            ga = rng.standard_normal(tuple(y.shape)).astype(dtype)
        y.backward(ember.tensor(ga))
        res.append((y, x.grad, w.grad))
    for a, b in zip(*res):
        _same(a, b)
    small = [t for k, t in seen[:len(seen) // 2]]
    assert small and small[0] == 1                 # the forward of these small ones: one thread
    assert all(t == threads for k, t in seen[len(seen) // 2:] if k == "wgrad")
    xt, wt = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    yt = (TF.conv2d if len(sx) == 4 else TF.conv1d)(xt, wt, **kw)
    yt.backward(torch.tensor(ga))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in zip(res[0], (yt, xt.grad, wt.grad)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------------- softmax / log_softmax kernel
def _softmax_inputs(rng, dtype):
    """(array, view) pairs: the view applied to the array and to its ember tensor."""
    a = rng.standard_normal((5, 7, 6)).astype(dtype) * 4
    b = a.copy()
    b[1, 2, :] = np.inf
    b[2, 3, 1] = -np.inf
    b[3, :, :] = -np.inf
    b[4, 0, 0] = np.nan
    same = lambda t: t  # noqa: E731
    return [(a, same), (b, same), (a, lambda t: t[:, :, ::2]), (a, lambda t: t.permute(2, 0, 1)),
            (a, lambda t: t[0, 0]), (rng.standard_normal((1, 9)).astype(dtype), same)]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_fast_kernel_same_bits(log, dtype, monkeypatch):
    """The contiguous float kernel path: the general path's bits for every dim (NaN, +-inf rows,
    size-1 dims), strided and transposed inputs through the general path, and torch's values."""
    from ember.ops import reduction
    rng = np.random.default_rng(3)
    fe = F.log_softmax if log else F.softmax
    ft = TF.log_softmax if log else TF.softmax
    for base, view in _softmax_inputs(rng, dtype):
        e, t = view(ember.tensor(base)), view(torch.tensor(base))
        for dim in range(-e.dim(), e.dim()):
            fast = fe(e, dim)
            with monkeypatch.context() as m:
                m.setattr(reduction, "_SOFTMAX_FAST", ())
                slow = fe(e, dim)
            _same(fast, slow)
            assert fast.stride() == slow.stride()
            np.testing.assert_allclose(_np(fast), _np(ft(t, dim)),
                                       rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_softmax_fast_kernel_grad_and_errors():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    e, t = _pair(a, requires_grad=True)
    ge = rng.standard_normal((4, 6)).astype(np.float32)
    F.log_softmax(e, 1).backward(ember.tensor(ge))
    TF.log_softmax(t, 1).backward(torch.tensor(ge))
    np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-5, atol=1e-6)
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.softmax(ember.tensor(a), 2)
    # an integer tensor: torch's error from the general path
    with pytest.raises(NotImplementedError, match="softmax"):
        ember.ops.OPS["_softmax"](ember.tensor([[1, 2]]), 1, False)


# ---------------------------------------------------------------------- batch_norm running statistics
def _bn_run(xa, dtype_buf, momentum, fast, monkeypatch, requires_grad=False, var=True):
    rng = np.random.default_rng(11)
    C = xa.shape[1]
    rm = ember.tensor(rng.standard_normal(C).astype(dtype_buf))
    rv = ember.tensor(rng.random(C).astype(dtype_buf) + 0.5) if var else None
    x = ember.tensor(xa, requires_grad=requires_grad)
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(_eager_fast, "batch_norm_running_update", lambda *a: False)
        out = F.batch_norm(x, rm, rv, training=True, momentum=momentum)
    return out, rm, rv


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (4, 5), (3, 4, 7), (2, 2, 3, 4, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.1, 0.0, 0.37])
def test_batch_norm_running_update_same_bits(shape, dtype, momentum, monkeypatch):
    """The running-statistics update as kernels back to back: the composite's bits and version
    bumps, and torch's running statistics."""
    xa = np.random.default_rng(5).standard_normal(shape).astype(dtype) * 3 + 1
    fo, frm, frv = _bn_run(xa, dtype, momentum, True, monkeypatch)
    so, srm, srv = _bn_run(xa, dtype, momentum, False, monkeypatch)
    for a, b in ((fo, so), (frm, srm), (frv, srv)):
        _same(a, b)
    assert frm._version == srm._version == 2 and frv._version == srv._version == 2
    rng = np.random.default_rng(11)
    C = shape[1]
    trm = torch.tensor(rng.standard_normal(C).astype(dtype))
    trv = torch.tensor(rng.random(C).astype(dtype) + 0.5)
    TF.batch_norm(torch.tensor(xa), trm, trv, training=True, momentum=momentum)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(_np(frm), _np(trm), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(frv), _np(trv), rtol=tol, atol=tol)


def test_batch_norm_running_update_fallbacks(monkeypatch):
    """Mixed dtypes (float32 buffers, a float16 input: the mixed mode torch accepts), an input
    requiring grad, and a dispatch mode: the composite's values; the mode sees the update's ops.
    (One buffer without the other, or float64 buffers for a float32 input, torch refuses:
    tests/ops/test_argument_errors_s34.py.)"""
    xa = np.random.default_rng(6).standard_normal((3, 4, 5)).astype(np.float32)
    calls = []
    real = _eager_fast.batch_norm_running_update
    monkeypatch.setattr(_eager_fast, "batch_norm_running_update",
                        lambda *a: calls.append(r := real(*a)) or r)
    fo, frm, frv = _bn_run(xa.astype(np.float16), np.float32, 0.1, True, monkeypatch)
    assert calls == [False]
    monkeypatch.setattr(_eager_fast, "batch_norm_running_update", real)
    so, srm, srv = _bn_run(xa.astype(np.float16), np.float32, 0.1, False, monkeypatch)
    _same(frm, srm)
    _same(frv, srv)
    rng = np.random.default_rng(11)
    trm = torch.tensor(rng.standard_normal(4).astype(np.float32))
    trv = torch.tensor(rng.random(4).astype(np.float32) + 0.5)
    TF.batch_norm(torch.tensor(xa.astype(np.float16)), trm, trv, training=True, momentum=0.1)
    np.testing.assert_allclose(_np(frm), _np(trm), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(_np(frv), _np(trv), rtol=1e-3, atol=1e-3)
    fo, frm, frv = _bn_run(xa, np.float32, 0.1, True, monkeypatch, requires_grad=True)
    so, srm, srv = _bn_run(xa, np.float32, 0.1, False, monkeypatch, requires_grad=True)
    _same(fo, so)
    _same(frm, srm)
    _same(frv, srv)
    from ember.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        _bn_run(xa, np.float32, 0.1, True, monkeypatch)
    assert any("mul_" in s for s in seen) and any("add_" in s for s in seen)


# ---------------------------------------------------------------------- avg_pool divisor tables
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=2, divisor_override=3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_avg_pool_cached_divisor(kw, dtype, monkeypatch):
    """The divisor table cached by geometry: the values of a fresh table (cache emptied), forward
    and backward, read-only tables, and torch's values."""
    from ember.ops import nn_ops
    rng = np.random.default_rng(8)
    xa = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    res = []
    for _ in range(2):      # the second call: a cached table
        x = ember.tensor(xa, requires_grad=True)
        y = F.avg_pool2d(x, **kw)
        y.backward(ember.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)).astype(dtype)))
        res.append((y, x.grad))
    monkeypatch.setattr(nn_ops, "_AVG_DIVISORS", {})
    x = ember.tensor(xa, requires_grad=True)
    y = F.avg_pool2d(x, **kw)
    y.backward(ember.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)).astype(dtype)))
    for r in res:
        _same(r[0], y)
        _same(r[1], x.grad)
    for tab in nn_ops._AVG_DIVISORS.values():
        assert not tab.flags.writeable
    xt = torch.tensor(xa, requires_grad=True)
    yt = TF.avg_pool2d(xt, **kw)
    yt.backward(torch.tensor(np.linspace(-1, 1, yt.numel()).reshape(tuple(yt.shape)).astype(dtype)))
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(_np(y), _np(yt), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=tol, atol=tol)


# ---------------------------------------------------------------------- cat / stack
def _cat_cases(rng):
    a = rng.standard_normal((3, 4, 2, 5)).astype(np.float32)
    b = rng.standard_normal((3, 1, 2, 5)).astype(np.float32)
    return [
        ([a, b, a], 1), ([a, a], -1), ([a, a], 0), ([a[:, :, 0], b[:, :, 0]], 1),
        ([a.reshape(-1), np.zeros(0, np.float32), a.reshape(-1)], 0),     # a legacy empty input
        ([a, b.astype(np.float64)], 1),                                   # promotion: general path
        ([a.transpose(0, 2, 3, 1), a.transpose(0, 2, 3, 1)], 0),         # strided first input
        ([np.zeros(0, np.float32), a.reshape(-1)], 0),                   # a legacy empty first
        ([(a > 0), (b > 0)], 1), ([np.arange(6).reshape(2, 3)] * 3, -2),
    ]


def _dtname(t):
    return str(t.dtype).split(".")[-1]


def test_cat_fast_path_matches_torch():
    rng = np.random.default_rng(9)
    for arrs, dim in _cat_cases(rng):
        es = [ember.tensor(x) for x in arrs]
        ts = [torch.tensor(x) for x in arrs]
        if arrs[0].ndim == 4 and not arrs[0].flags.c_contiguous:      # a permuted view, not a copy
            es = [ember.tensor(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).permute(0, 2, 3, 1) for x in arrs]
            ts = [torch.tensor(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).permute(0, 2, 3, 1) for x in arrs]
        e, t = ember.cat(es, dim), torch.cat(ts, dim)
        assert _dtname(e) == _dtname(t) and tuple(e.shape) == tuple(t.shape)
        assert e.stride() == t.stride() and e.is_contiguous()
        np.testing.assert_array_equal(_np(e), t.numpy())
        k = [i for i, x in enumerate(arrs) if x.size and x.shape == arrs[-1].shape]   # equal shapes
        s_e = ember.stack([es[i] for i in k], dim if dim >= 0 else dim - 1)
        s_t = torch.stack([ts[i] for i in k], dim if dim >= 0 else dim - 1)
        assert _dtname(s_e) == _dtname(s_t) and tuple(s_e.shape) == tuple(s_t.shape)
        assert s_e.stride() == s_t.stride()
        np.testing.assert_array_equal(_np(s_e), s_t.numpy())


def test_cat_fast_path_errors_and_grad():
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    for dim in (0, 2, -3):
        try:
            torch.cat([torch.tensor(a), torch.tensor(b)], dim)
        except Exception as exc:   # noqa: BLE001 - the type and message are compared
            with pytest.raises(type(exc)) as info:
                ember.cat([ember.tensor(a), ember.tensor(b)], dim)
            assert str(info.value) == str(exc)
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        ember.cat([ember.tensor(1.0), ember.tensor(2.0)])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        ember.stack([ember.tensor(a), ember.tensor(b)])
    x, y = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    g = rng.standard_normal((2, 7)).astype(np.float32)
    ember.cat([x, y], 1).backward(ember.tensor(g))
    np.testing.assert_array_equal(_np(x.grad), g[:, :3])
    np.testing.assert_array_equal(_np(y.grad), g[:, 3:])


# ---------------------------------------------------------------------- normalisation statistics
@pytest.mark.parametrize("dtype", DTYPES)
def test_np_mean_same_bits_as_numpy(dtype):
    """``_np_mean`` (the normalisations' mean without numpy's Python steps) is numpy's mean bit for
    bit: row sums, multi-axis sums over strided layouts, counts that do not divide evenly."""
    from ember.ops.nn_ops import _np_mean
    rng = np.random.default_rng(12)
    for shape, axes in [((8, 8), (1,)), ((2, 3, 8, 8), (0, 2, 3)), ((3, 7, 11), (2,)), ((5, 3, 13), (1, 2)),
                        ((4, 2, 300), (2,)), ((3, 1, 5, 7), (0, 2, 3))]:
        a = (rng.standard_normal(shape) * 100 + 7).astype(dtype)
        for arr in (a, np.asfortranarray(a), a[..., ::-1]):
            r = _np_mean(arr, axes)
            ref = arr.mean(axis=axes, keepdims=True)
            assert r.dtype == ref.dtype and r.shape == ref.shape
            np.testing.assert_array_equal(r, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_fast_statistics_same_bits(dtype, monkeypatch):
    """layer_norm, batch_norm (train) and group_norm, forward and backward: the bits of the
    statistics computed with numpy's mean, and torch's values."""
    from ember.ops import nn_ops
    rng = np.random.default_rng(13)
    xa = rng.standard_normal((2, 4, 5, 6)).astype(dtype) * 2 + 0.5
    wa, ba = rng.standard_normal(4).astype(dtype), rng.standard_normal(4).astype(dtype)
    lw, lb = rng.standard_normal(6).astype(dtype), rng.standard_normal(6).astype(dtype)
    ga = rng.standard_normal(xa.shape).astype(dtype)

    def run(lib, fns):
        out = []
        for f in fns:
            x = lib.tensor(xa, requires_grad=True)
            y = f(lib, x)
            y.backward(lib.tensor(ga))
            out.append((y, x.grad))
        return out

    fns = [lambda L, x: L.nn.functional.layer_norm(x, (6,), L.tensor(lw), L.tensor(lb)),
           lambda L, x: L.nn.functional.layer_norm(x, (5, 6)),
           lambda L, x: L.nn.functional.batch_norm(x, None, None, L.tensor(wa), L.tensor(ba), training=True),
           lambda L, x: L.nn.functional.group_norm(x, 2, L.tensor(wa), L.tensor(ba))]
    fast = run(ember, fns)
    monkeypatch.setattr(nn_ops, "_np_mean", lambda a, axes: a.mean(axis=axes, keepdims=True))
    slow = run(ember, fns)
    ref = run(torch, fns)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for f, s, r in zip(fast, slow, ref):
        for a, b, c in zip(f, s, r):
            _same(a, b)
            np.testing.assert_allclose(_np(a), _np(c), rtol=tol, atol=tol)


def test_batch_norm_running_update_channels_last(monkeypatch):
    rng = np.random.default_rng(14)
    xa = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    res = []
    for fast in (True, False):
        x = ember.tensor(xa).contiguous(memory_format=ember.channels_last)
        rm, rv = ember.tensor(np.linspace(-1, 1, 4, dtype=np.float32)), ember.ones(4)
        with monkeypatch.context() as m:
            if not fast:
                m.setattr(_eager_fast, "batch_norm_running_update", lambda *a: False)
            y = F.batch_norm(x, rm, rv, training=True, momentum=0.3)
        res.append((y, rm, rv))
    for a, b in zip(*res):
        _same(a, b)
    assert res[0][0].stride() == res[1][0].stride()


def test_float_to_int_casts_of_nonfinite_values_are_silent():
    """PyTorch converts nan/inf to integers without a warning (T5's relative-position buckets
    cast ``log(0)``); the values are the C cast's."""
    import warnings
    x = ember.tensor([float("-inf"), float("nan"), 1e30, 2.5, -3.7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = x.to(ember.int32).tolist()
    assert got[3:] == [2, -3]
