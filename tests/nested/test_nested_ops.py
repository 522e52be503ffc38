"""ember.nested ops against torch 2.13 (values and gradients): pointwise, broadcasting with dense
tensors, softmax, sum/mean, matmul/bmm, F.linear, layer_norm, dropout, transpose + SDPA,
reshape/view, cat, clone/detach/to. Random lengths (with 0 and 1), float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

from ._util import DTYPES, LAYOUTS, TOL, arrays, as_np, assert_nested_close, lengths, pair

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _loss(m, nt, ws):
    """A scalar reading every element of every component with its own weight."""
    return sum((c * m.tensor(w)).sum() for c, w in zip(nt.unbind(), ws))


def _grads_match(e, t, fe, ft, rng, dtype="float64"):
    """Forward values and the leaf's gradient of fe(e) vs ft(t)."""
    oe, ot = fe(e), ft(t)
    assert_nested_close(oe, ot, dtype)
    ws = [rng.standard_normal(tuple(c.shape)).astype(dtype) for c in ot.unbind()]
    _loss(ember, oe, ws).backward()
    _loss(torch, ot, ws).backward()
    assert_nested_close(e.grad, t.grad, dtype)


def _component_grads(arrs, f, ws):
    """The reference where torch's nested tensors have no gradient: f on each component alone."""
    grads = []
    for a, w in zip(arrs, ws):
        ta = torch.tensor(a, requires_grad=True)
        (f(ta) * torch.tensor(w)).sum().backward()
        grads.append(ta.grad.numpy())
    return grads


def _check_component_grads(e, arrs, fe, ft, rng, dtype="float64"):
    """fe on the nested tensor vs ft on each component: values and gradients."""
    out = fe(e)
    refs = [ft(torch.tensor(a)) for a in arrs]
    ws = [rng.standard_normal(tuple(r.shape)).astype(dtype) for r in refs]
    for c, r in zip(out.unbind(), refs):
        np.testing.assert_allclose(as_np(c), r.numpy(), **TOL[dtype])
    _loss(ember, out, ws).backward()
    for g, ref in zip(e.grad.unbind(), _component_grads(arrs, ft, ws)):
        np.testing.assert_allclose(as_np(g), ref, **TOL[dtype])


UNARY = {
    "relu": (lambda x: x.relu(), lambda x: x.relu()),
    "F.relu": (lambda x: EF.relu(x), lambda x: TF.relu(x)),
    "F.gelu": (lambda x: EF.gelu(x), lambda x: TF.gelu(x)),
    "F.gelu_tanh": (lambda x: EF.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    "F.silu": (lambda x: EF.silu(x), lambda x: TF.silu(x)),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: x.sigmoid()),
    "tanh": (lambda x: x.tanh(), lambda x: x.tanh()),
    "exp": (lambda x: x.exp(), lambda x: x.exp()),
    "neg": (lambda x: -x, lambda x: -x),
    "abs": (lambda x: x.abs(), lambda x: x.abs()),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_jagged_values_and_grads(name, dtype):
    rng = np.random.default_rng(hash(name) % 1000)
    e, t = pair(arrays(rng, lengths(rng), (4,), dtype), "jagged", requires_grad=True)
    fe, ft = UNARY[name]
    _grads_match(e, t, fe, ft, rng, dtype)
    assert fe(e).values().shape == e.values().shape       # one call on the packed buffer


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_strided_matches_per_component(name):
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal(s) for s in [(2, 3), (0, 3), (1, 3), (4, 3)]]
    e, t = pair(arrs, "strided")
    fe, ft = UNARY[name]
    out = fe(e)
    assert out.layout is ember.strided
    for c, a in zip(out.unbind(), arrs):
        np.testing.assert_allclose(as_np(c), ft(torch.tensor(a)).numpy(), rtol=1e-12)
    if name in ("relu", "tanh", "neg", "abs", "F.relu"):      # the ones torch's strided layout has
        assert_nested_close(out, ft(t))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_nested_nested_and_scalars(layout, dtype):
    rng = np.random.default_rng(11)
    lens = lengths(rng)
    arrs_a, arrs_b = arrays(rng, lens, (3,), dtype), arrays(rng, lens, (3,), dtype)
    ea, ta = pair(arrs_a, layout)
    eb, tb = pair(arrs_b, layout)
    if layout == "jagged":       # torch's jagged binary ops want the very same offsets
        tb = torch.nested.nested_tensor_from_jagged(tb.values(), ta.offsets())
    for fe, ft in ((lambda a, b: a + b, None), (lambda a, b: a - b, None), (lambda a, b: a * b, None),
                   (lambda a, b: a / (b.abs() + 1), None), (lambda a, b: a * 2.5 - 1, None),
                   (lambda a, b: 3 / (a.abs() + 1), None), (lambda a, b: a.add(b), None), (lambda a, b: 2 - a, None)):
        try:
            expect = fe(ta, tb)
        except NotImplementedError:        # torch's strided layout has no reciprocal: per component
            expect = torch.nested.as_nested_tensor([fe(x, y) for x, y in zip(ta.unbind(), tb.unbind())])
        assert_nested_close(fe(ea, eb), expect, dtype)
    with pytest.raises(RuntimeError):
        ea + ember.nested.nested_tensor([ember.ones(1, 3)] * len(lens), layout=getattr(ember, layout))


def test_binary_nested_nested_gradients():
    rng = np.random.default_rng(12)
    lens = lengths(rng)
    ea, ta = pair(arrays(rng, lens, (3,)), "jagged", requires_grad=True)
    eb = ember.nested.nested_tensor_from_jagged(ember.tensor(rng.standard_normal((sum(lens), 3)),
                                                             requires_grad=True), ea.offsets())
    tleaf = torch.tensor(as_np(eb.values()), requires_grad=True)
    tb = torch.nested.nested_tensor_from_jagged(tleaf, ta.offsets())
    ws = [rng.standard_normal((n, 3)) for n in lens]
    _loss(ember, ea * eb + eb / 2, ws).backward()
    _loss(torch, ta * tb + tb / 2, ws).backward()
    assert_nested_close(ea.grad, ta.grad)
    np.testing.assert_allclose(as_np(eb.values().grad), tleaf.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("shape", [(3,), (1, 3), (5, 1, 3), (5, 1, 1), (1, 1, 3), ()])
def test_jagged_plus_dense_broadcast(shape):
    rng = np.random.default_rng(13)
    lens = lengths(rng, 5)
    arrs = arrays(rng, lens, (3,))
    e, t = pair(arrs, "jagged", requires_grad=True)
    d = rng.standard_normal(shape)
    ed = ember.tensor(d, requires_grad=True)
    assert_nested_close(e * ed + ed, t * torch.tensor(d) + torch.tensor(d))
    assert_nested_close(ed - e, torch.tensor(d) - t)
    # gradients (torch's jagged broadcasting has none): component i meets d[i, 0] for a (B, 1, ...) d
    ws = [rng.standard_normal((n, 3)) for n in lens]
    _loss(ember, e * ed + ed, ws).backward()
    td = torch.tensor(d, requires_grad=True)
    comps = [torch.tensor(a, requires_grad=True) for a in arrs]
    ref = 0
    for i, (c, w) in enumerate(zip(comps, ws)):
        di = td[i, 0] if len(shape) == 3 and shape[0] == 5 else (td[0] if len(shape) == 3 else td)
        ref = ref + ((c * di + di) * torch.tensor(w)).sum()
    ref.backward()
    for g, c in zip(e.grad.unbind(), comps):
        np.testing.assert_allclose(as_np(g), c.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(as_np(ed.grad), td.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [-1, 1])
def test_softmax(layout, log, dim):
    rng = np.random.default_rng(14)
    e, t = pair(arrays(rng, lengths(rng), (4,)), layout)
    f = "log_softmax" if log else "softmax"
    if log and (layout == "strided" or dim == 1):    # torch has no such log_softmax: per component
        for c, a in zip(e.log_softmax(dim).unbind(), t.unbind()):
            np.testing.assert_allclose(as_np(c), a.log_softmax(dim - 1 if dim > 0 else dim).numpy(), rtol=1e-10)
        return
    assert_nested_close(getattr(e, f)(dim), getattr(t, f)(dim))
    assert_nested_close(getattr(EF, f)(e, dim), getattr(TF, f)(t, dim))


@pytest.mark.parametrize("dim", [-1, 1])
def test_softmax_jagged_grads(dim):
    rng = np.random.default_rng(15)
    arrs = arrays(rng, lengths(rng), (4,))
    e, t = pair(arrs, "jagged", requires_grad=True)
    if dim == -1:
        _grads_match(e, t, lambda x: EF.softmax(x * 2, dim), lambda x: TF.softmax(x * 2, dim), rng)
    # torch's jagged log_softmax has no backward (and no ragged dim): per component
    e, _ = pair(arrs, "jagged", requires_grad=True)
    cd = dim - 1 if dim > 0 else dim
    _check_component_grads(e, arrs, lambda x: EF.log_softmax(x * 2, dim), lambda c: TF.log_softmax(c * 2, cd), rng)


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_jagged(op, keepdim):
    rng = np.random.default_rng(16)
    arrs = arrays(rng, lengths(rng), (4, 3))
    e, t = pair(arrs, "jagged", requires_grad=True)
    assert_nested_close(getattr(e, op)(-1, keepdim=keepdim), getattr(t, op)(-1, keepdim=keepdim))
    assert_nested_close(getattr(e, op)(2, keepdim=keepdim), getattr(t, op)(2, keepdim=keepdim))
    # torch's jagged sum/mean have no backward: per component
    _check_component_grads(e, arrs, lambda x: getattr(x, op)(-1, keepdim=keepdim),
                           lambda c: getattr(c, op)(-1, keepdim=keepdim), rng)
    # over the ragged dim (torch refuses): one row per component, a dense tensor
    arrs2 = arrays(rng, [2, 1, 3], (4,))
    e2, _ = pair(arrs2, "jagged")
    np.testing.assert_allclose(as_np(getattr(e2, op)(1)), np.stack([getattr(a, op)(0) for a in arrs2]), rtol=1e-10)


def test_reductions_strided():
    rng = np.random.default_rng(17)
    e, t = pair(arrays(rng, lengths(rng), (4,)), "strided")
    assert_nested_close(e.sum(-1, keepdim=True), t.sum(-1, keepdim=True))
    out = e.mean(-1, keepdim=True)       # torch's strided layout has no mean: per component
    for c, a in zip(out.unbind(), e.unbind()):
        np.testing.assert_allclose(as_np(c), as_np(a).mean(-1, keepdims=True))
    np.testing.assert_allclose(float(e.sum()), sum(float(c.sum()) for c in t.unbind()), rtol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_jagged_dense_weight(dtype):
    rng = np.random.default_rng(18)
    e, t = pair(arrays(rng, lengths(rng), (3,), dtype), "jagged", requires_grad=True)
    w = rng.standard_normal((3, 5)).astype(dtype)
    ew, tw = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    _grads_match(e, t, lambda x: x @ ew, lambda x: x @ tw, rng, dtype)
    np.testing.assert_allclose(as_np(ew.grad), tw.grad.numpy(), **TOL[dtype])
    assert_nested_close(ember.matmul(e, ew), torch.matmul(t, tw), dtype)


def test_bmm_nested_nested():
    rng = np.random.default_rng(19)
    arrs = [rng.standard_normal(s) for s in [(2, 3), (1, 3), (0, 3), (4, 3)]]
    e, t = pair(arrs, "strided", requires_grad=True)
    out_e, out_t = ember.bmm(e, e.transpose(1, 2)), torch.bmm(t, t.transpose(1, 2))
    assert_nested_close(out_e, out_t)
    assert_nested_close(e.matmul(e.transpose(1, 2)), t.matmul(t.transpose(1, 2)))
    ws = [rng.standard_normal(tuple(c.shape)) for c in out_t.unbind()]
    _loss(ember, out_e, ws).backward()
    grads = []
    for a, w in zip(arrs, ws):                     # (torch's strided bmm has no gradient: per component)
        ta = torch.tensor(a, requires_grad=True)
        ((ta @ ta.T) * torch.tensor(w)).sum().backward()
        grads.append(ta.grad.numpy())
    for g, c in zip(grads, e.grad.unbind()):
        np.testing.assert_allclose(as_np(c), g, rtol=1e-10, atol=1e-12)
    ej, tj = pair(arrs, "jagged")
    with pytest.raises(RuntimeError, match="matmul"):
        ember.bmm(ej, ej.transpose(1, 2))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bias", [False, True])
def test_linear(layout, bias):
    rng = np.random.default_rng(20)
    e, t = pair(arrays(rng, lengths(rng), (3,)), layout, requires_grad=(layout == "jagged"))
    w, b = rng.standard_normal((4, 3)), rng.standard_normal(4)
    ew, tw = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    eb = ember.tensor(b, requires_grad=True) if bias else None
    tb = torch.tensor(b, requires_grad=True) if bias else None
    if layout == "strided":
        assert_nested_close(EF.linear(e, ew, eb), TF.linear(t, tw, tb))
        return
    _grads_match(e, t, lambda x: EF.linear(x, ew, eb), lambda x: TF.linear(x, tw, tb), rng)
    np.testing.assert_allclose(as_np(ew.grad), tw.grad.numpy(), rtol=1e-10)
    if bias:
        np.testing.assert_allclose(as_np(eb.grad), tb.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(layout, dtype):
    rng = np.random.default_rng(21)
    e, t = pair(arrays(rng, lengths(rng), (6,), dtype), layout, requires_grad=(layout == "jagged"))
    w, b = rng.standard_normal(6).astype(dtype), rng.standard_normal(6).astype(dtype)
    ew, tw, eb, tb = ember.tensor(w), torch.tensor(w), ember.tensor(b), torch.tensor(b)
    if layout == "strided":
        assert_nested_close(EF.layer_norm(e, (6,), ew, eb), TF.layer_norm(t, (6,), tw, tb), dtype)
        return
    _grads_match(e, t, lambda x: EF.layer_norm(x, (6,), ew, eb), lambda x: TF.layer_norm(x, (6,), tw, tb), rng, dtype)
    e2, t2 = pair(arrays(rng, lengths(rng), (6,), dtype), layout)
    assert_nested_close(EF.layer_norm(e2, 6), TF.layer_norm(t2, (6,)), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dropout(layout):
    rng = np.random.default_rng(22)
    e, _ = pair(arrays(rng, [40, 0, 1, 60], (8,)), layout)
    assert EF.dropout(e, 0.3, training=False) is e
    out = EF.dropout(e, 0.25, training=True)
    assert out.is_nested and out.layout is e.layout
    for c, a in zip(out.unbind(), e.unbind()):
        c, a = as_np(c), as_np(a)
        kept = c != 0
        np.testing.assert_allclose(c[kept], a[kept] / 0.75, rtol=1e-12)
    frac = np.concatenate([as_np(c).ravel() == 0 for c in out.unbind()]).mean()
    assert 0.15 < frac < 0.35
    assert all((as_np(c) == 0).all() for c in EF.dropout(e, 1.0).unbind())


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_jagged_transposed(is_causal, dtype):
    """q/k/v (B, j, H, D) -> transpose(1, 2) -> SDPA -> transpose back: each sequence attends to
    itself only (attention of each sequence on its own, values and gradients; torch's jagged SDPA
    where its CPU build has a kernel for the case)."""
    rng = np.random.default_rng(23)
    lens = [3, 1, 5, 2]
    arrs = [arrays(rng, lens, (2, 4), dtype) for _ in range(3)]
    eq = ember.nested.nested_tensor([ember.tensor(a) for a in arrs[0]], layout=ember.jagged, requires_grad=True)
    leaves = [ember.tensor(np.concatenate(a), requires_grad=True) for a in arrs[1:]]
    ek, ev = (ember.nested.nested_tensor_from_jagged(v, eq.offsets()) for v in leaves)
    oe = EF.scaled_dot_product_attention(eq.transpose(1, 2), ek.transpose(1, 2), ev.transpose(1, 2),
                                         is_causal=is_causal).transpose(1, 2)
    assert oe.values().shape == (sum(lens), 2, 4) and oe.size(2) == 2
    ws = [rng.standard_normal((n, 2, 4)).astype(dtype) for n in lens]
    _loss(ember, oe, ws).backward()
    tcomps = [[torch.tensor(x, requires_grad=True) for x in a] for a in arrs]
    for i, c in enumerate(oe.unbind()):
        q, k, v = (tc[i].transpose(0, 1) for tc in tcomps)
        ref = TF.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(0, 1)
        np.testing.assert_allclose(as_np(c), ref.detach().numpy(), **TOL[dtype])
        (ref * torch.tensor(ws[i])).sum().backward()
    for g, c in zip(eq.grad.unbind(), tcomps[0]):
        np.testing.assert_allclose(as_np(g), c.grad.numpy(), **TOL[dtype])
    for leaf, tc in zip(leaves, tcomps[1:]):
        np.testing.assert_allclose(as_np(leaf.grad), np.concatenate([c.grad.numpy() for c in tc]), **TOL[dtype])
    tq = torch.nested.nested_tensor([torch.tensor(a) for a in arrs[0]], layout=torch.jagged)
    tk, tv = (torch.nested.nested_tensor_from_jagged(torch.tensor(np.concatenate(a)), tq.offsets()) for a in arrs[1:])
    try:
        ot = TF.scaled_dot_product_attention(tq.transpose(1, 2), tk.transpose(1, 2), tv.transpose(1, 2),
                                             is_causal=is_causal).transpose(1, 2)
    except RuntimeError as err:          # "No viable backend for scaled_dot_product_attention"
        assert "backend" in str(err)
    else:
        assert_nested_close(oe, ot, dtype)


def test_reshape_view_transpose():
    rng = np.random.default_rng(24)
    lens = lengths(rng)
    e, t = pair(arrays(rng, lens, (6,)), "jagged")
    assert_nested_close(e.reshape(len(lens), -1, 2, 3), t.reshape(len(lens), -1, 2, 3))
    assert_nested_close(e.view(len(lens), -1, 3, 2), t.view(len(lens), -1, 3, 2))
    r = e.reshape(len(lens), -1, 2, 3).transpose(1, 2)
    tr = t.reshape(len(lens), -1, 2, 3).transpose(1, 2)
    assert_nested_close(r, tr)
    assert_nested_close(r.contiguous(), tr.contiguous())
    # (torch's jagged view/reshape refuses a transposed ragged dim: per component)
    for c, a in zip(r.reshape(len(lens), 2, -1, 3).unbind(), tr.unbind()):
        np.testing.assert_array_equal(as_np(c), a.reshape(2, -1, 3).numpy())
    with pytest.raises(RuntimeError, match="view"):
        r.view(len(lens), 2, -1, 3)
    es, ts = pair(arrays(rng, lens, (6,)), "strided")
    assert_nested_close(es.reshape(len(lens), -1, 2, 3), ts.reshape(len(lens), -1, 2, 3))
    assert_nested_close(es.view(len(lens), -1, 3, 2), ts.view(len(lens), -1, 3, 2))
    with pytest.raises(RuntimeError):
        es.reshape(len(lens) + 1, -1, 6)


def test_cat_clone_detach_to():
    rng = np.random.default_rng(25)
    lens = lengths(rng)
    e, t = pair(arrays(rng, lens, (3,)), "jagged", requires_grad=True)
    assert_nested_close(ember.cat([e, e * 2], -1), torch.cat([t, t * 2], -1))
    c = e.clone()
    assert c.requires_grad and not c.is_leaf and c.values() is not e.values()
    d = e.detach()
    assert not d.requires_grad and d.is_nested
    f = e.to(ember.float32)
    assert f.dtype is ember.float32 and f.values().dtype is ember.float32
    assert_nested_close(f, t.to(torch.float32), "float32")
    assert_nested_close(e.double(), t.double())


def test_dense_operand_per_component_paths():
    """A jagged view with holes (lengths=) or a transposed ragged dim cannot use the buffer
    directly: the dense operand meets each component (component i meets other[i] for (B, 1, ...))."""
    rng = np.random.default_rng(26)
    v = ember.tensor(rng.standard_normal((7, 3)), requires_grad=True)
    nt = ember.nested.nested_tensor_from_jagged(v, ember.tensor([0, 2, 7]), lengths=ember.tensor([1, 4]))
    d = ember.tensor(rng.standard_normal((2, 1, 3)))
    out = nt * d + d
    for i, c in enumerate(out.unbind()):
        np.testing.assert_allclose(as_np(c), as_np(nt[i] * d[i] + d[i]), rtol=1e-12)
    out.to_padded_tensor(0.0).sum().backward()
    g = as_np(v.grad)
    np.testing.assert_allclose(g[0], as_np(d[0, 0]), rtol=1e-12)
    np.testing.assert_allclose(g[2:6], np.broadcast_to(as_np(d[1, 0]), (4, 3)), rtol=1e-12)
    assert (g[[1, 6]] == 0).all()                       # rows outside the components get no gradient
    e, t = pair(arrays(rng, [2, 0, 3], (4, 3)), "jagged")
    w = rng.standard_normal(3)
    assert_nested_close(e.transpose(1, 2) * ember.tensor(w), t.transpose(1, 2) * torch.tensor(w))
    with pytest.raises(RuntimeError, match="cannot call binary pointwise function"):
        nt + ember.ones(3, 1, 3)
