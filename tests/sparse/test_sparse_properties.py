"""Properties of ember's sparse kernels against numpy (no torch needed): for random shapes,
sparse_dims, densities and duplicate indices, to_dense adds duplicates up, coalesce keeps the
dense tensor and sorts/uniquifies the indices, the layouts convert losslessly, and products
and sums equal numpy's on the dense tensor."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

from ._sparse_helpers import random_coo_arrays


def _dense_ref(idx, vals, shape):
    sd = idx.shape[0]
    out = np.zeros(shape, vals.dtype)
    for k in range(idx.shape[1]):
        out[tuple(idx[:, k])] += vals[k]
    return out if sd else out + 0


def _np(t):
    return np.asarray(t.detach()._data)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, data=st.data(), dup=st.booleans(), seed=st.integers(0, 2 ** 16),
       dt=st.sampled_from([np.float32, np.float64]))
def test_coalesce_and_to_dense(shape, data, dup, seed, dt):
    sd = data.draw(st.integers(1, len(shape)))
    rng = np.random.default_rng(seed)
    idx, vals = random_coo_arrays(rng, shape, sd, duplicates=dup, dtype=dt)
    s = ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(vals), shape)
    ref = _dense_ref(idx, vals, shape)
    np.testing.assert_allclose(_np(s.to_dense()), ref, rtol=1e-5, atol=1e-6)
    c = s.coalesce()
    ci = _np(c.indices())
    lin = np.ravel_multi_index(tuple(ci), shape[:sd]) if ci.shape[1] else ci[0]
    assert c.is_coalesced() and np.all(np.diff(lin) > 0)
    np.testing.assert_allclose(_np(c.to_dense()), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ember.sparse.sum(s)), ref.sum(), rtol=1e-4, atol=1e-5)
    for d in range(len(shape)):
        r = ember.sparse.sum(s, d)
        np.testing.assert_allclose(_np(r.to_dense() if r.layout != "strided" else r), ref.sum(d),
                                   rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 4), dup=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_products_and_layouts(m, k, n, dup, seed):
    rng = np.random.default_rng(seed)
    idx, vals = random_coo_arrays(rng, (m, k), duplicates=dup)
    s = ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(vals), (m, k))
    a = _dense_ref(idx, vals, (m, k))
    d = rng.standard_normal((k, n))
    np.testing.assert_allclose(_np(ember.sparse.mm(s, ember.tensor(d))), a @ d, rtol=1e-10, atol=1e-12)
    w = rng.standard_normal((n, m))
    np.testing.assert_allclose(_np(ember.tensor(w) @ s), w @ a, rtol=1e-10, atol=1e-12)
    for conv in ("to_sparse_csr", "to_sparse_csc"):
        c = getattr(s, conv)()
        np.testing.assert_allclose(_np(c.to_dense()), a, rtol=1e-12)
        np.testing.assert_allclose(_np(c @ ember.tensor(d)), a @ d, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_np(c.to_sparse_coo().to_dense()), a, rtol=1e-12)
    np.testing.assert_allclose(_np(s.t().to_dense()), a.T, rtol=1e-12)
    np.testing.assert_allclose(_np((s * s).to_dense()), a * a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np((s + s.t().t()).to_dense()), 2 * a, rtol=1e-10, atol=1e-12)
