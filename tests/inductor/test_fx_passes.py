"""``inductor/fx_passes.py``: independent products sharing a right operand become one
product; a sum of products (a weight gradient accumulated over unrolled steps) becomes one
product of concatenations. Values against the unrewritten graph; the rewrite pinned by the
number of matmul calls in the wrapper."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import prims as P
from ember.inductor import config as icfg

from ._helpers import assert_same, compile_and_run, rand

T, B, K, N = 6, 5, 7, 9


def _n_mm(cf):
    return sum(1 for ln in cf.compiled.wrapper_src.splitlines() if ln.strip().endswith("# mm"))


def _steps_times_weight(x, w):
    outs = [P.tanh(P.mm(P.squeeze(P.slice(x, [t, 0, 0], [t + 1, B, K]), [0]), w)) for t in range(T)]
    return outs


def test_independent_products_with_a_shared_operand_are_one_matmul():
    x, w = rand(T, B, K), rand(K, N)
    cf, got, want = compile_and_run(_steps_times_weight, x, w)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
    assert _n_mm(cf) == 1


def test_the_pass_can_be_switched_off():
    x, w = rand(T, B, K), rand(K, N)
    icfg.batch_matmuls = False
    try:
        cf, got, want = compile_and_run(_steps_times_weight, x, w)
    finally:
        icfg.batch_matmuls = True
    assert _n_mm(cf) == T
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)


def test_a_recurrence_is_not_batched():
    def fn(h, w):
        outs = []
        for _ in range(T):
            h = P.tanh(P.mm(h, w))
            outs.append(h)
        return outs
    h, w = rand(B, N, lo=-0.5, hi=0.5), rand(N, N, lo=-0.5, hi=0.5)
    cf, got, want = compile_and_run(fn, h, w)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
    assert _n_mm(cf) == T


def test_inputs_and_recurrence_sharing_a_weight():
    # x_t @ w are independent of each other; h_t @ w form a chain through the same weight
    def fn(x, h, w):
        outs = []
        for t in range(T):
            xt = P.squeeze(P.slice(x, [t, 0, 0], [t + 1, B, N]), [0])
            h = P.tanh(P.add(P.mm(xt, w), P.mm(h, w)))
            outs.append(h)
        return outs
    x, h, w = rand(T, B, N), rand(B, N, lo=-0.5, hi=0.5), rand(N, N, lo=-0.5, hi=0.5)
    cf, got, want = compile_and_run(fn, x, h, w)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
    assert _n_mm(cf) < 2 * T


@pytest.mark.parametrize("transposed", [False, True])
def test_sum_of_products_is_one_matmul(transposed):
    def fn(g, x):
        acc = None
        for t in range(T):
            gt = P.squeeze(P.slice(g, [t, 0, 0], [t + 1, B, N]), [0])
            xt = P.squeeze(P.slice(x, [t, 0, 0], [t + 1, B, K]), [0])
            p = P.mm(P.permute(gt, [1, 0]), xt)
            if transposed:
                p = P.permute(p, [1, 0])
            acc = p if acc is None else P.add(acc, p)
        return acc
    g, x = rand(T, B, N), rand(T, B, K)
    cf, got, want = compile_and_run(fn, g, x)
    assert_same(got[0], want[0], rtol=1e-4, atol=1e-4)
    assert _n_mm(cf) == 1


def test_compiled_lstm_training_matches_eager():
    ember.manual_seed(0)
    cell, head = nn.LSTMCell(6, 8), nn.Linear(8, 3)

    def run(x):
        h = ember.zeros(x.shape[0], 8)
        c = ember.zeros(x.shape[0], 8)
        for t in range(x.shape[1]):
            h, c = cell(x[:, t], (h, c))
        return head(h)
    params = list(cell.parameters()) + list(head.parameters())
    x = ember.randn(4, 7, 6)
    want_out = run(x)
    want_out.pow(2).mean().backward()
    want = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    out = ember.compile(run)(x)
    out.pow(2).mean().backward()
    np.testing.assert_allclose(out.detach().numpy(), want_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, w in zip(params, want):
        np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_of_many_pieces_copies_piece_by_piece(dim):
    def fn(x):
        pieces = [P.permute(P.squeeze(P.slice(x, [t, 0, 0], [t + 1, 4, 3]), [0]), [1, 0]) for t in range(12)]
        return P.cat(pieces, dim), P.cat(pieces[:3], dim)
    x = rand(12, 4, 3)
    cf, got, want = compile_and_run(fn, x)
    for g, w in zip(got, want):
        assert_same(g, w)
    src = cf.compiled.wrapper_src
    assert sum(1 for ln in src.splitlines() if ln.strip().endswith("# cat")) == 1    # the 3-piece cat is a loop


def test_the_callers_graph_is_left_alone():
    # aot caches its graphs and the FX-graph cache keys warm compiles by them: the rewrite
    # works on a copy
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.inductor import compile_fx
    x, w = rand(T, B, K), rand(K, N)
    gm = make_fx(_steps_times_weight)(x, w)
    before = gm.code
    cf = compile_fx(gm, [x, w])
    assert _n_mm(cf) == 1 and gm.code == before


def _per_step(x, w, steps):
    """``tanh(x[:, t] @ w)`` for t in ``steps`` of x [B, T, K]."""
    Bx, Tx, Kx = x.shape
    return [P.tanh(P.mm(P.squeeze(P.slice(x, [0, t, 0], [Bx, t + 1, Kx], [1, 1, 1]), [1]), w)) for t in steps]


def _mm_reads_x(cf):
    """Whether the product's left operand is the input ``x`` itself (a view), not a buffer a
    kernel wrote (the steps' concatenation)."""
    line = next(ln for ln in cf.compiled.wrapper_src.splitlines() if ln.strip().endswith("# mm"))
    return "(arg0" in line


def test_every_step_of_one_input_is_one_matmul_without_a_concatenation():
    """``x[:, t] @ w`` for every t in order: ``x.reshape(B * T, K) @ w``, each step's result a
    strided view of the product (no copy of the steps into (t, b) order)."""
    x, w = rand(B, T, K), rand(K, N)
    cf, got, want = compile_and_run(lambda x, w: _per_step(x, w, range(T)), x, w)
    assert _n_mm(cf) == 1 and _mm_reads_x(cf)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("steps", [range(T - 1), list(reversed(range(T))), [0, 2, 1, 3, 4, 5]])
def test_other_step_sets_are_concatenated(steps):
    """Not every step, or not in order: the rows are concatenated first (one matmul all the same)."""
    x, w = rand(B, T, K), rand(K, N)
    cf, got, want = compile_and_run(lambda x, w: _per_step(x, w, steps), x, w)
    assert _n_mm(cf) == 1 and not _mm_reads_x(cf)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
