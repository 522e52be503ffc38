"""``unfold`` / ``as_strided`` of non-contiguous inputs around in-place writes: compiled vs eager.

Why: ``unfold``'s kernel is ``as_strided`` with the traced input's strides, and a graph keeps
those strides while the value they are applied to may be laid out otherwise:

* after ``a.unfold(...).mul_(k)`` functionalization rebinds ``a`` to its new (contiguous)
  value, and an ``a.unfold(...)`` taken afterwards read it with ``a``'s old strides: for a
  transposed input, other elements (silently). ``unfold`` is now recorded whole and
  lowered as a view by value.
* a graph compiled for symbolic sizes gets every input as a contiguous copy; an
  ``as_strided`` reading a non-contiguous input then read the copy with the original
  strides -- other elements or past the end of the buffer (garbage such as 1e+253).
  Such graphs now run in the fx Interpreter on the inputs as they are, and an
  ``as_strided`` whose input layout differs from its eager one never takes the numpy
  reference fallback (which reads the same array).
"""
import numpy as np
import pytest

import ember


def _transposed(seed, shape=(2, 3, 4)):
    rng = np.random.default_rng(seed)
    return ember.from_numpy(rng.uniform(-2, 2, shape[::-1])).permute(*range(len(shape) - 1, -1, -1))


def _sliced(seed, shape=(4, 2, 6)):
    rng = np.random.default_rng(seed)
    return ember.from_numpy(rng.uniform(-2, 2, shape[:-1] + (2 * shape[-1] + 1,)))[..., 1::2]


def _check(f, make, dynamic, n_calls=2, compiled=True):
    ember.dynamo.reset()
    cf = ember.compile(f, backend="inductor", dynamic=dynamic)
    for call in range(n_calls):
        a, b = make(call), make(call)
        got, want = cf(a), f(b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    c = ember.dynamo.counters
    assert c["graph_breaks"] == 0 and c["eager_fallback"] == 0, dict(c)


@pytest.mark.parametrize("dynamic", [None, True])
def test_unfold_taken_again_after_inplace_on_transposed_input(dynamic, strict_lowering):
    def f(a):
        a.unfold(1, 2, 1).mul_(2)       # overlapping windows: the write doubles some twice
        z = a.unfold(1, 2, 1)
        return z * 1, a.unfold(2, 3, 2).sum(-1)

    _check(f, _transposed, dynamic)


def test_unfold_chain_select_inplace_on_transposed_input(strict_lowering):
    def f(a):
        a.unfold(1, 1, 1).unfold(2, 2, 1).select(3, -1).pow_(2)
        return a.unfold(1, 1, 1) * 2, a * 1

    _check(f, lambda s: _transposed(s, (5, 4, 6, 2)), None)


@pytest.mark.parametrize("make", [_sliced, _transposed], ids=["sliced", "transposed"])
def test_inplace_through_unfold_of_strided_input_dynamic(make):
    def f(a):
        w = a.unfold(0, 2, 1)
        w.add_(1.5)
        return a * 1, w + 0, w.sum()

    _check(f, make, True)


def test_as_strided_of_sliced_input_dynamic():
    def f(a):
        return (a.as_strided((2, 3), (4, 2), 1) * 2,)

    ember.dynamo.reset()
    cf = ember.compile(f, backend="inductor", dynamic=True)
    for seed in range(2):
        base = np.random.default_rng(seed).uniform(-2, 2, (3, 9))
        a = ember.from_numpy(base.copy())[:, ::2]
        got = cf(a)[0]
        want = f(ember.from_numpy(base.copy())[:, ::2])[0]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_unfold_inplace_matches_torch():
    torch = pytest.importorskip("torch")
    base = np.random.default_rng(7).uniform(-2, 2, (4, 3, 5))

    def f(a):
        a.unfold(2, 2, 2).mul_(3)
        return a.unfold(1, 2, 1).sum(-1)

    a = ember.from_numpy(base.copy()).permute(2, 0, 1)
    t = torch.from_numpy(base.copy()).permute(2, 0, 1)
    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor")(a)
    want = f(t)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-12)
