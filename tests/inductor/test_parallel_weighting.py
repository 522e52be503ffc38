"""Which loop nests run on threads: ``parallel_min_work`` elements, where each exp, tanh, erf,
log or division in an element's value weighs ``parallel_expensive_op_weight`` more (an LSTM
cell over 32 x 256 values: two outputs, thirteen such ops, ran single-threaded before).
The pragma is pinned on the generated source, the values against eager."""
import numpy as np
import pytest

import ember.prims as P

from ._helpers import assert_same, compile_and_run, patched_config, rand


def _sigmoid(x):
    return P.div(1.0, P.add(P.exp(P.neg(x)), 1.0))


def _lstm_cell(g0, g1, g2, g3, c):
    """An LSTM cell's pointwise part on the four gate pre-activations: (new c, new h)."""
    c2 = P.add(P.mul(_sigmoid(g1), c), P.mul(_sigmoid(g0), P.tanh(g2)))
    return c2, P.mul(_sigmoid(g3), P.tanh(c2))


def _cell_inputs(rows=32, cols=256):
    return [rand(rows, cols) for _ in range(5)]


def _parallel(cf) -> bool:
    return "omp parallel" in cf.compiled.source


def test_an_lstm_cell_runs_on_threads_and_matches_eager():
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(_lstm_cell, *_cell_inputs())
    assert _parallel(cf)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-6, atol=2e-6)


def test_without_the_weight_the_cell_stays_on_one_thread():
    """The same kernel with the weight at 0: 2 x 8192 elements, under ``parallel_min_work``."""
    with patched_config(combo_kernels=False, parallel_expensive_op_weight=0):
        cf, got, want = compile_and_run(_lstm_cell, *_cell_inputs())
    assert not _parallel(cf)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-6, atol=2e-6)


def test_cheap_ops_of_the_same_size_stay_on_one_thread():
    """Adds and multiplies over the same 8192 elements are not worth waking a thread."""
    def fn(a, b, c, d, e):
        return P.add(P.mul(a, b), P.mul(c, d)), P.sub(e, a)
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(fn, *_cell_inputs())
    assert not _parallel(cf)
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("rows,cols,expect", [(4, 64, False), (32, 256, True), (7, 1000, True)])
def test_the_threshold_scales_with_the_elements(rows, cols, expect):
    """256 elements of the cell stay serial whatever their ops; 7000 go to threads."""
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(_lstm_cell, *_cell_inputs(rows, cols))
    assert _parallel(cf) is expect
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-6, atol=2e-6)
