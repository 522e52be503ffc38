"""``nt[index]`` against torch 2.13: what each layout accepts (values, shapes, contiguity), what it
refuses (error type and message), gradients through select / slice, writes through the view."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember

from ._util import LAYOUTS, as_np, assert_nested_close, lengths, pair

torch = pytest.importorskip("torch")

_INDICES = ["0", "-1", "(0, 1)", "(0, slice(1, 3))", "(1, Ellipsis, 0)", "(slice(None), 0)", "(Ellipsis, 0)",
            "(Ellipsis, -1)", "(Ellipsis, slice(1, 3))", "(Ellipsis, 0, slice(None))", "(Ellipsis, slice(None), 0)",
            "(Ellipsis, slice(None, None, 2))", "(Ellipsis, slice(1, None), 0)", "(Ellipsis, None)",
            "(Ellipsis, 5)", "(Ellipsis, slice(0, 1), slice(None), slice(None))",
            "(Ellipsis, 0, slice(None), slice(None))", "(None,)", "(Ellipsis, True)", "(0, 0, 0, 0, 0)"]


def _outcome(x, ix):
    try:
        r = x[eval(ix)]
    except Exception as ex:     # noqa: BLE001 -- the error is what is compared
        first = re.sub(r"j\d+", "j", str(ex).splitlines()[0])
        return "error", type(ex).__name__, first[:60]
    if r.is_nested:
        return "nested", [c.detach().numpy() for c in r.unbind()], r.is_contiguous()
    return "dense", r.detach().numpy(), None


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("ix", _INDICES)
def test_index_matches_torch(layout, ix):
    rng = np.random.default_rng(abs(hash(ix)) % 1009)
    lens = [max(n, 1) for n in lengths(rng)]
    e, t = pair([rng.standard_normal((n, 3, 4)) for n in lens], layout)
    got, want = _outcome(e, ix), _outcome(t, ix)
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1] and got[2] == want[2]
    elif got[0] == "dense":
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert len(got[1]) == len(want[1])
        for a, b in zip(got[1], want[1]):
            np.testing.assert_array_equal(a, b)
        if layout == "jagged":
            assert got[2] == want[2]


def test_jagged_select_and_slice_gradients():
    # torch's jagged layout has no slice_backward: the reference is the same indexing per component
    rng = np.random.default_rng(5)
    lens = lengths(rng)
    arrs = [rng.standard_normal((n, 3, 4)) for n in lens]
    e, t = pair(arrs, "jagged", requires_grad=True)
    f = lambda x: x[..., 1:4:2].sin()[..., 0, :] * 2          # noqa: E731
    oe = f(e)
    assert oe.size(1) is e.size(1)                                # the ragged size is kept
    assert_nested_close(oe, f(t))
    ws = [rng.standard_normal((n, 2)) for n in lens]
    sum((c * ember.tensor(w)).sum() for c, w in zip(oe.unbind(), ws)).backward()
    for g, a, w in zip(e.grad.unbind(), arrs, ws):
        ta = torch.tensor(a, requires_grad=True)
        (f(ta) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(as_np(g), ta.grad.numpy(), rtol=1e-12)


def test_strided_select_gradients_per_component():
    rng = np.random.default_rng(6)
    arrs = [rng.standard_normal((n, 3)) for n in (2, 4, 1)]
    e, _ = pair(arrs, "strided", requires_grad=True)
    out = e[..., 1]
    ws = [rng.standard_normal(a.shape[0]) for a in arrs]
    sum((c * ember.tensor(w)).sum() for c, w in zip(out.unbind(), ws)).backward()
    for g, w in zip(e.grad.unbind(), ws):
        want = np.zeros(g.shape)
        want[:, 1] = w
        np.testing.assert_array_equal(as_np(g), want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_select_unsqueeze_functions(layout):
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal((n, 3)) for n in (2, 5)]
    e, t = pair(arrs, layout)
    # (torch's strided torch.select(nt, 2, 1) reads out of bounds: the reference is per component)
    cases = [(lambda m, x: m.select(x, 2, 1), lambda c: c.select(1, 1)),
             (lambda m, x: x.select(-1, 0), lambda c: c.select(-1, 0)),
             (lambda m, x: x.unsqueeze(-1), lambda c: c.unsqueeze(-1)),
             (lambda m, x: m.unsqueeze(x, 2), lambda c: c.unsqueeze(1))]
    for fn, per in cases:
        out = fn(ember, e)
        assert out.layout is e.layout
        for c, a in zip(out.unbind(), arrs):
            np.testing.assert_array_equal(as_np(c), per(torch.tensor(a)).numpy())
        if layout == "jagged":
            assert_nested_close(out, fn(torch, t))
    for fn in (lambda m, x: x.select(1, 0), lambda m, x: x.unsqueeze(0)):
        try:
            want = fn(torch, t)
        except Exception as ex:      # noqa: BLE001
            with pytest.raises(type(ex), match=re.escape(str(ex).split(":")[0])):
                fn(ember, e)
        else:
            assert_nested_close(fn(ember, e), want)


def test_transposed_jagged_slice_refused_as_torch():
    rng = np.random.default_rng(8)
    e, t = pair([rng.standard_normal((n, 3, 4)) for n in (2, 3)], "jagged")
    with pytest.raises(ValueError) as te:
        t.transpose(1, 2)[..., 1:3]
    with pytest.raises(ValueError) as ee:
        e.transpose(1, 2)[..., 1:3]
    assert str(ee.value) == str(te.value)
    assert_nested_close(e.transpose(1, 2)[..., 0], t.transpose(1, 2)[..., 0])


def test_slice_is_a_view_of_the_values():
    rng = np.random.default_rng(9)
    v = rng.standard_normal((5, 4))
    ev, tv = ember.tensor(v), torch.tensor(v)
    e = ember.nested.nested_tensor_from_jagged(ev, ember.tensor(np.array([0, 2, 5])))
    t = torch.nested.nested_tensor_from_jagged(tv, torch.tensor(np.array([0, 2, 5])))
    e[..., 1:3].mul_(10)
    t[..., 1:3].mul_(10)
    np.testing.assert_array_equal(as_np(ev), tv.numpy())
