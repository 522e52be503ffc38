"""Rows of big buffers: output rows staged and streamed out with non-temporal stores, the
next row prefetched by a stage computing transcendentals (``config.stream_min_bytes``), and
heavy rows dealt out to threads in chunks (``config.dynamic_chunks_per_thread``)."""
import re

import pytest

import ember.prims as P
from ember.inductor import config

from ._helpers import assert_same, compile_and_run, rand
from .test_fusion_codegen import softmax


def _kernels(src):
    return src[src.index('extern "C" void kernel'):]


@pytest.fixture
def knobs():
    names = ("stream_min_bytes", "stream_strip", "dynamic_chunks_per_thread", "threads")
    old = {k: getattr(config, k) for k in names}
    yield config
    for k, v in old.items():
        setattr(config, k, v)


@pytest.mark.parametrize("strip", [1024, 16, 0])
@pytest.mark.parametrize("shape", [(64, 2048), (37, 1999), (5, 1030)])
def test_softmax_rows_stream_and_prefetch(knobs, shape, strip):
    """Rows of odd lengths too (the streaming copy's aligned middle and scalar ends, the
    prefetching blocks' short last block; rows of 1999 floats start at every alignment),
    streamed in strips ending on the output's lines or as one staged row; the values match
    eager and the unstreamed code."""
    x = rand(*shape)
    knobs.stream_min_bytes = 1024
    knobs.stream_strip = strip
    cf, got, want = compile_and_run(softmax, x)
    src = _kernels(cf.compiled.source)
    if strip:
        assert "ember_stream_f32(&" not in src
        assert re.search(r"ember_stream_part\(buf\d+_dst \+ r0b, buf\d+_row, r0e - r0b\);", src)
        assert f"alignas(64) float buf2_row[{strip}];" in src.replace("buf3_row", "buf2_row")
        assert src.count("ember_stream_fence();") == 1
    else:
        assert "ember_stream_f32(&" in src and "ember_stream_part" not in src
    assert re.search(r"__builtin_prefetch\(&arg0\[", src)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)
    knobs.stream_min_bytes = 0
    cf0, got0, _ = compile_and_run(softmax, x)
    src0 = _kernels(cf0.compiled.source)
    assert "ember_stream" not in src0 and "__builtin_prefetch" not in src0
    assert_same(got[0], got0[0], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape", [(16, 4099), (3, 1024)])
def test_a_prefetching_stage_streams_in_strips(knobs, shape):
    """One stage both prefetching (exp of a row read before by the max) and streaming its row
    in strips: the strips carry the prefetch."""
    knobs.stream_min_bytes = 1024
    knobs.stream_strip = 64

    def f(x):
        n, m = x.shape
        mx = P.amax(x, [1])
        return (P.exp(P.sub(x, P.broadcast_in_dim(mx, [n, m], [0]))),)
    x = rand(*shape)
    cf, got, want = compile_and_run(f, x)
    src = _kernels(cf.compiled.source)
    loop = src[src.index("for (int64_t r0b = 0, r0e;"):]
    assert "__builtin_prefetch(&arg0[" in loop.split("ember_stream_part")[0]
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)


def test_small_buffers_are_not_streamed(knobs):
    x = rand(64, 2048)      # 512 KB, below the default threshold
    cf, got, want = compile_and_run(softmax, x)
    src = _kernels(cf.compiled.source)
    assert "ember_stream_f32(&" not in src and "__builtin_prefetch" not in src
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)


def _exp_and_its_sum(x):
    n, m = x.shape
    mx = P.amax(x, [1])
    e = P.exp(P.sub(x, P.broadcast_in_dim(mx, [n, m], [0])))
    return e, P.sum(e, [1]), P.mul(e, 2.0)


def test_an_output_other_stages_read_is_stored_in_place(knobs):
    """``e`` is an output and read by the sum and the product in the same loop nest: streamed
    at the end of its stage, those loads would see the row unwritten."""
    knobs.stream_min_bytes = 1024
    x = rand(64, 2048)
    cf, got, want = compile_and_run(_exp_and_its_sum, x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-6)


def test_heavy_rows_are_dealt_in_chunks(knobs):
    knobs.threads = 2
    x = rand(64, 4096)
    cf, got, want = compile_and_run(softmax, x)
    prag = [ln.strip() for ln in cf.compiled.source.splitlines() if "#pragma omp parallel" in ln]
    assert prag == ["#pragma omp parallel for schedule(dynamic, 2) num_threads(2)"]   # 64 rows / (2 x 16)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-7)
    knobs.dynamic_chunks_per_thread = 0
    cf0, got0, _ = compile_and_run(softmax, x)
    prag0 = [ln.strip() for ln in cf0.compiled.source.splitlines() if "#pragma omp parallel" in ln]
    assert prag0 == ["#pragma omp parallel for num_threads(2)"]
    assert_same(got0[0], got[0])


def _two_softmaxes(x, y):
    return softmax(x), softmax(y)


def test_chunked_kernels_keep_their_schedule_in_a_combo_region(knobs):
    knobs.threads = 2
    x, y = rand(64, 4096), rand(96, 4096)
    cf, got, want = compile_and_run(_two_softmaxes, x, y)
    src = cf.compiled.source
    fors = [ln.strip() for ln in src.splitlines() if "#pragma omp for" in ln or "#pragma omp parallel" in ln]
    assert "#pragma omp for schedule(dynamic, 2) nowait" in fors, fors
    assert "#pragma omp for schedule(dynamic, 3) nowait" in fors, fors
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-7)
