"""In-place writes through ``diagonal`` of inputs with non-contiguous layouts: compiled vs eager.

Why: ``diagonal``'s decomposition flattens its two dims with a reshape and slices every
(n2 + 1)-th element. For an input sliced or transposed in those dims the reshape copies,
so functionalization followed ``a.diagonal().mul_(k)`` into the copy and the write never
reached ``a``: the caller's tensor stayed unchanged and later reads of ``a`` in the graph
saw the old values (a silent wrong answer). The decomposition now takes the transposed
matrix's diagonal where that flattens as a view, and leaves ``diagonal`` whole otherwise
(lowered as a view by the inductor) -- never falling back to eager.
"""
import numpy as np
import pytest

import ember


def _make(layout, seed):
    rng = np.random.default_rng(seed)
    if layout == "contig":
        return ember.from_numpy(rng.uniform(-2, 2, (2, 4, 5)))
    if layout == "transposed":
        return ember.from_numpy(rng.uniform(-2, 2, (5, 4, 2))).permute(2, 1, 0)
    if layout == "sliced_last":
        return ember.from_numpy(rng.uniform(-2, 2, (2, 4, 11)))[..., 1::2]
    if layout == "sliced_mid":
        return ember.from_numpy(rng.uniform(-2, 2, (2, 9, 5)))[:, ::2]
    raise AssertionError(layout)


def _close(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout,off,d1,d2,dynamic", [
    ("transposed", 1, 0, 2, None), ("transposed", -1, 2, 1, True),
    ("sliced_last", 0, -2, -1, None), ("sliced_last", -2, -2, -1, True), ("sliced_last", 1, 0, 2, None),
    ("sliced_mid", 1, -2, -1, None), ("sliced_mid", 0, 0, 1, True), ("contig", 1, 0, 2, None)])
def test_inplace_on_diagonal_of_strided_input(layout, off, d1, d2, dynamic, strict_lowering):
    def f(a):
        d = a.diagonal(off, d1, d2)
        d.mul_(10)
        # the input after the write, the written view, and a view made again afterwards
        return a * 1, d + 1, a.diagonal(off, d1, d2).sum()

    a, b = _make(layout, 0), _make(layout, 0)
    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor", dynamic=dynamic)(a)
    want = f(b)
    for g, w in zip(got, want):
        _close(g, w)
    _close(a, b)       # the mutation is visible to the caller
    c = ember.dynamo.counters
    assert c["compiled"] >= 1 and c["eager_fallback"] == 0 and c["graph_breaks"] == 0, dict(c)


@pytest.mark.parametrize("layout", ["transposed", "sliced_mid"])
def test_diagonal_reads_and_grads_of_strided_input(layout, strict_lowering):
    def f(a):
        return (a.diagonal(1, 0, 2) * a.diagonal(0, -1, -2).sum()).tanh()

    a = _make(layout, 1).requires_grad_()
    b = _make(layout, 1).requires_grad_()
    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor")(a)
    want = f(b)
    _close(got, want)
    w = ember.from_numpy(np.random.default_rng(2).uniform(-1, 1, tuple(want.shape)))
    (got * w).sum().backward()
    (want * w).sum().backward()
    _close(a.grad, b.grad)


def test_diagonal_inplace_matches_torch():
    torch = pytest.importorskip("torch")
    base = np.random.default_rng(3).uniform(-2, 2, (3, 9))

    def f(T, a):
        a.diagonal().add_(5)
        return a.sum(0)

    a = ember.from_numpy(base.copy())[:, 1::3]
    t = torch.from_numpy(base.copy())[:, 1::3]
    ember.dynamo.reset()
    got = ember.compile(lambda x: f(ember, x), backend="inductor")(a)
    want = f(torch, t)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-12)
