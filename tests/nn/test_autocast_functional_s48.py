"""CPU autocast of ember.nn.functional's Python-composed functions (losses, 3-d adaptive average
pooling, reflect / replicate padding, grid_sample), and binary_cross_entropy_with_logits's result
dtype with mixed logits / target dtypes, compared with PyTorch."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _data(seed, *shapes, positive=False, sign=False):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.standard_normal(s).astype(np.float32)
        if positive:
            a = np.abs(a) + 0.1
        if sign:
            a = np.where(a >= 0, 1.0, -1.0).astype(np.float32)
        out.append(a)
    return out


def _cases():
    """name -> (ember fn, torch fn taking the torch.nn.functional module, list of (array, floating?))."""
    x43, y43, z43 = _data(1, (4, 3), (4, 3), (4, 3))
    p43, = _data(2, (4, 3), positive=True)
    s43, = _data(3, (4, 3), sign=True)
    s4, = _data(4, (4,), sign=True)
    x4, y4 = _data(5, (4,), (4,))
    q43 = np.exp(p43) / np.exp(p43).sum(-1, keepdims=True)
    cls = np.array([0, 1, 2, 1], dtype=np.int64)
    ml = np.array([[0, 1, -1], [2, -1, 0], [1, 0, 2], [-1, 0, 0]], dtype=np.int64)
    v5, = _data(6, (1, 2, 4, 5, 4))
    i3, = _data(7, (1, 2, 6))
    i4, = _data(8, (2, 2, 5, 4))
    img, = _data(9, (1, 2, 4, 5))
    grid = np.random.default_rng(10).uniform(-1.1, 1.1, (1, 3, 4, 2)).astype(np.float32)
    return {
        "l1_loss": (lambda f, a, b: f.l1_loss(a, b), [x43, y43]),
        "kl_div": (lambda f, a, b: f.kl_div(a, b, reduction="batchmean"), [x43, q43]),
        "kl_div_log_target": (lambda f, a, b: f.kl_div(a, b, reduction="sum", log_target=True), [x43, y43]),
        "soft_margin_loss": (lambda f, a, b: f.soft_margin_loss(a, b), [x43, s43]),
        "margin_ranking_loss": (lambda f, a, b, c: f.margin_ranking_loss(a, b, c, margin=0.2), [x4, y4, s4]),
        "triplet_margin_loss": (lambda f, a, b, c: f.triplet_margin_loss(a, b, c, swap=True), [x43, y43, z43]),
        "poisson_nll_loss": (lambda f, a, b: f.poisson_nll_loss(a, b, full=True), [x43, p43 * 3]),
        "poisson_nll_loss_raw": (lambda f, a, b: f.poisson_nll_loss(a, b, log_input=False), [p43, y43 ** 2]),
        "hinge_embedding_loss": (lambda f, a, b: f.hinge_embedding_loss(a, b), [x43, s43]),
        "multi_margin_loss": (lambda f, a, b: f.multi_margin_loss(a, b, p=2), [x43, cls]),
        "multilabel_margin_loss": (lambda f, a, b: f.multilabel_margin_loss(a, b), [x43, ml]),
        "cosine_embedding_loss": (lambda f, a, b, c: f.cosine_embedding_loss(a, b, c, margin=0.1), [x43, y43, s4]),
        "adaptive_avg_pool3d": (lambda f, a: f.adaptive_avg_pool3d(a, (2, 3, 3)), [v5]),
        "reflect_pad1d": (lambda f, a: f.pad(a, (2, 1), mode="reflect"), [i3]),
        "reflect_pad2d": (lambda f, a: f.pad(a, (1, 2, 2, 1), mode="reflect"), [i4]),
        "replicate_pad1d": (lambda f, a: f.pad(a, (2, 1), mode="replicate"), [i3]),
        "replicate_pad2d": (lambda f, a: f.pad(a, (1, 2, 2, 1), mode="replicate"), [i4]),
        "replicate_pad3d": (lambda f, a: f.pad(a, (1, 0, 1, 2, 0, 1), mode="replicate"), [v5]),
        "grid_sample": (lambda f, a, g: f.grid_sample(a, g, align_corners=False), [img, grid]),
        "grid_sample_bicubic": (lambda f, a, g: f.grid_sample(a, g, mode="bicubic", padding_mode="border",
                                                              align_corners=True), [img, grid]),
        # not on PyTorch's lists: keep the low precision
        "reflect_pad3d": (lambda f, a: f.pad(a, (1, 1, 1, 1, 1, 1), mode="reflect"), [v5]),
        "circular_pad2d": (lambda f, a: f.pad(a, (1, 1, 1, 1), mode="circular"), [i4]),
        "l1_loss_weighted": (lambda f, a, b, w: f.l1_loss(a, b, weight=w), [x43, y43, p43]),
    }


def _pair(arrays, low):
    """The same values as ember and torch tensors: floating arrays rounded to ``low`` (a torch dtype)."""
    import torch
    et, tt = [], []
    for a in arrays:
        t = torch.from_numpy(a)
        if a.dtype == np.float32 and low is not None:
            t = t.to(low)
        tt.append(t)
        e = ember.tensor(t.float().numpy() if t.is_floating_point() else t.numpy())
        if t.is_floating_point():
            e = e.to(getattr(ember, str(t.dtype).split(".")[1]))
        et.append(e)
    return et, tt


def _run_both(fn, arrays, low, autocast_dtype):
    import torch
    import torch.nn.functional as TF
    et, tt = _pair(arrays, low)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if autocast_dtype is None:
            return fn(F, *et), fn(TF, *tt)
        with ember.autocast("cpu", dtype=getattr(ember, autocast_dtype)):
            e = fn(F, *et)
        with torch.autocast("cpu", dtype=getattr(torch, autocast_dtype)):
            t = fn(TF, *tt)
    return e, t


def _assert_same(e, t, rtol, atol):
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1], (e.dtype, t.dtype)
    np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_cases()))
def test_cpu_autocast_dtype_and_values(name, dt):
    torch = pytest.importorskip("torch")
    fn, arrays = _cases()[name]
    e, t = _run_both(fn, arrays, getattr(torch, dt), dt)
    if t.dtype == torch.float32:      # inputs cast up: both compute in float32 from the same values
        _assert_same(e, t, 2e-5, 2e-5)
    else:                             # low precision kept: rounding order may differ a little
        _assert_same(e, t, 2e-2, 2e-2)


@pytest.mark.parametrize("name", sorted(_cases()))
def test_float32_path_unchanged(name):
    pytest.importorskip("torch")
    fn, arrays = _cases()[name]
    e, t = _run_both(fn, arrays, None, None)
    _assert_same(e, t, 2e-5, 2e-5)


def test_float64_left_alone_under_autocast():
    x = ember.tensor(np.random.default_rng(11).standard_normal((4, 3)))
    with ember.autocast("cpu"):
        assert F.l1_loss(x, x * 0.5).dtype is ember.float64
        assert F.pad(x.unsqueeze(0), (1, 1), mode="reflect").dtype is ember.float64


def test_autocast_gradient_reaches_low_precision_input():
    torch = pytest.importorskip("torch")
    a, b = _data(12, (5, 4), (5, 4))
    (ea, eb), (ta, tb) = _pair([a, b], torch.bfloat16)
    ea.requires_grad_(True)
    ta.requires_grad_(True)
    with ember.autocast("cpu"):
        F.soft_margin_loss(ea, eb).backward()
    with torch.autocast("cpu"):
        torch.nn.functional.soft_margin_loss(ta, tb).backward()
    _assert_same(ea.grad, ta.grad, 1e-2, 1e-3)


_DTYPES = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("tdt", _DTYPES)
@pytest.mark.parametrize("xdt", _DTYPES)
def test_bce_with_logits_mixed_dtypes(xdt, tdt, reduction):
    """PyTorch's loss has the target's dtype (it is computed into ``1 - target``)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    x = rng.standard_normal(6) * 3
    t = rng.random(6)
    ex, et = ember.tensor(x).to(getattr(ember, xdt)), ember.tensor(t).to(getattr(ember, tdt))
    tx, tt = torch.from_numpy(x).to(getattr(torch, xdt)), torch.from_numpy(t).to(getattr(torch, tdt))
    e = F.binary_cross_entropy_with_logits(ex, et, reduction=reduction)
    r = torch.nn.functional.binary_cross_entropy_with_logits(tx, tt, reduction=reduction)
    # the loss cancels (x * (1 - t) - logsigmoid(x)): PyTorch rounds each step to the target's
    # dtype, ember (mixed dtypes) only the result, hence a tolerance of a few ulps of |x| ~ 3
    low = {xdt, tdt} & {"float16", "bfloat16"}
    if low:
        atol = 6e-2 if "bfloat16" in low else 1e-2
    else:
        atol = 1e-5 if "float32" in (xdt, tdt) else 1e-12
    _assert_same(e, r, 1e-2 if low else 1e-6, atol)


def test_bce_with_logits_weights_dont_change_dtype_and_grad_flows():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    x, t, w, pw = rng.standard_normal(5), rng.random(5), rng.random(5) + 0.5, rng.random(5) + 0.5
    ex = ember.tensor(x.astype(np.float32), requires_grad=True)
    tx = torch.tensor(x.astype(np.float32), requires_grad=True)
    e = F.binary_cross_entropy_with_logits(ex, ember.tensor(t), weight=ember.tensor(w.astype(np.float32)),
                                           pos_weight=ember.tensor(pw.astype(np.float32)))
    r = torch.nn.functional.binary_cross_entropy_with_logits(
        tx, torch.tensor(t), weight=torch.tensor(w.astype(np.float32)), pos_weight=torch.tensor(pw.astype(np.float32)))
    _assert_same(e, r, 1e-6, 1e-6)
    e.backward()
    r.backward()
    _assert_same(ex.grad, tx.grad, 1e-5, 1e-6)


def test_bce_with_logits_autocast_float32():
    torch = pytest.importorskip("torch")
    (ex, et), (tx, tt) = _pair(_data(15, (6,), (6,), positive=True), torch.bfloat16)
    with ember.autocast("cpu"):
        e = F.binary_cross_entropy_with_logits(ex, et / 4)
    with torch.autocast("cpu"):
        r = torch.nn.functional.binary_cross_entropy_with_logits(tx, tt / 4)
    _assert_same(e, r, 1e-5, 1e-6)


@pytest.mark.parametrize("vdt", ["float64", "float16", "float32"])
def test_bernoulli_log_prob_value_dtype(vdt):
    torch = pytest.importorskip("torch")
    p = np.random.default_rng(16).uniform(0.1, 0.9, 5).astype(np.float32)
    v = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    e = ember.distributions.Bernoulli(probs=ember.tensor(p)).log_prob(ember.tensor(v).to(getattr(ember, vdt)))
    r = torch.distributions.Bernoulli(probs=torch.tensor(p)).log_prob(torch.tensor(v).to(getattr(torch, vdt)))
    _assert_same(e, r, 1e-3 if vdt == "float16" else 1e-6, 1e-6)
