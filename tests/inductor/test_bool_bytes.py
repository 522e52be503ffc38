"""bool tensors in the C++ kernels are bytes: read as ``byte != 0`` through ``uint8_t`` pointers
and written as 0 or 1 (``codegen/cpp.py`` STORAGE; a load typed ``bool`` made GCC's vector code
4.4x slower in nanoGPT's masked softmax). Values against eager on random data; bool outputs
hold only the bytes 0 and 1, as numpy's do; a mask holding other nonzero bytes reads as True,
as numpy reads it."""
import re

import numpy as np
import pytest

import ember
import ember.prims as P

from ._helpers import assert_same, compile_and_run, rand

RNG = np.random.default_rng()


def _no_bool_pointers(src):
    assert not re.search(r"\bbool\s*\*", src), "a bool buffer is read or written through a bool pointer"


def test_masked_softmax_reads_its_mask_as_bytes():
    n, t = 6, 37
    scores = rand(n, t, t)
    mask = ember.tensor(np.triu(np.ones((t, t), np.bool_), 1))         # causal: above the diagonal

    def f(s, m):
        filled = P.where(P.broadcast_in_dim(m, [n, t, t], [1, 2]), float("-inf"), P.mul(s, 0.125))
        mx = P.amax(filled, [2])
        e = P.exp(P.sub(filled, P.broadcast_in_dim(mx, [n, t, t], [0, 1])))
        return P.div(e, P.broadcast_in_dim(P.sum(e, [2]), [n, t, t], [0, 1]))
    cf, got, want = compile_and_run(f, scores, mask)
    src = cf.compiled.source
    _no_bool_pointers(src)
    assert re.search(r"const uint8_t\* __restrict__ arg1\b", src), src
    assert re.search(r"\(arg1\[[^\]]*\] != 0\)", src), src
    assert_same(got[0], want[0], rtol=2e-6, atol=1e-7)
    assert (got[0][:, np.triu(np.ones((t, t), bool), 1)] == 0).all()


@pytest.mark.parametrize("shape", [(5, 33), (2, 3, 17)])
def test_computed_bools_are_stored_as_0_or_1(shape):
    x, y = rand(*shape), rand(*shape)

    def f(a, b):
        gt = P.gt(a, b)
        both = P.bitwise_and(gt, P.lt(a, 0.5))
        return gt, both, P.logical_not(both), P.any(both, [len(shape) - 1]), P.all(gt, [0])
    cf, got, want = compile_and_run(f, x, y)
    _no_bool_pointers(cf.compiled.source)
    for g, w in zip(got, want):
        assert g.dtype == np.bool_
        assert_same(g, w)
        assert g.view(np.uint8).max(initial=0) <= 1


def test_nonzero_bytes_other_than_one_read_as_true():
    """A bool array whose bytes are not all 0/1 (a uint8 buffer viewed as bool): where() takes
    every nonzero byte as True, as numpy does."""
    raw = RNG.integers(0, 4, size=(9, 21)).astype(np.uint8)             # bytes 0..3
    mask = ember.tensor(raw.view(np.bool_))
    x, y = rand(9, 21), rand(9, 21)
    cf, got, _ = compile_and_run(lambda m, a, b: P.where(m, a, b), mask, x, y)
    np.testing.assert_array_equal(got[0], np.where(raw != 0, x.numpy(), y.numpy()))
    _no_bool_pointers(cf.compiled.source)


def test_bool_mask_end_to_end_matches_eager():
    """masked_fill with a broadcast causal mask, through ember.compile and its backward."""
    t = 19

    def f(q, k):
        att = q @ k.transpose(-2, -1)
        mask = ember.ones(t, t).tril() == 0
        return ember.nn.functional.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
    q = ember.tensor(RNG.standard_normal((3, t, 8)).astype(np.float32), requires_grad=True)
    k = ember.tensor(RNG.standard_normal((3, t, 8)).astype(np.float32), requires_grad=True)
    want = f(q, k)
    (want * want).sum().backward()
    gq, gk = q.grad.numpy().copy(), k.grad.numpy().copy()
    q.grad = k.grad = None
    got = ember.compile(f)(q, k)
    (got * got).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(q.grad.numpy(), gq, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(k.grad.numpy(), gk, rtol=1e-4, atol=1e-5)
