"""Fusion decisions visible in the generated code, vectorisation, logging,
config knobs and the eager fallback when the C++ build fails."""
import logging
import re

import numpy as np
import pytest

import ember
import ember.prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor import codecache, compile_fx, config

from ._helpers import assert_same, compile_and_run, rand


@pytest.fixture
def unstaged():
    """Loops as the generator writes them, before ``cpp_strips.stage_exps`` splits a loop that
    calls exp into an argument loop and a body loop (tests/inductor/test_vector_exp.py): the
    tests using it count loads and calls in one loop body."""
    old = config.strip_loops
    config.strip_loops = 0
    yield
    config.strip_loops = old


def _outer_loops(src):
    """Number of kernels and of top-level loop nests (a loop at the kernel's first indent)."""
    src = src[src.index('extern "C" void kernel'):]
    return len(re.findall(r"^    for \(", src, flags=re.M))


def softmax(x):
    n, m = x.shape
    mx = P.amax(x, [1])
    e = P.exp(P.sub(x, P.broadcast_in_dim(mx, [n, m], [0])))
    s = P.sum(e, [1])
    return P.div(e, P.broadcast_in_dim(s, [n, m], [0]))


def layer_norm(x, w, b):
    n, m = x.shape
    mean = P.div(P.sum(x, [1]), float(m))
    xc = P.sub(x, P.broadcast_in_dim(mean, [n, m], [0]))
    var = P.div(P.sum(P.mul(xc, xc), [1]), float(m))
    rstd = P.rsqrt(P.add(var, 1e-5))
    y = P.mul(xc, P.broadcast_in_dim(rstd, [n, m], [0]))
    return P.add(P.mul(y, P.broadcast_in_dim(w, [n, m], [1])), P.broadcast_in_dim(b, [n, m], [1]))


def test_pointwise_chain_is_one_loop(unstaged):
    x, y = rand(64, 130), rand(64, 130)

    def chain(x, y):
        a = P.mul(x, y)
        for op in ("exp", "neg", "tanh", "abs", "sqrt", "log1p", "sin", "cos"):
            a = getattr(P, op)(a)
        return P.add(a, x)      # 10 ops

    cf, got, want = compile_and_run(chain, x, y)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels == 1
    assert _outer_loops(cf.compiled.source) == 1
    assert cf.compiled.source.count("arg0[") == 1      # x is loaded once (CSE), nothing written between ops


@pytest.mark.parametrize("fn,nargs", [(softmax, 1), (layer_norm, 3)])
def test_softmax_layer_norm_one_kernel(fn, nargs):
    x = rand(48, 200)
    args = [x] + [rand(200) for _ in range(nargs - 1)]
    cf, got, want = compile_and_run(fn, *args)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels == 1
    assert _outer_loops(cf.compiled.source) == 1
    # the row statistics (and softmax's exp values) never reach memory: only the
    # output is allocated by the wrapper; the rest are per-row local arrays
    assert cf.compiled.wrapper_src.count("_empty(") == 1


def test_sibling_reductions_fuse():
    x = rand(40, 100)
    cf, got, want = compile_and_run(lambda x: (P.sum(x, [1]), P.amax(x, [1]), P.var(x, [1], 1.0)), x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels == 1


def test_no_fusion_across_a_transposed_read():
    """b reads a transposed: fusing it into a's loop would read unwritten values."""
    x = rand(30, 30)

    def fn(x):
        a = P.exp(x)
        b = P.add(P.permute(a, [1, 0]), a)
        return a, b

    cf, got, want = compile_and_run(fn, x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)
    assert cf.compiled.n_kernels == 2


def test_fusion_off_knob():
    x = rand(48, 200)
    old = config.fusion
    config.fusion = False
    try:
        cf, got, want = compile_and_run(softmax, x)
    finally:
        config.fusion = old
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels >= 3


def test_parallel_pragma_for_large_work():
    x = rand(256, 512)
    cf, got, want = compile_and_run(softmax, x)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)
    assert "#pragma omp parallel for" in cf.compiled.source
    x = rand(4, 8)
    cf, got, want = compile_and_run(softmax, x)
    assert "#pragma omp parallel for" not in cf.compiled.source


def test_exp_mul_inner_loop_vectorised(tmp_path, unstaged):
    """g++'s own report: the simd inner loop of exp(x) * y is vectorised under strict IEEE flags
    (calling a vector variant of ``ember_expf``: ember's own on AVX-512, else libmvec's expf)."""
    x, y = rand(16, 256), rand(16, 256)
    cf, got, want = compile_and_run(lambda x, y: P.mul(P.exp(x), y), x, y)
    src = cf.compiled.source
    so = str(tmp_path / "k.so")
    report = codecache.compile_so(src, so, extra_flags=["-fopt-info-vec-optimized"])
    lines = src.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('extern "C" void kernel'))
    exp_line = next(i for i, ln in enumerate(lines) if i > start and "= ember_expf(" in ln) + 1
    loop_line = max(i + 1 for i, ln in enumerate(lines[:exp_line]) if ln.strip().startswith("for ("))
    vec_lines = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", report)}
    # gcc reports the loop at its header or at the first statement of its body
    assert any(loop_line <= v <= exp_line for v in vec_lines), (loop_line, exp_line, report)
    assert "_ZGV" in open(so, "rb").read().decode("latin-1")     # a vector variant is called
    assert "-ffast-math" not in " ".join(config.cpp_flags)


def test_logging_output_code(caplog):
    config.configure_logging("output_code,schedule,fusion")
    try:
        with caplog.at_level(logging.DEBUG, logger="ember.inductor"):
            compile_and_run(softmax, rand(12, 40))
    finally:
        config.configure_logging("")
    text = caplog.text
    assert 'extern "C" void kernel0' in text and "def call(arrays)" in text
    assert "fused buf" in text
    assert "kernel 0: FusedGroup" in text


def test_compile_failure_runs_eagerly(caplog):
    x = rand(5, 7)
    gm = make_fx(lambda x: P.exp(x))(x)
    old = list(config.cpp_flags)
    config.cpp_flags = old + ["-fno-such-flag-ember"]
    try:
        with caplog.at_level(logging.WARNING, logger="ember.inductor"):
            cf = compile_fx(gm, [x])
    finally:
        config.cpp_flags = old
    assert cf.compiled is None
    assert "g++ failed" in cf.eager_reason and "no-such-flag" in cf.eager_reason
    assert "running it eagerly" in caplog.text
    assert_same(cf(x).numpy(), gm(x).numpy())


def test_many_kernels_compile_as_parallel_units():
    x = rand(30, 30)

    def fn(x):
        a = P.exp(x)
        b = P.add(P.permute(a, [1, 0]), a)
        c = P.mul(P.permute(b, [1, 0]), b)
        return a, b, c

    old = (config.compile_threads, config.kernels_per_unit)
    config.compile_threads, config.kernels_per_unit = 2, 1
    try:
        cf, got, want = compile_and_run(fn, x)
    finally:
        config.compile_threads, config.kernels_per_unit = old
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6)
    assert cf.compiled.n_kernels == 2      # (b is cheap: inlined into c, which fuses with b's copy)
    assert cf.compiled.source.count("next translation unit") == 1


def test_per_call_overhead_is_microseconds():
    """The wrapper is straight-line code: array objects go to C as they are (no
    per-call ctypes conversions). Generous bound: this box is shared and loaded."""
    import time
    x = rand(4)
    cf, got, want = compile_and_run(lambda x: P.add(x, 1.0), x)
    for _ in range(50):
        cf(x)
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(200):
            cf(x)
        best = min(best, (time.perf_counter() - t) / 200)
    assert best < 100e-6, best
    assert ".ctypes" not in cf.compiled.wrapper_src


def test_kernel_profiler_table():
    """config.profile_kernels: every kernel call (C++ and extern matmul) is timed and
    reported with its call count, bytes moved and the FX nodes it computes; results
    are unchanged."""
    from ember.inductor import profiler

    def fn(x, w):
        return softmax(P.mm(x, w))

    x, w = rand(64, 32), rand(32, 48)
    old = config.profile_kernels
    config.profile_kernels = True
    try:
        gm = make_fx(fn)(x, w)
        cf = compile_fx(gm, [x, w])
    finally:
        config.profile_kernels = old
    profiler.reset()
    for _ in range(3):
        out = cf(x, w)
    assert_same(out.numpy(), gm(x, w).numpy(), rtol=1e-5, atol=1e-7)
    rows = [s for s in profiler.STATS.values() if s.calls]
    kinds = {s.kind for s in rows}
    assert "mm" in kinds and any(k.startswith("cpp") for k in kinds), kinds
    assert all(s.calls == 3 for s in rows)
    red = next(s for s in rows if s.kind.startswith("cpp"))
    # the softmax kernel reads the 64x48 mm output and writes it (float32)
    assert red.nbytes == 3 * 2 * 64 * 48 * 4, red.nbytes
    assert any(o.startswith("amax") for o in red.origins) and any(o.startswith("exp") for o in red.origins)
    mm = next(s for s in rows if s.kind == "mm")
    assert mm.origins == ["mm"]
    table = profiler.report()
    assert "GB/s" in table and red.label in table and "exp" in table


def test_reduction_shares_the_pointwise_loop():
    """softmax: exp(x - max) is stored and summed in one loop (no second pass over
    the row for the sum); the results match eager, with the knob off too."""
    x = rand(64, 300)
    cf, got, want = compile_and_run(softmax, x)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)
    src = cf.compiled.source
    assert "reduction[sum]" in src and "(in the loop of buf" in src
    old = config.merge_reduction_loops
    config.merge_reduction_loops = False
    try:
        cf2, got2, _ = compile_and_run(softmax, x)
    finally:
        config.merge_reduction_loops = old
    assert "(in the loop of" not in cf2.compiled.source
    assert_same(got2[0], want[0], rtol=1e-5, atol=1e-7)


def _vectorized_lines(src, tmp_path):
    so = str(tmp_path / "k.so")
    report = codecache.compile_so(src, so, extra_flags=["-fopt-info-vec-optimized"])
    return {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", report)}


def _loop_of(lines, needle):
    """(header line, statement line) of the innermost loop around the first line holding needle (1-based)."""
    stmt = next(i for i, ln in enumerate(lines) if needle in ln) + 1
    head = max(i + 1 for i, ln in enumerate(lines[:stmt]) if ln.strip().startswith("for ("))
    return head, stmt


def test_transposed_tile_and_column_sum_loops_vectorised(tmp_path, contiguous_outputs):
    """g++'s report: the tanh loop of a transposed pointwise (read through a local
    tile) and the unit-stride loop of an interchanged column sum are vectorised.
    Without the tile the strided read keeps the whole loop scalar."""
    def fn(x, g):
        y = P.permute(x, [1, 0])
        t = P.mul(P.tanh(y), y)
        return t, P.sum(P.mul(g, 2.0), [0])
    x, g = rand(64, 96), rand(128, 96)
    cf, got, want = compile_and_run(fn, x, g)
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-7)
    assert_same(got[1], want[1], rtol=1e-5, atol=1e-5)
    src = cf.compiled.source
    lines = src.splitlines()
    vec = _vectorized_lines(src, tmp_path)
    head, stmt = _loop_of(lines, "= ember_tanhf(")
    assert "tr0[" in "\n".join(lines[head - 1:stmt])
    assert any(head <= v <= stmt for v in vec), (head, stmt, sorted(vec))
    head, stmt = _loop_of(lines, "[xi] = tmp")     # the column sum's accumulation over xi
    assert "xi" in lines[head - 1]
    assert any(head <= v <= stmt for v in vec), (head, stmt, sorted(vec))


def attention_softmax(x):
    """nanoGPT's softmax over ``[B, H, T, T]`` scores, reshaped to ``[B*H, T, T]`` for the
    batched matmul that follows: the division's sizes differ from its reductions'."""
    b, h, t, _ = x.shape
    mx = P.amax(x, [3])
    e = P.exp(P.sub(x, P.broadcast_in_dim(mx, [b, h, t, t], [0, 1, 2])))
    s = P.sum(e, [3])
    s3 = P.reshape(s, [b * h, t])
    return P.div(P.reshape(e, [b * h, t, t]), P.broadcast_in_dim(s3, [b * h, t, t], [0, 1]))


@pytest.mark.parametrize("on", [True, False])
def test_consumer_of_other_sizes_joins_the_row_loop(on, monkeypatch):
    monkeypatch.setattr(config, "reshape_to_fuse", on)
    x = rand(3, 4, 24, 24)
    cf, got, want = compile_and_run(attention_softmax, x)
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-7)
    assert cf.compiled.n_kernels == (1 if on else 2)


def test_sizes_that_do_not_line_up_stay_apart():
    # rows of 10 read as rows of 15: the division would need a division in its index
    def fn(x):
        s = P.sum(x, [1])
        y = P.div(x, P.broadcast_in_dim(s, [6, 10], [0]))
        return P.exp(P.reshape(y, [4, 15]))
    cf, got, want = compile_and_run(fn, rand(6, 10, lo=0.5, hi=1.5))   # row sums far from 0
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-6)
    assert "/ 15" not in cf.compiled.source and "% 15" not in cf.compiled.source


def test_many_stages_over_a_small_nest_run_in_parallel():
    # the parallel threshold counts every stage's work: an LSTM backward's cell-state
    # recurrence is ~100 stages over 8192 elements
    def chain(a, b):
        c, outs = a, []
        for _ in range(8):
            c = P.add(P.mul(c, b), a)
            outs.append(P.tanh(c))
        return outs

    def one(a, b):
        return P.add(a, b)
    a, b = rand(8192), rand(8192)
    cf, got, want = compile_and_run(chain, a, b)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels == 1 and "omp parallel" in cf.compiled.source
    cf, got, want = compile_and_run(one, a, b)
    assert_same(got[0], want[0])
    assert "omp parallel" not in cf.compiled.source     # one stage of 8192: not worth a wake-up


def test_relu_summed_by_a_pooling_vectorises(tmp_path):
    """NaN-propagating maximum is a bitwise blend: the ?: chain it replaced was left as a
    branch per element in reduction loops (scalar code, a mispredict on every other value)."""
    x = rand(64, 8, 8)
    cf, got, want = compile_and_run(lambda x: P.sum(P.maximum(x, 0.0), [1, 2]), x)
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-6)
    src = cf.compiled.source
    report = codecache.compile_so(src, str(tmp_path / "k.so"), extra_flags=["-fopt-info-vec-optimized"])
    lines = src.splitlines()
    max_line = next(i for i, ln in enumerate(lines) if "ember_max_fp" in ln and "=" in ln and "inline" not in ln) + 1
    loop_line = max(i + 1 for i, ln in enumerate(lines[:max_line]) if ln.strip().startswith("for ("))
    vec_lines = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", report)}
    assert any(loop_line - 1 <= v <= max_line for v in vec_lines), (loop_line, max_line, report)


def test_normalised_value_with_broadcast_operands_is_recomputed_not_stored():
    # x_hat = (x - mean[c]) * rstd[c] feeds a column sum and a pointwise: recomputing it
    # re-reads x only (the per-channel operands stay in cache), storing it cost a write + read
    def fn(x, m, r, g):
        n, c = x.shape
        xh = P.mul(P.sub(x, P.broadcast_in_dim(m, [n, c], [1])), P.broadcast_in_dim(r, [n, c], [1]))
        return P.sum(P.mul(xh, g), [0]), P.mul(xh, 2.0)
    args = rand(256, 16), rand(16), rand(16), rand(256, 16)
    cf, got, want = compile_and_run(fn, *args)
    for a, b in zip(got, want):
        assert_same(a, b, rtol=1e-5, atol=1e-5)
    assert len(cf.compiled.graph.buffers) == 2        # the sum and the scaled x_hat only


def _two_outputs_sharing(x, y):
    # three outputs in one loop: the first's value, a shared exp(x) and a shared load of y
    a = P.mul(P.exp(x), y)
    b = P.add(P.exp(x), y)
    c = P.mul(a, 2.0)          # reads what the first stage stored
    return a, b, c


def test_stages_of_one_loop_share_loads_and_values(unstaged):
    args = rand(300, 200), rand(300, 200)
    config.cse_across_stages = False
    try:
        cf0, got0, want = compile_and_run(_two_outputs_sharing, *args)
    finally:
        config.cse_across_stages = True
    cf, got, _ = compile_and_run(_two_outputs_sharing, *args)
    for g, g0, w in zip(got, got0, want):
        assert_same(g, g0)            # bit for bit: the same operations on the same values
        assert_same(g, w, rtol=1e-6, atol=1e-6)
    for c, shared in ((cf, True), (cf0, False)):
        src = c.compiled.source
        loop = src[src.index("for (int64_t x"):]
        outs = re.findall(r"(buf\d+)\[[^\]]*\] = ", loop)
        assert len(outs) == 3 and c.compiled.n_kernels == 1, src
        if shared:
            assert loop.count("expf(") == 1 and len(re.findall(r"= arg1\[", loop)) == 1, src
            assert not re.search(rf"= {outs[0]}\[", loop), src     # the stored value is reused
        else:
            assert loop.count("expf(") == 2, src


def test_batch_norm_statistics_read_each_channel_twice(caplog):
    """A compiled training-mode batch norm (running statistics updated): the mean's sum, then the
    centred sum of squares and the running variance's sum of squares in one loop -- two simd
    reduction loops over a channel, not four (prims.var summed the channel again, and its
    centred pass and the running variance's were separate)."""
    bn = ember.nn.BatchNorm2d(6)
    x = ember.tensor(np.random.default_rng().standard_normal((4, 6, 9, 11)).astype(np.float32))
    bn_ref = ember.nn.BatchNorm2d(6)
    config.configure_logging("output_code")
    try:
        with caplog.at_level(logging.DEBUG, logger="ember.inductor"), ember.no_grad():
            got = ember.compile(lambda t: bn(t))(x)
    finally:
        config.configure_logging("")
    src = caplog.text
    stats = [k for k in re.split(r'extern "C" void ', src)[1:] if "// buf0: reduction[sum]" in k]
    assert len(stats) == 1, src
    assert len(re.findall(r"#pragma omp simd reduction", stats[0])) == 2, stats[0]
    with ember.no_grad():
        want = bn_ref(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), bn_ref.running_mean.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(bn.running_var.numpy(), bn_ref.running_var.numpy(), rtol=1e-5, atol=1e-6)
