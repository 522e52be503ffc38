"""ember.nested against torch 2.13: construction, metadata, printing, to_padded_tensor (values and
gradients), jagged views (from_jagged, narrow, masked_select), errors, and ember.compile."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember

from ._util import DTYPES, LAYOUTS, TOL, arrays, as_np, assert_nested_close, lengths, pair

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("seed", range(3))
def test_metadata_and_unbind(layout, seed):
    rng = np.random.default_rng(seed)
    lens = lengths(rng)
    e, t = pair(arrays(rng, lens, (3, 2)), layout)
    assert e.is_nested and not ember.randn(2).is_nested
    assert e.layout is getattr(ember, layout) and e.dim() == t.dim() == 4 and e.ndim == 4
    assert e.numel() == t.numel() and len(e) == len(lens)
    assert e.dtype is ember.float64 and e.device == ember.device("cpu") and not e.requires_grad
    for d in (0, 2, 3, -1):
        assert e.size(d) == t.size(d)
    assert_nested_close(e, t)
    for i in (0, -1, len(lens) // 2):
        np.testing.assert_array_equal(as_np(e[i]), t[i].detach().numpy())
    with pytest.raises((NotImplementedError, RuntimeError)) as te:     # torch refuses a slice of dim 0
        t[:, 0]
    with pytest.raises(te.type, match="slice"):
        e[:, 0]
    if layout == "jagged":
        assert re.sub(r"j\d+", "j", str(e.shape)) == re.sub(r"j\d+", "j", str(t.shape)).replace("torch.", "ember.")
        np.testing.assert_array_equal(as_np(e.offsets()), t.offsets().numpy())
        np.testing.assert_array_equal(as_np(e.values()), t.values().detach().numpy())
        assert e.lengths() is None and t.lengths() is None
        assert str(e.size(1)).startswith("j")
        assert e.size(1) == e.size(1) and (e * 2).size(1) == e.size(1)        # structure kept
        assert ember.nested.nested_tensor([ember.ones(2, 3, 2)], layout=ember.jagged).size(1) != e.size(1)
    else:
        with pytest.raises(RuntimeError) as ti:
            t.size()
        with pytest.raises(RuntimeError) as ei:
            e.size()
        assert str(ei.value) == str(ti.value)
        with pytest.raises(RuntimeError, match="Given dimension 1 is irregular and does not have a size."):
            e.size(1)


def test_irregular_in_several_dims_strided():
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s) for s in [(2, 3), (4, 1), (0, 5), (1, 1)]]
    e, t = pair(arrs, "strided")
    assert_nested_close(e, t)
    assert e.numel() == t.numel()
    assert_nested_close(e.transpose(1, 2), t.transpose(1, 2))
    np.testing.assert_allclose(as_np(ember.nested.to_padded_tensor(e, -1.0)),
                               torch.nested.to_padded_tensor(t, -1.0).numpy())
    with pytest.raises(RuntimeError, match="Cannot represent given tensor list as a nested tensor with the jagged"):
        ember.nested.nested_tensor([ember.tensor(a) for a in arrs], layout=ember.jagged)
    with pytest.raises(RuntimeError, match="Cannot represent given tensor list as a nested tensor with the jagged"):
        torch.nested.nested_tensor([torch.tensor(a) for a in arrs], layout=torch.jagged)


def _norm(s):
    return s.replace("torch.", "ember.")


@pytest.mark.parametrize("seed", range(3))
def test_strided_repr_matches_torch(seed):
    rng = np.random.default_rng(seed)
    arrs = arrays(rng, lengths(rng), (3,), "float32")
    e, t = pair(arrs, "strided")
    assert repr(e) == _norm(repr(t))
    e, t = pair(arrs, "strided", requires_grad=True)
    assert repr(e) == _norm(repr(t))
    assert repr(e * 2) == _norm(repr(t * 2))
    ints = [[1, 2], [3], []]
    assert repr(ember.nested.nested_tensor(ints[:2])) == repr(torch.nested.nested_tensor(ints[:2]))
    e4, t4 = pair([rng.standard_normal((2, 1, 3)).astype("float32"), rng.standard_normal((1, 1, 3)).astype("float32")],
                  "strided")
    assert repr(e4) == _norm(repr(t4))


def test_jagged_repr_matches_torch():
    rng = np.random.default_rng(1)
    for lens in ([2, 1], [3]):
        e, t = pair(arrays(rng, lens, (4,)), "jagged")
        assert re.sub(r"j\d+", "j", repr(e)) == re.sub(r"j\d+", "j", repr(t))
        assert re.sub(r"j\d+", "j", repr(e.transpose(1, 2))) == re.sub(r"j\d+", "j", repr(t.transpose(1, 2)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(2))
def test_to_padded_tensor_values_and_grad(layout, dtype, seed):
    rng = np.random.default_rng(seed)
    lens = lengths(rng)
    e, t = pair(arrays(rng, lens, (3,), dtype), layout, requires_grad=True)
    pe, pt = ember.nested.to_padded_tensor(e, 0.5), torch.nested.to_padded_tensor(t, 0.5)
    np.testing.assert_allclose(as_np(pe), pt.detach().numpy(), **TOL[dtype])
    assert e.to_padded_tensor(0.5).shape == pe.shape and pe.dtype is getattr(ember, dtype)
    w = rng.standard_normal(tuple(pt.shape)).astype(dtype)
    (pe * ember.tensor(w)).sum().backward()
    (pt * torch.tensor(w)).sum().backward()
    assert e.grad.is_nested
    assert_nested_close(e.grad, t.grad, dtype)
    size = (len(lens) + 1, max(lens) + 2, 4)
    np.testing.assert_allclose(as_np(ember.nested.to_padded_tensor(e, 0.0, size)),
                               torch.nested.to_padded_tensor(t.detach(), 0.0, size).numpy(), **TOL[dtype])
    with pytest.raises(RuntimeError, match="Truncation is not supported"):
        ember.nested.to_padded_tensor(e, 0.0, (len(lens), 0, 3))
    with pytest.raises(NotImplementedError, match="to_padded_tensor"):
        ember.randn(2, 3).to_padded_tensor(0.0)


def test_as_nested_tensor_keeps_autograd_to_components():
    rng = np.random.default_rng(3)
    arrs = arrays(rng, [2, 0, 1, 4], (3,))
    ea = [ember.tensor(a, requires_grad=True) for a in arrs]
    ta = [torch.tensor(a, requires_grad=True) for a in arrs]
    for layout in LAYOUTS:
        e = ember.nested.as_nested_tensor(ea, layout=getattr(ember, layout))
        t = torch.nested.as_nested_tensor(ta, layout=getattr(torch, layout))
        assert not e.is_leaf and e.requires_grad
        w = rng.standard_normal((4, 4, 3))
        (ember.nested.to_padded_tensor((e * e) * 3 + e, 0.0) * ember.tensor(w)).sum().backward()
        (torch.nested.to_padded_tensor((t * t) * 3 + t, 0.0) * torch.tensor(w)).sum().backward()
        for a, b in zip(ea, ta):
            np.testing.assert_allclose(as_np(a.grad), b.grad.numpy(), rtol=1e-10)
            a.grad = None
            b.grad = None
    dense = rng.standard_normal((3, 2, 4))
    assert_nested_close(ember.nested.as_nested_tensor(ember.tensor(dense)),
                        torch.nested.as_nested_tensor(torch.tensor(dense)))


def test_nested_tensor_copies_and_is_a_leaf():
    a = ember.randn(2, 3, requires_grad=True)
    nt = ember.nested.nested_tensor([a, ember.randn(1, 3)], requires_grad=True)
    assert nt.is_leaf and nt.requires_grad and nt.grad_fn is None
    with ember.no_grad():
        a.mul_(0)
    assert float(nt.unbind()[0].abs().sum()) > 0
    assert ember.nested.nested_tensor([[1.0, 2.0], [3.0]], dtype=ember.float64).dtype is ember.float64
    assert ember.nested.nested_tensor([[1, 2], [3]]).dtype is ember.int64
    d = nt.data
    assert d.is_nested and not d.requires_grad and nt.requires_grad
    np.testing.assert_array_equal(as_np(d[1]), as_np(nt[1]))
    with pytest.raises(NotImplementedError, match="pin_memory"):
        ember.nested.nested_tensor([ember.ones(1)], pin_memory=True)
    with pytest.raises(RuntimeError, match="All Tensors given to nested_tensor must have the same dimension"):
        ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3)])
    mixed = [ember.ones(1, 3), ember.ones(2, 3, dtype=ember.float64)]
    assert torch.nested.nested_tensor([torch.ones(1, 3), torch.ones(2, 3, dtype=torch.float64)]).dtype is torch.float32
    assert ember.nested.nested_tensor(mixed).dtype is ember.float32      # the first component's, as torch
    with pytest.raises(RuntimeError, match="all tensors in list must have the same dtype"):
        ember.nested.nested_tensor(mixed, layout=ember.jagged)


@pytest.mark.parametrize("seed", range(3))
def test_from_jagged_offsets_and_lengths(seed):
    rng = np.random.default_rng(seed)
    lens = lengths(rng)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    vals = rng.standard_normal((int(offs[-1]), 3))
    ev = ember.tensor(vals, requires_grad=True)
    tv = torch.tensor(vals, requires_grad=True)
    e = ember.nested.nested_tensor_from_jagged(ev, ember.tensor(offs))
    t = torch.nested.nested_tensor_from_jagged(tv, torch.tensor(offs))
    assert e.values() is ev and e.is_contiguous()
    assert_nested_close(e, t)
    # (torch pads a from_jagged tensor to the values' row count, not the longest component:
    # the loss is written per component so both sides compute the same thing)
    ws = [rng.standard_normal((n, 3)) for n in lens]
    sum((c * ember.tensor(w)).sum() for c, w in zip((e.sigmoid() * e).unbind(), ws)).backward()
    sum((c * torch.tensor(w)).sum() for c, w in zip((t.sigmoid() * t).unbind(), ws)).backward()
    np.testing.assert_allclose(as_np(ev.grad), tv.grad.numpy(), rtol=1e-10, atol=1e-12)
    padded = as_np(ember.nested.to_padded_tensor(e, 7.0))
    assert padded.shape == (len(lens), max(lens), 3)
    for i, n in enumerate(lens):
        np.testing.assert_array_equal(padded[i, :n], vals[offs[i]:offs[i] + n])
        assert (padded[i, n:] == 7.0).all()
    # with lengths: a non-contiguous view (rows between the components are left out)
    ln = np.minimum(np.array(lens), rng.integers(0, 3, len(lens)))
    e = ember.nested.nested_tensor_from_jagged(ev.detach(), ember.tensor(offs), lengths=ember.tensor(ln))
    t = torch.nested.nested_tensor_from_jagged(tv.detach(), torch.tensor(offs), lengths=torch.tensor(ln))
    assert not e.is_contiguous() and not t.is_contiguous()
    assert_nested_close(e, t)
    np.testing.assert_array_equal(as_np(e.lengths()), t.lengths().numpy())
    padded = as_np(ember.nested.to_padded_tensor(e * 2, 9.0))     # (torch: "not supported ... with holes")
    for i, n in enumerate(ln):
        np.testing.assert_array_equal(padded[i, :n], 2 * vals[offs[i]:offs[i] + n])
        assert (padded[i, n:] == 9.0).all()
    assert_nested_close(e.relu().softmax(-1), t.relu().softmax(-1))


def test_narrow_jagged():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6, 2))
    start, length = np.array([0, 2, 5]), np.array([3, 0, 1])
    e = ember.nested.narrow(ember.tensor(x), 1, ember.tensor(start), ember.tensor(length), layout=ember.jagged)
    t = torch.nested.narrow(torch.tensor(x), 1, torch.tensor(start), torch.tensor(length), layout=torch.jagged)
    assert_nested_close(e, t)
    np.testing.assert_array_equal(as_np(e.offsets()), t.offsets().numpy())
    padded = as_np(e.to_padded_tensor(-2.0))          # (torch: "not supported ... with holes")
    for i in range(3):
        np.testing.assert_array_equal(padded[i, :length[i]], x[i, start[i]:start[i] + length[i]])
        assert (padded[i, length[i]:] == -2.0).all()
    s = ember.nested.narrow(ember.tensor(x), 1, 1, 2)
    assert s.layout is ember.strided
    for i, c in enumerate(s.unbind()):
        np.testing.assert_array_equal(as_np(c), x[i, 1:3])


def test_masked_select():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5))
    m = rng.random((3, 5)) > 0.5
    m[1] = False
    e = ember.nested.masked_select(ember.tensor(x), ember.tensor(m))
    t = torch.nested.masked_select(torch.tensor(x), torch.tensor(m))
    assert_nested_close(e, t)
    np.testing.assert_array_equal(as_np(e.offsets()), t.offsets().numpy())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unsupported_ops_raise_naming_the_op(layout):
    e, t = pair(arrays(np.random.default_rng(0), [2, 1], (3,)), layout)
    for fn, name in ((lambda m, x: m.cumsum(x, 2), "cumsum"), (lambda m, x: m.flip(x, [2]), "flip"),
                     (lambda m, x: x.sort(), "sort")):
        with pytest.raises(NotImplementedError, match=name):
            fn(ember, e)
        with pytest.raises(NotImplementedError, match=name):
            fn(torch, t)
    with pytest.raises(TypeError, match="numpy"):
        e.numpy()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_errors_match_torch(layout):
    e, t = pair(arrays(np.random.default_rng(0), [2, 1], (3,)), layout)

    def same(fn):
        with pytest.raises(Exception) as te:
            fn(torch, t)
        with pytest.raises(type(te.value)) as ee:
            fn(ember, e)
        assert re.sub(r"j\d+", "j", str(ee.value)) == re.sub(r"j\d+", "j", str(te.value)).replace("torch.", "ember.")

    same(lambda m, x: x.softmax(0))
    same(lambda m, x: x.transpose(0, 1))
    same(lambda m, x: x.sum(0, keepdim=True))
    same(lambda m, x: x.backward())
    if layout == "strided":
        same(lambda m, x: x + m.ones(3))
        same(lambda m, x: x @ m.ones(3, 2))
        same(lambda m, x: x.sum(-1))
        same(lambda m, x: m.nn.functional.layer_norm(x, (3,)))
    else:
        same(lambda m, x: x + m.ones(4, 3))
        same(lambda m, x: x * m.ones(2, 3))


def test_compile_runs_nested_eagerly():
    rng = np.random.default_rng(0)
    e, _ = pair(arrays(rng, [2, 0, 3], (3,)), "jagged")
    w = ember.randn(3, 2, dtype=ember.float64)

    def f(x, w):
        return ember.nested.to_padded_tensor((x.relu() * 2) @ w, 0.0) + 1

    expect = f(e, w)
    out = ember.compile(f)(e, w)
    np.testing.assert_allclose(as_np(out), as_np(expect))
    text = str(ember.dynamo.explain(f)(e, w))
    assert "nested tensors are not supported by ember.compile" in text

    def g(x):
        nt = ember.nested.as_nested_tensor([x, x[:1]])
        return ember.nested.to_padded_tensor(nt.exp(), 0.0).sum(1)

    x = ember.randn(3, 2)
    np.testing.assert_allclose(as_np(ember.compile(g)(x)), as_np(g(x)), rtol=1e-6)
    assert "as_nested_tensor" in str(ember.dynamo.explain(g)(x))
