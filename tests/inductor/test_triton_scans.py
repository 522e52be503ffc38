"""Scans (cumsum/cumprod, the prims' only scans) and split reductions in Triton,
under the interpreter against the eager prims on random inputs.

Scans: persistent (whole row in one block, one ``tl.cumsum``/``tl.cumprod``) for
rows up to ``PERSISTENT_RNUMEL_MAX`` and looped (chunks in order, carrying the
running value) for longer or symbolic rows; scan dims first/middle/last, odd
sizes, strided inputs, float32/float64/float16, wrapping integers.

Split reductions: a reduction with few outputs and long rows becomes a partials
kernel plus a second pass; the thresholds are lowered here so the interpreter
can run small examples, and the default heuristic is checked on its own."""
import numpy as np
import pytest

from ._triton import compile_interp, import_triton_interpreted, run_compiled

import_triton_interpreted()

import ember  # noqa: E402
import ember.prims as P  # noqa: E402
from ember.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from ember.inductor.codegen import triton as tg  # noqa: E402
from ember.inductor.codegen.triton_wrapper import compile_graph_triton  # noqa: E402
from ember.tensor import _make  # noqa: E402

from ._helpers import RNG, assert_same, rand, randint  # noqa: E402


@pytest.fixture(params=["persistent", "looped"])
def scan_kind(request, monkeypatch):
    if request.param == "looped":
        monkeypatch.setattr(tg, "PERSISTENT_RNUMEL_MAX", 0)
    return request.param


def _kinds(cg):
    return {s.kind for s in cg.specs.values()}


def _check(got, want, dtype):
    tol = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12),
           np.float16: dict(rtol=2e-3, atol=2e-3)}.get(dtype, {})
    for i, (g, w) in enumerate(zip(got, want)):
        try:
            assert_same(g, w, **tol)
        except AssertionError as e:
            raise AssertionError(f"output {i}: {e}") from None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_scans_every_dim(scan_kind, dtype):
    # cumprod of values near 1 stays finite over 37 steps; odd sizes throughout
    x = rand(5, 37, 3, dtype=dtype, lo=0.6, hi=1.4)
    y = rand(7, 29, dtype=dtype)

    def fn(x, y):
        return (P.cumsum(x, 0), P.cumsum(x, 1), P.cumsum(x, 2), P.cumprod(x, 0), P.cumprod(x, 1),
                P.cumprod(x, 2), P.cumsum(P.exp(y), 1), P.cumsum(y, 0))

    cg, got, want = compile_interp(fn, x, y)
    assert _kinds(cg) == {scan_kind}
    _check(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_int_scans_wrap_like_the_prim(scan_kind, dtype):
    # int8 sums over 45 elements and cumprods of values up to 9 overflow: both wrap
    a = randint(6, 45, dtype=dtype, lo=-9, hi=10)

    def fn(a):
        return P.cumsum(a, 1), P.cumprod(a, 1), P.cumsum(a, 0), P.cumprod(P.remainder(a, 3), 0)

    cg, got, want = compile_interp(fn, a)
    _check(got, want, dtype)
    if dtype == np.int8:
        assert np.abs(np.cumsum(a.numpy().astype(np.int64), 1)).max() > 127 or \
            np.abs(np.cumprod(a.numpy().astype(np.int64), 1)).max() > 127


def test_half_scan_accumulates_in_float32(scan_kind):
    x = rand(4, 300, dtype=np.float16, lo=-1, hi=1)
    cg, got, want = compile_interp(lambda x: (P.cumsum(x, 1),), x)
    _check(got, want, np.float16)


def test_long_rows_loop_with_a_carry():
    """Rows longer than a persistent block: the interpreter's RBLOCK is 16, so a row
    of 1500 is 94 chunks and every chunk after the first starts from the carry."""
    x = rand(3, 1500, dtype=np.float64, lo=-1, hi=1)
    p = rand(2, 1500, dtype=np.float64, lo=0.995, hi=1.005)
    cg, got, want = compile_interp(lambda x, p: (P.cumsum(x, 1), P.cumprod(p, 1), P.cumsum(x, 0)), x, p)
    kinds = {s.name: s.kind for s in cg.specs.values()}
    assert sorted(kinds.values()) == ["looped", "looped", "persistent"]
    _check(got, want, np.float64)


def test_strided_and_broadcast_inputs(scan_kind):
    base = rand(40, 9)
    xt = _make(base.numpy().T)                       # transposed (non-contiguous)
    xs = _make(rand(9, 80).numpy()[:, ::2])          # a step-2 slice
    row = rand(40)

    def fn(xt, xs, row):
        b = P.broadcast_in_dim(row, [9, 40], [1])    # the same row for every x: loads over r only
        return P.cumsum(xt, 1), P.cumprod(P.add(P.mul(xs, 0.1), 1.0), 0), P.cumsum(P.add(xt, b), 1)

    cg, got, want = compile_interp(fn, xt, xs, row)
    _check(got, want, np.float32)


def test_scan_fused_with_producer_and_consumer():
    """The scan reads its (inlined) pointwise producer directly; a consumer is a
    kernel of its own reading the scan's buffer."""
    x = rand(6, 50)
    cg, got, want = compile_interp(lambda x: P.mul(P.cumsum(P.exp(P.neg(x)), 1), 2.0), x)
    assert cg.n_kernels == 2
    _check(got, want, np.float32)


def test_scan_symbolic_sizes():
    def fn(x):
        return P.cumsum(x, 1), P.cumprod(P.add(P.mul(x, 0.01), 1.0), 0)

    x = rand(6, 70, dtype=np.float64)
    cg, got, want = compile_interp(fn, x, dynamic=True)
    assert _kinds(cg) == {"looped"}   # a symbolic row length cannot be persistent
    _check(got, want, np.float64)
    gm = make_fx(fn)(x)
    for shape in ((3, 131), (11, 2)):
        a = rand(*shape, dtype=np.float64)
        _check(run_compiled(cg, a), [t.numpy() for t in gm(a)], np.float64)


def test_decomposed_cumsum_ops():
    """ember.cumsum / cumprod and cumsum's backward (a reversed cumsum), decomposed to prims."""
    x = rand(5, 33)
    w = rand(5, 33)

    def fn(x, w):
        xg = x.detach().requires_grad_()
        y = ember.cumsum(xg, 1)
        g, = ember.autograd.grad((y * w).sum(), [xg])
        return y.detach(), ember.cumprod(x, 0), ember.cumsum(x, -1, dtype=ember.float64), g

    cg, got, want = compile_interp(fn, x, w, decompose=True)
    _check([got[i] for i in (0, 1, 3)], [want[i] for i in (0, 1, 3)], np.float32)
    _check(got[2:3], want[2:3], np.float64)
    expect = np.flip(np.cumsum(np.flip(w.numpy(), 1), 1), 1)
    np.testing.assert_allclose(got[3], expect, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- split reductions
@pytest.fixture
def small_splits(monkeypatch):
    monkeypatch.setattr(tg, "SPLIT_MIN_RNUMEL", 1000)
    monkeypatch.setattr(tg, "SPLIT_MIN_CHUNK", 100)


def _split_groups(cg):
    return [s.name for s in cg.specs.values() if s.name.endswith("_split")]


def _n_partials(cg):
    return sum(len(s.scratch) for s in cg.specs.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_reductions_match(small_splits, dtype):
    x = rand(3, 50, 41, dtype=dtype, lo=0.5, hi=1.5)
    nanx = x.numpy().copy()
    nanx[1, 7, 3] = np.nan                            # NaN in one chunk propagates through the partials
    xn = _make(nanx)

    def fn(x, xn):
        s = P.sum(x, [1, 2])
        return (P.div(s, 2050.0),                     # a sum with a per-output epilogue (a mean)
                P.sum(x, [0, 1, 2]), P.amax(x, [0, 1]), P.amin(x, [0, 2]),
                P.prod(P.add(P.div(P.sub(x, 1.0), 50.0), 1.0), [0, 1, 2]),
                P.amax(xn, [0, 1, 2]), P.amin(xn, [1, 2]), P.sum(xn, [0, 1, 2]))

    cg, got, want = compile_interp(fn, x, xn)
    # split: the six reductions of >= 1000 elements per output (siblings over the same
    # rows share one partials kernel); amax over [0, 1] / amin over [0, 2] (41 / 50
    # outputs of 150 / 123 elements) are not
    assert _n_partials(cg) == 6
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, **tol), i


def test_split_reductions_ints_bools_half(small_splits):
    xi = randint(7, 900, dtype=np.int32)
    xh = rand(2000, dtype=np.float16)
    b = _make(RNG.random((2, 3000)) < 0.001)

    def fn(xi, xh, b):
        return (P.sum(xi, [0, 1]), P.amin(xi, [0, 1]), P.any(P.gt(xi, 48), [0, 1]), P.all(P.gt(xi, -50), [0, 1]),
                P.sum(xh, [0]), P.any(b, [1]), P.all(P.logical_not(b), [1]), P.sum(P.mul(xi, 1000000), [0, 1]))

    cg, got, want = compile_interp(fn, xi, xh, b)
    assert _n_partials(cg) == 8
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-3 if g.dtype == np.float16 else 0)


def test_split_heuristic():
    """Defaults: few outputs and long rows split; many outputs, short rows,
    whole-row dependencies and symbolic sizes do not (they stay single looped kernels)."""
    def specs(fn, *inputs, dynamic=False):
        gm = make_fx(fn)(*inputs)
        return compile_graph_triton(gm, list(inputs), mode="source", dynamic=dynamic).specs

    big = rand(1 << 18)
    sp = specs(lambda x: P.sum(x, [0]), big)
    split = [s for s in sp.values() if s.name.endswith("_split")]
    assert len(split) == 1 and split[0].kind == "looped"
    (nm, numel, dt, _), = split[0].scratch
    assert numel == 128 and dt is ember.float32      # min(1024, 2**18 // 2048) partials
    assert {s.kind for s in sp.values()} == {"looped", "persistent"}
    # many outputs: the rows already give enough programs
    assert not any(n.endswith("_split") for n in specs(lambda x: P.sum(x, [1]), rand(512, 4096)))
    # a short row
    assert not any(n.endswith("_split") for n in specs(lambda x: P.sum(x, [0]), rand(5000)))
    # argmax splits too (value + index partials), with var in the same group
    am = specs(lambda x: (P.argmax(x, 0), P.var(x, [0], 1)), big)
    assert sum(len(s.scratch) for s in am.values()) == 4
    # a row stage reading a whole-row result of the group (softmax over a long row)
    assert not any(n.endswith("_split") for n in specs(
        lambda x: P.sum(P.exp(P.sub(x, P.broadcast_in_dim(P.amax(x, [0]), [1 << 18], []))), [0]), big))
    # BatchNorm's statistics over (N, H, W) for 32 channels: mean and var split
    bn = specs(lambda x: (P.sum(x, [0, 2, 3]), P.var(x, [0, 2, 3], 0)), rand(32, 32, 32, 32))
    assert sum(len(s.scratch) for s in bn.values()) == 3  # sum, var's mean and M2
    # symbolic sizes
    assert not any(n.endswith("_split") for n in specs(lambda x: P.sum(x, [0]), big, dynamic=True))
    assert tg.split_factor is not None


def test_split_reduction_runs_at_default_thresholds():
    """One real split at the default thresholds (2**16 elements -> 32 partials of
    2048), run under the interpreter."""
    x = rand(1 << 16, dtype=np.float64)
    cg, got, want = compile_interp(lambda x: (P.sum(x, [0]), P.amax(x, [0])), x)
    assert len(_split_groups(cg)) == 1 and _n_partials(cg) == 2  # siblings: one partials kernel
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_var_and_row_stages(small_splits, dtype):
    """var splits into per-chunk (mean, M2) partials merged in the second pass (odd
    sizes: the last chunk is short, corrections 0/1, a large mean); BatchNorm's
    statistics group (sum, per-channel mean, var, rstd); a group whose row-wise
    pointwise stage is written in the first pass while its rows are reduced."""
    x = rand(3, 41, 37, dtype=dtype, lo=-1.0, hi=1.0)
    off = _make((x.numpy() + 100.0).astype(dtype))           # stability: var of values near 100
    w = rand(3, dtype=dtype)

    def fn(x, off, w):
        n = 41.0 * 37.0
        mean = P.div(P.sum(x, [1, 2]), n)
        var = P.var(x, [1, 2], 0)
        rstd = P.rsqrt(P.add(var, 1e-5))
        y = P.mul(P.broadcast_in_dim(w, [3, 41, 37], [0]), P.exp(x))   # written in pass 1 ...
        return (mean, var, rstd, P.var(off, [0, 1, 2], 1), P.var(x, [1, 2], 1),
                y, P.sum(y, [1, 2]))                                      # ... and reduced there

    cg, got, want = compile_interp(fn, x, off, w)
    # one split group over x's rows (sum, two vars, the pointwise y and its sum: 6 partials
    # buffers, var has two) and one for off's full var (2)
    assert len(_split_groups(cg)) == 2 and _n_partials(cg) == 8
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    for i, (g, w_) in enumerate(zip(got, want)):
        try:
            assert_same(g, w_, **tol)
        except AssertionError as e:
            raise AssertionError(f"output {i}: {e}") from None


def test_split_argmax_argmin(small_splits):
    """argmax/argmin split into (value, global index) partials: the first occurrence
    wins across chunks (ties planted in different chunks), NaN counts as the extreme,
    integer and float rows."""
    a = RNG.uniform(-1, 1, (3, 2000)).astype(np.float32)
    a[0, [150, 1700]] = 5.0                     # a tie across chunks: the first one wins
    a[1, [1999, 40]] = -7.0
    a[2, 900] = np.nan
    ints = randint(4, 1500, dtype=np.int32, lo=-3, hi=3)   # many ties
    x, xi = _make(a), ints

    def fn(x, xi):
        return P.argmax(x, 1), P.argmin(x, 1), P.argmax(xi, 1), P.argmin(xi, 1), P.argmax(P.neg(x), 0)

    cg, got, want = compile_interp(fn, x, xi)
    assert _n_partials(cg) >= 8
    for g, w in zip(got, want):
        assert_same(g, w)
