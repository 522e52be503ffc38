"""Session-32 eager fast paths of small losses and masks against the general paths they
short-cut, bit for bit, and against torch: nll_loss's unit-weight kernel case (``nn_ops.nll_unit``,
its backward ``_nll_backward_unit``, ``F.nll_loss`` without dispatch), derivative formulas run as
their kernels when nothing records (``reduction.unrecorded``: log_softmax's and nll_loss's
backward), and dropout's mask drawn without the dispatcher (``_eager_fast.dropout``)."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn import _eager_fast
from ember.ops import indexing, nn_ops, reduction

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float32, np.float64]
REDS = ["none", "mean", "sum"]


def _general(m):
    """Switch every fast path of this file off (the general kernels and dispatch run)."""
    m.setattr(nn_ops, "nll_unit", lambda *a: None)
    m.setattr(nn_ops, "_nll_backward_unit", lambda *a: None)
    m.setattr(nn_ops, "_unrecorded", lambda *a: False)
    m.setattr(reduction, "unrecorded", lambda *a: False)
    m.setattr(indexing, "_unrecorded", lambda *a: False)
    m.setattr(_eager_fast, "dropout", lambda *a: None)
    m.setattr(_eager_fast, "nll_loss", lambda *a: None)


def _both(fn, monkeypatch):
    fast = fn()
    with monkeypatch.context() as m:
        _general(m)
        slow = fn()
    return fast, slow


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _same(a, b):
    a, b = _np(a), _np(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()          # same bits: signed zeros, NaN signs and payloads


def _logits(rng, shape, dtype, special=False):
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    if special and a.size >= 4:
        a.reshape(-1)[:4] = [np.nan, -np.nan, -0.0, np.inf]
    return a


# ---------------------------------------------------------------------- nll_loss forward
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("N,C", [(1, 1), (8, 10), (33, 7)])
def test_nll_loss_fast_equals_general_and_torch(dtype, reduction, N, C, monkeypatch):
    rng = np.random.default_rng(N * 100 + C)
    x = _logits(rng, (N, C), dtype)
    t = rng.integers(0, C, N)
    e_x, e_t = ember.tensor(x), ember.tensor(t)
    assert nn_ops.nll_unit(x, t, REDS.index(reduction), -100) is not None       # the case is covered
    fast, slow = _both(lambda: F.nll_loss(e_x, e_t, reduction=reduction), monkeypatch)
    _same(fast, slow)
    assert fast.dtype == slow.dtype and fast.requires_grad is False and fast.grad_fn is None
    want = TF.nll_loss(torch.tensor(x), torch.tensor(t), reduction=reduction).numpy()
    np.testing.assert_allclose(_np(fast), want, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDS)
def test_nll_loss_special_values_same_bits(dtype, reduction, monkeypatch):
    rng = np.random.default_rng(3)
    x = _logits(rng, (6, 5), dtype, special=True)
    t = np.array([0, 1, 2, 3, 4, 0])              # picks the NaN, -NaN, -0.0 and inf entries
    e_x, e_t = ember.tensor(x), ember.tensor(t)
    fast, slow = _both(lambda: F.nll_loss(e_x, e_t, reduction=reduction), monkeypatch)
    _same(fast, slow)
    # the kernel with the op's dispatch (autograd off) takes the same case
    op_fast, op_slow = _both(lambda: nn_ops.nll_loss_nd(e_x, e_t, None, REDS.index(reduction)), monkeypatch)
    for a, b in zip(op_fast, op_slow):
        _same(a, b)


@pytest.mark.parametrize("ignore_index,weight", [(-100, False), (2, False), (-100, True), (1, True)])
@pytest.mark.parametrize("reduction", REDS)
def test_nll_loss_other_cases_fall_back(ignore_index, weight, reduction, monkeypatch):
    """ignore_index among the classes, weights, ignored targets: the general path's values."""
    rng = np.random.default_rng(11)
    x = _logits(rng, (9, 4), np.float32)
    t = rng.integers(0, 4, 9)
    t[2] = ignore_index if ignore_index != -100 else t[2]
    w = rng.random(4).astype(np.float32) + 0.5 if weight else None
    e_w = ember.tensor(w) if weight else None
    fast, slow = _both(lambda: F.nll_loss(ember.tensor(x), ember.tensor(t), e_w, ignore_index=ignore_index,
                                          reduction=reduction), monkeypatch)
    _same(fast, slow)
    want = TF.nll_loss(torch.tensor(x), torch.tensor(t), None if w is None else torch.tensor(w),
                       ignore_index=ignore_index, reduction=reduction).numpy()
    np.testing.assert_allclose(_np(fast), want, rtol=1e-6, atol=1e-7)


def test_nll_loss_ignored_targets_and_errors():
    x = ember.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    # a target equal to the (out-of-class) ignore_index: the general path (weights 0 there)
    t = ember.tensor([0, -100, 2, 1])
    got = F.nll_loss(x, t)
    want = TF.nll_loss(torch.tensor(x.numpy()), torch.tensor([0, -100, 2, 1]))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        F.nll_loss(x, ember.tensor([0, 3, 1, 1]))
    with pytest.raises(IndexError, match="Target -2 is out of bounds."):
        F.nll_loss(x, ember.tensor([0, -2, 1, 1]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        F.nll_loss(x, ember.tensor([0, 1, 1, 1], dtype=ember.int32))


# ---------------------------------------------------------------------- backward
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("N,C", [(1, 3), (8, 10), (32, 10)])
def test_nll_and_cross_entropy_grads_same_bits(dtype, reduction, N, C, monkeypatch):
    rng = np.random.default_rng(N + 7 * C)
    x = _logits(rng, (N, C), dtype)
    t = rng.integers(0, C, N)
    gout = rng.standard_normal(N).astype(dtype) if reduction == "none" else None

    def run(fn):
        xe = ember.tensor(x, requires_grad=True)
        out = fn(xe, ember.tensor(t), reduction=reduction)
        out.backward(None if gout is None else ember.tensor(gout))
        return out, xe.grad

    for fn, tfn in ((F.nll_loss, TF.nll_loss), (F.cross_entropy, TF.cross_entropy)):
        (of, gf), (os_, gs) = _both(lambda: run(fn), monkeypatch)
        _same(of, os_)
        _same(gf, gs)
        assert of.grad_fn.name() == os_.grad_fn.name()
        xt = torch.tensor(x, requires_grad=True)
        ot = tfn(xt, torch.tensor(t), reduction=reduction)
        ot.backward(None if gout is None else torch.tensor(gout))
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(_np(gf), xt.grad.numpy(), **tol)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_log_softmax_backward_kernels_same_bits(dim, monkeypatch):
    rng = np.random.default_rng(dim + 5)
    x = _logits(rng, (5, 6), np.float32, special=True)
    g = rng.standard_normal((5, 6)).astype(np.float32)

    def run():
        xe = ember.tensor(x, requires_grad=True)
        ember.log_softmax(xe, dim).backward(ember.tensor(g))
        return xe.grad

    calls = []
    real = reduction.unrecorded
    monkeypatch.setattr(reduction, "unrecorded", lambda *a: calls.append(real(*a)) or calls[-1])
    fast, slow = _both(run, monkeypatch)
    assert calls == [True]                                                       # the kernels ran
    _same(fast, slow)
    xt = torch.tensor(x, requires_grad=True)
    torch.log_softmax(xt, dim).backward(torch.tensor(g))
    ok = np.isfinite(xt.grad.numpy())
    np.testing.assert_allclose(_np(fast)[ok], xt.grad.numpy()[ok], rtol=1e-5, atol=1e-6)


def test_double_backward_still_records():
    """create_graph: the formulas run as ops (differentiable), not as kernels."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5))
    t = rng.integers(0, 5, 4)
    xe = ember.tensor(x, requires_grad=True)
    (g,) = ember.autograd.grad(F.cross_entropy(xe, ember.tensor(t)), xe, create_graph=True)
    assert g.grad_fn is not None
    (gg,) = ember.autograd.grad((g * g).sum(), xe)
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(TF.cross_entropy(xt, torch.tensor(t)), xt, create_graph=True)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- dropout
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("shape", [(1000,), (7, 13), (2, 3, 4, 5)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_fast_equals_composite(dtype, shape, p, monkeypatch):
    ember.manual_seed(17)
    x = ember.randn(*shape, dtype=dtype)
    assert _eager_fast.dropout(x, p) is not None                                 # the case is covered

    def run():
        ember.manual_seed(23)
        y = F.dropout(x, p)
        xr = x.clone().requires_grad_()
        z = F.dropout(xr, p)
        z.backward(ember.ones_like(z))
        return y, z, xr.grad, z.grad_fn.name(), ember.rand(3)     # the stream continues alike

    fast, slow = _both(run, monkeypatch)
    for a, b in zip(fast[:3] + fast[4:], slow[:3] + slow[4:]):
        _same(a, b)
    assert fast[3] == slow[3] == "MulBackward0"
    assert fast[0].requires_grad is False and fast[1].requires_grad is True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_matches_torch_stream(dtype):
    x = np.random.default_rng(2).standard_normal(500).astype(dtype)
    ember.manual_seed(9)
    torch.manual_seed(9)
    got = F.dropout(ember.tensor(x), 0.3)
    want = TF.dropout(torch.tensor(x), 0.3)
    np.testing.assert_array_equal(got.numpy() == 0, want.numpy() == 0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_dropout_layouts_and_cases_fall_back(monkeypatch):
    """Transposed inputs, size-1 dims, p as an int, in place: the composite's draw order."""
    ember.manual_seed(0)
    base = ember.randn(6, 5)
    cases = [lambda: F.dropout(base.t(), 0.5), lambda: F.dropout(base[:1], 0.5),
             lambda: F.dropout(base.clone(), 0.25, inplace=True), lambda: F.dropout(base, 0.5, training=False)]
    for fn in cases:
        def run():
            ember.manual_seed(4)
            return fn()
        fast, slow = _both(run, monkeypatch)
        _same(fast, slow)


# ---------------------------------------------------------------------- sum's backward, topk, native pointers
@pytest.mark.parametrize("shape", [(3,), (1,), (2, 3, 1), (4, 1, 5), (1, 1)])
def test_full_sum_backward_view_same_as_expand_reduced(shape, monkeypatch):
    """x.sum().backward(): the gradient view made in one step has expand_reduced's geometry."""
    def run():
        x = ember.tensor(np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32),
                         requires_grad=True)
        (g,) = ember.autograd.grad(x.sum(), x)
        return g

    calls = []
    real = reduction.unrecorded
    monkeypatch.setattr(reduction, "unrecorded", lambda *a: calls.append(real(*a)) or calls[-1])
    fast, slow = _both(run, monkeypatch)
    assert calls == [True]
    for g in (fast, slow):
        assert g._base is not None and g._vc is g._base._vc
    assert fast.shape == slow.shape and fast.stride() == slow.stride()
    assert fast._data.strides == slow._data.strides and fast._data.flags.writeable == slow._data.flags.writeable
    _same(fast.contiguous(), slow.contiguous())
    if 1 not in shape:
        xt = torch.ones(shape, requires_grad=True)
        (gt,) = torch.autograd.grad(xt.sum(), xt)
        assert tuple(fast.stride()) == gt.stride()


def test_topk_plain_arguments_skip_proxy_scan():
    rng = np.random.default_rng(8)
    a = rng.standard_normal(100).astype(np.float32)
    a[[3, 50]] = a[7]                                   # ties: index order
    e = ember.tensor(a)
    for k, largest in ((5, True), (5, False), (1, True)):
        v, i = ember.topk(e, k, largest=largest)
        tv, ti = torch.topk(torch.tensor(a), k, largest=largest)
        _same(v, tv.numpy())
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
        assert type(ember.topk(e, k)).__name__ == "topk"


def test_native_pointer_of_any_array():
    from ember.ops._native_small import _ptr
    a = np.arange(20.0).reshape(4, 5)
    ro = np.frombuffer(b"12345678", dtype=np.uint8)
    for v in (a, a[1:], a.T, a[:, 1:], np.broadcast_to(a[0], (3, 5)), np.empty(0), a[2, 3:], ro):
        assert _ptr(v) == v.ctypes.data


@pytest.mark.parametrize("make", [lambda a: a, lambda a: a.T, lambda a: a[:, ::2], lambda a: a[1:]])
def test_native_small_ops_on_strided_inputs(make):
    """erfinv / topk / max_pool over strided and offset views (their pointers' fallback)."""
    rng = np.random.default_rng(4)
    a = make(rng.uniform(-0.99, 0.99, (8, 12)).astype(np.float32))
    np.testing.assert_array_equal(ember.erfinv(ember.tensor(a)).numpy(), torch.erfinv(torch.tensor(a)).numpy())
    v, i = ember.topk(ember.tensor(a), 3, dim=0)
    tv, ti = torch.topk(torch.tensor(a), 3, dim=0)
    _same(v, tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    x4 = ember.tensor(a)[None, None]
    got, gi = F.max_pool2d(x4, 2, return_indices=True)
    want, wi = TF.max_pool2d(torch.tensor(a)[None, None], 2, return_indices=True)
    _same(got, want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())


# ---------------------------------------------------------------------- index-routing backward formulas
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_topk_max_pool_grads_same_bits(dtype, monkeypatch):
    rng = np.random.default_rng(21)
    m = rng.standard_normal((16, 16)).astype(dtype)
    gidx = rng.integers(0, 16, (16, 16))                  # repeated indices: the scatter adds
    v = rng.standard_normal(100).astype(dtype)
    x = rng.standard_normal((2, 3, 8, 8)).astype(dtype)
    cases = [
        (lambda e: ember.gather(e, 1, ember.tensor(gidx)), m, lambda t: torch.gather(t, 1, torch.tensor(gidx))),
        (lambda e: ember.gather(e, 0, ember.tensor(gidx[:5])), m, lambda t: torch.gather(t, 0, torch.tensor(gidx[:5]))),
        (lambda e: ember.topk(e, 5)[0], v, lambda t: torch.topk(t, 5)[0]),
        (lambda e: ember.topk(e.reshape(10, 10), 3, dim=0, largest=False)[0], v,
         lambda t: torch.topk(t.reshape(10, 10), 3, dim=0, largest=False)[0]),
        (lambda e: F.max_pool2d(e, 2), x, lambda t: TF.max_pool2d(t, 2)),
        (lambda e: F.max_pool2d(e, 3, stride=2, padding=1), x, lambda t: TF.max_pool2d(t, 3, stride=2, padding=1)),
    ]
    for fn, a, tfn in cases:
        w = rng.standard_normal(_np(fn(ember.tensor(a))).shape).astype(dtype)

        def run():
            e = ember.tensor(a, requires_grad=True)
            out = fn(e)
            out.backward(ember.tensor(w))
            return out, e.grad

        (of, gf), (os_, gs) = _both(run, monkeypatch)
        _same(of, os_)
        _same(gf, gs)
        assert of.grad_fn.name() == os_.grad_fn.name()
        t = torch.tensor(a, requires_grad=True)
        tfn(t).backward(torch.tensor(w))
        np.testing.assert_allclose(_np(gf), t.grad.numpy(), rtol=1e-6, atol=1e-6)
        # a training step (x.sum().backward()) too
        e = ember.tensor(a, requires_grad=True)
        fn(e).sum().backward()
        t = torch.tensor(a, requires_grad=True)
        tfn(t).sum().backward()
        np.testing.assert_allclose(_np(e.grad), t.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_native_geometry_cache_hits_match_torch():
    """topk / max_pool geometry arrays kept by their inputs' geometry: second calls (cache hits)
    on other data, other dtypes of the same byte strides, and other layouts give torch's values."""
    from ember.ops import _native_small
    _native_small._GEO.clear()
    rng = np.random.default_rng(30)
    for rep in range(2):
        for dt in (np.float32, np.float64, np.int32, np.int64):
            a = (rng.permutation(60).reshape(6, 10) - 30).astype(dt)       # no ties
            for view in (a, a.T, a[:, ::2]):
                v, i = ember.topk(ember.tensor(view), 3, dim=-1)
                tv, ti = torch.topk(torch.tensor(np.ascontiguousarray(view)), 3, dim=-1)
                _same(v, tv.numpy())
                np.testing.assert_array_equal(i.numpy(), ti.numpy())
            x = (rng.permutation(384).reshape(2, 3, 8, 8) - 190).astype(dt)
            for view, k, s, p in ((x, 2, 2, 0), (x, 3, 1, 1), (x.transpose(0, 1, 3, 2), 2, 1, 1)):
                got, gi = F.max_pool2d(ember.tensor(view), k, s, p, return_indices=True)
                want, wi = TF.max_pool2d(torch.tensor(np.ascontiguousarray(view)), k, s, p, return_indices=True)
                _same(got.contiguous(), want.numpy())
                np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    assert _native_small._GEO


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("N,C", [(1, 1), (32, 10), (7, 3)])
def test_cross_entropy_forward_fast_equals_composite(dtype, reduction, N, C, monkeypatch):
    rng = np.random.default_rng(N * 3 + C)
    x = _logits(rng, (N, C), dtype, special=N * C >= 8)
    t = rng.integers(0, C, N)
    e_x, e_t = ember.tensor(x), ember.tensor(t)
    fast = F.cross_entropy(e_x, e_t, reduction=reduction)
    with monkeypatch.context() as m:
        m.setattr(_eager_fast, "plain", lambda *a: False)
        slow = F.cross_entropy(e_x, e_t, reduction=reduction)
    _same(fast, slow)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (8, 8), (3, 4, 5)])
def test_erfinv_backward_kernels_same_bits(dtype, shape, monkeypatch):
    rng = np.random.default_rng(len(shape) + 40)
    a = rng.uniform(-0.999, 0.999, shape).astype(dtype)
    if a.size >= 4:
        a.reshape(-1)[:4] = [0.0, -0.0, 1.0, -1.0]
    w = rng.standard_normal(shape).astype(dtype)

    def run():
        e = ember.tensor(a, requires_grad=True)
        ember.erfinv(e).backward(ember.tensor(w))
        return e.grad

    fast, slow = _both(run, monkeypatch)
    _same(fast, slow)
    t = torch.tensor(a, requires_grad=True)
    torch.erfinv(t).backward(torch.tensor(w))
    np.testing.assert_allclose(_np(fast), t.grad.numpy(), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gather_scatter_index_grids_reused_across_calls():
    """_along_key's arange grids are kept per (index shape, dim): later calls with other index
    values, dims and ops (gather, scatter, scatter_add) still give torch's values."""
    rng = np.random.default_rng(50)
    indexing._GRIDS.clear()
    for rep in range(3):
        a = rng.standard_normal((5, 6)).astype(np.float32)
        for d in (0, 1, -1):
            n = a.shape[d]
            idx = rng.integers(0, n, (4, 5) if d == 0 else (5, 4))
            src = rng.standard_normal(idx.shape).astype(np.float32)
            ea, ei, es = ember.tensor(a), ember.tensor(idx), ember.tensor(src)
            ta, ti, ts = torch.tensor(a), torch.tensor(idx), torch.tensor(src)
            _same(ember.gather(ea, d, ei), torch.gather(ta, d, ti).numpy())
            _same(ember.scatter_add(ea, d, ei, es), torch.scatter_add(ta, d, ti, ts).numpy())
            perm = np.stack([rng.permutation(n)[:idx.shape[d]] for _ in range(idx.shape[1 - d % 2])], 1 - d % 2)
            _same(ember.scatter(ea, d, ember.tensor(perm), es), torch.scatter(ta, d, torch.tensor(perm), ts).numpy())
    assert indexing._GRIDS and all(g is None or not g.flags.writeable for gs in indexing._GRIDS.values() for g in gs)


def test_bernoulli_mask_integer_threshold_equals_double_draw():
    """dropout's mask in integers against _mt19937.bernoulli: random streams and words placed
    exactly at, below and above p * 2**53 (the comparison's edge), p at its extremes."""
    from ember import _mt19937 as _mt
    from ember.nn._eager_fast import _bernoulli_mask
    for seed in range(3):
        for p in (0.5, 0.1, 0.9, 1e-17, 2.0 ** -53, 1 - 2.0 ** -53, 0.0, 1.0, 1 / 3):
            for n in (0, 1, 7, 1000):
                a, b = _mt.MTStream(seed), _mt.MTStream(seed)
                want, got = _mt.bernoulli(a, n, p), _bernoulli_mask(b, n, p)
                assert got.dtype == want.dtype and np.array_equal(got, want)
                assert np.array_equal(a.bg.random_raw(3), b.bg.random_raw(3))   # same words used

    class Words:                     # a stream handing out chosen 32-bit words
        words64 = _mt.MTStream.words64

        def __init__(self, words):
            self.bg = self
            self.w = np.array(words, dtype=np.uint64)

        def random_raw(self, n):
            assert n == len(self.w)
            return self.w.copy()

    for k in (1, 5, 2 ** 32 + 3, 2 ** 52 + 1, 2 ** 53 - 1):
        p = k * 2.0 ** -53
        words = []
        for v in (k - 1, k, k + 1, k + 2 ** 53 * 7):          # high bits above 53 are dropped
            v &= (1 << 64) - 1
            words += [v >> 32, v & 0xFFFFFFFF]
        want = _mt.bernoulli(Words(words), 4, p)
        got = _bernoulli_mask(Words(words), 4, p)
        assert np.array_equal(got, want), (k, got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3), stride=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_values_without_dispatch(dtype, kw, monkeypatch):
    rng = np.random.default_rng(60)
    a = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    a[0, 0, 0, :3] = [np.nan, -np.inf, -0.0]
    base = ember.tensor(a)
    for x in (base, base.contiguous(memory_format=ember.channels_last), base[:, :, 1:, 1:]):
        fast = F.max_pool2d(x, **kw)
        with monkeypatch.context() as m:
            m.setattr(_eager_fast, "plain", lambda *a: False)
            slow = F.max_pool2d(x, **kw)
        _same(fast, slow)
        assert fast.stride() == slow.stride() and fast.grad_fn is None
        want = TF.max_pool2d(torch.tensor(x.contiguous().numpy()), **kw).numpy()
        np.testing.assert_array_equal(fast.contiguous().numpy(), want)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(base, 2, padding=2)
