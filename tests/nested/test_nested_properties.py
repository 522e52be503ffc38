"""Properties of ember.nested that need no oracle (these also run where torch is not installed):
for random ragged batches (hypothesis: lengths 0..5, one to five components, both layouts, float32
and float64) every op on the nested tensor equals the same op on each component alone, values and
gradients, and to_padded_tensor puts each component in its corner with the padding elsewhere."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn.functional as F

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}

batches = st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=5), st.sampled_from(["strided", "jagged"]),
                    st.sampled_from(["float32", "float64"]), st.integers(0, 2 ** 31 - 1))


def _make(lens, layout, dtype, seed, tail=(3,)):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal((n,) + tail).astype(dtype) for n in lens]
    nt = ember.nested.nested_tensor([ember.tensor(a) for a in arrs], layout=getattr(ember, layout),
                                    requires_grad=True)
    return rng, arrs, nt


OPS = [
    ("gelu", lambda x: F.gelu(x)),
    ("silu", lambda x: F.silu(x)),
    ("softmax", lambda x: F.softmax(x, -1)),
    ("log_softmax", lambda x: F.log_softmax(x, -1)),
    ("affine", lambda x: (x * 1.5 - 0.25) / 2),
    ("layer_norm", lambda x: F.layer_norm(x, (3,), ember.ones(3, dtype=x.dtype) * 1.5, ember.zeros(3, dtype=x.dtype))),
    ("linear", lambda x: F.linear(x, ember.arange(6, dtype=x.dtype).reshape(2, 3) / 5, ember.ones(2, dtype=x.dtype))),
    ("sum", lambda x: x.sum(-1, keepdim=True)),
]


@pytest.mark.parametrize("name,fn", OPS, ids=[n for n, _ in OPS])
@settings(max_examples=8, deadline=None)
@given(batch=batches)
def test_op_equals_per_component(name, fn, batch):
    lens, layout, dtype, seed = batch
    rng, arrs, nt = _make(lens, layout, dtype, seed)
    out = fn(nt)
    assert out.is_nested and out.layout is nt.layout and len(out) == len(lens)
    refs = []
    for a in arrs:
        c = ember.tensor(a, requires_grad=True)
        refs.append((c, fn(c)))
    ws = [rng.standard_normal(tuple(r.shape)).astype(dtype) for _, r in refs]
    for c, (_, r) in zip(out.unbind(), refs):
        assert tuple(c.shape) == tuple(r.shape)
        np.testing.assert_allclose(c.detach().numpy(), r.detach().numpy(), **TOL[dtype])
    sum((c * ember.tensor(w)).sum() for c, w in zip(out.unbind(), ws)).backward()
    for (leaf, r), w in zip(refs, ws):
        (r * ember.tensor(w)).sum().backward()
    for g, (leaf, _) in zip(nt.grad.unbind(), refs):
        np.testing.assert_allclose(g.numpy(), leaf.grad.numpy(), **TOL[dtype])


@settings(max_examples=15, deadline=None)
@given(batch=batches, padding=st.floats(-3, 3, allow_nan=False))
def test_to_padded_tensor_and_its_gradient(batch, padding):
    lens, layout, dtype, seed = batch
    rng, arrs, nt = _make(lens, layout, dtype, seed)
    p = ember.nested.to_padded_tensor(nt, padding)
    assert tuple(p.shape) == (len(lens), max(lens), 3) and p.dtype is getattr(ember, dtype)
    pn = p.detach().numpy()
    for i, a in enumerate(arrs):
        np.testing.assert_array_equal(pn[i, :len(a)], a)
        assert (pn[i, len(a):] == np.asarray(padding, dtype)).all()
    w = rng.standard_normal(pn.shape).astype(dtype)
    (p * ember.tensor(w)).sum().backward()
    for i, g in enumerate(nt.grad.unbind()):
        np.testing.assert_array_equal(g.numpy(), w[i, :lens[i]])


@settings(max_examples=15, deadline=None)
@given(batch=batches)
def test_transpose_reshape_and_jagged_views(batch):
    lens, layout, dtype, seed = batch
    rng, arrs, nt = _make(lens, layout, dtype, seed, tail=(2, 3))
    for c, a in zip(nt.transpose(1, 2).unbind(), arrs):
        np.testing.assert_array_equal(c.detach().numpy(), a.transpose(1, 0, 2))
    for c, a in zip(nt.transpose(2, 3).contiguous().unbind(), arrs):
        np.testing.assert_array_equal(c.detach().numpy(), a.transpose(0, 2, 1))
    for c, a in zip(nt.reshape(len(lens), -1, 6).unbind(), arrs):
        np.testing.assert_array_equal(c.detach().numpy(), a.reshape(len(a), 6))
    if layout == "jagged":
        v = nt.values()
        assert tuple(v.shape) == (sum(lens), 2, 3)
        np.testing.assert_array_equal(nt.offsets().numpy(), np.concatenate([[0], np.cumsum(lens)]))
        again = ember.nested.nested_tensor_from_jagged(v, nt.offsets())
        for c, a in zip(again.unbind(), arrs):
            np.testing.assert_array_equal(c.detach().numpy(), a)
