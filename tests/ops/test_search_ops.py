"""Searching, counting and order statistics vs PyTorch: searchsorted, bucketize, isin, count_nonzero,
median/nanmedian, kthvalue, cummax/cummin, logcumsumexp, histc, bincount, unique, unique_consecutive."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, gradcheck_fn, needs_torch, torch

SET = settings(max_examples=15, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
NAN = float("nan")


def rng():
    return np.random.default_rng()


def floats(shape, ties=False, nan=0.0, dtype="float32"):
    """Fresh random values; ``ties`` draws from a few integers so equal values are common,
    ``nan`` is the fraction of NaNs."""
    g = rng()
    a = g.integers(-3, 4, size=shape).astype(dtype) if ties else g.uniform(-3, 3, size=shape).astype(dtype)
    if nan:
        a[g.random(size=shape) < nan] = np.nan
    return a


def both(a):
    return ember.tensor(a), torch.tensor(a)


def same(e, t):
    """Exact comparison (values, dtype, shape), NaN equal to NaN."""
    assert_close(e, t, rtol=0, atol=0)


def grads(fn, arr, outputs=lambda r: r):
    """d sum(out * cot) / d input under ember and torch for ``fn(module, x)``."""
    cot = None
    res = []
    for m in (ember, torch):
        x = m.tensor(arr.astype(np.float64), requires_grad=True)
        out = outputs(fn(m, x))
        if cot is None:
            cot = rng().standard_normal(tuple(out.shape))
        res.append(((out * m.tensor(cot)).sum(), x))
    (le, xe), (lt, xt) = res
    ge, = ember.autograd.grad(le, [xe])
    gt, = torch.autograd.grad(lt, [xt])
    return ge, gt


# ---------------------------------------------------------------------- searchsorted / bucketize
@needs_torch
@SET
@given(m=st.integers(0, 6), vshape=shapes, ties=st.booleans(), right=st.booleans(), int32=st.booleans())
def test_searchsorted_1d(m, vshape, ties, right, int32):
    seq = np.sort(floats((m,), ties=ties))
    vals = floats(vshape, ties=ties, nan=0.2)
    (se, st_), (ve, vt) = both(seq), both(vals)
    same(ember.searchsorted(se, ve, right=right, out_int32=int32),
         torch.searchsorted(st_, vt, right=right, out_int32=int32))
    side = "right" if right else "left"
    same(ember.searchsorted(se, ve, side=side), torch.searchsorted(st_, vt, side=side))


@needs_torch
@SET
@given(lead=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), m=st.integers(0, 5),
       k=st.integers(0, 4), right=st.booleans())
def test_searchsorted_nd_and_sorter(lead, m, k, right):
    raw = floats(lead + (m,), ties=True)
    vals = floats(lead + (k,), ties=True)
    seq = np.sort(raw, axis=-1)
    same(ember.searchsorted(ember.tensor(seq), ember.tensor(vals), right=right),
         torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right))
    order = np.argsort(raw, axis=-1, kind="stable")
    same(ember.searchsorted(ember.tensor(raw), ember.tensor(vals), right=right, sorter=ember.tensor(order)),
         torch.searchsorted(torch.tensor(raw), torch.tensor(vals), right=right, sorter=torch.tensor(order)))


@needs_torch
def test_searchsorted_scalars_ints_and_mixed_dtypes():
    seq = np.sort(rng().integers(-5, 6, size=7))
    se, st_ = both(seq)
    for v in (2, 2.5, -10, 10, NAN):
        for right in (False, True):
            same(ember.searchsorted(se, v, right=right), torch.searchsorted(st_, v, right=right))
    vals = floats((3, 2))
    same(ember.searchsorted(se, ember.tensor(vals)), torch.searchsorted(st_, torch.tensor(vals)))
    v0 = np.array(1.5, dtype=np.float32)     # 0-d values tensor
    same(ember.searchsorted(ember.tensor(seq.astype(np.float32)), ember.tensor(v0)),
         torch.searchsorted(torch.tensor(seq.astype(np.float32)), torch.tensor(v0)))


@needs_torch
@SET
@given(vshape=shapes, m=st.integers(0, 6), right=st.booleans(), int32=st.booleans())
def test_bucketize(vshape, m, right, int32):
    b = np.sort(floats((m,), ties=True))
    v = floats(vshape, ties=True, nan=0.1)
    same(ember.bucketize(ember.tensor(v), ember.tensor(b), right=right, out_int32=int32),
         torch.bucketize(torch.tensor(v), torch.tensor(b), right=right, out_int32=int32))
    same(ember.bucketize(1, ember.tensor(b), right=right), torch.bucketize(1, torch.tensor(b), right=right))


def test_searchsorted_bad_input():
    s = ember.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right' but got up"):
        ember.searchsorted(s, s, side="up")
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        ember.searchsorted(s, s, side="left", right=True)
    with pytest.raises(RuntimeError, match=r"boundaries tensor \[2, 3\] and input value tensor \[3, 2\]"):
        ember.searchsorted(ember.randn(2, 3), ember.randn(3, 2))
    with pytest.raises(RuntimeError, match="scalar only when boundaries tensor dimension is 1"):
        ember.searchsorted(ember.randn(2, 3), 1.0)
    with pytest.raises(RuntimeError, match="sorter must be a tensor of long dtype"):
        ember.searchsorted(s, s, sorter=ember.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError, match="boundary and sorter must have the same size"):
        ember.searchsorted(s, s, sorter=ember.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"boundaries tensor must be 1 dimension, but got dim\(2\)"):
        ember.bucketize(s, ember.randn(2, 2))
    assert not hasattr(ember.Tensor, "searchsorted") and not hasattr(ember.Tensor, "bucketize")  # as in torch


# ---------------------------------------------------------------------- isin / count_nonzero
@needs_torch
@SET
@given(eshape=shapes, tshape=st.lists(st.integers(0, 4), max_size=2).map(tuple), invert=st.booleans(),
       floaty=st.booleans())
def test_isin(eshape, tshape, invert, floaty):
    g = rng()
    el = g.integers(-4, 5, size=eshape)
    te = g.integers(-4, 5, size=tshape)
    if floaty:
        el = el.astype(np.float64)
        el[g.random(size=eshape) < 0.2] = np.nan
        te = te.astype(np.float32)          # mixed dtypes promote, as in torch
    (ee, et), (te_e, te_t) = both(el), both(te)
    same(ember.isin(ee, te_e, invert=invert), torch.isin(et, te_t, invert=invert))
    # assume_unique promises unique inputs (PyTorch's answer is unspecified otherwise)
    ue, ut = g.permutation(12)[:int(np.prod(eshape))] - 6, g.permutation(12)[:int(np.prod(tshape))] - 6
    same(ember.isin(ember.tensor(ue), ember.tensor(ut), assume_unique=True, invert=invert),
         torch.isin(torch.tensor(ue), torch.tensor(ut), assume_unique=True, invert=invert))
    same(ember.isin(ee, 2), torch.isin(et, 2))
    same(ember.isin(2, te_e, invert=invert), torch.isin(2, te_t, invert=invert))


def test_isin_needs_a_tensor():
    with pytest.raises(TypeError, match="at least one of elements and test_elements must be a Tensor"):
        ember.isin(1, 2)


@needs_torch
@SET
@given(shape=shapes, data=st.data())
def test_count_nonzero(shape, data):
    a = rng().integers(-1, 2, size=shape).astype(np.float32)
    a[rng().random(size=shape) < 0.1] = np.nan          # NaN is nonzero
    e, t = both(a)
    same(ember.count_nonzero(e), torch.count_nonzero(t))
    same(e.count_nonzero(), t.count_nonzero())
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    same(ember.count_nonzero(e, dim), torch.count_nonzero(t, dim))
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    dims = tuple(d - len(shape) if i % 2 else d for i, d in enumerate(dims))
    same(ember.count_nonzero(e, dim=dims), torch.count_nonzero(t, dim=dims))
    same(ember.count_nonzero(ember.tensor(a.astype(bool))), torch.count_nonzero(torch.tensor(a.astype(bool))))


# ---------------------------------------------------------------------- median / nanmedian / kthvalue
def _consistent(x, vals, idx, dim, keepdim):
    """The reported index holds the reported value (PyTorch leaves the choice among ties open)."""
    ix = idx if keepdim else idx.unsqueeze(dim)
    got = ember.gather(x, dim, ix)
    got = got if keepdim else got.squeeze(dim)
    same(got, torch.tensor(vals.detach()._data))


@needs_torch
@SET
@given(shape=shapes, data=st.data(), keepdim=st.booleans())
def test_median_dim_distinct_values(shape, data, keepdim):
    a = floats(shape, dtype="float64")
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    e, t = both(a)
    for name in ("median", "nanmedian"):
        re_, rt = getattr(ember, name)(e, dim, keepdim=keepdim), getattr(torch, name)(t, dim, keepdim=keepdim)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
        assert type(re_).__name__ == name
        rm = getattr(e, name)(dim, keepdim)
        same(rm[0], rt[0])
    same(ember.median(e), torch.median(t))
    same(e.nanmedian(), t.nanmedian())


@needs_torch
@SET
@given(shape=shapes, data=st.data(), keepdim=st.booleans(), nan=st.sampled_from([0.0, 0.3, 1.0]))
def test_median_ties_and_nan(shape, data, keepdim, nan):
    a = floats(shape, ties=True, nan=nan)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    e, t = both(a)
    for name in ("median", "nanmedian"):
        re_, rt = getattr(ember, name)(e, dim, keepdim), getattr(torch, name)(t, dim, keepdim)
        same(re_.values, rt.values)
        assert re_.indices.dtype is ember.int64 and tuple(re_.indices.shape) == tuple(rt.indices.shape)
        _consistent(e, re_.values, re_.indices, dim, keepdim)
        same(getattr(ember, name)(e), getattr(torch, name)(t))
    ints = rng().integers(-3, 4, size=shape)
    ie, it = both(ints)
    same(ember.median(ie), torch.median(it))
    same(ember.median(ie, dim).values, torch.median(it, dim).values)


@needs_torch
def test_median_edge_cases():
    for name in ("median", "nanmedian"):
        fe, ft = getattr(ember, name), getattr(torch, name)
        same(fe(ember.tensor([])), ft(torch.tensor([])))                       # NaN
        x = np.float32(rng().uniform(-1, 1))
        for dim in (0, -1):                                                     # 0-d input
            same(fe(ember.tensor(x), dim)[0], ft(torch.tensor(x), dim)[0])
            same(fe(ember.tensor(x), dim)[1], ft(torch.tensor(x), dim)[1])
        z = np.zeros((0, 3), np.float32)
        re_, rt = fe(ember.tensor(z), 1), ft(torch.tensor(z), 1)               # reduce a non-empty dim
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
        with pytest.raises(IndexError, match=rf"{name}\(\): Expected reduction dim 0 to have non-zero size"):
            fe(ember.randn(0, 3), 0)
        with pytest.raises(IndexError, match="Dimension out of range"):
            fe(ember.randn(3), 2)
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            fe(ember.tensor([True, False]))
        with pytest.raises(TypeError, match="keepdim=True needs a dim"):
            fe(ember.randn(3), keepdim=True)


@needs_torch
@SET
@given(shape=shapes, data=st.data(), keepdim=st.booleans())
def test_kthvalue(shape, data, keepdim):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(1, shape[dim]))
    a = floats(shape, dtype="float64")
    e, t = both(a)
    re_, rt = ember.kthvalue(e, k, dim, keepdim), torch.kthvalue(t, k, dim, keepdim)
    same(re_.values, rt.values)
    same(re_.indices, rt.indices)
    assert type(re_).__name__ == "kthvalue"
    same(e.kthvalue(k, dim=dim, keepdim=keepdim)[0], rt.values)
    # ties and NaN (NaN counts as the largest value)
    a = floats(shape, ties=True, nan=0.2)
    e, t = both(a)
    re_, rt = ember.kthvalue(e, k, dim, keepdim), torch.kthvalue(t, k, dim, keepdim)
    same(re_.values, rt.values)
    _consistent(e, re_.values, re_.indices, dim, keepdim)


@needs_torch
def test_kthvalue_edges_and_errors():
    x = np.float32(rng().uniform(-1, 1))
    same(ember.kthvalue(ember.tensor(x), 1)[0], torch.kthvalue(torch.tensor(x), 1)[0])
    z = np.zeros((0, 3), np.float32)
    re_, rt = ember.kthvalue(ember.tensor(z), 2, 1, True), torch.kthvalue(torch.tensor(z), 2, 1, True)
    same(re_.values, rt.values)
    same(re_.indices, rt.indices)
    for k in (0, 4):
        with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range for dimension 0"):
            ember.kthvalue(ember.randn(3), k)


@needs_torch
def test_order_statistic_gradients():
    a = floats((4, 5), dtype="float64")
    for fn in (lambda m, x: m.median(x, 1).values, lambda m, x: m.nanmedian(x, -2, keepdim=True).values,
               lambda m, x: m.kthvalue(x, 3, 0).values, lambda m, x: m.median(x), lambda m, x: m.nanmedian(x)):
        ge, gt = grads(fn, a)
        assert_close(ge, gt)
        assert gradcheck_fn(fn, [a])
    # whole-tensor median splits the gradient among tied elements (or among the NaNs)
    for arr in (floats((3, 4), ties=True), floats((3, 4), ties=True, nan=0.3)):
        for name in ("median", "nanmedian"):
            ge, gt = grads(lambda m, x: getattr(m, name)(x), arr)
            assert_close(ge, gt)


# ---------------------------------------------------------------------- cummax / cummin / logcumsumexp
@needs_torch
@SET
@given(shape=shapes, data=st.data(), nan=st.sampled_from([0.0, 0.25]))
def test_cummax_cummin(shape, data, nan):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = floats(shape, ties=True, nan=nan)      # ties: PyTorch reports the last occurrence
    e, t = both(a)
    for name in ("cummax", "cummin"):
        re_, rt = getattr(ember, name)(e, dim), getattr(torch, name)(t, dim)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
        assert type(re_).__name__ == name
        same(getattr(e, name)(dim).indices, rt.indices)
    ints = rng().integers(-3, 4, size=shape)
    ie, it = both(ints)
    same(ember.cummin(ie, dim).indices, torch.cummin(it, dim).indices)
    bools = ints > 0
    same(ember.cummax(ember.tensor(bools), dim).indices, torch.cummax(torch.tensor(bools), dim).indices)


@needs_torch
def test_cummax_edges_and_gradients():
    for name in ("cummax", "cummin"):
        x = np.float32(rng().uniform(-1, 1))
        re_, rt = getattr(ember, name)(ember.tensor(x), 0), getattr(torch, name)(torch.tensor(x), 0)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
        z = np.zeros((2, 0), np.float32)
        re_, rt = getattr(ember, name)(ember.tensor(z), 1), getattr(torch, name)(torch.tensor(z), 1)
        same(re_.values, rt.values)
        same(re_.indices, rt.indices)
        for arr in (floats((3, 6), dtype="float64"), floats((3, 6), ties=True)):
            ge, gt = grads(lambda m, x: getattr(m, name)(x, -1).values, arr)
            assert_close(ge, gt)
        with pytest.raises(IndexError, match="Dimension out of range"):
            getattr(ember, name)(ember.randn(3), 1)


@needs_torch
@SET
@given(shape=shapes, data=st.data(), dtype=st.sampled_from(["float32", "float64"]))
def test_logcumsumexp(shape, data, dtype):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = floats(shape, dtype=dtype) * 10
    e, t = both(a)
    assert_close(ember.logcumsumexp(e, dim), torch.logcumsumexp(t, dim))
    assert_close(e.logcumsumexp(dim), torch.logcumsumexp(t, dim))
    ge, gt = grads(lambda m, x: m.logcumsumexp(x, dim), a)
    assert_close(ge, gt)


@needs_torch
def test_logcumsumexp_extremes():
    # a slice-wide shift would underflow the early terms here; the scan keeps them exact
    for vals in ([-1000.0, 0.0, -np.inf, np.inf, 1.0], [-np.inf, -np.inf, 2.0], [np.nan, 1.0, 2.0],
                 [1.0, np.nan, np.inf], [3.0, 3.0, 3.0, 3.0, 3.0]):
        a = np.array(vals, np.float32)
        same(ember.logcumsumexp(ember.tensor(a), 0), torch.logcumsumexp(torch.tensor(a), 0))
    same(ember.logcumsumexp(ember.tensor(np.float32(1.5)), 0), torch.logcumsumexp(torch.tensor(np.float32(1.5)), 0))
    z = np.zeros((0, 2), np.float32)
    same(ember.logcumsumexp(ember.tensor(z), 0), torch.logcumsumexp(torch.tensor(z), 0))
    a = np.array([-1000.0, 0.0, 1.0, -5.0], np.float64)
    ge, gt = grads(lambda m, x: m.logcumsumexp(x, 0), a)
    assert_close(ge, gt)
    assert gradcheck_fn(lambda m, x: m.logcumsumexp(x, 1), [floats((2, 5), dtype="float64")])
    with pytest.raises(NotImplementedError, match="\"logcumsumexp_out_cpu\" not implemented for 'Long'"):
        ember.logcumsumexp(ember.tensor([1, 2]), 0)


# ---------------------------------------------------------------------- histc / bincount
@needs_torch
@SET
@given(shape=shapes, bins=st.integers(1, 12), ranged=st.booleans(), dtype=st.sampled_from(["float32", "float64"]))
def test_histc(shape, bins, ranged, dtype):
    a = floats(shape, dtype=dtype)
    e, t = both(a)
    kw = dict(min=-1.5, max=2.0) if ranged else {}
    same(ember.histc(e, bins, **kw), torch.histc(t, bins, **kw))
    same(e.histc(bins=bins), t.histc(bins=bins))


@needs_torch
def test_histc_edges_and_errors():
    for a, kw in ((np.array([2.0, 2.0], np.float32), dict(bins=3)),          # constant data: widened by 1
                  (np.array([], np.float32), dict(bins=4)),
                  (np.array([1.0, 2.0, 1.0, 4.0]), dict(bins=4, min=1, max=1)),  # min == max: data range
                  (np.array([1.0, np.nan, 3.0, 0.0, 2.0], np.float32), dict(bins=5, min=0, max=2)),
                  (np.array([0.0, 0.5, 1.0]), dict(bins=2, min=0, max=1))):     # the maximum: last bin
        same(ember.histc(ember.tensor(a), **kw), torch.histc(torch.tensor(a), **kw))
    with pytest.raises(RuntimeError, match=r"range of \[nan, nan\] is not finite"):
        ember.histc(ember.tensor([1.0, NAN]))
    with pytest.raises(RuntimeError, match=r"range of \[1, inf\] is not finite"):
        ember.histc(ember.tensor([1.0, float("inf")]))
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        ember.histc(ember.randn(3), bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        ember.histc(ember.randn(3), min=2, max=1)
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Long'"):
        ember.histc(ember.tensor([1, 2]))


@needs_torch
@SET
@given(n=st.integers(0, 12), minlength=st.integers(0, 8), wdt=st.sampled_from([None, "float32", "float64", "int64"]))
def test_bincount(n, minlength, wdt):
    g = rng()
    a = g.integers(0, 7, size=n)
    e, t = both(a)
    if wdt is None:
        same(ember.bincount(e, minlength=minlength), torch.bincount(t, minlength=minlength))
        same(e.bincount(), t.bincount())
    else:
        w = (g.uniform(-2, 2, size=n) * 4).astype(wdt)
        assert_close(ember.bincount(e, ember.tensor(w), minlength), torch.bincount(t, torch.tensor(w), minlength))
    u8 = a.astype(np.uint8)
    same(ember.bincount(ember.tensor(u8)), torch.bincount(torch.tensor(u8)))


def test_bincount_errors():
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        ember.bincount(ember.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        ember.bincount(ember.tensor([[1, 2]]))
    with pytest.raises(NotImplementedError, match="\"bincount_cpu\" not implemented for 'Float'"):
        ember.bincount(ember.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length as input"):
        ember.bincount(ember.tensor([1, 2]), ember.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        ember.bincount(ember.tensor([1, 2]), minlength=-1)


# ---------------------------------------------------------------------- unique / unique_consecutive
def _flags():
    return st.tuples(st.booleans(), st.booleans())


@needs_torch
@SET
@given(shape=st.lists(st.integers(0, 4), max_size=3).map(tuple), flags=_flags(), srt=st.booleans(),
       kind=st.sampled_from(["float", "int", "bool"]))
def test_unique(shape, flags, srt, kind):
    inv, cnt = flags
    a = {"float": floats(shape, ties=True, nan=0.15), "int": rng().integers(-3, 4, size=shape),
         "bool": rng().random(size=shape) < 0.5}[kind]
    e, t = both(a)
    re_ = ember.unique(e, sorted=srt, return_inverse=inv, return_counts=cnt)
    rt = torch.unique(t, sorted=True, return_inverse=inv, return_counts=cnt)   # torch's CPU order is sorted
    assert isinstance(re_, tuple) == isinstance(rt, tuple)
    if inv:
        # every NaN is its own value; which NaN slot each one gets is PyTorch's (unstable) sort's choice
        nan = np.isnan(a) if kind == "float" else np.zeros(a.shape, bool)
        ie, it = re_[1].numpy(), rt[1].numpy()
        np.testing.assert_array_equal(ie[~nan], it[~nan])
        np.testing.assert_array_equal(np.sort(ie[nan]), np.sort(it[nan]))
        re_, rt = re_[:1] + re_[2:], rt[:1] + rt[2:]
    same(re_, rt)
    same(e.unique(return_counts=cnt), t.unique(return_counts=cnt))
    re_ = ember.unique_consecutive(e, return_inverse=inv, return_counts=cnt)
    rt = torch.unique_consecutive(t, return_inverse=inv, return_counts=cnt)
    assert isinstance(re_, tuple) == isinstance(rt, tuple)
    same(re_, rt)
    same(e.unique_consecutive(return_inverse=True), t.unique_consecutive(return_inverse=True))


@needs_torch
def test_unique_scalar_and_dim():
    x = np.float32(rng().uniform(-1, 1))
    same(ember.unique(ember.tensor(x), return_inverse=True, return_counts=True),
         torch.unique(torch.tensor(x), return_inverse=True, return_counts=True))
    same(ember.unique_consecutive(ember.tensor(x), return_inverse=True),
         torch.unique_consecutive(torch.tensor(x), return_inverse=True))
    for fn in (ember.unique, ember.unique_consecutive):
        with pytest.raises(NotImplementedError, match=r"dim=0 is not supported"):
            fn(ember.randn(3, 2), dim=0)


def test_data_dependent_ops_are_nondifferentiable_and_extern():
    from ember.ops.registry import OPS
    from ember.prims.coverage import EXTERN
    for name in ("bincount", "unique", "unique_consecutive"):
        assert {"data_dependent", "nondifferentiable"} <= OPS[name].tags
        assert name in EXTERN
    x = ember.randn(5, requires_grad=True)
    assert not ember.unique(x).requires_grad
    assert not ember.histc(x, 3).requires_grad


# ---------------------------------------------------------------------- compiled composites
def test_compiled_matches_eager():
    ember.dynamo.reset()

    def f(x, s, v):
        m = ember.median(x, 1)
        c = ember.cummin(x, 0)
        k = ember.kthvalue(x, 2, -1, keepdim=True)
        return (ember.searchsorted(s, v, right=True), ember.bucketize(v, s), ember.isin(v, s),
                ember.count_nonzero(x > 0, 1), m.values, m.indices, ember.nanmedian(x), c.values, c.indices,
                ember.cummax(x, 1).indices, ember.logcumsumexp(x, 1), k.values, k.indices, ember.histc(x, 4))

    cf = ember.compile(f, backend="inductor")
    for _ in range(2):
        x = ember.tensor(floats((4, 5)))
        s = ember.sort(ember.tensor(floats((6,), ties=True)))[0]
        v = ember.tensor(floats((3,), ties=True))
        for got, want in zip(cf(x, s, v), f(x, s, v)):
            assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_fake_tensors_get_shapes_from_composites():
    from ember.fx.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        x = mode.from_tensor(ember.randn(3, 4))
        v, i = ember.median(x, 1, keepdim=True)
        assert tuple(v.shape) == (3, 1) and i.dtype is ember.int64
        assert tuple(ember.searchsorted(ember.randn(5), x, out_int32=True).shape) == (3, 4)
        assert tuple(ember.cummax(x, 0).indices.shape) == (3, 4)


@needs_torch
@pytest.mark.parametrize("right", [False, True])
def test_large_eager_searchsorted_and_isin_search_instead_of_comparing_all_pairs(right):
    """Above 65536 (value, boundary) pairs an eager call searches (numpy) instead of building the
    all-pairs comparison (1e6 values x 1e3 boundaries would be 1 GB of booleans): the same
    answers, NaN values included, for 1-D and batched sequences and for isin."""
    g = np.random.default_rng(11)
    seq = np.sort(g.standard_normal(1000)).astype(np.float32)
    v = g.standard_normal((300, 400)).astype(np.float32)
    v[0, :7] = np.nan
    v[1, :5] = seq[:5]                                   # ties with boundaries
    got = ember.searchsorted(ember.tensor(seq), ember.tensor(v), right=right)
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(v), right=right)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype is ember.int64
    seq2 = np.sort(g.standard_normal((3, 60)), -1)
    v2 = g.standard_normal((3, 2000))
    got = ember.searchsorted(ember.tensor(seq2), ember.tensor(v2), right=right, out_int32=True)
    want = torch.searchsorted(torch.tensor(seq2), torch.tensor(v2), right=right, out_int32=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype is ember.int32
    e, t = g.integers(0, 3000, (200, 400)), g.integers(0, 3000, 900)
    got = ember.isin(ember.tensor(e), ember.tensor(t), invert=right)
    np.testing.assert_array_equal(got.numpy(), torch.isin(torch.tensor(e), torch.tensor(t), invert=right).numpy())
