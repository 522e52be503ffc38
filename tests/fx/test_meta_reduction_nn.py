"""Meta functions of the reduction, linear-algebra and nn kernels against their eager kernels.

Every kernel op defined in ``ember/ops/reduction.py``, ``linalg.py`` and
``nn_ops.py`` is run eagerly and under fake and symbolic-fake tensors
(``check_meta``) on random inputs in several memory layouts (contiguous,
permuted, sliced, expanded), so the metas must reproduce numpy's output
layouts as well as shapes and dtypes. Composites over these kernels are
checked to run under fake tensors too.
"""
from __future__ import annotations

import contextlib
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.nn.functional as F
from ember.fx.experimental.symbolic_shapes import ShapeEnv
from ember.fx.fake_tensor import DataDependentOutputError, FakeTensorMode, is_fake
from ember.ops import registry
from tests.fx.meta_check import check_meta

rng = np.random.default_rng(1234)
MINE = ("ember.ops.reduction", "ember.ops.linalg", "ember.ops.nn_ops")


@contextlib.contextmanager
def others_metas():
    """For code that also calls ops of other modules (``.to``, pointwise, views): a missing
    meta there skips the test instead of failing it; a missing meta of ours still fails."""
    from ember.fx.fake_tensor import UnsupportedFakeOperator
    try:
        yield
    except UnsupportedFakeOperator as e:
        if registry.OPS[e.op].kernel.__module__ in MINE:
            raise
        pytest.skip(f"needs a meta for {e.op} (another module)")


def check_ext(fn, *args, **kwargs):
    with others_metas():
        return check_meta(fn, *args, **kwargs)


def _vals(shape, dtype, lo=-3.0, hi=3.0):
    """Random nonzero data."""
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        v = rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)
        return v.astype(dtype)
    v = rng.uniform(0.1, hi, shape) * rng.choice([-1.0, 1.0], shape)
    return v.astype(dtype)


def T(shape, dtype=np.float32, **kw):
    return ember.tensor(_vals(tuple(shape), dtype, **kw))


def layouts(shape, dtype=np.float32):
    """``(name, tensor)`` of ``shape`` in several layouts: contiguous, permuted, sliced, expanded."""
    shape = tuple(shape)
    nd = len(shape)
    out = [("contig", T(shape, dtype))]
    if nd >= 2:
        perm = list(range(nd))[::-1]
        base = T(tuple(shape[p] for p in perm), dtype)
        out.append(("reversed", base.permute(*[int(i) for i in np.argsort(perm)])))
        perm2 = [nd - 1] + list(range(nd - 1))
        base = T(tuple(shape[p] for p in perm2), dtype)
        out.append(("last-outer", base.permute(*[int(i) for i in np.argsort(perm2)])))
        big = T(shape[:-1] + (shape[-1] * 2,), dtype)
        out.append(("sliced-last", big[..., ::2]))
        out.append(("sliced-last-T", T((shape[-1] * 2,) + shape[:-1], dtype)[::2].permute(
            *list(range(1, nd)), 0)))
    if nd >= 1:
        out.append(("sliced-first", T((shape[0] * 2,) + shape[1:], dtype)[::2]))
        out.append(("expanded", T((1,) + shape[1:], dtype).expand(*shape)))
    return out


def test_layout_helper_gives_distinct_layouts():
    strides = {tuple(t.stride()) for _, t in layouts((3, 4, 5))}
    assert len(strides) >= 6


# ====================================================================== reductions
SHAPES = [(3, 4, 5), (2, 6), (7,), ()]
DIMS = {3: [None, 0, -1, (0, 2), [1, -1], (), 1], 2: [None, 0, -1, (0, 1)], 1: [None, 0, -1], 0: [None, 0, -1]}


def _each_layout(shapes=SHAPES, dtype=np.float32):
    for shape in shapes:
        for name, t in layouts(shape, dtype):
            yield shape, name, t


@pytest.mark.parametrize("fn", ["sum", "mean", "amax", "amin", "all", "any"])
def test_dim_list_reductions(fn):
    f = getattr(ember, fn)
    for shape, name, t in _each_layout():
        for dim in DIMS[len(shape)]:
            if fn in ("amax", "amin") and dim is None:
                continue
            for keepdim in (False, True):
                if dim is None and fn in ("sum", "mean", "all", "any"):
                    check_meta(lambda x: f(x), t) if not keepdim else None
                    continue
                check_meta(lambda x: f(x, dim, keepdim=keepdim), t)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.float16, np.float64, np.uint8])
def test_sum_prod_dtypes(dtype):
    for shape, name, t in _each_layout([(3, 4, 5), (4,)], dtype):
        check_meta(lambda x: x.sum(), t)
        check_meta(lambda x: x.sum(0, keepdim=True), t)
        check_meta(lambda x: x.sum(-1, dtype=ember.float64), t)
        check_meta(lambda x: x.prod(), t)
        check_meta(lambda x: x.prod(-1), t)
        check_meta(lambda x: x.prod(0, keepdim=True, dtype=ember.float32), t)
        check_meta(lambda x: x.cumsum(0), t)
        check_meta(lambda x: x.cumsum(-1, dtype=ember.float64), t)
        check_meta(lambda x: x.cumprod(0), t)
        check_meta(lambda x: ember.all(x, 0), t)
        check_meta(lambda x: ember.any(x, -1, keepdim=True), t)
        if dtype != np.bool_:
            check_meta(lambda x: ember.amax(x, 0), t)
            check_meta(lambda x: x.argmax(), t)
            check_meta(lambda x: x.argmin(0, keepdim=True), t)
            check_meta(lambda x: x.max(-1), t)
            check_meta(lambda x: ember.sort(x, 0, descending=True), t)
            check_meta(lambda x: ember.topk(x, 2, 0), t)
            check_meta(lambda x: ember.argsort(x, -1), t)
        if dtype in (np.float16, np.float64):
            check_meta(lambda x: x.mean(0, dtype=ember.float32), t)
            check_meta(lambda x: x.var(0), t)
            check_meta(lambda x: ember.logsumexp(x, [0]), t)
            check_meta(lambda x: ember.softmax(x, 0), t)
            check_meta(lambda x: ember.norm(x, 3, dim=0), t)
        else:
            check_meta(lambda x: x.mean(0, dtype=ember.float64), t)
            check_meta(lambda x: ember.logsumexp(x, [0]), t)


def _raises_same(fn, *args):
    """The eager error and the fake/symbolic errors: same type, and the same message with fake sizes."""
    with pytest.raises(Exception) as eager:
        fn(*args)
    for sym in (False, True):
        mode = FakeTensorMode(shape_env=ShapeEnv() if sym else None)
        fargs = [mode.from_tensor(a, symbolic=sym) if isinstance(a, ember.Tensor) else a for a in args]
        with pytest.raises(Exception) as fake:
            with mode:
                fn(*fargs)
        assert type(fake.value) is type(eager.value), (fake.value, eager.value)
        if not sym:     # symbolic sizes print as their symbols
            assert str(fake.value) == str(eager.value)
    return eager.value


def test_reduction_errors_match_kernel():
    i = T((3, 4), np.int64)
    b = T((3, 4), np.bool_)
    e = ember.zeros(0, 3)
    _raises_same(lambda x: x.mean(), i)
    _raises_same(lambda x: x.mean(0), b)
    _raises_same(lambda x: x.var(), i)
    _raises_same(lambda x: ember.std_mean(x), i)
    _raises_same(lambda x: ember.norm(x.to(ember.int64)), i)
    _raises_same(lambda x: x.argmax(), b)
    _raises_same(lambda x: x.argmax(), e)
    _raises_same(lambda x: x.argmin(0), e)
    _raises_same(lambda x: x.max(), e)
    _raises_same(lambda x: x.max(0), e)
    _raises_same(lambda x: ember.amax(x), e)
    _raises_same(lambda x: ember.amin(x, 0), e)
    _raises_same(lambda x: x.sum(3), i)
    _raises_same(lambda x: x.sum((0, -2)), i)
    _raises_same(lambda x: ember.softmax(x, 0), i)
    _raises_same(lambda x: ember.log_softmax(x, -1), i)
    _raises_same(lambda x: ember.topk(x, 5, 0), T((3, 4)))
    _raises_same(lambda x: ember.topk(x, 1), b)
    _raises_same(lambda x: ember.norm(x, float("inf"), dim=0), e)
    _raises_same(lambda x: x.cumsum(2), i)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("shape", SHAPES)
def test_var_std_norm_logsumexp_softmax(shape):
    for name, t in layouts(shape):
        for dim in DIMS[len(shape)]:
            for keepdim in (False, True):
                for corr in (None, 0, 2):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        check_meta(lambda x: ember.var(x, dim, correction=corr, keepdim=keepdim), t)
                        check_meta(lambda x: ember.std_mean(x, dim, keepdim=keepdim, correction=corr), t)
                check_meta(lambda x: ember.std(x, dim, keepdim=keepdim), t)
                check_meta(lambda x: ember.var_mean(x, dim, keepdim=keepdim), t)
                for p in (2, 1, 0, 3.5, float("inf"), -float("inf"), "fro"):
                    if p == "fro" and dim is not None and len(np.atleast_1d(dim)) > 2:
                        continue
                    check_meta(lambda x: ember.norm(x, p, dim, keepdim), t)
                if dim is not None:
                    check_meta(lambda x: ember.logsumexp(x, dim, keepdim), t)
            if isinstance(dim, int):
                check_meta(lambda x: ember.softmax(x, dim), t)
                check_meta(lambda x: ember.log_softmax(x, dim), t)
                check_meta(lambda x: ember.cumsum(x, dim), t)
                check_meta(lambda x: ember.cumprod(x, dim), t)


def test_softmax_dtype_argument():
    for name, t in layouts((3, 4)):
        check_ext(lambda x: ember.softmax(x, 1, dtype=ember.float64), t)
        check_ext(lambda x: ember.log_softmax(x.to(ember.float16), 0), t)


def test_var_warning_under_fake():
    t = T((1, 3))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        check_meta(lambda x: ember.var(x, 0), t)


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 6), (7,), ()])
def test_values_indices_ops(shape):
    for name, t in layouts(shape):
        for dim in ([0, -1, len(shape) - 1] if shape else [0, -1]):
            for keepdim in (False, True):
                check_meta(lambda x: ember.max(x, dim, keepdim), t)
                check_meta(lambda x: ember.min(x, dim, keepdim=keepdim), t)
                check_meta(lambda x: ember.argmax(x, dim, keepdim), t)
                check_meta(lambda x: ember.argmin(x, dim, keepdim=keepdim), t)
            for desc in (False, True):
                check_meta(lambda x: ember.sort(x, dim, descending=desc), t)
                check_meta(lambda x: ember.argsort(x, dim, descending=desc), t)
                n = shape[dim] if shape else 1
                for k in sorted({0, 1, n}):
                    check_meta(lambda x: ember.topk(x, k, dim, largest=desc), t)
        for keepdim in (False, True):
            check_meta(lambda x: ember.argmax(x, keepdim=keepdim), t)
        check_meta(lambda x: ember.max(x), t)
        check_meta(lambda x: ember.min(x), t)


def test_empty_reductions():
    for t in (ember.zeros(0, 3), ember.zeros(3, 0), ember.zeros(2, 0, 3).permute(2, 0, 1)):
        check_meta(lambda x: x.sum(0), t)
        check_meta(lambda x: x.mean(-1), t)
        check_meta(lambda x: ember.logsumexp(x, [0]), t)
        check_meta(lambda x: ember.logsumexp(x, [1], keepdim=True), t)
        check_meta(lambda x: ember.softmax(x, 0), t)
        check_meta(lambda x: x.cumsum(0), t)
        check_meta(lambda x: ember.norm(x, 2, 0), t)
        check_meta(lambda x: x.prod(1), t)


def test_gradient_helpers_of_reductions():
    """The private gather/scatter/reverse-cumsum records (backward of max/sort/cumsum) under fake."""
    from ember.ops import reduction as R
    for shape, name, t in _each_layout([(3, 4, 5), (6,)]):
        idx = ember.tensor(np.argsort(rng.random(tuple(t.shape)), axis=0)[:2])
        check_meta(lambda x, i: R._reduction_gather.binding(x, i, 0), t, idx)
        check_meta(lambda g, i: R._reduction_scatter.binding(g, i, 0, list(t.shape)), T(idx.shape), idx)
        check_meta(lambda x: R._reverse_cumsum.binding(x, -1), t)
    s = T(())
    check_meta(lambda x: R._reverse_cumsum.binding(x, 0), s)
    check_meta(lambda x: R._reduction_gather.binding(x, ember.tensor(0), 0), s)
    check_meta(lambda x: R._reduction_scatter.binding(x, ember.tensor(0), 0, []), s)


def test_reduction_backward_under_fake():
    """Gradients of reductions (which run these metas again) trace under fake tensors."""
    for fn in (lambda x: x.max(1).values.sum(), lambda x: ember.sort(x, 0).values.sum(),
               lambda x: x.cumprod(1).sum(), lambda x: ember.topk(x, 2).values.sum(),
               lambda x: ember.std(x, 0).sum(), lambda x: ember.softmax(x, 1).sum(),
               lambda x: ember.norm(x, 3)):
        x = T((3, 4), np.float64)
        with FakeTensorMode() as mode, others_metas():
            fx = mode.from_tensor(x).requires_grad_(True)
            (g,) = ember.autograd.grad(fn(fx), [fx])
        assert is_fake(g) and tuple(g.shape) == (3, 4) and g.dtype == ember.float64


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_reductions_hypothesis(shape, data):
    shape = tuple(shape)
    nd = len(shape)
    dims = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda d: d % nd, max_size=nd))
    keepdim = data.draw(st.booleans())
    layout = data.draw(st.integers(0, 10))
    ls = layouts(shape, data.draw(st.sampled_from([np.float32, np.float64, np.int64, np.float16])))
    t = ls[layout % len(ls)][1]
    check_meta(lambda x: x.sum(dims, keepdim=keepdim), t)
    check_meta(lambda x: ember.amax(x, dims, keepdim=keepdim), t)
    check_meta(lambda x: ember.any(x, dims, keepdim=keepdim), t)
    if t.dtype.is_floating_point:
        check_meta(lambda x: x.mean(dims, keepdim=keepdim), t)
        check_meta(lambda x: ember.norm(x, 2, dims if dims else None, keepdim), t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_meta(lambda x: ember.var_mean(x, dims, keepdim=keepdim), t)
    d = dims[0] if dims else -1
    check_meta(lambda x: x.cumsum(d), t)
    check_meta(lambda x: ember.max(x, d, keepdim), t)
    check_meta(lambda x: ember.sort(x, d), t)


# ====================================================================== linear algebra
def _mats(shape, dtype=np.float32):
    return [t for _, t in layouts(shape, dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_mm_bmm_mv_dot(dtype):
    for a, b in itertools.product(_mats((3, 4), dtype), _mats((4, 5), dtype)):
        check_meta(ember.mm, a, b)
        for c in _mats((3, 5), dtype)[:3] + [T((5,), dtype), T((1, 5), dtype), T((), dtype)]:
            check_meta(lambda s, x, y: ember.addmm(s, x, y, beta=2, alpha=0.5 if dtype != np.int64 else 3),
                       c, a, b)
        check_meta(ember.mv, a, _mats((4,), dtype)[-1])
    for a, b in itertools.product(_mats((2, 3, 4), dtype), _mats((2, 4, 5), dtype)):
        check_meta(ember.bmm, a, b)
        check_meta(lambda s, x, y: ember.baddbmm(s, x, y, alpha=2), T((3, 5), dtype), a, b)
    for a in _mats((6,), dtype):
        check_meta(ember.dot, a, T((6,), dtype))
        check_meta(ember.mv, T((2, 6), dtype).t().t(), a)


def test_linalg_errors_match_kernel():
    a, b = T((3, 4)), T((5, 6))
    _raises_same(ember.mm, a, b)
    _raises_same(ember.mm, T((3,)), b)
    _raises_same(ember.mm, a, T((4,)))
    _raises_same(ember.mm, a, T((4, 2), np.float64))
    _raises_same(ember.mm, T((3, 4), np.bool_), T((4, 2), np.bool_))
    _raises_same(ember.bmm, T((2, 3, 4)), T((2, 5, 4)))
    _raises_same(ember.bmm, T((2, 3, 4)), T((3, 4, 4)))
    _raises_same(ember.bmm, T((3, 4)), T((3, 4, 4)))
    _raises_same(ember.bmm, T((2, 3, 4), np.bool_), T((2, 4, 4), np.bool_))
    _raises_same(ember.bmm, T((2, 3, 4)), T((2, 4, 4), np.float64))
    _raises_same(ember.addmm, T((3, 2)), a, T((4, 5)))
    _raises_same(ember.addmm, T((3, 5), np.float64), a, T((4, 5)))
    _raises_same(ember.addmm, T((3, 5)), a, T((3, 5)))
    _raises_same(ember.baddbmm, T((2, 3, 7)), T((2, 3, 4)), T((2, 4, 5)))
    _raises_same(ember.mv, a, T((3,)))
    _raises_same(ember.mv, a, T((4, 1)))
    _raises_same(ember.dot, T((3,)), T((4,)))
    _raises_same(ember.dot, T((3,)), T((3,), np.float64))
    _raises_same(ember.dot, T((3, 1)), T((3,)))


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk->ki", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]), ("ij->", [(3, 4)]), ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]), ("ij,ij->ji", [(3, 4), (3, 4)]), ("...i,oij,...j->...o", [(2, 3), (5, 3, 4), (2, 4)]),
    ("ab,bc,cd->da", [(2, 3), (3, 4), (4, 5)]), ("ij,j", [(3, 4), (4,)]), ("i,i", [(5,), (5,)]),
    ("bi,bi->b", [(1, 4), (3, 4)]), ("ij,kj->ikj", [(3, 4), (2, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS)
def test_einsum(eq, shapes):
    for dtype in (np.float32, np.float64, np.int64):
        choices = [_mats(s, dtype)[:4] for s in shapes]
        for ops in itertools.islice(itertools.product(*choices), 24):
            check_ext(lambda *xs: ember.einsum(eq, *xs), *ops)
    check_ext(lambda x, y: ember.einsum(eq.split(",")[0].split("->")[0] + "->", x), T(shapes[0], np.float16),
              None)


def test_einsum_mixed_dtypes():
    from ember.ops import linalg as L
    check_meta(lambda a, b: L._einsum.binding("ij,jk->ik", [a, b]), T((3, 4), np.int32), T((4, 2)))
    check_meta(lambda a, b: L._einsum.binding("ij,->ij", [a, b]), T((3, 4), np.int64), T((), np.float64))


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
                                   ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,))])
def test_matmul_outer_linear_composites(sa, sb):
    """Composites over mm/bmm/mv/dot/addmm run under fake tensors with the eager metadata."""
    for a, b in itertools.islice(itertools.product(_mats(sa), _mats(sb)), 20):
        check_ext(ember.matmul, a, b)
    check_ext(ember.outer, T((3,)), T((4,)))
    check_ext(lambda x, w, b: F.linear(x, w, b), T((2, 3, 4)), T((5, 4)), T((5,)))
    check_ext(lambda x, w, b: F.linear(x, w, b), T((3, 4)), T((5, 4)), T((5,)))
    check_ext(lambda x, w: F.linear(x, w), T((3, 4)).t().t(), T((5, 4)))
    check_ext(lambda x, y, w, b: F.bilinear(x, y, w, b), T((2, 3)), T((2, 4)), T((5, 3, 4)), T((5,)))
