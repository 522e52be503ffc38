"""float32 exp in the C++ kernels (codegen/cpp_strips.py): ember's AVX-512 routine, loops staged
around it, and the libmvec fallback where AVX-512 is off."""
import re

import numpy as np
import pytest

import ember.prims as P
from ember.inductor import codecache, config
from ember.inductor.codegen.cpp_strips import exp_staging_enabled, strip_loops
from ember.tensor import _make

from ._helpers import RNG, assert_same, compile_and_run, rand

avx512 = pytest.mark.skipif(not exp_staging_enabled(), reason="host without AVX-512F or AVX2+FMA (or -march=native off): "
                                                          "exp is libmvec's and loops are not staged")


@pytest.fixture(autouse=True)
def knobs():
    """Every kernel here is stripped, whatever its size (``config.strip_min_work``: 0)."""
    saved = (config.strip_loops, list(config.cpp_flags), config.strip_min_work, config.strip_exp_min_work)
    config.strip_min_work = 0
    yield
    config.strip_loops, config.cpp_flags, config.strip_min_work, config.strip_exp_min_work = saved


@avx512
def test_small_kernels_are_not_stripped():
    config.strip_min_work = 1 << 22
    x = rand(64, 1000)
    cf, got, want = compile_and_run(lambda a: P.sum(P.exp(a), [1]), x)
    src = _kernels(cf.compiled.source)
    assert "ember_exp_block(" not in src and "= ember_expf(" in src and "_p = 0.0f" not in src
    config.strip_min_work = 64 * 1000
    cf, got2, _ = compile_and_run(lambda a: P.sum(P.exp(a), [1]), x)
    assert "ember_exp_block(" in _kernels(cf.compiled.source)
    np.testing.assert_allclose(got2[0], got[0], rtol=1e-6)


@avx512
def test_mid_sized_kernels_stage_exp_loops_only():
    """Between ``strip_exp_min_work`` and ``strip_min_work`` a loop calling exp is staged (with
    its sum in float partials) and a loop that only sums keeps its double accumulator."""
    config.strip_min_work = 1 << 22
    config.strip_exp_min_work = 1 << 18
    x = rand(64, 8192, lo=-5, hi=5)
    cf, got, want = compile_and_run(lambda a: (P.sum(P.exp(a), [1]), P.sum(P.mul(a, a), [1])), x)
    src = _kernels(cf.compiled.source)
    assert src.count("ember_exp_block(") == 1 and len(re.findall(r"float tmp\d+_p = 0\.0f;", src)) == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6)
    config.strip_exp_min_work = 1 << 22
    cf, _, _ = compile_and_run(lambda a: (P.sum(P.exp(a), [1]), P.sum(P.mul(a, a), [1])), x)
    assert "ember_exp_block(" not in _kernels(cf.compiled.source)


@avx512
@pytest.mark.parametrize("stage", [1024, 0])
def test_tanh_staged_within_about_one_ulp(stage):
    """Staged strips run ember's tanh (checked over every float: 1.06 ulp at most); unstaged
    loops call libmvec's tanhf. Both against float64 tanh on 2^20 random bit patterns in tanh's
    interesting range, and the special values: signed zeros, infinities, NaN."""
    config.strip_loops = stage
    bits = RNG.integers(0, 2 ** 32, size=(1 << 20) - 12, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.where(np.abs(x) < 12, x, RNG.uniform(-12, 12, x.shape).astype(np.float32)).astype(np.float32)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 0.75, -0.75, 0.7499999, 44.5, -100.0,
                        1e-30, -1e-38], np.float32)
    x = np.concatenate([special, x]).reshape(1 << 10, -1)
    cf, got, _ = compile_and_run(lambda a: P.tanh(a), _make(x))
    got = got[0].ravel()
    assert ("ember_tanh_block(" in _kernels(cf.compiled.source)) == bool(stage)
    assert got[0] == 0 and np.signbit(got[0]) and got[1] == 0 and not np.signbit(got[1])
    assert got[2] == 1 and got[3] == -1 and np.isnan(got[4]) and got[8] == 1 and got[9] == -1
    assert got[10] == np.float32(1e-30) and got[11] == np.float32(-1e-38)
    want = np.tanh(x.ravel().astype(np.float64))
    ok = ~np.isnan(want)
    ulp = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    err = np.abs(got[ok].astype(np.float64) - want[ok]) / ulp
    assert err.max() <= (1.1 if stage else 2.0), err.max()


@avx512
def test_tanh_staged_on_16_lanes_equals_8_lanes_bit_for_bit():
    """On an AVX-512 host the staged tanh runs 16 lanes (``ember_tanh16``); built with AVX-512
    off it is the 8-lane AVX2 routine. The same bits for every input: 2^20 random patterns in
    tanh's range, both sides of the 0.75 switch, the specials."""
    try:
        with open("/proc/cpuinfo") as f:
            avx512f = any(ln.startswith("flags") and "avx512f" in ln.split() for ln in f)
    except OSError:
        avx512f = False
    if not avx512f:
        pytest.skip("no AVX-512F on this host: both builds are the 8-lane routine")
    config.strip_loops = 1024
    bits = RNG.integers(0, 2 ** 32, size=(1 << 20) - 8, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.where(np.abs(x) < 12, x, RNG.uniform(-12, 12, x.shape).astype(np.float32)).astype(np.float32)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 0.75, np.nextafter(np.float32(0.75), 0), 44.5],
                       np.float32)
    x = _make(np.concatenate([special, x]).reshape(1 << 10, -1))
    cf, wide, _ = compile_and_run(lambda a: P.tanh(a), x)
    assert "ember_tanh_block(" in _kernels(cf.compiled.source)
    config.cpp_flags = list(config.cpp_flags) + ["-mno-avx512f"]
    _, narrow, _ = compile_and_run(lambda a: P.tanh(a), x)
    np.testing.assert_array_equal(wide[0].view(np.uint32), narrow[0].view(np.uint32))


def _kernels(src):
    return src[src.index('extern "C" void kernel'):]


def _ulps(got, x):
    want = np.exp(x.astype(np.float64))
    tiny = np.float64(np.finfo(np.float32).smallest_subnormal)
    ulp = np.maximum(np.spacing(np.abs(want).astype(np.float32)).astype(np.float64), tiny)
    ok = np.isfinite(want) & (want <= np.finfo(np.float32).max)
    return np.abs(got[ok].astype(np.float64) - want[ok]) / ulp[ok]


@avx512
@pytest.mark.parametrize("stage", [256, 0])
def test_exp_within_one_ulp_over_random_bit_patterns(stage):
    """2^22 random float bit patterns in exp's range (the routine was checked over all 2^32
    floats: 0.91 ulp at most) plus the special values; staged or called, the same bits."""
    config.strip_loops = stage
    bits = RNG.integers(0, 2 ** 32, size=(1 << 22) - 13, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.where(np.abs(x) < 110, x, RNG.uniform(-110, 90, x.shape).astype(np.float32)).astype(np.float32)
    special = np.array([-np.inf, np.inf, np.nan, -0.0, 0.0, -104.0, -103.97, -87.33655, 88.72283,
                        88.7229, 89.0, 1e-30, -1e-30], np.float32)
    x = np.concatenate([special, x]).reshape(1 << 11, -1)
    cf, got, _ = compile_and_run(lambda a: P.exp(a), _make(x))
    got = got[0].ravel()
    assert ("ember_exp_block(" in _kernels(cf.compiled.source)) == bool(stage)
    assert np.isnan(got[2]) and got[0] == 0.0 and got[1] == np.inf and got[3] == got[4] == 1.0
    assert got[5] == 0.0 and got[6] > 0 and got[8] < np.inf and got[9] == np.inf and got[10] == np.inf
    err = _ulps(got, x.ravel())
    assert err.max() <= 1.0, err.max()
    if stage:
        config.strip_loops = 0
        _, again, _ = compile_and_run(lambda a: P.exp(a), _make(x))
        assert again[0].ravel().tobytes() == got.tobytes()


@avx512
def test_exp_paths_give_the_same_bits_mixed_or_grouped():
    """ember_exp8 takes a short path for a vector whose lanes all have normal results or x <= -104
    (those give 0), and the clamped routine otherwise. The same values, once spread so that every
    vector mixes the kinds (normal, zero, subnormal result, overflowing, NaN) and once grouped so
    that whole vectors hold one kind, give the same bits and the exact zeros and infinities."""
    config.strip_loops = 1024
    kinds = [RNG.uniform(-86.4, 87.8, 4096), RNG.uniform(-1e4, -104, 4096), np.full(4096, -np.inf),
             RNG.uniform(-103.9, -86.6, 4096), RNG.uniform(88.0, 89.5, 4096), np.full(4096, np.inf),
             np.full(4096, np.nan), RNG.uniform(-20, 0, 4096)]
    grouped = np.concatenate([k.astype(np.float32) for k in kinds])       # 4096-long runs of one kind
    mixed = grouped.reshape(len(kinds), -1).T.ravel()                     # every 8 lanes: one of each
    outs = []
    for x in (grouped, mixed):
        cf, got, _ = compile_and_run(lambda a: P.exp(a), _make(x.reshape(32, 1024)))
        assert "ember_exp_block(" in _kernels(cf.compiled.source)
        outs.append(got[0].ravel())
    back = outs[1].reshape(-1, len(kinds)).T.ravel()
    np.testing.assert_array_equal(back.view(np.uint32), outs[0].view(np.uint32))
    g = outs[0].reshape(len(kinds), -1)
    assert (g[1] == 0).all() and (g[2] == 0).all() and (g[5] == np.inf).all() and np.isnan(g[6]).all()
    assert not np.signbit(g[1]).any() and (g[3] > 0).all() and (g[3] < 3e-38).all()
    assert (g[3] < np.finfo(np.float32).tiny).mean() > 0.9                # mostly subnormal results
    ok = ~np.isnan(grouped)
    assert _ulps(outs[0][ok], grouped[ok]).max() <= 1.0


@avx512
@pytest.mark.parametrize("op", ["exp", "tanh"])
def test_nan_payloads_stay_nan(op):
    """NaNs with payload bits, among ordinary values in the same vectors: exp and the staged tanh
    give NaN for each (tanh's e^(2|x|) routine builds 2^n from the bits of a rounded sum, which a
    NaN's payload would turn into a number; the NaN lane takes the other branch)."""
    config.strip_loops = 1024
    payloads = np.array([0x7F800001, 0x7FBFFFFF, 0xFF800001, 0x7FC00001, 0xFFFFFFFF, 0x7F80FFFF,
                         0x7FC00100, 0xFFC0FF00], np.uint32).view(np.float32)
    x = RNG.uniform(-3, 3, (64, 1024)).astype(np.float32)
    x[:, ::3] = np.resize(payloads, x[:, ::3].shape)
    fn = P.exp if op == "exp" else P.tanh
    cf, got, _ = compile_and_run(lambda a: fn(a), _make(x))
    assert f"ember_{op}_block(" in _kernels(cf.compiled.source)
    got = got[0]
    assert np.isnan(got[:, ::3]).all()
    rest = np.ones(x.shape, bool)
    rest[:, ::3] = False
    want = (np.exp if op == "exp" else np.tanh)(x[rest].astype(np.float64))
    np.testing.assert_allclose(got[rest], want, rtol=3e-7)


@avx512
def test_softmax_rows_staged_and_summed_in_float_partials():
    x = rand(37, 1030, lo=-30, hi=30)
    def softmax(a):
        e = P.exp(a)
        return P.div(e, P.broadcast_in_dim(P.sum(e, [1]), list(a.shape), [0]))
    cf, got, want = compile_and_run(softmax, x)
    src = _kernels(cf.compiled.source)
    assert "ember_exp_block(" in src and re.search(r"float tmp\d+_p = 0\.0f;", src), src
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-9)
    x64 = x.numpy().astype(np.float64)
    ref = np.exp(x64) / np.exp(x64).sum(1, keepdims=True)
    np.testing.assert_allclose(got[0], ref, rtol=2e-6, atol=1e-12)


@avx512
def test_long_sum_of_exp_keeps_double_accuracy():
    """Float partial sums per strip of 256, added into double: the sum of 200k exps stays within a
    few float eps of the float64 sum (a float accumulator per lane would be ~1e-4 off)."""
    x = rand(3, 200_000, lo=-3, hi=1)
    cf, got, _ = compile_and_run(lambda a: P.sum(P.exp(a), [1]), x)
    assert "ember_exp_block(" in _kernels(cf.compiled.source)
    ref = np.exp(x.numpy().astype(np.float64)).sum(1)
    np.testing.assert_allclose(got[0], ref, rtol=5e-7)


@avx512
def test_parallel_flat_loop_strips_are_shared_out():
    x = rand(1000, 700, lo=-20, hi=20)
    cf, got, want = compile_and_run(lambda a: P.mul(P.reciprocal(P.add(P.exp(P.neg(a)), 1.0)), a), x)
    src = cf.compiled.source
    head = re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t (\w+)s = ", src)
    assert head and "simd" not in head.group(0), src
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-6)
    config.strip_loops = 0
    _, plain, _ = compile_and_run(lambda a: P.mul(P.reciprocal(P.add(P.exp(P.neg(a)), 1.0)), a), x)
    assert plain[0].tobytes() == got[0].tobytes()


@avx512
def test_staged_loops_vectorise(tmp_path):
    """g++'s report: the argument loop and the body loop of a staged exp both vectorise."""
    x, y = rand(16, 1000), rand(16, 1000)
    cf, got, want = compile_and_run(lambda a, b: P.mul(P.exp(P.sub(a, b)), b), x, y)
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-6)
    src = cf.compiled.source
    report = codecache.compile_so(src, str(tmp_path / "k.so"), extra_flags=["-fopt-info-vec-optimized"])
    lines = src.splitlines()
    loops = [i + 1 for i, ln in enumerate(lines) if re.match(r"\s*for \(int64_t \w+ = \w+s; ", ln)]
    assert len(loops) == 2, src
    vec = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", report)}
    for line in loops:
        assert any(line <= v <= line + 8 for v in vec), (line, report)


def test_libmvec_fallback_when_avx512_is_off():
    """Staged code compiles and is right where ``__AVX512F__`` is undefined: ``ember_exp_block``
    is then a loop of the libmvec-based ``ember_expf``."""
    config.cpp_flags = list(config.cpp_flags) + ["-mno-avx512f"]
    x = rand(64, 300, lo=-90, hi=80)
    cf, got, want = compile_and_run(lambda a: P.sum(P.exp(a), [1]), x)
    ref = np.exp(x.numpy().astype(np.float64)).sum(1)
    np.testing.assert_allclose(got[0], ref, rtol=1e-6)
    _, got, _ = compile_and_run(lambda a: P.exp(a), x)
    assert (_ulps(got[0].ravel(), x.numpy().ravel()) <= 4).all()


# -- the rewrite itself, on the generator's text ------------------------------------------------

def _loop(body, pragma="#pragma omp simd", before=()):
    return list(before) + ["    " + pragma, "    for (int64_t r0 = 0; r0 < n; ++r0) {"] + \
        ["        " + b for b in body] + ["    }"]


def test_rewrite_stages_the_argument_and_keeps_the_body():
    config.strip_loops = 128
    out = strip_loops(_loop(["float tmp1 = a[r0];", "float tmp2 = tmp1 * tmp0;", "float tmp3 = ember_expf(tmp2);",
                             "out[r0] = tmp3 + tmp1;"]), True)
    text = "\n".join(out)
    assert "r0s += 128" in text and "alignas(64) float tmp3_s[128];" in text
    assert "tmp3_s[r0 - r0s] = tmp2;" in text and "ember_exp_block(tmp3_s, r0t - r0s);" in text
    assert "float tmp3 = tmp3_s[r0 - r0s];" in text and "out[r0] = tmp3 + tmp1;" in text
    first = text[:text.index("ember_exp_block")]
    assert "out[" not in first          # the argument loop only computes the argument


@pytest.mark.parametrize("body", [
    # the argument reads a buffer the body writes (a store earlier in the same iteration)
    ["float tmp1 = a[r0];", "b[r0] = tmp1;", "float tmp2 = b[r0];", "float tmp3 = ember_expf(tmp2);",
     "c[r0] = tmp3;"],
    # the argument reads an accumulator
    ["float tmp1 = a[r0] + tmp9;", "float tmp3 = ember_expf(tmp1);", "tmp9 = tmp9 + tmp3;"],
    # control flow in the body
    ["float tmp1 = a[r0];", "if (tmp1 > 0) { c[r0] = 1; }", "float tmp3 = ember_expf(tmp1);"],
    # no exp at all
    ["float tmp1 = a[r0];", "c[r0] = tmp1;"],
    # a double sum the body also reads: its running value must stay the double
    ["float tmp1 = a[r0];", "tmp5 = tmp5 + tmp1;", "float tmp2 = static_cast<float>(tmp5);", "c[r0] = tmp2;"],
])
def test_rewrite_leaves_loops_it_cannot_prove(body):
    lines = _loop(body, pragma="#pragma omp simd reduction(+:tmp5)", before=["    double tmp5 = 0;"])
    assert strip_loops(lines, True) == lines


def test_rewrite_keeps_an_exp_of_an_exp_as_a_call():
    out = "\n".join(strip_loops(_loop(["float tmp1 = a[r0];", "float tmp2 = ember_expf(tmp1);",
                                       "float tmp3 = ember_expf(tmp2);", "c[r0] = tmp3;"]), True))
    assert "tmp2_s" in out and "tmp3_s" not in out and "float tmp3 = ember_expf(tmp2);" in out


def test_rewrite_of_a_parallel_double_sum():
    out = strip_loops(_loop(["float tmp1 = a[r0];", "float tmp2 = ember_expf(tmp1);", "tmp5 = tmp5 + tmp2;"],
                           pragma="#pragma omp parallel for simd reduction(+:tmp5) if((n) >= 32768)",
                           before=["    double tmp5 = 0;"]), True)
    text = "\n".join(out)
    assert "#pragma omp parallel for reduction(+:tmp5) if((n) >= 32768)" in text
    assert "#pragma omp simd reduction(+:tmp5_p)" in text and "tmp5_p = tmp5_p + tmp2;" in text
    assert "tmp5 = tmp5 + static_cast<double>(tmp5_p);" in text
    # a float accumulator is left as it is
    out = "\n".join(strip_loops(_loop(["float tmp1 = a[r0];", "float tmp2 = ember_expf(tmp1);",
                                      "tmp5 = tmp5 + tmp2;"], pragma="#pragma omp simd reduction(+:tmp5)",
                                     before=["    float tmp5 = 0;"]), True))
    assert "tmp5_p" not in out and "#pragma omp simd reduction(+:tmp5)" in out


def test_rewrite_of_a_long_double_sum_without_exp():
    body = ["float tmp1 = a[r0];", "float tmp2 = tmp1 * tmp1;", "tmp5 = tmp5 + tmp2;"]
    before = ["    double tmp5 = 0;"]
    text = "\n".join(strip_loops(_loop(body, pragma="#pragma omp simd reduction(+:tmp5)", before=before), False))
    assert f"r0s += {config.strip_loops}" in text and "ember_exp_block" not in text and text.count("for (") == 2
    assert "#pragma omp simd reduction(+:tmp5_p)" in text and "tmp5_p = tmp5_p + tmp2;" in text
    # one strip or less: nothing to gain
    short = list(before) + ["    #pragma omp simd reduction(+:tmp5)", "    for (int64_t r0 = 0; r0 < 200; ++r0) {"] + \
        ["        " + b for b in body] + ["    }"]
    assert strip_loops(short, False) == short


def test_layer_norm_rows_in_three_passes_with_partials():
    """layer_norm's variance is the mean of squares about the row's mean (decompositions/nn.py
    ``_stats``): a sum pass, a centred pass, the output pass -- not a fourth re-summing the row;
    both sums in float partials per strip."""
    import ember.nn.functional as F
    from ember.inductor import compile_fx
    from ember.prims.table import decompose
    x, w, b = rand(40, 3000, lo=-4, hi=6), rand(3000), rand(3000)
    gm = decompose(lambda x, w, b: F.layer_norm(x, (3000,), w, b))(x, w, b)
    cf = compile_fx(gm, [x, w, b])
    assert cf.compiled is not None, cf.eager_reason
    got, want = [cf(x, w, b).numpy()], [gm(x, w, b).numpy()]
    src = _kernels(cf.compiled.source)
    assert src.count("reduction[sum]") == 2 and "reduction[var]" not in src, src
    assert len(re.findall(r"float tmp\d+_p = 0\.0f;", src)) == 2, src
    assert_same(got[0], want[0], rtol=1e-5, atol=2e-5)
    x64 = x.numpy().astype(np.float64)
    mu = x64.mean(1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w.numpy() + b.numpy()
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=2e-5)
