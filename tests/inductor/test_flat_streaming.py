"""Flat pointwise loops streaming big float32 outputs with non-temporal stores
(``codegen/cpp_stream.py``, ``config.stream_flat``): the generated loop's shape, values
against eager and against the unstreamed code, every alignment of the output, and the loops
left alone (a per-element math call, an output read again, small buffers, the knob off)."""
import re

import numpy as np
import pytest

import ember.prims as P
from ember.inductor.codegen.cpp_stream import stream_flat_stores

from ._helpers import assert_same, compile_and_run, patched_config, rand

STREAMED = dict(stream_min_bytes=1024, parallel_min_work=1, stream_flat=True)


def _kernels(src):
    return src[src.index('extern "C" void kernel'):]


def _axpy(x, y):
    return (P.add(P.mul(x, y), x),)


def _staged_exp(x):
    return (P.exp(P.mul(x, 0.5)),)


def _log_chain(x):
    return (P.log(P.add(P.abs(P.mul(x, 1.5)), 1.0)),)


@pytest.mark.parametrize("n", [256, 300, 1023, 1024, 1025, 4099, 20011])
def test_a_flat_output_is_streamed_in_line_aligned_strips(n):
    x, y = rand(n), rand(n)
    with patched_config(**STREAMED):
        cf, got, want = compile_and_run(_axpy, x, y)
    src = _kernels(cf.compiled.source)
    assert "#pragma omp for nowait" in src and "ember_stream_fence();" in src
    assert re.search(r"ember_stream_part\(&buf\d+\[x0s\], buf\d+_row, x0t - x0s\);", src)
    assert "const int64_t x0h = " in src
    assert_same(got[0], want[0])            # bit for bit: the same arithmetic, stored differently
    with patched_config(**dict(STREAMED, stream_flat=False)):
        cf0, got0, _ = compile_and_run(_axpy, x, y)
    assert "ember_stream" not in _kernels(cf0.compiled.source)
    assert_same(got[0], got0[0])


def test_every_alignment_of_the_output():
    """The kernel called on outputs starting at each float offset of a 64-byte line (the
    first strip ends on the first line boundary, then every ``stream_strip`` elements)."""
    n = 3000
    x, y = rand(n), rand(n)
    with patched_config(**STREAMED, stream_strip=64):
        cf, got, want = compile_and_run(_axpy, x, y)
    assert "x0a += 64" in cf.compiled.source
    kernel = cf.compiled._call.__globals__["_kernel0"]
    want = want[0]
    for off in range(16):
        backing = np.full(n + 32, np.nan, np.float32)
        start = (-(backing.ctypes.data // 4) + off) % 16
        out = backing[start:start + n]
        assert out.ctypes.data % 64 == off * 4
        kernel(x.numpy(), y.numpy(), out)
        assert_same(out, want)
        assert np.isnan(backing[:start]).all() and np.isnan(backing[start + n:]).all()


def test_a_staged_exp_streams_its_strips():
    x = rand(5000)
    with patched_config(**STREAMED, strip_exp_min_work=1):
        cf, got, want = compile_and_run(_staged_exp, x)
    src = _kernels(cf.compiled.source)
    assert "ember_exp_block(" in src and "ember_stream_part(&buf" in src
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-37)


def test_a_per_element_math_call_is_not_streamed():
    """libmvec's logf called in the SIMD loop: compute-bound, left as it is."""
    x = rand(5000)
    with patched_config(**STREAMED):
        cf, got, want = compile_and_run(_log_chain, x)
    src = _kernels(cf.compiled.source)
    assert "logf(" in src and "ember_stream" not in src
    assert_same(got[0], want[0], rtol=2e-6)


def test_small_outputs_and_the_knob_off_are_not_streamed():
    x, y = rand(5000), rand(5000)
    with patched_config(parallel_min_work=1):          # 20 KB, below the default threshold
        cf, got, want = compile_and_run(_axpy, x, y)
    assert "ember_stream" not in _kernels(cf.compiled.source)
    assert_same(got[0], want[0])


def test_num_threads_goes_to_the_region_and_the_schedule_to_the_loop():
    x, y = rand(5000), rand(5000)
    with patched_config(**STREAMED, threads=2):
        cf, got, want = compile_and_run(_axpy, x, y)
    src = _kernels(cf.compiled.source)
    assert "#pragma omp parallel num_threads(2)" in src
    assert "#pragma omp for nowait" in src
    assert_same(got[0], want[0])


def test_symbolic_sizes():
    with patched_config(**STREAMED):
        for n in (3001, 4500):
            x, y = rand(n), rand(n)
            cf, got, want = compile_and_run(_axpy, x, y, dynamic=True)
            assert_same(got[0], want[0])
    src = _kernels(cf.compiled.source)
    assert "ember_stream_part(&buf" in src and re.search(r"x0a < s\d+", src), src


# -- the rewrite on its own -----------------------------------------------------------------

_LOOP = """\
    #pragma omp parallel for simd schedule(dynamic, 4)
    for (int64_t x0 = 0; x0 < 4096; ++x0) {
        // buf1: pointwise size=[4096]
        float tmp0 = arg0[x0];
        float tmp1 = tmp0 * tmp0;
        buf1[x0] = tmp1;
        buf2[x0] = tmp0;
    }""".split("\n")


def test_rewrite_of_a_simd_loop():
    out = stream_flat_stores(_LOOP, ["buf1", "buf2"], 256)
    text = "\n".join(out)
    assert "#pragma omp for schedule(dynamic, 4) nowait" in text
    assert "alignas(64) float buf1_row[256];" in text and "alignas(64) float buf2_row[256];" in text
    assert "buf1_row[x0 - x0s] = tmp1;" in text and "buf2_row[x0 - x0s] = tmp0;" in text
    assert text.count("ember_stream_fence();") == 1
    assert "reinterpret_cast<uintptr_t>(&buf1[0])" in text     # strips on the first output's lines


def test_an_output_read_elsewhere_in_the_kernel_is_stored_plainly():
    later = ["    #pragma omp parallel for simd", "    for (int64_t x0 = 0; x0 < 4096; ++x0) {",
             "        buf3[x0] = buf1[x0] + 1.0f;", "    }"]
    out = stream_flat_stores(_LOOP + later, ["buf1", "buf2", "buf3"], 256)
    text = "\n".join(out)
    assert "buf1[x0] = tmp1;" in text          # buf1 is read by the second loop
    assert "buf2_row[x0 - x0s] = tmp0;" in text and "buf3_row[x0 - x0s]" in text


@pytest.mark.parametrize("pragma", ["    #pragma omp simd", "    #pragma omp parallel for simd reduction(+:acc)",
                                    "    #pragma omp parallel for simd collapse(2)"])
def test_other_loops_are_left_alone(pragma):
    lines = [pragma] + _LOOP[1:]
    assert stream_flat_stores(lines, ["buf1", "buf2"], 256) == lines


def test_nothing_to_stream():
    assert stream_flat_stores(_LOOP, [], 256) == _LOOP
    assert stream_flat_stores(_LOOP, ["buf9"], 256) == _LOOP
    assert stream_flat_stores(_LOOP, ["buf1"], 0) == _LOOP

