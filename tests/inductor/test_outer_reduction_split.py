"""Column reductions split over chunks of whole rows (``KernelGen._outer_split_chunks``): each
chunk reduces its run of rows into a private partial row, the partials are combined per column.
Values against eager (exact where the reduction is exact), NaN propagation, several reduced dims
(the flat row index split back into them), two reductions and an epilogue in one kernel, and the
cases that keep the block loop."""
import numpy as np
import pytest

import ember.prims as P
from ember.tensor import _make

from ._helpers import RNG, assert_same, compile_and_run, patched_config, rand, randint


def _src(cf):
    return cf.compiled.source


@pytest.fixture
def split_small():
    """Split from small sizes, so the tests' shapes take the split path."""
    with patched_config(outer_reduction_split_min_work=1, parallel_min_work=1, combo_kernels=False):
        yield


@pytest.mark.parametrize("rows,cols", [(300, 96), (37, 53), (1000, 8)])
def test_split_column_reductions_match_eager(split_small, rows, cols):
    xn = rand(rows, cols, dtype=np.float64).numpy()
    xn[rows // 2, 3] = np.nan                       # one NaN: max/min of its column are NaN
    x, xnan = rand(rows, cols, dtype=np.float64), _make(xn)
    xf = rand(rows, cols, lo=0.9, hi=1.1)          # products that stay finite
    xi = randint(rows, cols, dtype=np.int32, lo=-1000, hi=1000)
    xb = _make(RNG.random((rows, cols)) < 0.02)

    def fn(x, xnan, xf, xi, xb):
        return (P.sum(x, [0]), P.amax(xnan, [0]), P.amin(xnan, [0]), P.amax(x, [0]), P.amin(x, [0]),
                P.prod(xf, [0]), P.sum(xi, [0]), P.amax(xi, [0]), P.amin(xi, [0]),
                P.any(xb, [0]), P.all(P.logical_not(xb), [0]))
    cf, got, want = compile_and_run(fn, x, xnan, xf, xi, xb)
    assert "chunk" in _src(cf)
    np.testing.assert_allclose(got[0], x.numpy().sum(0), rtol=1e-12, atol=1e-12)
    for g, w in zip(got[1:5], want[1:5]):
        assert_same(g, w)                          # max/min (and their NaN) exactly
    assert np.isnan(got[1][3]) and np.isnan(got[2][3])
    np.testing.assert_allclose(got[5], want[5], rtol=1e-5)
    for g, w in zip(got[6:], want[6:]):
        assert_same(g, w)                          # integer and boolean reductions exactly


def test_split_float32_sum_accumulates_in_double(split_small):
    """float32 column sums add up in double in the chunks and in the combination: within a
    float32 rounding of the exact sum."""
    x = rand(2000, 40)
    cf, got, want = compile_and_run(lambda x: (P.sum(P.mul(x, x), [0]),), x)
    assert "chunk" in _src(cf) and "double" in _src(cf)
    exact = (x.numpy().astype(np.float64) ** 2).sum(0)
    np.testing.assert_allclose(got[0], exact, rtol=1e-7)
    assert_same(got[0], want[0], rtol=1e-5)


def test_split_over_several_reduced_dims(split_small):
    """sum over (0, 1) of [A, B, C] (a bias gradient of a [batch, time, channels] activation):
    the chunks cut the flat row index, each row's (r0, r1) recovered by division."""
    x = rand(7, 45, 33, dtype=np.float64)
    cf, got, want = compile_and_run(lambda x: (P.sum(x, [0, 1]), P.amax(x, [0, 1])), x)
    assert "chunk" in _src(cf)
    np.testing.assert_allclose(got[0], x.numpy().sum((0, 1)), rtol=1e-12, atol=1e-12)
    assert_same(got[1], want[1])


def test_split_two_reductions_and_an_epilogue(split_small):
    """A layer-norm style backward group: sum(g) and sum(g * xhat) over the rows, then a
    pointwise of the results, all in one kernel."""
    def fn(g, x):
        s1 = P.sum(g, [0])
        s2 = P.sum(P.mul(g, x), [0])
        return s1, s2, P.add(P.mul(s1, 2.0), s2)
    g, x = rand(513, 70, dtype=np.float64), rand(513, 70, dtype=np.float64)
    cf, got, want = compile_and_run(fn, g, x)
    assert "chunk" in _src(cf)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11)


def test_split_half_inputs(split_small):
    """float16 values are read into float and summed in double; max exactly."""
    x = _make(rand(900, 48).numpy().astype(np.float16))
    cf, got, want = compile_and_run(lambda x: (P.sum(x, [0]), P.amax(x, [0])), x)
    assert "chunk" in _src(cf)
    exact = x.numpy().astype(np.float64).sum(0)
    np.testing.assert_allclose(got[0].astype(np.float64), exact, rtol=2e-3, atol=1e-2)
    assert_same(got[1], want[1])


def test_block_loop_kept_where_split_does_not_apply():
    """Small cache-resident sums with enough column blocks for the threads, var (two passes) and
    ``outer_reduction_split = False`` keep the block loop."""
    x = rand(64, 1024)
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(lambda x: (P.sum(x, [0]),), x)     # 2^16 elements, 4 blocks
        assert "xblk" in _src(cf) and "chunk" not in _src(cf)
    with patched_config(outer_reduction_split_min_work=1, parallel_min_work=1, combo_kernels=False):
        y = rand(300, 40, dtype=np.float64)
        cf, got, want = compile_and_run(lambda y: (P.var(y, [0], 1.0),), y)
        assert "xblk" in _src(cf) and "chunk" not in _src(cf)
        np.testing.assert_allclose(got[0], y.numpy().var(0, ddof=1), rtol=1e-10)
    with patched_config(outer_reduction_split=False, outer_reduction_split_min_work=1, parallel_min_work=1):
        cf, got, want = compile_and_run(lambda x: (P.sum(x, [0]),), rand(300, 40))
        assert "chunk" not in _src(cf)


def test_split_when_column_blocks_leave_threads_idle():
    """A bias gradient over 256 columns is one column block: with default knobs and two threads
    it splits over the rows below the memory-bound size, from ``outer_reduction_split_idle_min_work``."""
    from ember.inductor import config
    x = rand(4096, 256)
    with patched_config(threads=2, combo_kernels=False):
        cf, got, want = compile_and_run(lambda x: (P.sum(x, [0]),), x)
    assert "chunk" in _src(cf), config.outer_reduction_split_min_work
    with patched_config(threads=2, combo_kernels=False):
        cf2, _, _ = compile_and_run(lambda x: (P.sum(x, [0]),), rand(1024, 256))
    assert "chunk" not in _src(cf2)          # too small for a parallel region of its own
    np.testing.assert_allclose(got[0], x.numpy().astype(np.float64).sum(0), rtol=1e-6, atol=1e-6)
