"""MaskedTensor against torch.masked.MaskedTensor: printing, unary/binary/reduction/passthrough
ops, where/softmax/to/clone, errors, autograd (masked gradients), and ops without a rule."""
import warnings

import numpy as np
import pytest

import ember
from ember.masked import MaskedTensor, as_masked_tensor, is_masked_tensor, masked_tensor

from oracle import assert_close

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _draw(seed, shape=(3, 4)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype("float32")
    m = rng.random(shape) > 0.4
    xi = rng.integers(-5, 5, shape)
    return x, m, xi


def _both(fn, seed=0):
    """repr (or "Type: first line of message") of fn(lib, mt, int_mt) in torch and in ember."""
    x, m, xi = _draw(seed)
    out = []
    for lib in (torch, ember):
        mt = lib.masked.masked_tensor(lib.tensor(x), lib.tensor(m))
        mti = lib.masked.masked_tensor(lib.tensor(xi), lib.tensor(m))
        try:
            r = repr(fn(lib, mt, mti))
        except Exception as e:     # noqa: BLE001 - the error itself is compared
            r = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        out.append(r.replace("torch", "ember"))
    return out


SAME_AS_TORCH = {
    "abs": lambda L, a, i: a.abs(), "exp": lambda L, a, i: a.exp(), "clamp": lambda L, a, i: a.clamp(-0.5, 0.5),
    "clamp_kw": lambda L, a, i: a.clamp(min=0.0), "pow": lambda L, a, i: a ** 2, "neg": lambda L, a, i: -a,
    "pow_tensor": lambda L, a, i: a.pow(a), "isnan": lambda L, a, i: a.isnan(), "sigmoid": lambda L, a, i: a.sigmoid(),
    "sub": lambda L, a, i: a - a, "rsub": lambda L, a, i: 2 - a, "radd": lambda L, a, i: 2 + a,
    "rmul": lambda L, a, i: 2 * a, "rdiv": lambda L, a, i: 2 / a, "div": lambda L, a, i: a / 2,
    "dense_rhs": lambda L, a, i: a * L.tensor(_draw(1)[0]), "dense_lhs": lambda L, a, i: L.tensor(_draw(1)[0]) + a,
    "broadcast": lambda L, a, i: a + L.ones(2, 3, 4), "gt": lambda L, a, i: a > 0, "eq": lambda L, a, i: a == a,
    "lt": lambda L, a, i: a < 0, "ge_dense": lambda L, a, i: a >= L.tensor(_draw(1)[0]), "ne": lambda L, a, i: a != 1.0,
    "maximum": lambda L, a, i: a.maximum(a), "alpha_kw": lambda L, a, i: a.add(a, alpha=2),
    "int_add": lambda L, a, i: i + i, "int_floordiv": lambda L, a, i: i // 2, "int_rem": lambda L, a, i: i % 3,
    "bitwise_and": lambda L, a, i: i & i, "invert": lambda L, a, i: ~(a > 0), "atan2": lambda L, a, i: a.atan2(a),
    "iadd": lambda L, a, i: a.add_(a), "exp_": lambda L, a, i: a.exp_(), "mul_": lambda L, a, i: a.mul_(2),
    "sum": lambda L, a, i: a.sum(), "sum1": lambda L, a, i: a.sum(1), "sum0_keep": lambda L, a, i: a.sum(0, True),
    "sum_kw": lambda L, a, i: a.sum(dim=1, keepdim=True), "sum_tuple": lambda L, a, i: a.sum((0, 1)),
    "mean": lambda L, a, i: a.mean(), "mean1": lambda L, a, i: a.mean(1), "amax1": lambda L, a, i: a.amax(1),
    "amin": lambda L, a, i: a.amin(), "argmax": lambda L, a, i: a.argmax(), "argmin0": lambda L, a, i: a.argmin(0),
    "prod1": lambda L, a, i: a.prod(1), "all": lambda L, a, i: (a > 0).all(), "all1": lambda L, a, i: (a > 0).all(1),
    "var": lambda L, a, i: a.var(), "var1": lambda L, a, i: a.var(1), "std0": lambda L, a, i: a.std(0),
    "int_sum": lambda L, a, i: i.sum(), "int_sum1": lambda L, a, i: i.sum(1), "int_mean": lambda L, a, i: i.mean(),
    "t": lambda L, a, i: a.t(), "transpose": lambda L, a, i: a.transpose(0, 1), "view": lambda L, a, i: a.view(2, 6),
    "reshape": lambda L, a, i: a.reshape(6, 2), "flatten": lambda L, a, i: a.flatten(), "index": lambda L, a, i: a[1],
    "slice": lambda L, a, i: a[:, 1:3], "bool_index": lambda L, a, i: a[L.tensor([True, False, True])],
    "select": lambda L, a, i: a.select(1, 2), "split": lambda L, a, i: a.split(2),
    "unsqueeze": lambda L, a, i: a.unsqueeze(0), "expand": lambda L, a, i: a[0:1].expand(3, 4),
    "unfold": lambda L, a, i: a.unfold(1, 2, 1), "softmax": lambda L, a, i: a.softmax(1),
    "softmax_data": lambda L, a, i: a.softmax(0).get_data(),
    "to64": lambda L, a, i: a.to(L.float64), "double": lambda L, a, i: a.double().dtype,
    "clone": lambda L, a, i: a.clone(), "detach": lambda L, a, i: a.detach(), "contiguous": lambda L, a, i: a.t().contiguous(),
    "to_dense": lambda L, a, i: a.to_dense(),
    "meta": lambda L, a, i: (a.shape, a.dim(), a.numel(), a.layout, a.is_sparse, a.dtype, a.device, len(a)),
    "to_tensor": lambda L, a, i: a.to_tensor(-1), "get_mask": lambda L, a, i: a.get_mask(),
    "get_data": lambda L, a, i: a.get_data(), "item_masked_out": lambda L, a, i: a[1, 0].item(),
    "bool_data": lambda L, a, i: L.masked.masked_tensor(L.tensor([True, False]), L.tensor([True, False])),
    "masked_sum": lambda L, a, i: L.masked.sum(a, 1), "masked_amax": lambda L, a, i: L.masked.amax(a, 1, mask=a.get_mask()),
    "masked_mean": lambda L, a, i: L.masked.mean(a, 0, mask=a.get_mask()),
    "non_bool_mask": lambda L, a, i: L.masked.masked_tensor(L.tensor([1.0]), L.tensor([1])),
    "size_mismatch": lambda L, a, i: L.masked.masked_tensor(L.ones(3, 4), L.ones(4, 3, dtype=L.bool)),
    "dim_mismatch": lambda L, a, i: L.masked.masked_tensor(L.ones(3, 4), L.ones(1, 3, 4, dtype=L.bool)),
    "complex": lambda L, a, i: L.masked.masked_tensor(L.ones(2, dtype=L.complex64), L.ones(2, dtype=L.bool)),
    "not_a_tensor": lambda L, a, i: L.masked.masked_tensor([1.0], L.tensor([True])),
    "mask_mismatch": lambda L, a, i: a + L.masked.masked_tensor(a.get_data(), ~a.get_mask()),
    "is_mt": lambda L, a, i: (L.masked.is_masked_tensor(a), L.masked.is_masked_tensor(a.get_data()),
                               isinstance(a, L.Tensor)),
    "str": lambda L, a, i: str(a.sum(1)), "int_repr": lambda L, a, i: i, "int_t": lambda L, a, i: i.t(),
    "as_masked": lambda L, a, i: L.masked.as_masked_tensor(a.get_data() * 2, a.get_mask()),
    "zero_dim": lambda L, a, i: L.masked.masked_tensor(L.tensor(1.5), L.tensor(True)),
    "zero_dim_out": lambda L, a, i: L.masked.masked_tensor(L.tensor(1.5), L.tensor(False)),
    "three_d": lambda L, a, i: L.masked.masked_tensor(a.get_data().view(2, 3, 2), a.get_mask().view(2, 3, 2)),
    "all_out": lambda L, a, i: L.masked.masked_tensor(a.get_data(), a.get_mask() & False).sum(),
    "cumsum": lambda L, a, i: a.cumsum(0), "mm": lambda L, a, i: a.mm(a.t()),
    "copy_": lambda L, a, i: (a.copy_(L.masked.masked_tensor(a.get_data() * 10, ~a.get_mask())), a.get_data()),
    "copy_dense": lambda L, a, i: (a.copy_(a.get_data() + 1), a.get_data()),
    "chunk": lambda L, a, i: a.chunk(2), "narrow": lambda L, a, i: a.narrow(0, 1, 2),
    "tensor_split": lambda L, a, i: a.tensor_split(2), "swapaxes": lambda L, a, i: a.swapaxes(0, 1),
    "view_as": lambda L, a, i: a.t().view_as(a.t()), "reshape_as": lambda L, a, i: a.flatten().reshape_as(a),
    "unflatten": lambda L, a, i: a.unflatten(1, (2, 2)), "mT": lambda L, a, i: a.mT, "ravel": lambda L, a, i: a.ravel(),
    "hsplit": lambda L, a, i: a.hsplit(2), "index_tensor": lambda L, a, i: a[L.tensor([0, 2])],
    "ellipsis": lambda L, a, i: a[..., 1], "none_index": lambda L, a, i: a[None], "step": lambda L, a, i: a[::2],
    "T_permute": lambda L, a, i: a.T, "movedim": lambda L, a, i: a.movedim(0, 1),
    "rpow": lambda L, a, i: 2 ** a, "pos": lambda L, a, i: +a, "builtin_abs": lambda L, a, i: abs(a),
    "is_same_size": lambda L, a, i: (a.is_same_size(a), a.is_same_size(a.t())),
}


@pytest.mark.parametrize("case", sorted(SAME_AS_TORCH))
def test_same_as_torch(case):
    for seed in (0, 1):
        t, e = _both(SAME_AS_TORCH[case], seed)
        assert e == t


def test_float_reductions_close_to_torch():
    """Reductions by value (float sums may differ from torch's in the last bit)."""
    for seed in range(3):
        x, m, _ = _draw(seed, (4, 5))
        emt, tmt = masked_tensor(ember.tensor(x), ember.tensor(m)), torch.masked.masked_tensor(
            torch.tensor(x), torch.tensor(m))
        for name in ("sum", "mean", "amax", "amin", "prod", "var", "std"):
            for args in ((), (0,), (1, True)):
                eo, to = getattr(emt, name)(*args), getattr(tmt, name)(*args)
                assert is_masked_tensor(eo)
                assert_close(eo.get_mask(), to.get_mask())
                keep = to.get_mask().numpy()
                assert_close(eo.get_data()[ember.tensor(keep)], to.get_data()[torch.tensor(keep)], rtol=1e-5,
                             atol=1e-5)


GRAD_CASES = {
    "mul2": lambda L, a, d: a * 2, "exp": lambda L, a, d: a.exp(), "square": lambda L, a, d: a * a,
    "sum1": lambda L, a, d: a.sum(1), "mean": lambda L, a, d: a.mean(), "amax1": lambda L, a, d: a.amax(1),
    "softmax": lambda L, a, d: a.softmax(1) * L.masked.masked_tensor(d.detach(), a.get_mask()),
    "t": lambda L, a, d: a.t().exp(), "view": lambda L, a, d: a.view(2, 6).sum(0),
    "prod": lambda L, a, d: a.prod(0), "dense_operand": lambda L, a, d: (d + a).exp(),
    "to_tensor": lambda L, a, d: a.to_tensor(0.0).sum(), "get_data": lambda L, a, d: (a.get_data() ** 2).sum(),
    "twice": lambda L, a, d: a.sum() + (a * 3).sum(), "masked_fn": lambda L, a, d: L.masked.sum(a * a, 1),
    "masked_softmax": lambda L, a, d: L.masked.softmax(a, 1).nan_to_num().sum(),
    "to": lambda L, a, d: a.to(L.float32).double(), "clone": lambda L, a, d: a.clone() * 2,
    "var_visible": lambda L, a, d: a.var(1), "std_visible": lambda L, a, d: a.std(),
}


def _grads(L, fn, x, m, y):
    mt = L.masked.masked_tensor(L.tensor(x), L.tensor(m), requires_grad=True)
    d = L.tensor(y, requires_grad=True)
    out = fn(L, mt, d)
    (out.sum() if out.dim() else out).backward()
    dg = d.grad
    if dg is not None and L.masked.is_masked_tensor(dg):
        dg = dg.get_data()       # torch gives the dense operand a MaskedTensor gradient (see report)
    return mt, dg


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_as_torch(case):
    for seed in (0, 1):
        rng = np.random.default_rng(seed + 100)
        x, m, y = rng.standard_normal((3, 4)), rng.random((3, 4)) > 0.4, rng.standard_normal((3, 4))
        emt, edg = _grads(ember, GRAD_CASES[case], x, m, y)
        tmt, tdg = _grads(torch, GRAD_CASES[case], x, m, y)
        assert type(emt.grad) is MaskedTensor
        assert repr(emt.grad) == repr(tmt.grad)
        assert_close(emt.grad.get_mask(), tmt.grad.get_mask())
        keep = m if case.endswith("visible") else np.ones_like(m)      # var/std: masked-out grads differ
        assert_close(emt.grad.get_data()[ember.tensor(keep)], tmt.grad.get_data()[torch.tensor(keep)])
        assert_close(edg, tdg)


def test_grad_accumulates_and_finite_differences():
    rng = np.random.default_rng(5)
    x, m = rng.standard_normal((3, 4)), rng.random((3, 4)) > 0.3
    mt = masked_tensor(ember.tensor(x), ember.tensor(m), requires_grad=True)
    (mt * 2).sum().backward()
    (mt.exp()).sum(0).sum().backward()
    expected = 2 + np.exp(x)
    np.testing.assert_allclose(mt.grad.get_data().numpy()[m], expected[m])
    assert mt.grad.get_mask().numpy().tolist() == m.tolist()
    # float64 finite differences of a composite through get_data / as_masked_tensor
    mm = ember.tensor(m)

    def f(t):
        a = as_masked_tensor(t, mm)
        return (a.sin() * a).softmax(1).to_tensor(0.0)
    assert ember.autograd.gradcheck(f, (ember.tensor(x, requires_grad=True),), eps=1e-6, atol=1e-6)


def test_constructor_copies_and_warns():
    x, m = ember.randn(2, 3), ember.tensor([[True, False, True], [False, True, True]])
    with pytest.warns(UserWarning, match="prototype stage"):
        mt = masked_tensor(x, m)
    x.add_(1.0)
    assert not ember.equal(mt.get_data(), x)          # the data was copied, as torch
    xr = ember.randn(2, 3, requires_grad=True)
    with pytest.warns(UserWarning, match="not recommended to create a MaskedTensor with a tensor that requires_grad"):
        MaskedTensor(xr, m)
    assert isinstance(mt, ember.Tensor) and not mt.requires_grad
    assert masked_tensor(x, m, requires_grad=True).requires_grad


def test_ops_without_a_rule_raise():
    """Dense kernels refuse a MaskedTensor: torch's error, never a silent result."""
    mt = masked_tensor(ember.randn(3, 3), ember.randn(3, 3) > 0)
    for call, op in ((lambda: ember.cumsum(mt, 0), "cumsum"), (lambda: mt.mm(mt), "mm"),
                     (lambda: ember.permute(mt, (1, 0)), "permute"), (lambda: mt.permute(1, 0), "permute"),
                     (lambda: mt.log_softmax(1), "_log_softmax")):
        with pytest.raises(TypeError, match=f"Multiple dispatch failed for 'torch._ops.aten.{op}"):
            call()
    for call in (lambda: mt.to_sparse(), lambda: mt.to_sparse_csr()):
        with pytest.raises(NotImplementedError, match="ember.masked: to_sparse"):
            call()
    with pytest.raises(TypeError, match="can't convert a MaskedTensor to numpy"):
        mt.numpy()
    with pytest.raises(TypeError, match="argument 'mask' must be Tensor or None, not MaskedTensor"):
        ember.masked.sum(ember.ones(3, 3), mask=mt > 0)
    with pytest.raises(TypeError, match="can't convert a MaskedTensor to numpy"):
        np.asarray(mt)
    with pytest.raises(NotImplementedError, match="sparse data or mask"):
        masked_tensor(ember.ones(2, 2).to_sparse(), ember.ones(2, 2, dtype=ember.bool).to_sparse())
    with pytest.raises(NotImplementedError, match="in-place exp_ on a MaskedTensor that requires grad"):
        masked_tensor(ember.ones(2), ember.ones(2, dtype=ember.bool), requires_grad=True).exp_()


def test_where_and_softmax():
    rng = np.random.default_rng(9)
    x, y, m, c = (rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.random((3, 4)) > 0.4,
                  rng.random((3, 4)) > 0.5)
    for other_masked in (True, False):
        ea, ta = masked_tensor(ember.tensor(x), ember.tensor(m)), torch.masked.masked_tensor(torch.tensor(x),
                                                                                             torch.tensor(m))
        eb = masked_tensor(ember.tensor(y), ember.tensor(~m)) if other_masked else ember.tensor(y)
        tb = torch.masked.masked_tensor(torch.tensor(y), torch.tensor(~m)) if other_masked else torch.tensor(y)
        eo = ember.masked.where(ember.tensor(c), ea, eb)
        to = torch.where(torch.tensor(c), ta, tb)
        assert repr(eo) == repr(to)
        assert repr(ea.where(ember.tensor(c), eb)) == repr(to)


def test_compile_breaks_and_runs_eagerly():
    x = ember.randn(3, 4)
    m = x > 0.1
    mt = masked_tensor(x, m)

    def f(a, b):
        return (a * 2 + 1).sum(1), b.sin()

    def g(b, mm):
        t = MaskedTensor(b, mm)
        return (t * 3).amax(1).to_tensor(0.0) + b.sum()

    for fn, args in ((f, (mt, x)), (g, (x, m))):
        ember.compiler.reset()
        got, want = ember.compile(fn, backend="inductor")(*args), fn(*args)
        assert repr(got) == repr(want)
    ex = ember.dynamo.explain(f)(mt, x)
    assert any("a MaskedTensor is not supported by ember.compile" in r[1] for r in ex.break_reasons)

    def h(b, mm):        # the masked functions on strided tensors compile (no break)
        return ember.masked.softmax(b, 1, mask=mm) + ember.masked.var(b, 1, mask=mm, keepdim=True)
    assert ember.dynamo.explain(h)(x, m).graph_break_count == 0
    np.testing.assert_allclose(ember.compile(h)(x, m).numpy(), h(x, m).numpy(), equal_nan=True, rtol=1e-5)


def test_softmax_fully_masked_slice_as_torch():
    """PyTorch's _masked_softmax: masked-out elements 0, a fully masked-out row nan; the data's
    gradient is 0 at both (never nan)."""
    rng = np.random.default_rng(77)
    x, m = rng.standard_normal((4, 5)), rng.random((4, 5)) > 0.4
    m[1] = False
    w = rng.standard_normal((4, 5))
    res = []
    for L in (ember, torch):
        a = L.masked.masked_tensor(L.tensor(x), L.tensor(m), requires_grad=True)
        s = a.softmax(1)
        (s * L.masked.masked_tensor(L.tensor(w), L.tensor(m))).sum().backward()
        res.append((s.get_data().detach(), a.grad.get_data(), repr(s), repr(a.grad)))
    (es, eg, er, egr), (ts, tg, tr, tgr) = res
    assert_close(es, ts)
    assert_close(eg, tg)
    assert er == tr and egr == tgr
    assert not np.isnan(eg.numpy()).any()


def test_double_backward_and_accumulation_as_torch():
    rng = np.random.default_rng(88)
    x, m = rng.standard_normal((3, 4)), rng.random((3, 4)) > 0.4
    out = []
    for L in (ember, torch):
        a = L.masked.masked_tensor(L.tensor(x), L.tensor(m), requires_grad=True)
        g, = L.autograd.grad((a * a * a).sum(), a, create_graph=True)
        assert g.requires_grad
        g.sum().backward()
        b = L.masked.masked_tensor(L.tensor(x), L.tensor(m), requires_grad=True)
        b.sum().backward()
        (b.exp() * 2).sum().backward()
        out.append((repr(g), repr(a.grad), repr(b.grad), a.grad.get_data().detach(), b.grad.get_data()))
    for e, t in zip(*out):
        if isinstance(e, str):
            assert e == t
        else:
            assert_close(e, t)


def test_top_level_functions_route_to_the_masked_tensor():
    """``ember.exp(mt)``, ``ember.add(mt, mt)``, ``ember.sum(mt, 1)``, ``ember.where(m, mt, mt)``,
    ``ember.transpose(mt, 0, 1)``, ``ember.softmax(mt, 1)``: the same printed results as torch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    d, m = rng.standard_normal((2, 3)), rng.random((2, 3)) > 0.4

    def run(lib, masked):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mt = masked.masked_tensor(lib.tensor(d), lib.tensor(m))
            outs = [lib.exp(mt), lib.add(mt, mt), lib.sum(mt, 1), lib.where(lib.tensor(m), mt, mt),
                    lib.transpose(mt, 0, 1), lib.softmax(mt, 1), lib.mul(mt, 2), lib.amax(mt, 0)]
        return [str(o).replace("torch.", "").replace("ember.", "") for o in outs]

    assert run(ember, ember.masked) == run(torch, torch.masked)
