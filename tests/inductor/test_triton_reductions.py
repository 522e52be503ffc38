"""Reductions, fused chains (softmax, layer_norm), views and indexing, random
numbers and symbolic sizes: the Triton lowering under the interpreter against
the eager prims, with persistent (whole rows in a block) and looped (rows in
RBLOCK chunks) kernels."""
import numpy as np
import pytest

from ._triton import ON_GPU, compile_and_run, compile_interp, import_triton_interpreted, run_compiled

import_triton_interpreted()

import ember  # noqa: E402
import ember.prims as P  # noqa: E402
from ember.inductor.codegen import triton as tg  # noqa: E402
from ember.tensor import _make  # noqa: E402

from ._helpers import RNG, assert_same, rand, randint  # noqa: E402

FLOAT_REDUCTIONS = ["sum", "prod", "amax", "amin"]


@pytest.fixture(params=["persistent", "looped"])
def kernel_kind(request, monkeypatch):
    if request.param == "looped":
        monkeypatch.setattr(tg, "PERSISTENT_RNUMEL_MAX", 0)
    return request.param


def _kinds(cg):
    return {s.kind for s in cg.specs.values()}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_reductions(kernel_kind, dtype):
    x = rand(6, 5, 37, dtype=dtype, lo=0.5, hi=1.5)  # prod stays finite
    nanx = x.numpy().copy()
    nanx[1, 2, 3] = np.nan
    xn = _make(nanx)

    def fn(x, xn):
        out = {}
        for op in FLOAT_REDUCTIONS:
            out[f"{op}_last"] = getattr(P, op)(x, [2])
            out[f"{op}_mid"] = getattr(P, op)(x, [1])
            out[f"{op}_two"] = getattr(P, op)(x, [0, 2])
            out[f"{op}_all"] = getattr(P, op)(x, [0, 1, 2])
        out["amax_nan"] = P.amax(xn, [2])
        out["amin_nan"] = P.amin(xn, [2])
        out["argmax"] = P.argmax(x, 2)
        out["argmin"] = P.argmin(x, 1)
        out["argmax_nan"] = P.argmax(xn, 2)
        out["argmin_nan"] = P.argmin(xn, 2)
        out["var"] = P.var(x, [2], 1)
        out["var_two"] = P.var(x, [0, 2], 0)
        return out

    cg, got, want = compile_interp(fn, x, xn)
    # the full reduction (1110 elements per row) is looped either way
    assert kernel_kind in _kinds(cg) and _kinds(cg) <= {"pointwise", "persistent", "looped"}
    if kernel_kind == "looped":
        assert "persistent" not in _kinds(cg)
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for k, g, w in zip(sorted(fn(x, xn)), got, want):
        try:
            assert_same(g, w, **tol)
        except AssertionError as e:
            raise AssertionError(f"{k}: {e}") from None


def test_argmax_ties_and_int_reductions(kernel_kind):
    a = randint(4, 50, dtype=np.int32, lo=-3, hi=3)  # many ties: first occurrence wins
    b = _make(RNG.random((4, 50)) < 0.3)
    i8 = randint(4, 50, dtype=np.int8, lo=-100, hi=100)  # int8 sums wrap like numpy

    def fn(a, b, i8):
        return (P.argmax(a, 1), P.argmin(a, 1), P.sum(a, [1]), P.prod(P.remainder(a, 2), [1]), P.amax(a, [0]),
                P.amin(a, [1]), P.any(b, [1]), P.all(b, [0]), P.any(a, [1]), P.all(P.ne(a, 0), [1]),
                P.sum(i8, [1]), P.amax(b, [1]))

    cg, got, want = compile_interp(fn, a, b, i8)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_softmax_one_kernel(kernel_kind):
    x = rand(7, 45, lo=-4, hi=4)

    def softmax(x):
        m = P.amax(x, [1])
        e = P.exp(P.sub(x, P.broadcast_in_dim(m, [7, 45], [0])))
        return P.div(e, P.broadcast_in_dim(P.sum(e, [1]), [7, 45], [0]))

    cg, got, want = compile_interp(softmax, x)
    assert cg.n_kernels == 1 and _kinds(cg) == {kernel_kind}
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-7)
    spec = next(iter(cg.specs.values()))
    if kernel_kind == "persistent":
        # intermediates stay in registers, the row is read once
        assert spec.params == ["arg0", cg.graph.outputs[0].name]
        assert cg.source.count("tl.load(") == 1
    else:
        # exp(x - max) goes through memory between the loops; the reductions stay in registers
        assert len(spec.params) == 3


def test_layer_norm_pattern(kernel_kind):
    x = rand(9, 64, lo=-3, hi=3)
    w = rand(64)
    b = rand(64)

    def layer_norm(x, w, b):
        mean = P.div(P.sum(x, [1]), 64.0)
        xc = P.sub(x, P.broadcast_in_dim(mean, [9, 64], [0]))
        var = P.var(x, [1], 0)
        rstd = P.rsqrt(P.add(var, 1e-5))
        y = P.mul(xc, P.broadcast_in_dim(rstd, [9, 64], [0]))
        return P.add(P.mul(y, P.broadcast_in_dim(w, [9, 64], [1])), P.broadcast_in_dim(b, [9, 64], [1])), mean, rstd

    cg, got, want = compile_interp(layer_norm, x, w, b)
    assert cg.n_kernels == 1
    for g, w_ in zip(got, want):
        assert_same(g, w_, rtol=1e-5, atol=1e-6)


def test_decomposed_softmax_and_layer_norm():
    import ember.nn.functional as F
    x = rand(6, 33, lo=-3, hi=3)
    w, b = rand(33), rand(33)
    cg, got, want = compile_interp(lambda x, w, b: (F.softmax(x, -1), F.layer_norm(x, (33,), w, b),
                                                    F.log_softmax(x, 0)), x, w, b, decompose=True)
    for g, w_ in zip(got, want):
        assert_same(g, w_, rtol=2e-5, atol=2e-6)


def test_views_and_indexing():
    x = rand(6, 10)
    y = rand(10, 6)
    idx = randint(6, 4, dtype=np.int64, lo=0, hi=10)
    sel = randint(5, dtype=np.int64, lo=0, hi=6)

    def fn(x, y, idx, sel):
        return (P.add(x, P.permute(y, [1, 0])),
                P.slice(x, [1, 2], [6, 10], [2, 3]),
                P.flip(x, [0, 1]),
                P.cat([x, P.mul(x, 2.0)], 1),
                P.pad(x, 0.5, [(1, 2, 0), (-1, 0, 1)]),
                P.reshape(P.permute(x, [1, 0]), [5, 12]),
                P.gather(x, 1, idx),
                P.index_select(x, 0, sel),
                P.expand_dims(P.squeeze(P.sum(x, [1]), []), [0]),
                P.iota(11, 3, 2, ember.int64, None),
                P.full([3, 4], 2.5, ember.float32, None),
                P.mul(P.iota(7, 0.5, 0.25, ember.float32, None), 2.0))

    cg, got, want = compile_interp(fn, x, y, idx, sel)
    for g, w in zip(got, want):
        # the sum (10 float32 values of either sign) is added in another order than numpy's:
        # absolute error up to ~n * eps * sum(abs(x)); the other outputs are exact copies
        assert_same(g, w, rtol=1e-6, atol=1e-5)


@pytest.mark.skipif(ON_GPU, reason="device-side index checks are the interpreter's (debug=True); a GPU build has none")
def test_out_of_bounds_index_raises():
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor.codegen.triton_wrapper import compile_graph_triton
    x = rand(3, 5)
    good = randint(3, 2, dtype=np.int64, lo=0, hi=5)
    gm = make_fx(lambda x, i: P.gather(x, 1, i))(x, good)
    cg = compile_graph_triton(gm, [x, good], mode="interpret")
    np.testing.assert_array_equal(cg(x, good).numpy(), gm(x, good).numpy())
    bad = _make(np.array([[0, 1], [2, 7], [1, 1]], dtype=np.int64))
    with pytest.raises(Exception, match="index out of bounds"):
        cg(x, bad)


def test_strided_input_and_long_rows():
    base = rand(12, 300)
    xt = _make(base.numpy().T)  # a transposed (non-contiguous) input
    cg, got, want = compile_interp(lambda x: (P.sum(x, [1]), P.amax(x, [0]), P.exp(x)), xt)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-5, atol=1e-5)


def test_philox_random_matches_reference():
    seed = _make(np.array(0x1234_5678_9ABC, dtype=np.int64))
    off = _make(np.array(7, dtype=np.int64))

    def fn(seed, off):
        return (P.philox_rand([5, 13], seed, off, ember.float32, None),
                P.philox_rand([9], seed, off, ember.float64, None),
                P.philox_rand([4, 3], seed, off, ember.bfloat16, None),
                P.philox_randn([6, 7], seed, off, ember.float32, None),
                P.philox_randn([5], seed, off, ember.float64, None))

    cg, got, want = compile_interp(fn, seed, off)
    for g, w in zip(got[:3], want[:3]):
        assert_same(g, w)  # uniform: bit for bit
    for g, w in zip(got[3:], want[3:]):
        assert_same(g, w, rtol=1e-6 if g.dtype == np.float32 else 1e-12, atol=1e-7)


def test_symbolic_sizes():
    """dynamic=True: sizes are kernel arguments (s0, s1), rows of symbolic length are
    looped, and one compiled graph serves other sizes."""
    def fn(x, y):
        e = P.exp(P.mul(x, y))
        return e, P.sum(e, [1]), P.amax(e, [0]), P.var(x, [0], 1.0)

    x, y = rand(8, 50, dtype=np.float64), rand(8, 50, dtype=np.float64)
    cg, got, want = compile_interp(fn, x, y, dynamic=True)
    assert all(spec.size_syms for spec in cg.specs.values())
    assert "s0" in cg.source and "s1" in cg.source
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-12)
    from ember.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(fn)(x, y)
    for shape in ((13, 77), (3, 2)):
        a, b = rand(*shape, dtype=np.float64), rand(*shape, dtype=np.float64)
        for g, w in zip(run_compiled(cg, a, b), gm(a, b)):
            assert_same(g, w.numpy(), rtol=1e-12)


def test_scatters():
    """scatter/index_put: the last write of a repeated index wins (elected with
    atomic_max, whatever the GPU's order); scatter_add/index_put(accumulate) add
    with atomics."""
    x = rand(5, 8)
    src = rand(5, 8)
    idx = randint(5, 8, dtype=np.int64, lo=0, hi=8)  # many repeats per row
    rows = _make(np.array([3, 0, 3, 1, 3, 4], dtype=np.int64))
    vals = rand(6, 8)
    xi = randint(5, 8, dtype=np.int64, lo=-9, hi=9)

    def fn(x, src, idx, rows, vals, xi):
        return (P.scatter(x, 1, idx, src), P.scatter_add(x, 1, idx, src),
                P.index_put(x, (rows,), vals, False), P.index_put(x, (rows,), vals, True),
                P.scatter_add(xi, 0, P.remainder(idx, 5), xi))

    cg, got, want = compile_interp(fn, x, src, idx, rows, vals, xi)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6, atol=1e-6)
    assert any(s.scratch for s in cg.specs.values())


def test_unsupported_ops_name_themselves():
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor.codegen.triton_wrapper import compile_graph_triton
    b = randint(4, 6, dtype=np.int8, lo=-5, hi=5)
    idx = randint(4, 6, dtype=np.int64, lo=0, hi=6)
    gm = make_fx(lambda b, i: P.scatter_add(b, 1, i, b))(b, idx)
    with pytest.raises(tg.TritonCodegenError, match="scatter_add.*int8"):
        compile_graph_triton(gm, [b, idx], mode="source")


@pytest.mark.parametrize("what", ["forward", "train"])
def test_mlp_end_to_end(what):
    """Decomposed MLP (Linear, GELU, LayerNorm, softmax / cross-entropy + gradients):
    matmuls run as externs between the Triton kernels; bias + GELU + LayerNorm after
    a matmul is one fused kernel (the epilogue)."""
    import ember.nn as nn
    import ember.nn.functional as F
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 10))
    x = ember.randn(8, 16)
    y = ember.randint(0, 10, (8,))
    params = list(model.parameters())

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        return (loss, *ember.autograd.grad(loss, params))

    from ember.prims.table import decompose
    fn = (lambda x, y: F.softmax(model(x), -1)) if what == "forward" else step
    gm = decompose(fn)(x, y)
    with ember.no_grad():  # the eager prims graph has no derivatives of its own
        cg, got = compile_and_run(gm, [x, y])
        want = gm(x, y)
    want = want if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(got, [a.numpy() for a in want]):
        assert_same(g, w, rtol=1e-5, atol=1e-6)
    if what == "forward":
        assert cg.n_kernels == 2
