"""Session 47: ember.nn modules / functional against PyTorch, values and gradients.

Each test was a mismatch: the TransformerEncoder's nested-tensor inference path (padded positions
come out 0), SDPA / MHA on a query with every key masked (0 on the SDPA path, NaN on MHA's
inference fast path), SDPA with attn_mask and is_causal together, PoissonNLLLoss(full=True) at zero
targets, CTC's NaN gradient of an infeasible sample on all of its frames, weighted l1/mse means,
multi_margin_loss's gradient at the hinge, prelu's gradient at 0, grid_sample's grid gradient on
the clip bounds, FractionalMaxPool's and ParameterDict's repr, EmbeddingBag.from_pretrained,
clip_grad_norm_'s total norm over mixed dtypes, interpolate's antialias (bilinear / bicubic /
lanczos) and its empty-size error."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _both(torch, arrays, grad=True):
    e = [ember.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    t = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    return e, t


def _close(a, b, rtol, atol):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def _tol(dt):
    return (1e-4, 1e-5) if dt == "float32" else (1e-9, 1e-10)


def _copy_weights(em, tm):
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


# ---------------------------------------------------------------------------- transformer encoder
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("mask_kind", ["bool", "float", "ragged_unchecked", "ragged_checked"])
def test_encoder_nested_path_zeroes_padding(dt, mask_kind):
    torch = _torch()
    rng = np.random.RandomState(1)
    x = rng.randn(3, 5, 8).astype(dt)
    kpm = np.zeros((3, 5), bool)
    kpm[:, -1] = True
    kpm[0, -3:] = True
    mask_check = True
    if mask_kind.startswith("ragged"):
        kpm[1, 1] = True                       # not left-aligned
        mask_check = mask_kind == "ragged_checked"

    def build(nn):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), mask_check=mask_check)

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm, em = build(torch.nn).eval().to(getattr(torch, dt)), build(ember.nn).eval().to(getattr(ember, dt))
    _copy_weights(em, tm)
    if mask_kind == "float":   # any nonzero entry drops the token on this path, -1.5 as -inf
        fm = np.where(kpm, -1.5, 0.0).astype(dt)
        em_mask, tm_mask = ember.tensor(fm), torch.tensor(fm)
    else:
        em_mask, tm_mask = ember.tensor(kpm), torch.tensor(kpm)
    with torch.no_grad(), ember.no_grad():
        ot = tm(torch.tensor(x), src_key_padding_mask=tm_mask)
        oe = em(ember.tensor(x), src_key_padding_mask=em_mask)
    assert em.use_nested_tensor is True
    _close(oe, ot, *_tol(dt))


def test_encoder_use_nested_tensor_flag_and_warning():
    torch = _torch()
    for kw in (dict(batch_first=False), dict(batch_first=True, norm_first=True), dict(batch_first=True),
               dict(batch_first=True, activation=lambda x: x)):
        msgs = []
        for nn in (torch.nn, ember.nn):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, **kw), 1)
            msgs.append(([str(m.message) for m in w if "nested" in str(m.message)], enc.use_nested_tensor,
                         enc.layers[0].activation_relu_or_gelu))
        assert msgs[0] == msgs[1]


def test_encoder_training_or_grad_keeps_padding_values():
    torch = _torch()
    rng = np.random.RandomState(2)
    x = rng.randn(2, 4, 8).astype("float32")
    kpm = np.array([[False, False, True, True], [False, False, False, True]])
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 1)
    em = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 1)
    _copy_weights(em, tm)
    tm.eval()
    em.eval()
    (xe,), (xt,) = _both(torch, [x])
    oe = em(xe, src_key_padding_mask=ember.tensor(kpm))
    ot = tm(xt, src_key_padding_mask=torch.tensor(kpm))
    _close(oe, ot, 1e-4, 1e-5)
    assert np.abs(oe.detach().numpy()[0, 3]).max() > 0.1    # autograd on: no zeroing
    w = np.random.RandomState(3).randn(*ot.shape).astype("float32")
    (oe * ember.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    _close(xe.grad, xt.grad, 1e-4, 1e-5)


# ---------------------------------------------------------------------------- fully masked queries
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("grad", [True, False])
def test_sdpa_fully_masked_row_gives_zeros(dt, kind, grad):
    torch = _torch()
    rng = np.random.RandomState(4)
    q, k, v = (rng.randn(2, 2, 3, 4).astype(dt) for _ in range(3))
    keep = np.ones((2, 2, 3, 3), bool)
    keep[0, 1, 2] = False
    keep[1, 0, 0, 1:] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(dt)
    (qe, ke, ve), (qt, kt, vt) = _both(torch, [q, k, v], grad)
    oe = ember.nn.functional.scaled_dot_product_attention(qe, ke, ve, attn_mask=ember.tensor(mask))
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=torch.tensor(mask))
    _close(oe, ot, *_tol(dt))
    assert not np.isnan(oe.detach().numpy()).any()
    if grad:
        w = rng.randn(*ot.shape).astype(dt)
        (oe * ember.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        for a, b in ((qe, qt), (ke, kt), (ve, vt)):
            _close(a.grad, b.grad, *_tol(dt))


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_fully_masked_query(need_weights):
    torch = _torch()
    rng = np.random.RandomState(5)
    q = rng.randn(3, 4, 8).astype("float32")
    kpm = np.zeros((3, 4), bool)
    kpm[:, -1] = True
    am = np.zeros((4, 4), bool)
    am[1] = True                             # query 1 may attend to nothing
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    em = ember.nn.MultiheadAttention(8, 2, batch_first=True)
    _copy_weights(em, tm)
    (xe,), (xt,) = _both(torch, [q])
    oe, we = em(xe, xe, xe, key_padding_mask=ember.tensor(kpm), attn_mask=ember.tensor(am), need_weights=need_weights)
    ot, wt = tm(xt, xt, xt, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am), need_weights=need_weights)
    _close(oe, ot, 1e-4, 1e-5)             # NaN rows where torch has them (need_weights=True), 0 otherwise
    if need_weights:
        _close(we, wt, 1e-4, 1e-5)
    else:
        assert not np.isnan(oe.detach().numpy()).any()
        w = rng.randn(*ot.shape).astype("float32")
        (oe * ember.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        _close(xe.grad, xt.grad, 1e-4, 1e-5)
        _close(em.in_proj_weight.grad, tm.in_proj_weight.grad, 1e-4, 1e-5)


# ---------------------------------------------------------------------------- losses
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_poisson_nll_full_zero_targets(dt, log_input, reduction):
    torch = _torch()
    rng = np.random.RandomState(6)
    x = (rng.randn(4, 3) if log_input else rng.rand(4, 3) + 0.1).astype(dt)
    t = rng.poisson(2.0, (4, 3)).astype(dt)
    t[0, 0], t[0, 1], t[1, 2] = 0.0, 1.0, 0.0
    (xe, te), (xt, tt) = _both(torch, [x, t])
    le = ember.nn.PoissonNLLLoss(log_input=log_input, full=True, reduction=reduction)(xe, te)
    lt = torch.nn.PoissonNLLLoss(log_input=log_input, full=True, reduction=reduction)(xt, tt)
    _close(le, lt, *_tol(dt))
    g = np.asarray(rng.randn(*lt.shape)).astype(dt)
    (le * ember.tensor(g)).sum().backward()
    (lt * torch.tensor(g)).sum().backward()
    _close(xe.grad, xt.grad, *_tol(dt))
    _close(te.grad, tt.grad, *_tol(dt))     # NaN where t == 0, as PyTorch


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_infeasible_sample_nan_gradient_on_all_frames(reduction):
    torch = _torch()
    rng = np.random.RandomState(7)
    logits = rng.randn(6, 3, 5).astype("float32")
    targets = np.array([[1, 1, 1], [1, 2, 3], [2, 2, 4]])
    il, tl = [4, 6, 6], [3, 3, 3]     # sample 0 needs 5 frames for "1 1 1": infeasible
    res = []
    for lib in (ember, torch):
        x = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(x.log_softmax(2), lib.tensor(targets), lib.tensor(il), lib.tensor(tl),
                                          reduction=reduction)
        (loss.sum() if reduction == "none" else loss).backward()
        res.append((loss.detach().numpy(), x.grad.numpy()))
    (le, ge), (lt, gt) = res
    np.testing.assert_allclose(le, lt, rtol=1e-4)
    np.testing.assert_array_equal(np.isnan(ge), np.isnan(gt))
    if reduction == "none":
        assert np.isnan(ge[:4, 0]).all() and not np.isnan(ge[4:, 0]).any()
        np.testing.assert_allclose(ge[:, 1:], gt[:, 1:], rtol=1e-4, atol=1e-6)


def test_ctc_feasible_keeps_negative_zero_loss():
    lp = ember.tensor(np.log(np.full((3, 1, 4), 0.25)), requires_grad=True)
    out = ember.nn.functional.ctc_loss(lp, ember.tensor([[1]]), [0], [0], reduction="none")
    assert np.signbit(out.detach().numpy()[0])


# ---------------------------------------------------------------------------- module API
def test_fractional_max_pool_repr():
    torch = _torch()
    for name, args in (("FractionalMaxPool2d", dict(kernel_size=2, output_ratio=0.5)),
                       ("FractionalMaxPool3d", dict(kernel_size=(2, 2, 1), output_size=3))):
        assert repr(getattr(ember.nn, name)(**args)) == repr(getattr(torch.nn, name)(**args))


def test_clip_grad_norm_mixed_dtypes_total_is_promoted():
    torch = _torch()
    rng = np.random.RandomState(8)
    g32, g64 = rng.randn(3).astype("float32"), rng.randn(4)
    out = []
    for lib in (ember, torch):
        a, b = lib.nn.Parameter(lib.zeros(3)), lib.nn.Parameter(lib.zeros(4, dtype=lib.float64))
        a.grad, b.grad = lib.tensor(g32), lib.tensor(g64)
        tot = lib.nn.utils.clip_grad_norm_([a, b], 0.5)
        out.append((str(tot.dtype).split(".")[1], tot.item(), a.grad.numpy(), b.grad.numpy()))
    assert out[0][0] == out[1][0] == "float64"
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-6)
    np.testing.assert_allclose(out[0][3], out[1][3], rtol=1e-12)


# ---------------------------------------------------------------------------- interpolate antialias
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("mode,align_corners", [("bilinear", False), ("bilinear", True), ("bicubic", False),
                                                ("bicubic", True), ("lanczos", False)])
@pytest.mark.parametrize("spec", [dict(size=(5, 9)), dict(size=(2, 3)), dict(scale_factor=0.45),
                                  dict(scale_factor=(2.3, 0.6)), dict(scale_factor=0.3, recompute_scale_factor=True)])
def test_interpolate_antialias(dt, mode, align_corners, spec):
    torch = _torch()
    rng = np.random.RandomState(9)
    x = rng.randn(2, 3, 16, 13).astype(dt)
    (xe,), (xt,) = _both(torch, [x])
    kw = dict(spec, mode=mode, align_corners=align_corners, antialias=True)
    oe = ember.nn.functional.interpolate(xe, **kw)
    ot = torch.nn.functional.interpolate(xt, **kw)
    _close(oe, ot, *_tol(dt))
    assert oe.grad_fn.name() == ot.grad_fn.name()
    w = rng.randn(*ot.shape).astype(dt)
    (oe * ember.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    _close(xe.grad, xt.grad, *_tol(dt))


def test_interpolate_antialias_errors_and_empty_sizes():
    torch = _torch()

    def outcome(lib, fn):
        try:
            fn(lib)
        except (ValueError, RuntimeError) as e:
            return type(e).__name__, str(e)
        return None

    cases = [
        lambda m: m.nn.functional.interpolate(m.ones(1, 2, 5), size=3, mode="linear", antialias=True),
        lambda m: m.nn.functional.interpolate(m.ones(1, 2, 5, 5), size=3, mode="lanczos"),
        lambda m: m.nn.functional.interpolate(m.ones(1, 2, 5, 5), size=3, mode="lanczos", antialias=True,
                                              align_corners=True),
        lambda m: m.nn.functional.interpolate(m.ones(1, 2, 5, 5), size=(0, 3), mode="bilinear", antialias=True),
        lambda m: m.nn.functional.interpolate(m.ones(1, 2, 4), size=0, mode="nearest"),
        lambda m: m.nn.functional.interpolate(m.ones(1, 1, 3, 4, 5), size=(2, 0, 1), mode="trilinear"),
        lambda m: m.nn.functional.interpolate(m.ones(1, 1, 0, 4), size=(2, 2), mode="bicubic"),
    ]
    for fn in cases:
        te, ee = outcome(torch, fn), outcome(ember, fn)
        assert te is not None and ee == te


@pytest.mark.parametrize("module", ["mha", "encoder_layer"])
def test_inference_fast_path_fully_masked_query_matches(module):
    """PyTorch's eval/no-grad fast path gives NaN for a query with every key masked (its autograd
    path gives 0): both paths must match."""
    torch = _torch()
    rng = np.random.RandomState(10)
    x = rng.randn(3, 4, 8).astype("float32")
    kpm = np.zeros((3, 4), bool)
    kpm[:, -1] = True
    kpm[1, :] = True

    def build(nn):
        if module == "mha":
            return nn.MultiheadAttention(8, 2, batch_first=True)
        return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def call(m, t, k):
        if module == "mha":
            return m(t, t, t, key_padding_mask=k, need_weights=False)[0]
        return m(t, src_key_padding_mask=k)

    torch.manual_seed(0)
    tm, em = build(torch.nn).eval(), build(ember.nn).eval()
    _copy_weights(em, tm)
    with torch.no_grad(), ember.no_grad():
        ot = call(tm, torch.tensor(x), torch.tensor(kpm))
        oe = call(em, ember.tensor(x), ember.tensor(kpm))
    _close(oe, ot, 1e-4, 1e-5)
    assert np.isnan(ot.numpy()[1]).all()
    ot = call(tm, torch.tensor(x), torch.tensor(kpm))      # autograd on: the SDPA path
    oe = call(em, ember.tensor(x), ember.tensor(kpm))
    _close(oe, ot, 1e-4, 1e-5)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("num_parameters", [1, 3])
def test_prelu_gradient_at_zero_uses_weight(dt, num_parameters):
    torch = _torch()
    rng = np.random.RandomState(11)
    x = rng.randn(2, 3, 4).astype(dt)
    x[0, :, 0] = 0.0
    x[1, 1, 2] = -0.0
    w = (rng.rand(num_parameters) * 0.5 - 0.6).astype(dt)     # negative slopes: 0 * w is -0.0
    (xe, we), (xt, wt) = _both(torch, [x, w])
    oe, ot = ember.nn.functional.prelu(xe, we), torch.nn.functional.prelu(xt, wt)
    _close(oe, ot, *_tol(dt))
    np.testing.assert_array_equal(np.signbit(oe.detach().numpy()), np.signbit(ot.detach().numpy()))
    g = rng.randn(*x.shape).astype(dt)
    (oe * ember.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    _close(xe.grad, xt.grad, *_tol(dt))
    _close(we.grad, wt.grad, *_tol(dt))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("freeze", [True, False])
def test_embedding_bag_from_pretrained(mode, freeze):
    torch = _torch()
    rng = np.random.RandomState(12)
    table = rng.randn(10, 3).astype("float32")
    idx = np.array([2, 2, 4, 5, 2, 3, 2, 9])
    offsets = np.array([0, 2, 2, 6, 8])
    res = []
    for lib in (ember, torch):
        w = lib.tensor(table)
        bag = lib.nn.EmbeddingBag.from_pretrained(w, freeze=freeze, mode=mode, include_last_offset=True,
                                                  padding_idx=2)
        out = bag(lib.tensor(idx), lib.tensor(offsets))
        if not freeze:
            (out * lib.tensor(np.arange(out.numel(), dtype="float32").reshape(tuple(out.shape)))).sum().backward()
        res.append((out.detach().numpy(), bag.weight.requires_grad, repr(bag),
                    None if freeze else bag.weight.grad.numpy()))
    (oe, re_, pe, ge), (ot, rt, pt, gt) = res
    np.testing.assert_allclose(oe, ot, rtol=1e-6, atol=1e-7)
    assert re_ == rt and pe == pt
    if not freeze:
        np.testing.assert_allclose(ge, gt, rtol=1e-6, atol=1e-7)


def test_parameter_dict_repr_names_tensor_types():
    torch = _torch()
    reprs = []
    for lib in (ember, torch):
        pd = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2, 3, dtype=lib.float64)),
                                   "b": lib.ones(4, dtype=lib.float16), "c": 3})
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, dtype=lib.float64))])
        reprs.append((repr(pd).replace(lib.__name__ + ".", "LIB."), repr(pl).replace(lib.__name__ + ".", "LIB.")))
    assert reprs[0] == reprs[1]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["bool", "bool4d", "float"])
@pytest.mark.parametrize("L,S", [(3, 3), (5, 3), (3, 5)])
def test_sdpa_attn_mask_with_is_causal(dt, kind, L, S):
    """PyTorch 2.13 accepts both: the causal mask and-ed with a bool mask / applied over a float one."""
    torch = _torch()
    rng = np.random.RandomState(13)
    q, k, v = rng.randn(2, 2, L, 4).astype(dt), rng.randn(2, 2, S, 4).astype(dt), rng.randn(2, 2, S, 4).astype(dt)
    mask = {"bool": rng.rand(L, S) > 0.3, "bool4d": rng.rand(2, 1, L, S) > 0.4,
            "float": rng.randn(L, S).astype(dt)}[kind]
    (qe, ke, ve), (qt, kt, vt) = _both(torch, [q, k, v])
    oe = ember.nn.functional.scaled_dot_product_attention(qe, ke, ve, attn_mask=ember.tensor(mask), is_causal=True)
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=torch.tensor(mask), is_causal=True)
    _close(oe, ot, *_tol(dt))
    w = rng.randn(*ot.shape).astype(dt)
    (oe * ember.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    for a, b in ((qe, qt), (ke, kt), (ve, vt)):
        _close(a.grad, b.grad, *_tol(dt))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_weighted_l1_mse_huber_reductions(dt, reduction):
    torch = _torch()
    rng = np.random.RandomState(14)
    x, t, w = rng.randn(4, 3).astype(dt), rng.randn(4, 3).astype(dt), rng.rand(4, 3).astype(dt)
    for name in ("l1_loss", "mse_loss", "huber_loss"):
        (xe, we), (xt, wt) = _both(torch, [x, w])
        le = getattr(ember.nn.functional, name)(xe, ember.tensor(t), reduction=reduction, weight=we)
        lt = getattr(torch.nn.functional, name)(xt, torch.tensor(t), reduction=reduction, weight=wt)
        _close(le, lt, *_tol(dt))
        le.sum().backward()
        lt.sum().backward()
        _close(xe.grad, xt.grad, *_tol(dt))
        _close(we.grad, wt.grad, *_tol(dt))
        for lib in (ember, torch):
            with pytest.raises(ValueError, match="Weights and input must have the same size"):
                getattr(lib.nn.functional, name)(lib.tensor(x), lib.tensor(t), weight=lib.tensor(w[:1]))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_no_gradient_at_the_hinge(p, reduction):
    torch = _torch()
    x = np.array([[1.0, 0.0, 0.5, -0.25], [0.0, 1.0, 0.0, 0.75], [0.3, -0.2, 0.1, 0.9]])
    y = np.array([0, 1, 3])
    w = np.array([0.5, 1.0, 2.0, 1.5])
    (xe,), (xt,) = _both(torch, [x])
    le = ember.nn.functional.multi_margin_loss(xe, ember.tensor(y), p=p, weight=ember.tensor(w), reduction=reduction)
    lt = torch.nn.functional.multi_margin_loss(xt, torch.tensor(y), p=p, weight=torch.tensor(w), reduction=reduction)
    _close(le, lt, 1e-12, 1e-14)
    le.sum().backward()
    lt.sum().backward()
    _close(xe.grad, xt.grad, 1e-12, 1e-14)


def test_sdpa_attn_mask_with_is_causal_refused_off_the_flash_shapes():
    torch = _torch()
    rng = np.random.RandomState(15)

    def r(*s):
        return rng.randn(*s).astype("float32")

    mask = np.ones((3, 5), bool)
    cases = [((r(2, 3, 4), r(2, 5, 4), r(2, 5, 4)), {}, True),                      # 3-D: math kernel
             ((r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 6)), {}, True),             # value head dim differs
             ((r(2, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 4)), {}, True),             # broadcast batch
             ((r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4)), dict(dropout_p=0.5), True),
             ((r(2, 4, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4)), dict(enable_gqa=True), False),
             ((r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4)), {}, False)]
    for arrays, kw, refused in cases:
        for lib in (ember, torch):
            call = lambda: lib.nn.functional.scaled_dot_product_attention(  # noqa: E731
                *(lib.tensor(a) for a in arrays), attn_mask=lib.tensor(mask), is_causal=True, **kw)
            if refused:
                with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
                    call()
            else:
                call()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_grid_gradient_zero_on_clip_bounds(dt, padding_mode, align_corners):
    """Grid points that land exactly on the clip bounds get no grid gradient (ATen's
    clip_coordinates_set_grad); a clamp passed one."""
    torch = _torch()
    rng = np.random.RandomState(16)
    x = rng.randn(1, 2, 4, 5).astype(dt)
    g = np.array([[[[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [-0.75, 0.5]],
                   [[0.25, -0.5], [1.2, -1.3], [0.5, 0.5], [0.125, 0.375]]]], dtype=dt)
    (xe, ge), (xt, gt) = _both(torch, [x, g])
    kw = dict(mode="bilinear", padding_mode=padding_mode, align_corners=align_corners)
    oe, ot = ember.nn.functional.grid_sample(xe, ge, **kw), torch.nn.functional.grid_sample(xt, gt, **kw)
    _close(oe, ot, *_tol(dt))
    w = rng.randn(*ot.shape).astype(dt)
    (oe * ember.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    _close(xe.grad, xt.grad, *_tol(dt))
    _close(ge.grad, gt.grad, *_tol(dt))
