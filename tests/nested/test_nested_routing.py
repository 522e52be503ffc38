"""Ops reached through the dispatcher's route (NestedTensor.__ember_route__) against torch 2.13:
top-level pointwise functions (``ember.sigmoid(nt)``, ``ember.where``, ``ember.add(.., alpha=)``),
nn.functional (no code swapped into linear/layer_norm/softmax/relu/gelu/silu), in-place ops
(``nt.mul_``, ``add_``, ``relu_``, ``fill_``, ``copy_``), ``native_layer_norm``'s statistics.
Values and gradients; errors with torch's messages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

from ._util import DTYPES, LAYOUTS, TOL, arrays, as_np, assert_nested_close, lengths, pair

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _loss(m, nt, ws):
    return sum((c * m.tensor(w)).sum() for c, w in zip(nt.unbind(), ws))


def _weights(rng, nt, dtype="float64"):
    return [rng.standard_normal(tuple(c.shape)).astype(dtype) for c in nt.unbind()]


def _component_grads(f, arrs, ws):
    """The reference where torch's jagged layout has no backward: ``f`` on each component alone
    (a dense torch tensor), the gradient of the same weighted loss."""
    out = []
    for a, w in zip(arrs, ws):
        ta = torch.tensor(a, requires_grad=True)
        (f(ta) * torch.tensor(w)).sum().backward()
        out.append(ta.grad.numpy())
    return out


def _check_grads(e, t, oe, ot, ws, arrs, f_dense, dtype="float64"):
    """e.grad against torch's jagged backward, or per component where torch has none."""
    _loss(ember, oe, ws).backward()
    try:
        _loss(torch, ot, ws).backward()
    except NotImplementedError:          # e.g. aten.masked_fill_ / _log_softmax_backward_data
        for g, want in zip(e.grad.unbind(), _component_grads(f_dense, arrs, ws)):
            np.testing.assert_allclose(as_np(g), want, **TOL[dtype])
        return False
    assert_nested_close(e.grad, t.grad, dtype)
    return True


def _jagged_like(e, t, rng, dtype="float64", low=None):
    """A second jagged operand over the same offsets in ember and torch (torch wants the very same
    offsets tensor), a leaf of its values."""
    n, d = tuple(e.values().shape)
    v = rng.standard_normal((n, d)).astype(dtype) if low is None else rng.uniform(low, 0.9, (n, d)).astype(dtype)
    ev = ember.tensor(v, requires_grad=True)
    tv = torch.tensor(v, requires_grad=True)
    return (ember.nested.nested_tensor_from_jagged(ev, e.offsets()), ev,
            torch.nested.nested_tensor_from_jagged(tv, t.offsets()), tv)


# ---------------------------------------------------------------------- nn.functional: no swap
@pytest.mark.parametrize("name", ["linear", "layer_norm", "softmax", "log_softmax", "relu", "gelu", "silu"])
def test_functional_reaches_nested_through_the_op_not_swapped_code(name):
    fn = getattr(EF, name)
    assert not getattr(fn, "_ember_nested_routed", False)
    assert "_EmberNestedTensor" not in fn.__code__.co_names


@pytest.mark.parametrize("name", ["dropout", "scaled_dot_product_attention"])
def test_functions_running_python_first_keep_the_swap(name):
    assert getattr(getattr(EF, name), "_ember_nested_routed", False)


# ---------------------------------------------------------------------- top-level unary
_ANY = ["sigmoid", "tanh", "abs", "exp", "neg", "sin", "cos", "square", "expm1", "sign", "floor", "ceil", "round",
        "trunc", "erf", "sgn", "frac", "exp2", "sinh", "cosh", "atan", "tan", "erfinv", "relu", "deg2rad",
        "positive", "asin", "acos"]
_POSITIVE = ["log", "sqrt", "rsqrt", "log1p", "reciprocal", "log2", "log10"]
_BOOL = ["logical_not", "isnan", "isinf"]
_NO_GRAD = {"sign", "floor", "ceil", "round", "trunc", "sgn"}


@pytest.mark.parametrize("name", _ANY + _POSITIVE + _BOOL)
def test_toplevel_unary_on_jagged(name):
    rng = np.random.default_rng(abs(hash(name)) % 997)
    lens = lengths(rng)
    low = 0.1 if name in _POSITIVE else -0.9
    arrs = [rng.uniform(low, 0.9, (n, 3)) for n in lens]
    grad = name not in _NO_GRAD and name not in _BOOL
    e, t = pair(arrs, "jagged", requires_grad=grad)
    oe, ot = getattr(ember, name)(e), getattr(torch, name)(t)
    assert oe.layout is ember.jagged and oe.size(1) is e.size(1)     # the input's ragged size
    assert_nested_close(oe, ot)
    if grad:
        ws = _weights(rng, ot)
        _loss(ember, oe, ws).backward()
        _loss(torch, ot, ws).backward()
        assert_nested_close(e.grad, t.grad)


@pytest.mark.parametrize("name", ["sigmoid", "exp", "log1p", "tanh", "abs", "logical_not"])
def test_toplevel_unary_on_strided_per_component(name):
    # torch's strided layout lacks most of these; ember computes them: compared per component
    rng = np.random.default_rng(3)
    arrs = [rng.uniform(0.1, 0.9, s) for s in [(2, 3), (0, 3), (1, 3), (4, 3)]]
    e, _ = pair(arrs, "strided")
    out = getattr(ember, name)(e)
    assert out.layout is ember.strided
    for c, a in zip(out.unbind(), arrs):
        np.testing.assert_allclose(as_np(c), getattr(torch, name)(torch.tensor(a)).numpy(), rtol=1e-12)


# ---------------------------------------------------------------------- top-level binary / where
_BINARY = {
    "add": lambda m, a, b: m.add(a, b, alpha=2.5),
    "sub": lambda m, a, b: m.sub(a, b),
    "mul": lambda m, a, b: m.mul(a, b),
    "div": lambda m, a, b: m.div(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "pow": lambda m, a, b: m.pow(a, b),
    "pow_scalar_base": lambda m, a, b: m.pow(2.0, a),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "copysign": lambda m, a, b: m.copysign(a, -1.5),
    "clamp_min": lambda m, a, b: m.clamp_min(a, b),
    "clamp": lambda m, a, b: m.clamp(a, -0.3, 0.4),
    "lerp": lambda m, a, b: m.lerp(a, b, 0.3),
    "where": lambda m, a, b: m.where(a > b, a, b * 2),
    "where_scalar": lambda m, a, b: m.where(a > 0.5, a, 0.0),
    "eq": lambda m, a, b: m.eq(a, a),
    "lt": lambda m, a, b: m.lt(a, b),
    "logical_and": lambda m, a, b: m.logical_and(a > 0.5, b > 0.5),
}


@pytest.mark.parametrize("name", sorted(_BINARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_toplevel_binary_on_jagged(name, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 991)
    lens = lengths(rng)
    arrs = [rng.uniform(0.1, 0.9, (n, 3)).astype(dtype) for n in lens]
    e, t = pair(arrs, "jagged", requires_grad=True)
    e2, ev, t2, tv = _jagged_like(e, t, rng, dtype, low=0.1)
    f = _BINARY[name]
    oe, ot = f(ember, e, e2), f(torch, t, t2)
    assert_nested_close(oe, ot, dtype)
    if ot.requires_grad:
        ws = _weights(rng, ot, dtype)
        # the per-component reference meets component i of the second operand
        it = iter([c.detach().numpy() for c in t2.unbind()])

        def f_dense(x):
            return f(torch, x, torch.tensor(next(it)))
        if _check_grads(e, t, oe, ot, ws, arrs, f_dense, dtype) and tv.grad is not None:
            np.testing.assert_allclose(as_np(ev.grad), tv.grad.numpy(), **TOL[dtype])


def test_toplevel_binary_with_dense_row_operand():
    rng = np.random.default_rng(21)
    lens = lengths(rng, 4)
    e, t = pair(arrays(rng, lens, (3,)), "jagged")
    for shape in [(3,), (4, 1, 3), (1, 1, 3)]:
        d = rng.standard_normal(shape)
        assert_nested_close(ember.mul(e, ember.tensor(d)), torch.mul(t, torch.tensor(d)))
        assert_nested_close(ember.sub(ember.tensor(d), e), torch.sub(torch.tensor(d), t))


def test_toplevel_binary_errors_match_torch():
    rng = np.random.default_rng(22)
    e, t = pair(arrays(rng, [2, 3], (3,)), "jagged")
    e2, t2 = pair(arrays(rng, [2, 4], (3,)), "jagged")
    with pytest.raises(RuntimeError, match=r"cannot call binary pointwise function add\.Tensor"):
        ember.add(e, e2)
    with pytest.raises(RuntimeError, match=r"cannot call binary pointwise function add\.Tensor"):
        torch.add(t, t2)
    es, ts = pair(arrays(rng, [2, 3], (3,)), "strided")
    d = rng.standard_normal((2, 3))
    msg = "Expected both self and other to be nested, but got a nested self and non-nested other"
    with pytest.raises(RuntimeError, match=msg):
        torch.mul(ts, torch.tensor(d[0:1]))
    with pytest.raises(RuntimeError, match=msg):
        ember.mul(es, ember.tensor(d[0:1]))


@pytest.mark.parametrize("kind", ["transposed", "holey"])
def test_pointwise_per_component_paths(kind):
    """Structures whose buffer cannot meet a dense operand row by row (a transposed jagged
    tensor, a view with gaps) take the per-component path: same values as torch / per component."""
    rng = np.random.default_rng(23)
    if kind == "transposed":
        lens = [2, 3, 1]
        e, t = pair(arrays(rng, lens, (2, 4)), "jagged", requires_grad=True)
        oe = ember.sigmoid(e.transpose(1, 2)) * ember.tensor(np.array([2.0, 3.0, 4.0]).reshape(3, 1, 1, 1))
        ot = torch.sigmoid(t.transpose(1, 2))
        ref = [c * k for c, k in zip(ot.unbind(), (2.0, 3.0, 4.0))]
        for a, b in zip(oe.unbind(), ref):
            np.testing.assert_allclose(as_np(a), b.detach().numpy(), rtol=1e-12)
        return
    v = rng.standard_normal((9, 3))
    offs, lens_ = np.array([0, 3, 7]), np.array([2, 1])
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor(offs), ember.tensor(lens_))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(offs), torch.tensor(lens_))
    d = rng.standard_normal((2, 1, 3))
    oe = ember.mul(ember.tanh(e), ember.tensor(d))
    for i, (c, tc) in enumerate(zip(oe.unbind(), torch.tanh(t).unbind())):
        np.testing.assert_allclose(as_np(c), (tc * torch.tensor(d[i])).numpy(), rtol=1e-12)


# ---------------------------------------------------------------------- nn.functional through the op
@pytest.mark.parametrize("layout", LAYOUTS)
def test_functional_values_and_grads(layout):
    rng = np.random.default_rng(31)
    lens = lengths(rng)
    arrs = arrays(rng, lens, (4,))
    w, b = rng.standard_normal((5, 4)), rng.standard_normal(5)
    lw, lb = rng.standard_normal(4), rng.standard_normal(4)
    cases = [
        (lambda m, F, x: F.linear(x, m.tensor(w), m.tensor(b))),
        (lambda m, F, x: F.layer_norm(x, (4,), m.tensor(lw), m.tensor(lb))),
        (lambda m, F, x: F.softmax(x, -1)),
        (lambda m, F, x: F.log_softmax(x, -1)),
        (lambda m, F, x: F.gelu(x, approximate="tanh")),
        (lambda m, F, x: F.silu(x)),
        (lambda m, F, x: F.relu(x)),
    ]
    for f in cases:
        e, t = pair(arrs, layout, requires_grad=True)
        oe = f(ember, EF, e)
        if layout == "jagged":
            ot = f(torch, TF, t)
            assert_nested_close(oe, ot)
            _check_grads(e, t, oe, ot, _weights(rng, ot), arrs, lambda x: f(torch, TF, x))
        else:   # torch's strided layout has no autograd for most of these: per component
            for c, a in zip(oe.unbind(), arrs):
                np.testing.assert_allclose(as_np(c), f(torch, TF, torch.tensor(a)).numpy(), rtol=1e-10,
                                           atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_functional_inplace_variants(layout):
    rng = np.random.default_rng(32)
    arrs = arrays(rng, lengths(rng), (3,))
    for fe, ft in ((lambda x: EF.relu(x, inplace=True), lambda x: TF.relu(x, inplace=True)),
                   (lambda x: EF.silu(x, inplace=True), lambda x: TF.silu(x, inplace=True)),
                   (lambda x: ember.relu_(x), lambda x: torch.relu_(x))):
        e, t = pair(arrs, layout)
        r = fe(e)
        assert r is e
        ft(t)
        assert_nested_close(e, t)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_native_layer_norm_statistics(layout):
    """torch returns (out, None, None) for a nested input; ember gives the real mean / rstd, per
    component as the dense op's (normalized dims kept as size 1)."""
    rng = np.random.default_rng(33)
    arrs = arrays(rng, lengths(rng), (2, 3))
    e, _ = pair(arrs, layout)
    w, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    for shape in [(3,), (2, 3)]:
        ww, bb = w[-len(shape):] if len(shape) == 2 else w[0], b if len(shape) == 2 else b[0]
        out, mean, rstd = ember.native_layer_norm(e, shape, ember.tensor(ww), ember.tensor(bb), 1e-5)
        for i, a in enumerate(arrs):
            ref = torch.native_layer_norm(torch.tensor(a), shape, torch.tensor(ww), torch.tensor(bb), 1e-5)
            for got, want in zip((out, mean, rstd), ref):
                np.testing.assert_allclose(as_np(got.unbind()[i]), want.numpy(), rtol=1e-10, atol=1e-12)
    if layout == "strided":
        with pytest.raises(ValueError, match="NestedTensor layer_norm requires weight and bias"):
            ember.native_layer_norm(e, (3,), None, None, 1e-5)


# ---------------------------------------------------------------------- in-place
_INPLACE = {
    "mul_": lambda x, y: x.mul_(2.5),
    "add_nested": lambda x, y: x.add_(y),
    "add_alpha": lambda x, y: x.add_(y, alpha=-2),
    "mul_nested": lambda x, y: x.mul_(y),
    "div_": lambda x, y: x.div_(4),
    "sub_nested": lambda x, y: x.sub_(y),
    "relu_": lambda x, y: x.relu_(),
    "sigmoid_": lambda x, y: x.sigmoid_(),
    "tanh_": lambda x, y: x.tanh_(),
    "exp_": lambda x, y: x.exp_(),
    "neg_": lambda x, y: x.neg_(),
    "sin_": lambda x, y: x.sin_(),
    "clamp_": lambda x, y: x.clamp_(-0.2, 0.3),
    "pow_": lambda x, y: x.pow_(2),
    "fill_": lambda x, y: x.fill_(1.25),
    "zero_": lambda x, y: x.zero_(),
    "copy_": lambda x, y: x.copy_(y),
    "iadd": lambda x, y: x.__iadd__(y),
    "imul": lambda x, y: x.__imul__(3.0),
}


@pytest.mark.parametrize("name", sorted(_INPLACE))
def test_inplace_jagged_values_and_grads(name):
    rng = np.random.default_rng(abs(hash(name)) % 983)
    lens = lengths(rng)
    e, t = pair(arrays(rng, lens, (3,)), "jagged", requires_grad=True)
    e2, ev, t2, tv = _jagged_like(e, t, rng)
    xe, xt = e * 1.5, t * 1.5              # a non-leaf: in place is allowed and differentiable
    re, rt = _INPLACE[name](xe, e2), _INPLACE[name](xt, t2)
    assert re is xe
    assert_nested_close(xe, xt)
    ws = _weights(rng, xt)
    _loss(ember, xe, ws).backward()
    _loss(torch, xt, ws).backward()
    for g, want in ((e.grad, t.grad), (ev.grad, tv.grad)):
        if want is None:
            assert g is None or not np.any(as_np(g if not g.is_nested else g.values()))
        elif g is not None and g.is_nested:
            assert_nested_close(g, want)
        else:
            np.testing.assert_allclose(as_np(g), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["mul_", "add_nested", "mul_nested", "relu_", "tanh_", "neg_", "fill_", "zero_",
                                  "copy_", "abs_"])
def test_inplace_strided(name):
    rng = np.random.default_rng(41)
    arrs = arrays(rng, lengths(rng), (3,))
    e, t = pair(arrs, "strided")
    e2, t2 = pair(arrays(rng, [a.shape[0] for a in arrs], (3,)), "strided")
    f = _INPLACE.get(name, lambda x, y: x.abs_())
    assert f(e, e2) is e
    f(t, t2)
    assert_nested_close(e, t)


def test_inplace_per_component_gradients():
    """In place on a transposed jagged tensor with a (B, 1, 1, 1) operand runs per component on
    views of the buffer: float64 reference gradients of the same computation done densely."""
    rng = np.random.default_rng(45)
    arrs = [rng.standard_normal((n, 2, 3)) for n in (2, 3, 1)]
    k = rng.standard_normal(3)
    leaf = ember.nested.nested_tensor([ember.tensor(a) for a in arrs], layout=ember.jagged, requires_grad=True)
    x = (leaf * 1.5).transpose(1, 2)
    x.mul_(ember.tensor(k.reshape(3, 1, 1, 1))).add_(0.25)
    ws = [rng.standard_normal((2, n, 3)) for n in (2, 3, 1)]
    _loss(ember, x, ws).backward()
    for g, c, a, kk, w in zip(leaf.grad.unbind(), x.unbind(), arrs, k, ws):
        ta = torch.tensor(a, requires_grad=True)
        y = (ta * 1.5).transpose(0, 1) * kk + 0.25
        (y * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(as_np(c), y.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(as_np(g), ta.grad.numpy(), rtol=1e-12)


def test_inplace_errors_match_torch():
    rng = np.random.default_rng(42)
    arrs = arrays(rng, [2, 3], (3,))
    for layout in LAYOUTS:
        e, t = pair(arrs, layout, requires_grad=True)
        with pytest.raises(RuntimeError):       # (torch's jagged leaf says it is a no_grad view)
            t.mul_(2)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            e.mul_(2)
        e, t = pair(arrs, layout)
        with pytest.raises(RuntimeError) as te:
            torch.ones(2, 3).mul_(t)
        with pytest.raises(RuntimeError) as ee:
            ember.ones(2, 3).mul_(e)
        assert re.sub(r"j\d+", "j", str(ee.value).replace("ember.", "torch.")) == re.sub(r"j\d+", "j", str(te.value))


def test_inplace_view_writes_through_to_values():
    # a jagged tensor made from values is a view of them: in place writes reach them (as torch's)
    rng = np.random.default_rng(43)
    v = rng.standard_normal((5, 2))
    ev, tv = ember.tensor(v), torch.tensor(v)
    e = ember.nested.nested_tensor_from_jagged(ev, ember.tensor(np.array([0, 2, 5])))
    t = torch.nested.nested_tensor_from_jagged(tv, torch.tensor(np.array([0, 2, 5])))
    e.mul_(3).add_(1)
    t.mul_(3).add_(1)
    np.testing.assert_allclose(as_np(ev), tv.numpy(), rtol=1e-12)


def test_unrouted_op_fails_naming_it():
    rng = np.random.default_rng(44)
    e, t = pair(arrays(rng, [2, 3], (3,)), "jagged")
    with pytest.raises(NotImplementedError, match=re.escape("aten.cumsum.default")):
        torch.cumsum(t, 2)
    with pytest.raises(NotImplementedError, match=r"cumsum"):
        ember.cumsum(e, 2)
    # code that reads strides says which feature is missing
    with pytest.raises(RuntimeError, match=r"has no single strides .* not supported for nested tensors"):
        e.stride()
