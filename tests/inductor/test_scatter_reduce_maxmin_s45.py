"""scatter_reduce(reduce='amax'/'amin') compiled: prims.scatter_amax/scatter_amin, their
decomposition and their C++ lowering (a max/min folded into the scatter loop).

Before, the decomposition returned NotImplemented (no prim reduced by max into a scatter
target), so a graph holding one -- scatter_reduce itself, EmbeddingBag(mode='max') -- ran
eagerly. Compared with eager and with torch: forward, gradients, dynamic sizes, NaN (a NaN
wins, in either operand) and include_self=False (only src reaches a scattered-to slot).
"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import prims


def _t(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_(True) if grad else t


def _compile_check(f, args, grad_of=(), dynamic=None, against_eager=True):
    """Compiled == eager (to a few ulps: a fused ``sin`` epilogue) and the graph compiled."""
    ember.dynamo.reset()
    a1 = [_t(a.detach().numpy(), k in grad_of) for k, a in enumerate(args)]
    a2 = [_t(a.detach().numpy(), k in grad_of) for k, a in enumerate(args)]
    got = ember.compile(f, backend="inductor", dynamic=dynamic)(*a1)
    if against_eager:
        want = f(*a2)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-7)
    if grad_of:
        w = _t(np.random.default_rng(7).uniform(-1, 1, tuple(got.shape)).astype(np.float32))
        (got * w).sum().backward()
        (want * w).sum().backward()
        for k in grad_of:
            np.testing.assert_allclose(a1[k].grad.numpy(), a2[k].grad.numpy(), rtol=1e-6, atol=1e-7)
    c = ember.dynamo.counters
    assert c["compiled"] == 1 and c["eager_fallback"] == 0 and c["graph_breaks"] == 0, dict(c)
    return got


def _data(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x, s = rng.uniform(-2, 2, (4, 6)).astype(dtype), rng.uniform(-2, 2, (4, 5)).astype(dtype)
    else:
        x, s = rng.integers(-9, 9, (4, 6)).astype(dtype), rng.integers(-9, 9, (4, 5)).astype(dtype)
    return x, rng.integers(0, 3, (3, 5)), s      # index narrower than src and self: repeats


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_scatter_reduce_maxmin_compiles(reduce, include_self, dtype, strict_lowering):
    x, i, s = _data(dtype)

    def f(x, i, s):
        return x.scatter_reduce(1, i, s, reduce, include_self=include_self) * 3

    _compile_check(f, [_t(x), _t(i), _t(s)])


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_maxmin_training_and_dynamic(reduce, include_self, strict_lowering):
    x, i, s = _data(seed=1)

    def f(x, i, s):
        return x.scatter_reduce(0, i, s, reduce, include_self=include_self).sin()

    _compile_check(f, [_t(x), _t(i), _t(s)], grad_of=(0, 2))
    _compile_check(f, [_t(x), _t(i), _t(s)], dynamic=True)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_maxmin_nonfinite_matches_torch(reduce, include_self, strict_lowering):
    """A NaN wins whichever side it is on; with include_self=False a slot that only -inf (amax)
    / inf (amin) reaches holds it (the identity the decomposition starts from is -inf/inf).
    Against torch: eager ember fills such a slot with the dtype's finite max/min instead
    (an eager bug, reported)."""
    torch = pytest.importorskip("torch")
    x, _, s = _data(seed=2)
    x[0, 1] = np.nan
    s[1, 2] = np.nan
    s[:, 4] = -np.inf if reduce == "amax" else np.inf
    i = np.zeros((3, 5), np.int64)
    i[:, 2] = 3
    i[:, 4] = 5                       # column 4 of src: only +-inf, into slot 5

    def f(x, i, s):
        return x.scatter_reduce(1, i, s, reduce, include_self=include_self)

    got = _compile_check(f, [_t(x), _t(i), _t(s)], against_eager=include_self)
    want = torch.from_numpy(x).scatter_reduce(1, torch.from_numpy(i), torch.from_numpy(s), reduce,
                                              include_self=include_self)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["scatter_amax", "scatter_amin"])
def test_scatter_maxmin_prims_match_torch(name):
    torch = pytest.importorskip("torch")
    x, i, s = _data(seed=3)
    got = getattr(prims, name)(_t(x), 1, _t(i), _t(s[:3]))
    want = torch.from_numpy(x).scatter_reduce(1, torch.from_numpy(i), torch.from_numpy(s[:3]), name[8:])
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dynamic", [None, True])
def test_embedding_bag_max_with_offsets_compiles(dynamic, strict_lowering):
    rng = np.random.default_rng(4)
    w = rng.uniform(-2, 2, (10, 4)).astype(np.float32)
    idx = rng.integers(0, 10, (12,))
    off = np.array([0, 3, 3, 7])       # an empty bag: zeros, as in eager

    def f(w, i, o):
        return F.embedding_bag(i, w, o, mode="max")

    _compile_check(f, [_t(w), _t(idx), _t(off)], grad_of=(0,), dynamic=dynamic)
