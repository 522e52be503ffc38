"""as_strided/unfold backward on an input whose elements share memory (an expanded tensor):
each element sharing a location takes its share, as torch's as_strided_backward; before, the
expanded copies each got the whole gradient and expand's backward summed them (k times)."""
import numpy as np
import pytest

import ember
from ember.ops.shape import _may_overlap


def _grad(fn, x, w):
    a = ember.from_numpy(x).requires_grad_()
    (fn(a) * ember.from_numpy(w)).sum().backward()
    return a.grad.numpy()


def _fd(fn, x, w, eps=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        f = lambda v: float((fn(ember.from_numpy(v)) * ember.from_numpy(w)).sum())  # noqa: E731
        out[i] = (f(hi) - f(lo)) / (2 * eps)
    return out


CASES = [
    ("expand_unfold", (1, 9), lambda a: a.unsqueeze(0).expand(2, 1, 9).unfold(-1, 3, 3), (2, 1, 3, 3)),
    ("expand_unfold_overlapping", (4,), lambda a: a.expand(3, 4).unfold(1, 2, 1), (3, 3, 2)),
    ("expand_as_strided", (5,), lambda a: a.expand(2, 5).as_strided((2, 3), (0, 1), 1), (2, 3)),
    ("plain_unfold", (2, 7), lambda a: a.unfold(1, 3, 2), (2, 3, 3)),
]


@pytest.mark.parametrize("name,shape,fn,wshape", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(name, shape, fn, wshape):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x, w = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, wshape)
    np.testing.assert_allclose(_grad(fn, x, w), _fd(fn, x, w), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,shape,fn,wshape", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_torch(name, shape, fn, wshape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(abs(hash(name)) % 2**32 + 1)
    x, w = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, wshape)
    t = torch.from_numpy(x).requires_grad_()
    (fn(t) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(_grad(fn, x, w), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_overlap_detection():
    assert _may_overlap((2, 9), (0, 1))
    assert _may_overlap((3, 2), (1, 1))           # unfold's overlapping windows
    assert not _may_overlap((2, 9), (9, 1))
    assert not _may_overlap((3, 1, 4), (4, 0, 1))   # a size-1 dim's stride does not matter
    assert not _may_overlap((4, 3), (1, 4))         # transposed
