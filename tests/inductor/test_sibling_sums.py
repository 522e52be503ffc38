"""Sum reductions over the same ranges in one loop (``KernelGen._sibling_sums``): batch norm's
backward sums the output gradient and its products with the normalised input per channel, each
before in a loop of its own reading the gradient again. One accumulator and reduction clause
each, the same arithmetic as separate loops (the vectoriser may split off a different tail, so
float64 sums can differ from theirs in the last ulps); against eager too."""
import numpy as np
import pytest

import ember.prims as P

from ._helpers import assert_same, compile_and_run, patched_config, rand

MARK = "sums over the same ranges: one loop"


def _bn_backward_like(g, x, y):
    d = (0, 2, 3)
    return (P.sum(g, d), P.sum(P.mul(g, x), d), P.sum(P.mul(P.sub(g, 1.0), y), d),
            P.sum(P.mul(g, P.exp(y)), d), P.sum(P.exp(x), d))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12), (np.float16, 2e-2)])
@pytest.mark.parametrize("shape", [(4, 6, 5, 7), (3, 2, 16, 16), (1, 3, 1, 33)])
def test_values_match_eager_and_separate_loops(dtype, tol, shape):
    g, x, y = (rand(*shape, dtype=dtype) for _ in range(3))
    cf, got, want = compile_and_run(_bn_backward_like, g, x, y)
    src = cf.compiled.source
    # the three plain sums in one loop, the two calling exp in another (a loop calling exp may
    # be staged with float partial sums: a plain sum keeps its own accumulator type)
    assert "(3 sums over the same ranges: one loop)" in src and "(2 sums over the same ranges: one loop)" in src
    for a, b in zip(got, want):
        assert_same(a, b, rtol=tol, atol=tol * float(np.prod(shape)) ** 0.5)
    with patched_config(merge_sibling_reductions=False):
        cf2, got2, _ = compile_and_run(_bn_backward_like, g, x, y)
    assert MARK not in cf2.compiled.source
    for a, b in zip(got, got2):
        np.testing.assert_allclose(a, b, rtol=1e-12 if dtype == np.float64 else 1e-6)


def test_a_sum_reading_another_is_not_merged_with_it():
    x = rand(5, 4, 6)

    def fn(x):
        s = P.sum(x, (0, 2))
        c = P.sub(x, P.broadcast_in_dim(P.div(s, 30.0), (5, 4, 6), (1,)))
        return s, P.sum(P.mul(c, c), (0, 2)), P.sum(P.abs(x), (0, 2))
    cf, got, want = compile_and_run(fn, x)
    for a, b in zip(got, want):
        assert_same(a, b, rtol=1e-5, atol=1e-5)


def test_different_ranges_and_other_reductions_keep_their_loops():
    x = rand(6, 8, 9)

    def fn(x):
        return P.sum(x, (0,)), P.sum(x, (0, 2)), P.amax(x, (0, 2)), P.sum(P.mul(x, x), (0, 2))
    cf, got, want = compile_and_run(fn, x)
    for a, b in zip(got, want):
        assert_same(a, b, rtol=1e-5, atol=1e-5)

