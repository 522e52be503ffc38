"""Pointwise groups whose indices divide a loop variable (a permuted view merged into one dim:
attention's heads gathered back into rows) loop over the divided dims instead
(``codegen/cpp._split_div_mod``): affine indices, no division or modulo per element, and the
cat's pieces still found on the split dim (``_segments`` with ``_split_zero``)."""
import re

import numpy as np
import pytest

import ember
from ember.inductor import config

from ._helpers import patched_config


def _sources(fn, *args):
    import importlib
    compile_fx = importlib.import_module("ember.inductor.compile_fx")
    sources = []
    orig = compile_fx.CompiledGraph.__init__

    def spy(self, graph, source, *a, **kw):
        sources.append(source)
        orig(self, graph, source, *a, **kw)

    compile_fx.CompiledGraph.__init__ = spy
    try:
        out = ember.compile(fn)(*args)
    finally:
        compile_fx.CompiledGraph.__init__ = orig
    return out, "\n".join(s[s.index('extern "C" void kernel'):] for s in sources if 'extern "C" void kernel' in s)


_DIVMOD = re.compile(r"\) / \(\d+\)\)|\) % \(\d+\)\)")


def _merge_heads(B, H, T, D):
    def f(a, b, c):
        return ember.cat([t.permute(0, 2, 1, 3).reshape(B, T, H * D) for t in (a, b, c)], dim=2)
    return f


@pytest.mark.parametrize("shape", [(2, 4, 16, 8), (3, 2, 5, 16), (1, 3, 7, 32)])
def test_merged_heads_cat_has_affine_indices(shape):
    B, H, T, D = shape
    f = _merge_heads(B, H, T, D)
    xs = [ember.randn(B, H, T, D) for _ in range(3)]
    out, src = _sources(f, *xs)
    assert not _DIVMOD.search(src), src
    assert src.count("// x2 in [") == 3, src                  # the cat's three pieces, on the split dim
    np.testing.assert_array_equal(out.numpy(), f(*xs).numpy())


def test_switch_off_keeps_the_division():
    B, H, T, D = 2, 4, 16, 8
    f = _merge_heads(B, H, T, D)
    xs = [ember.randn(B, H, T, D) for _ in range(3)]
    with patched_config(split_div_mod=False):
        out, src = _sources(f, *xs)
    assert _DIVMOD.search(src)
    np.testing.assert_array_equal(out.numpy(), f(*xs).numpy())


def test_merged_heads_with_pointwise_math_and_gradients():
    """A transposed merge feeding arithmetic, in a training graph: values and gradients as eager."""
    B, H, T, D = 2, 3, 10, 16
    w = ember.randn(H * D, requires_grad=True)

    def f(q):
        y = q.transpose(1, 2).reshape(B, T, H * D)
        return (y * w).tanh().sum()

    q = ember.randn(B, H, T, D, requires_grad=True)
    q2 = ember.tensor(q.detach().numpy(), requires_grad=True)
    out, src = _sources(f, q)
    out.backward()
    assert not _DIVMOD.search(src), src
    w_grad = w.grad.numpy().copy()
    w.grad = None
    ref = f(q2)
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5)
    np.testing.assert_allclose(q.grad.numpy(), q2.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_grad, w.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_random_permute_reshape_chains_match_eager(seed):
    """Random permutations of 4-d tensors merged into 2-3 dims, with offsets from slicing and a
    cat; divisors that do not chain or indices that keep a division fall back to the unsplit
    loops. Always the eager values."""
    rng = np.random.default_rng(seed)
    dims = [int(d) for d in rng.choice([2, 3, 4, 6, 8], size=4)]
    perm = [int(p) for p in rng.permutation(4)]
    a = ember.randn(*dims)
    b = ember.randn(*dims)
    shp = [dims[p] for p in perm]

    def f(a, b):
        u = a.permute(*perm).reshape(shp[0], -1)
        v = (b.permute(*perm) * 2).reshape(shp[0] * shp[1], -1)
        return ember.cat([u, u.flip(1)], dim=1) + 1, v.exp()

    got = ember.compile(f)(a, b)
    want = f(a, b)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=2e-7)     # (exp: ember's vs numpy's)


@pytest.mark.parametrize("shape", [(0, 2, 0), (3, 0, 4), (0,)])
def test_empty_views_compile(shape):
    """A reshape of an empty tensor (0, 2, 0) -> (0,) -> (0, 2, 0) gives the split
    zero-sized divisors: the split is skipped for an empty loop (it raised ZeroDivisionError,
    and the graph ran eagerly -- the fuzzer's ``a0.roll(24)`` of such an input in training)."""
    a = ember.from_numpy(np.zeros(shape, np.float32)).requires_grad_(True)

    def f(a):
        return (a.reshape(-1) * 2).reshape(shape), a.roll(24)

    old = config.debug_lowering
    config.debug_lowering = True          # a lowering that fails raises instead of running eagerly
    try:
        ember.dynamo.reset()
        got = ember.compile(f)(a)
    finally:
        config.debug_lowering = old
    want = f(a)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
    sum(o.sum() for o in got).backward()
    assert tuple(a.grad.shape) == shape
    assert ember.dynamo.counters["eager_fallback"] == 0
