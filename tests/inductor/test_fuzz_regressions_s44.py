"""Bugs the compiler fuzzer (test_fuzz_compiled.py) found in session 44, minimised by hand.

The signed-size ones (a dynamic roll by a negative shift; a negative size expression used as a
tensor value) are in test_signed_size_division.py; the empty-loop split in
test_split_div_mod_s34.py.
"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F


@pytest.mark.parametrize("shape,pad", [((3, 0, 2, 0), (0, 3)), ((3, 2, 0), (1, 2)), ((2, 0), (2, 0)),
                                       ((4, 0, 0), (1, 1, 2, 0))])
def test_constant_pad_of_an_empty_dim(shape, pad, strict_lowering):
    """The padded dim holds no element: every output position is the fill value. The pad's
    gather clamped its source index to 0 -- out of range of the empty dim -- and the selection's
    index check raised IndexError at run time (eager pads fine)."""
    def f(a):
        return F.pad(a, pad, value=1.5) * 2.0

    a = ember.from_numpy(np.zeros(shape, np.float32)).requires_grad_(True)
    want = f(a)
    ember.dynamo.reset()
    got = ember.compile(f)(a)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    assert tuple(a.grad.shape) == shape


@pytest.mark.parametrize("training", [False, True])
def test_topk_with_a_symbolic_k_runs_correctly(training, strict_dynamic):
    """``topk(x, x.shape[1] // 2)`` under dynamic=True: the numpy fallback got ``k`` as a sympy
    expression and raised TypeError in the user's call (then, session 44, the graph ran eagerly).
    The wrapper now computes ``k`` per call from the input's size (``ir.ExternSize``): compiled
    once for every size, values and gradients as eager's."""
    def f(x):
        v, i = x.topk(x.shape[1] // 2, 1)
        return v * 2, i

    ember.dynamo.reset()
    c = ember.compile(f, dynamic=True)
    for i, shp in enumerate([(7, 9), (5, 12), (3, 4), (2, 15)]):
        x = ember.from_numpy(np.random.default_rng(i).uniform(-2, 2, shp).astype(np.float32))
        xs = [x.clone().requires_grad_(training) for _ in range(2)]
        got, want = c(xs[0]), f(xs[1])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())
        if training:
            (got[0] * xs[0][:, :1]).sum().backward()
            (want[0] * xs[1][:, :1]).sum().backward()
            np.testing.assert_array_equal(xs[0].grad.numpy(), xs[1].grad.numpy())
    assert ember.dynamo.counters["eager_fallback"] == 0
    assert ember.dynamo.counters["recompiles"] <= 1      # the static first call, then one dynamic graph


@pytest.mark.parametrize("shape,dim", [((2, 0), -1), ((0, 3), 0), ((2, 0, 4), 1)])
def test_cat_of_pieces_all_empty_along_the_dim(shape, dim, strict_lowering):
    """Every piece empty along the cat dim: the select chain had no piece and the kernel stored
    ``None`` (the C++ did not compile, and the graph ran eagerly)."""
    def f(a):
        return ember.cat([a, a * 2], dim) + 1

    a = ember.from_numpy(np.zeros(shape, np.float32))
    ember.dynamo.reset()
    got = ember.compile(f)(a)
    assert tuple(got.shape) == tuple(f(a).shape)
    assert ember.dynamo.counters["eager_fallback"] == 0


@pytest.mark.parametrize("shape,new", [((0,), (0, 1)), ((0, 3), (3, 0)), ((2, 0), (0, 5))])
def test_view_of_a_flipped_empty_tensor_in_training(shape, new, strict_lowering):
    """``a.flip(0).reshape(0, 1)`` of an empty tensor that requires grad: the view's index
    rewrite divided by the empty dim's zero size (ZeroDivisionError in ModularIndexing; the
    fuzzer's seed 312)."""
    def f(a):
        return a.flip(0).reshape(new) * 2.0

    a = ember.from_numpy(np.zeros(shape, np.float64)).requires_grad_(True)
    ember.dynamo.reset()
    got = ember.compile(f)(a)
    assert tuple(got.shape) == new
    got.sum().backward()
    assert tuple(a.grad.shape) == shape
    assert ember.dynamo.counters["eager_fallback"] == 0
