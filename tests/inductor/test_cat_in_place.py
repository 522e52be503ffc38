"""A ``cat`` of many computed pieces (the extern path, ``config.cat_extern_min_inputs``) whose
pieces each fill a contiguous range of its output: the wrapper makes each piece a view of the
output, so the kernels producing the pieces write there and no copy runs
(``WrapperGen._cat_pieces_in_place``); a second cat of the same pieces is the first's output.
Every case compares with eager and checks which path the wrapper took."""
import numpy as np
import pytest

import ember
from ember.inductor import compile_fx, config
from ember.prims.table import decompose

from ._helpers import _flat, assert_same, rand

N = config.cat_extern_min_inputs + 4        # pieces: more than the fused-select path takes


def compile_and_run(fn, *inputs):
    """(compiled graph, its outputs, eager outputs) for ``fn`` traced to prims."""
    gm = decompose(fn)(*inputs)
    cf = compile_fx(gm, list(inputs))
    assert cf.compiled is not None, cf.eager_reason
    with ember.no_grad():
        got = _flat(cf(*inputs))
    want = fn(*inputs)
    want = [t.detach() for t in want] if isinstance(want, (tuple, list)) else want.detach()
    return cf, got, _flat(want)


def _paths(cf):
    src = cf.compiled.wrapper_src
    return src.count("its pieces written in place"), src.count("# cat\n"), src.count("cat of the same pieces")


def test_pieces_along_the_first_dim_are_written_in_place():
    def f(x, w):
        pieces = [(x[i] * (i + 1.0)).tanh() for i in range(N)]
        y = ember.cat(pieces, 0)                         # (N * 4, 16)
        return y @ w, pieces[3].exp() + y[:4].sum()      # a piece read again after the cat
    x, w = rand(N, 4, 16), rand(16, 8)
    cf, got, want = compile_and_run(f, x, w)
    assert _paths(cf) == (1, 0, 0), cf.compiled.wrapper_src
    for a, e in zip(got, want):
        assert_same(a, e, rtol=1e-5, atol=1e-5)
    # the pool is reused by the next call: the pieces are written again, in place
    x2 = rand(N, 4, 16)
    got2 = [t.numpy() for t in cf(x2, w)]
    want2 = [t.numpy() for t in f(x2, w)]
    for a, e in zip(got2, want2):
        assert_same(a, e, rtol=1e-5, atol=1e-5)


def test_a_later_dim_behind_size_one_dims_is_in_place():
    """(1, 7) pieces along dim 1: each is a run of the (1, 7 N) output (the pieces reach the
    cat as reshapes of their (7,) buffers)."""
    def f(x):
        return ember.cat([(x[i] + float(i)).sigmoid().unsqueeze(0) for i in range(N)], 1) * 2.0
    x = rand(N, 7)
    cf, got, want = compile_and_run(f, x)
    assert _paths(cf)[0] == 1, cf.compiled.wrapper_src
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_pieces_interleaved_in_the_output_are_copied():
    """cat along dim 1 of (2, k) pieces: each piece is two separate runs of the output."""
    def f(x):
        return ember.cat([(x[i] * 3.0).sin() for i in range(N)], 1) + 1.0
    x = rand(N, 2, 6)
    cf, got, want = compile_and_run(f, x)
    assert _paths(cf) == (0, 1, 0), cf.compiled.wrapper_src
    assert_same(got[0], want[0], rtol=1e-6, atol=1e-6)


def test_a_piece_that_is_an_output_is_not_aliased():
    def f(x):
        pieces = [(x[i] * 2.0).cos() for i in range(N)]
        return ember.cat(pieces, 0).sum(0), pieces[0]
    x = rand(N, 3, 7)
    cf, got, want = compile_and_run(f, x)
    assert _paths(cf) == (0, 1, 0), cf.compiled.wrapper_src
    for a, e in zip(got, want):
        assert_same(a, e, rtol=1e-5, atol=1e-5)
    # the returned piece is the caller's: a second call does not overwrite it
    keep = cf(x)[1].numpy().copy()
    cf(rand(N, 3, 7))
    assert_same(keep, want[1], rtol=1e-6, atol=1e-6)


def _lstm_step(cell, steps):
    """loss and gradients (input and weights) of an LSTM cell unrolled over ``steps``."""
    def run(x):
        h = ember.zeros(x.shape[0], 8)
        c = ember.zeros(x.shape[0], 8)
        for t in range(steps):
            h, c = cell(x[:, t], (h, c))
        loss = h.pow(2).sum()
        return (loss, *ember.autograd.grad(loss, [x] + list(cell.parameters())))
    return run


def test_lstm_backward_cats_are_written_in_place():
    """The case it is for: the unrolled LSTM's backward concatenates every step's gate
    gradients twice (for the input and the recurrent weight gradients, each one product over
    all steps): the first cat's pieces are written in place, the second is the first."""
    ember.manual_seed(3)
    cell = ember.nn.LSTMCell(6, 8)
    x = ember.randn(5, N + 1, 6, requires_grad=True)
    cf, got, want = compile_and_run(_lstm_step(cell, N + 1), x)
    ins, copies, same = _paths(cf)
    assert ins >= 1 and same >= 1, cf.compiled.wrapper_src
    for a, e in zip(got, want):
        assert_same(a, e, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("steps", [N + 1])
def test_unrolled_lstm_training_matches_eager(steps):
    """The case it is for: an LSTM cell unrolled over the steps, its backward's weight
    gradients over all steps' gate gradients at once."""
    ember.manual_seed(3)
    cell = ember.nn.LSTMCell(6, 8)

    def run(mod, x):
        h = ember.zeros(x.shape[0], 8)
        c = ember.zeros(x.shape[0], 8)
        for t in range(x.shape[1]):
            h, c = mod(x[:, t], (h, c))
        return h.pow(2).sum()

    x = ember.randn(5, steps, 6)
    compiled = ember.compile(run)
    loss = compiled(cell, x)
    loss.backward()
    got = [p.grad.numpy().copy() for p in cell.parameters()]
    for p in cell.parameters():
        p.grad = None
    want_loss = run(cell, x)
    want_loss.backward()
    np.testing.assert_allclose(loss.item(), want_loss.item(), rtol=1e-5)
    for a, p in zip(got, cell.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=2e-4, atol=2e-5)
