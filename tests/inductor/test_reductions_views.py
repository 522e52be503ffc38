"""Reductions over various dims (innermost, outer, several, all), views and
broadcasts as index rewrites, indexing, creation, externs and fallbacks."""
import logging
import re

import numpy as np
import pytest

import ember
import ember.prims as P
from ember.tensor import _make

from ._helpers import RNG, assert_same, compile_and_run, patched_config, rand, randint

DIMS = [(2,), (0,), (1,), (0, 2), (0, 1, 2)]


@pytest.fixture(scope="module")
def reduction_results():
    x = rand(6, 7, 33, dtype=np.float64)
    xf = rand(6, 7, 33, dtype=np.float32, lo=0.5, hi=1.5)
    xt = _make(rand(33, 7, 6, dtype=np.float32).numpy().transpose(2, 1, 0))   # non-contiguous input
    xn = x.numpy().copy()
    xn[2, 3, 5] = np.nan
    xnan = _make(xn)
    xi = randint(6, 7, 33, dtype=np.int32, lo=-5, hi=5)
    xb = _make(RNG.random((6, 7, 33)) < 0.1)

    def fn(x, xf, xt, xnan, xi, xb):
        out = {}
        for dims in DIMS:
            k = "_".join(map(str, dims))
            out[f"sum_{k}"] = P.sum(x, dims)
            out[f"prod_{k}"] = P.prod(xf, dims)
            out[f"amax_{k}"] = P.amax(x, dims)
            out[f"amin_{k}"] = P.amin(xt, dims)
            out[f"amaxnan_{k}"] = P.amax(xnan, dims)
            out[f"any_{k}"] = P.any(xb, dims)
            out[f"all_{k}"] = P.all(P.logical_not(xb), dims)
            out[f"isum_{k}"] = P.sum(xi, dims)
            out[f"imax_{k}"] = P.amax(xi, dims)
            out[f"var_{k}"] = P.var(x, dims, 1.0)
            out[f"varf_{k}"] = P.var(xt, dims, 0.0)
            out[f"sumt_{k}"] = P.sum(xt, dims)
        for d in range(3):
            out[f"argmax_{d}"] = P.argmax(x, d)
            out[f"argmin_{d}"] = P.argmin(xt, d)
            out[f"argmaxnan_{d}"] = P.argmax(xnan, d)
            out[f"iargmax_{d}"] = P.argmax(xi, d)    # ties: the first occurrence
        out["sum_none"] = P.sum(x, [])
        out["any_int"] = P.any(xi, [1])
        return out

    return compile_and_run(fn, x, xf, xt, xnan, xi, xb)


def test_reductions(reduction_results):
    cf, got, want = reduction_results
    assert len(got) == len(want) > 60
    for g, w in zip(got, want):
        # float32: eager accumulates up to 231 terms of magnitude <= 2 in float32 (strided
        # inputs: no pairwise sum), off by up to ~231 * 2 * 2**-24 = 3e-5 where a sum nearly
        # cancels; the compiled sum accumulates in double
        assert_same(g, w, rtol=1e-5 if g.dtype == np.float32 else 1e-12,
                    atol=3e-5 if g.dtype == np.float32 else 1e-6)


@pytest.mark.parametrize("n", [1, 5, 40000])
def test_full_reduction_parallel(n):
    """A reduction to a scalar runs its reduction loop in parallel (no outer loop)."""
    x = rand(n, dtype=np.float64)
    cf, got, want = compile_and_run(lambda x: (P.sum(x, [0]), P.var(x, [0], 1.0), P.amax(x, [0])), x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-10)


def test_views_and_broadcasts():
    x = rand(4, 6, 10, dtype=np.float32)
    y = rand(6, dtype=np.float32)
    s = rand(1, 6, 1, dtype=np.float32)

    def fn(x, y, s):
        out = {}
        out["bid"] = P.add(x, P.broadcast_in_dim(y, [4, 6, 10], [1]))
        out["bid1"] = P.mul(x, P.broadcast_in_dim(s, [4, 6, 10], [0, 1, 2]))
        out["perm"] = P.exp(P.permute(x, [2, 0, 1]))
        out["slice"] = P.slice(x, [1, 0, 2], [4, 6, 9], [2, 3, 2])
        out["squeeze"] = P.neg(P.squeeze(s, [0, 2]))
        out["expand"] = P.expand_dims(y, [0, 2])
        out["reshape"] = P.reshape(x, [24, 10])
        out["reshape2"] = P.reshape(x, [4, 3, 2, 5, 2])
        out["reshape_perm"] = P.reshape(P.permute(x, [1, 0, 2]), [6, 40])   # value semantics, not a view
        out["reshape_flat"] = P.reshape(P.permute(x, [2, 1, 0]), [240])
        out["flip"] = P.flip(x, [0, 2])
        out["cat0"] = P.cat([x, P.mul(x, 2.0)], 0)
        out["cat2"] = P.cat([x, P.slice(x, [0, 0, 0], [4, 6, 3])], 2)
        out["pad"] = P.pad(x, 0.5, [(1, 2, 0), (0, 0, 0), (-2, 3, 0)])
        out["pad_interior"] = P.pad(x, -1.0, [(0, 0, 1), (2, -1, 2), (0, 0, 0)])
        out["clone"] = P.clone(P.permute(x, [1, 0, 2]))
        out["as_strided"] = P.as_strided(x, [5, 7], [3, 11], 4)
        out["iota"] = P.iota(12, 3, 2, ember.int64)
        out["iota_f"] = P.iota(7, 0.5, 0.25, ember.float32)
        out["iota_i8"] = P.iota(5, -3, 70, ember.int8)                     # wraps
        out["full_conv"] = P.add(P.full([3], 3.7, ember.int32), P.full([3], 300, ember.int32))
        out["full_u8"] = P.full([2], -1, ember.uint8)
        out["full_f16"] = P.full([2], 1e10, ember.float16)                 # inf
        out["full"] = P.add(x, P.full([4, 6, 10], 2.0, ember.float32))
        return out

    cf, got, want = compile_and_run(fn, x, y, s)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)


def test_non_contiguous_inputs_and_variants():
    base = rand(20, 30, dtype=np.float32).numpy()
    xt = _make(base.T)                   # transposed
    xs = _make(base[::2, 1::3])          # strided slice
    xr = _make(base[::-1, :10])          # negative stride
    fn = lambda a, b, c: (P.exp(a), P.sum(b, [0]), P.mul(c, c))  # noqa: E731
    cf, got, want = compile_and_run(fn, xt, xs, xr)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-6, atol=1e-6)
    # the same graph called with contiguous inputs compiles a second variant
    out = cf(_make(np.ascontiguousarray(base.T)), _make(np.ascontiguousarray(base[::2, 1::3])),
             _make(np.ascontiguousarray(base[::-1, :10])))
    assert len(cf.variants) == 2
    for g, w in zip(out, want):
        assert_same(g.numpy(), w, rtol=2e-6, atol=1e-6)


def test_indexing():
    x = rand(7, 9, dtype=np.float32)
    idx = _make(RNG.integers(0, 7, size=(5, 9)).astype(np.int64))
    sel = _make(RNG.integers(0, 9, size=(4,)).astype(np.int64))
    ii = _make(RNG.integers(-7, 7, size=(6,)).astype(np.int64))      # negative: wrapped by index_put
    jj = _make(RNG.integers(0, 9, size=(6,)).astype(np.int64))
    vals = rand(6, dtype=np.float32)

    def fn(x, idx, sel, ii, jj, vals):
        return (P.gather(x, 0, idx), P.index_select(x, 1, sel), P.exp(P.index_select(x, 0, P.remainder(sel, 7))),
                P.scatter(x, 0, idx, P.mul(x, 2.0)), P.scatter_add(x, 0, idx, P.slice(x, [0, 0], [5, 9])),
                P.scatter(x, 1, P.slice(idx, [0, 0], [5, 7]), -3.0),
                P.index_put(x, [ii, jj], vals, False), P.index_put(x, [ii, jj], vals, True),
                P.index_put(x, [ii], P.slice(x, [0, 0], [1, 9]), True))

    cf, got, want = compile_and_run(fn, x, idx, sel, ii, jj, vals)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)
    assert cf.compiled.fallbacks == []


def test_out_of_range_index_raises_like_eager():
    x = rand(7, 9, dtype=np.float32)
    idx = _make(RNG.integers(0, 7, size=(5, 9)).astype(np.int64))
    fn = lambda x, idx: (P.gather(x, 0, idx), P.scatter_add(x, 0, idx, P.slice(x, [0, 0], [5, 9])))  # noqa: E731
    cf, got, want = compile_and_run(fn, x, idx)
    bad = _make(np.full((5, 9), 7, dtype=np.int64))
    with pytest.raises(IndexError):
        cf.gm(x, bad)
    with pytest.raises(IndexError, match="out of bounds"):
        cf(x, bad)
    # the flag is cleared: a good call afterwards works
    for g, w in zip(cf(x, idx), want):
        assert_same(g.numpy(), w, rtol=1e-6)


def test_philox_random_bit_exact():
    seed = ember.tensor(np.int64(987654321987))
    off = ember.tensor(np.int64(3))

    def fn(seed, off):
        return (P.philox_rand([5, 7], seed, off, ember.float32), P.philox_rand([9], seed, off, ember.float64),
                P.philox_randn([4, 5], seed, off, ember.float32), P.philox_randn([3, 3], seed, off, ember.float64),
                P.philox_rand([6], seed, off, ember.bfloat16))

    cf, got, want = compile_and_run(fn, seed, off)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert "ember_philox" in cf.compiled.source


def test_matmul_extern_with_epilogue():
    a = rand(16, 32, dtype=np.float32)
    w = rand(32, 24, dtype=np.float32)
    b = rand(24, dtype=np.float32)
    bb = rand(3, 8, 5, dtype=np.float64)
    cc = rand(3, 5, 4, dtype=np.float64)

    def fn(a, w, b, bb, cc):
        h = P.add(P.mm(a, w), P.broadcast_in_dim(b, [16, 24], [1]))
        g = P.mul(h, P.mul(P.add(P.erf(P.mul(h, 0.7071067811865476)), 1.0), 0.5))
        return g, P.bmm(bb, cc), P.mm(P.permute(w, [1, 0]), P.permute(a, [1, 0]))

    cf, got, want = compile_and_run(fn, a, w, b, bb, cc)
    for g, w_ in zip(got, want):
        assert_same(g, w_, rtol=1e-5, atol=1e-5)
    # gelu(x @ w + b): exactly one C++ kernel after the matmul
    src = cf.compiled.wrapper_src
    lines = [ln.strip() for ln in src.splitlines()]
    mm_line = next(i for i, ln in enumerate(lines) if "# mm" in ln)
    assert sum(1 for ln in lines[mm_line + 1:] if ln.startswith("_kernel")) == 1
    assert cf.compiled.n_kernels == 1          # the transposed operands are strided views, not copies
    assert cf.compiled.fallbacks == []


def test_fallback_extern_ops():
    """sort has no lowering: it runs as the prim's numpy reference inside the compiled graph."""
    x = rand(5, 8, dtype=np.float32)

    def fn(x):
        v, i = P.sort(x, 1, False, True)
        return P.add(v, 1.0), i, P.mul(P.exp(x), 2.0)

    cf, got, want = compile_and_run(fn, x, allow_fallback=("sort",))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)
    assert any(f.startswith("prims.sort: no C++ lowering") for f in cf.compiled.fallbacks)


def test_scans():
    x = rand(4, 6, 5, dtype=np.float64, lo=0.5, hi=1.5)
    xi = randint(4, 6, 5, dtype=np.int32, lo=-3, hi=4)
    xh = _make(RNG.uniform(-1, 1, size=(3, 40)).astype(np.float16))

    def fn(x, xi, xh):
        return (P.cumsum(x, 0), P.cumsum(x, 1), P.cumsum(x, 2), P.cumprod(x, 1), P.cumsum(xi, 2),
                P.cumprod(xi, 0), P.cumsum(xh, 1), P.cumsum(P.exp(x), 1))

    cf, got, want = compile_and_run(fn, x, xi, xh)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-12 if g.dtype == np.float64 else 1e-3)
    assert cf.compiled.fallbacks == []


def test_dynamic_shapes():
    """Symbolic sizes: one compiled kernel serves other sizes; sizes are kernel arguments."""
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor import compile_fx

    def fn(x, y):
        e = P.exp(P.mul(x, y))
        return e, P.sum(e, [1]), P.amax(e, [0]), P.var(x, [0], 1.0)

    x, y = rand(8, 50, dtype=np.float64), rand(8, 50, dtype=np.float64)
    gm = make_fx(fn)(x, y)
    cf = compile_fx(gm, [x, y], dynamic=True)
    assert cf.compiled is not None, cf.eager_reason
    assert "const int64_t s0" in cf.compiled.source
    for shape in ((8, 50), (13, 77), (3, 2)):
        a, b = rand(*shape, dtype=np.float64), rand(*shape, dtype=np.float64)
        got, want = cf(a, b), gm(a, b)
        for g, w in zip(got, want):
            assert_same(g.numpy(), w.numpy(), rtol=1e-12)
    assert len(cf.variants) == 1


def test_edge_shapes_and_aliasing():
    """0-d, empty and size-1 tensors, wrapping int64 arithmetic, an input returned as is."""
    s = _make(np.array(1.5, np.float32))
    e = _make(np.zeros((0, 5), np.float32))
    one = rand(1, 5, 1, dtype=np.float32)
    big = _make(np.array([2 ** 62, -2 ** 62, 5], np.int64))

    def fn(s, e, one, big):
        return (P.exp(s), P.sum(s, []), P.exp(e), P.sum(e, [1]), P.sum(e, [0]),
                P.sum(P.mul(one, one), [0, 2]), P.mul(big, 3), big)

    cf, got, want = compile_and_run(fn, s, e, one, big)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)
    assert cf(s, e, one, big)[-1] is big


def test_dynamic_with_baked_sizes_specialises():
    """A real-mode trace bakes sizes into broadcast_in_dim: dynamic=True would be
    unsound, so the graph is compiled for the example shapes (and other shapes are refused)."""
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor import GuardError, compile_fx

    def fn(x, b):
        return P.add(x, P.broadcast_in_dim(b, [4, 6], [1]))

    x, b = rand(4, 6, dtype=np.float64), rand(6, dtype=np.float64)
    gm = make_fx(fn)(x, b)
    cf = compile_fx(gm, [x, b], dynamic=True)
    assert cf.compiled is not None and not cf.dynamic
    assert "const int64_t s0" not in cf.compiled.source
    assert_same(cf(x, b).numpy(), gm(x, b).numpy())
    with pytest.raises(GuardError):
        cf(rand(5, 6, dtype=np.float64), b)


# ---------------------------------------------------------------- kernel quality (issue 7)
def _kernel_src(cf):
    src = cf.compiled.source
    i = src.find('extern "C" void kernel')
    return src[i if i >= 0 else src.index('extern "C" void combo_kernel'):]


def _reshape_permute_chain(x):
    """[B*T, C] -> [B, T, H, D] -> permute -> [B, H, T, D] -> reshape [B*H*T, D] ->
    back through the inverse: the index of a view of a view of a view."""
    b, t, h, d = 2, 8, 4, 16
    y = P.reshape(x, [b, t, h, d])
    y = P.permute(y, [0, 2, 1, 3])
    y = P.mul(y, 2.0)
    y = P.reshape(P.permute(y, [0, 2, 1, 3]), [b * t, h * d])
    return P.add(y, x)


def test_view_chain_index_is_affine():
    """Reshape/permute/reshape index expressions simplify over the loop ranges to an
    affine index: no division or modulo left in the kernel."""
    x = rand(16, 64)
    cf, got, want = compile_and_run(_reshape_permute_chain, x)
    assert_same(got[0], want[0])
    src = _kernel_src(cf)
    loads = re.findall(r"arg0\[([^\]]*)\]", src)
    assert loads and all("/" not in ix and "%" not in ix for ix in loads), loads


def test_cat_backward_column_sum():
    """cat of three [N, C] tensors along dim 1 then a column sum (the qkv bias
    gradient): correct, and the flattened split index r//128*128 + r%128 joins back."""
    def fn(a, b, c):
        x = P.cat([a, b, c], 1)
        y = P.reshape(P.reshape(x, [4, 128, 96]), [512, 96])
        return P.sum(y, [0]), y
    a, b, c = rand(512, 32), rand(512, 32), rand(512, 32)
    cf, got, want = compile_and_run(fn, a, b, c)
    # against the float64 sum: eager's float32 column sum is a serial float32 loop, which the
    # compiled double accumulation beats by more than 1e-5 on some draws
    exact = np.concatenate([a.numpy(), b.numpy(), c.numpy()], 1).astype(np.float64).sum(0)
    np.testing.assert_allclose(got[0], exact, rtol=1e-6, atol=1e-6)
    assert_same(got[0], want[0], rtol=1e-4, atol=1e-4)
    assert_same(got[1], want[1])
    assert "% (128)" not in _kernel_src(cf)


def test_column_sum_hosts_its_sibling_in_the_row_loop():
    """A column sum (reduction over the outer dim, e.g. a bias gradient) next to a
    row-wise pointwise of the same input: the column sum runs interchanged (outer-reduction
    path: unit-stride SIMD over the columns) and the pointwise is a row stage of the same
    kernel (scheduler.row_stage; tests/inductor/test_row_stages.py)."""
    def fn(x, g):
        y = P.mul(x, g)
        return P.sum(y, [0]), P.mul(y, 3.0)
    x, g = rand(256, 512), rand(256, 512)
    cf, got, want = compile_and_run(fn, x, g)
    exact = (x.numpy() * g.numpy()).astype(np.float64).sum(0)     # float32 products, summed exactly
    np.testing.assert_allclose(got[0], exact, rtol=1e-6, atol=1e-6)
    assert_same(got[0], want[0], rtol=1e-4, atol=1e-4)
    assert_same(got[1], want[1])
    src = _kernel_src(cf)
    assert "xblk" in src                      # the interchanged column-sum loop
    assert cf.compiled.n_kernels == 1 and "row stage written at" in src


@pytest.mark.parametrize("rows", [64, 13])
def test_column_sum_with_row_statistics_interchanged(rows):
    """The layer-norm weight gradient ``sum(g * (x - mean[r]) * rstd[r], 0)``: the per-row
    statistics are read at unit stride along the reduced index but do not move with the
    columns, so the sum still runs interchanged (unit-stride SIMD over the columns, one
    broadcast statistic per row) -- it used to fall back to a strided gather per column."""
    def fn(g, x, mean, rstd):
        xhat = P.mul(P.sub(x, P.broadcast_in_dim(mean, [rows, 300], [0])),
                     P.broadcast_in_dim(rstd, [rows, 300], [0]))
        return (P.sum(P.mul(g, xhat), [0]),)
    g, x, mean, rstd = rand(rows, 300), rand(rows, 300), rand(rows), rand(rows, lo=0.5, hi=2.0)
    cf, got, want = compile_and_run(fn, g, x, mean, rstd)
    gn, xn, mn, rn = (t.numpy() for t in (g, x, mean, rstd))
    exact = (gn * ((xn - mn[:, None]) * rn[:, None])).astype(np.float64).sum(0)
    np.testing.assert_allclose(got[0], exact, rtol=1e-6, atol=1e-6)
    assert_same(got[0], want[0], rtol=1e-4, atol=1e-4)
    assert "xblk" in _kernel_src(cf)


@pytest.mark.parametrize("shape", [(64, 48), (37, 53), (128, 8)])
def test_transposed_pointwise_tiles(shape, contiguous_outputs):
    """A pointwise of a transposed input (GELU of an activation recomputed in the
    backward, transposed for the weight-gradient matmul): computed through local
    tiles with contiguous SIMD loops; bit-identical to eager, ragged edges included."""
    def fn(x):
        y = P.permute(x, [1, 0])
        return P.mul(P.mul(y, 0.5), P.add(P.tanh(P.mul(y, 0.79788456)), 1.0))
    x = rand(*shape)
    cf, got, want = compile_and_run(fn, x)
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-7)
    src = _kernel_src(cf)
    if shape[0] >= 32:
        assert "tr0[" in src, src
    else:   # too narrow to tile
        assert "tr0[" not in src


def test_transposed_read_at_a_gathered_index_is_not_tiled(contiguous_outputs):
    """index_select over a transposed input: its read index holds the gathered position, which
    the loop body loads; a tile filled before the body used the index's placeholder symbol
    (``indirect0``, undeclared: a g++ error, found by the fuzzer, seed 1534). Such reads are
    not tiled; the values match eager."""
    x = _make(rand(2, 16, 33, 31).numpy().transpose(0, 1, 3, 2))
    idx = _make(np.random.default_rng(2).integers(0, 16, 33))
    cf, got, want = compile_and_run(lambda x, i: P.index_select(x, 1, i), x, idx)
    assert_same(got[0], want[0], rtol=0, atol=0)


def test_transposed_strided_input_tiles(contiguous_outputs):
    """The same through a non-contiguous (sliced, transposed) graph input."""
    base = rand(80, 70)
    x = _make(base.numpy()[5:69, 3:67].T)
    def fn(x):
        return P.exp(P.mul(P.permute(x, [1, 0]), 0.5))
    cf, got, want = compile_and_run(fn, x)
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sizes", [(32, 32, 32), (5, 17, 1), (1, 40, 3)])
def test_cat_loop_split(sizes):
    """cat along the last dim: the loop is split at the inputs' boundaries, each
    piece loads one input at an affine index (no clamp, no select); the same through
    a transposed (strided) input and with a pad."""
    def fn(a, b, c):
        x = P.cat([a, b, P.permute(c, [1, 0])], 1)
        return P.mul(x, 2.0), P.pad(a, 0.5, [(0, 0, 0), (2, 3, 0)])
    a, b = rand(24, sizes[0]), rand(24, sizes[1])
    c = rand(sizes[2], 24)
    cf, got, want = compile_and_run(fn, a, b, c)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
    src = _kernel_src(cf)
    assert "// x1 in [" in src
    assert "std::max" not in src and "std::min<int64_t>(" not in src.replace("std::min<int64_t>(16", "")


@pytest.mark.parametrize("shape", [(48, 160), (37, 70)])
def test_sum_of_transposed_inputs_output_tile(shape, contiguous_outputs):
    """A sum of several transposed inputs (an unrolled RNN's per-step weight
    gradients): the loop runs along the inputs' rows and only the result is
    transposed through a local tile; exact, ragged tile edges included."""
    def fn(a, b, c, d):
        t = [P.permute(v, [1, 0]) for v in (a, b, c)]
        return P.add(P.add(P.add(t[0], t[1]), t[2]), P.broadcast_in_dim(d, [shape[1], shape[0]], [1]))
    a, b, c = (rand(*shape) for _ in range(3))
    d = rand(shape[0])
    cf, got, want = compile_and_run(fn, a, b, c, d)
    assert_same(got[0], want[0])
    src = _kernel_src(cf)
    assert "ot[" in src and "tr0[" not in src, src


def test_cat_of_transposed_pieces_tiles_its_pieces(contiguous_outputs):
    """The gradient of a fused qkv projection: three [B, H, T, D] gradients, one of them
    transposed ([B, H, D, T], as the batched matmul of the key's gradient writes it), each
    permuted to [B, T, H, D] and flattened to [B*T, H*D], then concatenated along the columns.
    The transposed piece's loop simplifies to affine indices over its piece of the column range
    and reads through a local tile (its row index is ``x0 % T``, linear inside a tile);
    bit-identical to eager."""
    B, H, T, D = 2, 4, 64, 16
    def fn(q, kt, v):
        k = P.permute(kt, [0, 1, 3, 2])
        parts = [P.reshape(P.permute(t, [0, 2, 1, 3]), [B * T, H * D]) for t in (q, k, v)]
        return (P.cat(parts, 1),)
    q, kt, v = rand(B, H, T, D), rand(B, H, D, T), rand(B, H, T, D)
    with patched_config(split_div_mod=False):     # (by default the dims are split: below)
        cf, got, want = compile_and_run(fn, q, kt, v)
    assert_same(got[0], want[0], rtol=0, atol=0)
    src = _kernel_src(cf)
    piece = src[src.index(f"in [{H * D}, {2 * H * D})"):src.index(f"in [{2 * H * D}, {3 * H * D})")]
    assert "tr0[" in piece, src
    assert f"/ ({T * H * D})" not in piece, piece     # the flattened-index division is gone
    # split at the divisors ([B*T, H*D] -> [B, T, H, D]), the pieces on the head dim: every index
    # affine (measured faster than the tiled piece, 6 MB: 9-12 vs 16 ms under load)
    cf, got, want = compile_and_run(fn, q, kt, v)
    assert_same(got[0], want[0], rtol=0, atol=0)
    src = _kernel_src(cf)
    assert "x2 in [4, 8)" in src and ") / (" not in src and ") % (" not in src, src


@pytest.mark.parametrize("dynamic", [True, False])
def test_scans_over_symbolic_or_long_rows_compile(dynamic):
    """A scan whose extent after the scan dim is symbolic (``x.cumsum(0)`` under dynamic=True)
    or longer than a local accumulator row (a [4, 20000] cumsum over dim 0) keeps its running
    value in the output's previous row; before, such a graph did not compile and ran eagerly."""
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("ember.inductor")
    logger.addHandler(handler)
    fns = [lambda x: x.cumsum(0), lambda x: x.flip(0).cumsum(1) * 2, lambda x: x.cumprod(0),
           lambda x: (x.exp().cumsum(1) + 1).sum(1), lambda x: x[None].expand(3, -1, -1).cumsum(1)]
    shapes = ((6, 8), (10, 12), (7, 9)) if dynamic else ((4, 20000),)
    for fn in fns:
        ember.dynamo.reset()
        cf = ember.compile(fn, dynamic=dynamic)
        for shape in shapes:
            x = _make(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32) * 0.3)
            np.testing.assert_allclose(cf(x).numpy(), fn(x).numpy(), rtol=1e-4, atol=1e-5)
    logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if "eagerly" in r.getMessage() or "Interpreter" in r.getMessage()]
