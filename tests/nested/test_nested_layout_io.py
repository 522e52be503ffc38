"""Against torch 2.13: ``nested_tensor_from_jagged(..., jagged_dim=2)``, ``values()`` /
``is_contiguous()`` / ``contiguous()`` of permuted jagged tensors, jagged printing with
requires_grad / grad_fn, ``ember.save`` / ``ember.load`` round trips (torch.save's), pickling
(refused as for every ember tensor), SDPA's attn_mask refusal."""
from __future__ import annotations

import io
import pickle
import re

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

from ._util import LAYOUTS, as_np, assert_nested_close, lengths, pair

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _norm(text):
    return re.sub(r"j\d+", "j", re.sub(r"0x[0-9a-f]+", "0x", text)).replace("torch.", "ember.")


def _from_jagged_pair(v, offs, lens=None, jagged_dim=None, requires_grad=False):
    ev, tv = ember.tensor(v, requires_grad=requires_grad), torch.tensor(v, requires_grad=requires_grad)
    el = None if lens is None else ember.tensor(lens)
    tl = None if lens is None else torch.tensor(lens)
    e = ember.nested.nested_tensor_from_jagged(ev, ember.tensor(offs), el, jagged_dim=jagged_dim)
    t = torch.nested.nested_tensor_from_jagged(tv, torch.tensor(offs), tl, jagged_dim=jagged_dim)
    return e, t, ev, tv


# ---------------------------------------------------------------------- jagged_dim
def test_jagged_dim_2_matches_torch():
    rng = np.random.default_rng(1)
    v = rng.standard_normal((3, 6, 4))
    offs = np.array([0, 2, 2, 6])
    e, t, ev, tv = _from_jagged_pair(v, offs, jagged_dim=2, requires_grad=True)
    assert _norm(repr(e.detach())) == _norm(repr(t.detach()))
    assert e.grad_fn is not None and t.grad_fn is not None           # views of the values
    assert _norm(str(e.shape)) == _norm(str(t.shape))
    np.testing.assert_array_equal(as_np(e.values()), t.values().detach().numpy())
    assert e.is_contiguous() and t.is_contiguous()
    assert_nested_close(e, t)
    for f in (lambda x: x.sin() * 2, lambda x: x.softmax(-1), lambda x: x.transpose(1, 2),
              lambda x: x.transpose(1, 3), lambda x: x.sum(-1), lambda x: x[..., 1],
              lambda x: x.transpose(1, 2).contiguous(), lambda x: x.unsqueeze(-1)):
        oe, ot = f(e), f(t)
        assert_nested_close(oe, ot)
        assert tuple(oe.values().shape) == tuple(ot.values().shape)
        assert oe._ragged_idx == ot._ragged_idx
    # (torch 2.13 sizes the padded ragged dim of a jagged_dim=2 tensor by the wrong dim: the
    # reference is built from the components)
    want = np.full((3, 3, 4, 4), 0.5)
    for i, c in enumerate(t.unbind()):
        want[i, :, :c.shape[1]] = c.detach().numpy()
    np.testing.assert_array_equal(as_np(e.to_padded_tensor(0.5)), want)
    # gradients reach the values (torch: through its view)
    ws = [rng.standard_normal(tuple(c.shape)) for c in t.unbind()]
    sum((c.sin() * ember.tensor(w)).sum() for c, w in zip(e.unbind(), ws)).backward()
    sum((c.sin() * torch.tensor(w)).sum() for c, w in zip(t.unbind(), ws)).backward()
    np.testing.assert_allclose(as_np(ev.grad), tv.grad.numpy(), rtol=1e-12)


def test_jagged_dim_errors():
    v = np.zeros((3, 6, 4))
    with pytest.raises(ValueError, match=re.escape("Expected jagged_dim >=1, but got 0.")):
        ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor(np.array([0, 6])), jagged_dim=0)
    with pytest.raises(ValueError, match=re.escape("Expected jagged_dim >=1, but got 0.")):
        torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(np.array([0, 6])), jagged_dim=0)
    with pytest.raises(IndexError, match="jagged_dim=4"):
        ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor(np.array([0, 6])), jagged_dim=4)


# ---------------------------------------------------------------------- values / contiguity
def test_transposed_values_and_contiguous_match_torch():
    rng = np.random.default_rng(2)
    lens = lengths(rng)
    e, t = pair([rng.standard_normal((n, 5, 4)) for n in lens], "jagged", requires_grad=True)
    for f in (lambda x: x.transpose(1, 2), lambda x: x.transpose(2, 3), lambda x: x.transpose(1, 3)):
        oe, ot = f(e), f(t)
        np.testing.assert_array_equal(as_np(oe.values()), ot.values().detach().numpy())
        assert oe.is_contiguous() == ot.is_contiguous() is False
        ce, ct = oe.contiguous(), ot.contiguous()
        assert ce.is_contiguous() and ct.is_contiguous()
        assert_nested_close(ce, ct)
        np.testing.assert_array_equal(as_np(ce.values()), ct.values().detach().numpy())
        assert _norm(repr(oe.detach())) == _norm(repr(ot.detach()))
    # contiguous() is differentiable
    ws = [rng.standard_normal((5, n, 4)) for n in lens]
    sum((c * ember.tensor(w)).sum() for c, w in zip(e.transpose(1, 2).contiguous().unbind(), ws)).backward()
    for g, w in zip(e.grad.unbind(), ws):
        np.testing.assert_array_equal(as_np(g), np.swapaxes(w, 0, 1))


# ---------------------------------------------------------------------- printing
def test_jagged_repr_with_autograd_matches_torch():
    rng = np.random.default_rng(3)
    e, t = pair([rng.standard_normal((n, 3)) for n in (2, 5)], "jagged", requires_grad=True)
    assert _norm(repr(e)) == _norm(repr(t))                        # requires_grad=True
    for f in (lambda x: x * 2, lambda x: x.sin(), lambda x: x + x):
        assert _norm(repr(f(e))) == _norm(repr(f(t)))              # grad_fn=<MulBackward0 object at 0x...>
    assert _norm(repr(e.detach())) == _norm(repr(t.detach()))


# ---------------------------------------------------------------------- save / load / pickle
@pytest.mark.parametrize("layout", LAYOUTS)
def test_save_load_round_trip(layout):
    rng = np.random.default_rng(4)
    arrs = [rng.standard_normal((n, 3)) for n in lengths(rng)]
    e, t = pair(arrs, layout, requires_grad=True)
    objs = {"nt": e, "list": [e.detach() * 2], "plain": ember.ones(2)}
    if layout == "jagged":
        objs["transposed"] = e.detach().unsqueeze(-1).transpose(1, 2)
    buf = io.BytesIO()
    ember.save(objs, buf)
    buf.seek(0)
    got = ember.load(buf)
    tb = io.BytesIO()
    torch.save(t, tb)
    tb.seek(0)
    want = torch.load(tb)
    assert got["nt"].layout is e.layout and got["nt"].requires_grad == want.requires_grad is True
    assert got["nt"].is_leaf       # (torch's strided load comes back as a view of its buffer)
    assert_nested_close(got["nt"], want)
    assert_nested_close(got["list"][0], (t * 2).detach())
    if layout == "jagged":
        assert got["nt"].size(1) is not e.size(1)                  # a fresh ragged size, as torch's
        np.testing.assert_array_equal(as_np(got["nt"].offsets()), want.offsets().numpy())
        assert_nested_close(got["transposed"], t.detach().unsqueeze(-1).transpose(1, 2))
        assert got["transposed"]._ragged_idx == 2


def test_save_load_holey_jagged_keeps_lengths():
    rng = np.random.default_rng(5)
    v = rng.standard_normal((9, 2))
    e, t, _, _ = _from_jagged_pair(v, np.array([0, 3, 7]), np.array([2, 1]))
    buf = io.BytesIO()
    ember.save(e, buf)
    buf.seek(0)
    got = ember.load(buf)
    assert not got.is_contiguous()
    np.testing.assert_array_equal(as_np(got.lengths()), t.lengths().numpy())
    assert _norm(repr(got)) == _norm(repr(t))
    assert_nested_close(got, t)


def test_pickle_of_nested_refused():
    # (session 31: plain ember tensors pickle now, tests/test_checkpoint_interop.py; nested do not)
    e = ember.nested.nested_tensor([ember.ones(2, 3)], layout=ember.jagged)
    with pytest.raises(RuntimeError, match="not picklable"):   # (ember/nested/_tensor.py __reduce_ex__)
        pickle.dumps(e)
    assert pickle.loads(pickle.dumps(ember.ones(2))).tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------- SDPA
def test_sdpa_attn_mask_refused_as_torch():
    rng = np.random.default_rng(6)
    arrs = [rng.standard_normal((n, 2, 4)) for n in (2, 3)]
    e, t = pair(arrs, "jagged")
    qe, qt = e.transpose(1, 2), t.transpose(1, 2)
    for mask in (np.zeros((3, 3)), np.ones((3, 3), dtype=bool)):
        with pytest.raises(ValueError) as te:
            TF.scaled_dot_product_attention(qt, qt, qt, attn_mask=torch.tensor(mask))
        with pytest.raises(ValueError) as ee:
            EF.scaled_dot_product_attention(qe, qe, qe, attn_mask=ember.tensor(mask))
        assert str(ee.value) == str(te.value)
    dense = rng.standard_normal((2, 2, 3, 4))
    with pytest.raises(ValueError) as te:
        TF.scaled_dot_product_attention(qt, torch.tensor(dense), torch.tensor(dense))
    with pytest.raises(ValueError) as ee:
        EF.scaled_dot_product_attention(qe, ember.tensor(dense), ember.tensor(dense))
    assert str(ee.value) == str(te.value)
    es, ts = pair([a.transpose(1, 0, 2) for a in arrs], "strided")
    with pytest.raises(RuntimeError) as te:
        TF.scaled_dot_product_attention(ts, ts, ts, attn_mask=torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(RuntimeError) as ee:
        EF.scaled_dot_product_attention(es, es, es, attn_mask=ember.zeros(3, 3, dtype=ember.float64))
    assert str(ee.value) == str(te.value)
