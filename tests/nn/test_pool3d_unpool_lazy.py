"""3-d pooling, max-unpooling, FeatureAlphaDropout, MultiLabelMarginLoss,
TripletMarginWithDistanceLoss, the in-place activation aliases and the Lazy* modules against torch.nn."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from oracle import assert_close, needs_torch, torch
from _helpers import compare_layer, t2e_state


def f(*shape):
    return np.random.default_rng().uniform(-2, 2, size=shape)


# ---------------------------------------------------------------------- 3-d pooling modules
POOLS = [
    ("MaxPool3d", lambda nn: nn.MaxPool3d(2), (2, 3, 5, 6, 4)),
    ("MaxPool3d-args", lambda nn: nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=1, dilation=(1, 1, 2),
                                               ceil_mode=True), (2, 2, 5, 7, 6)),
    ("MaxPool3d-unbatched", lambda nn: nn.MaxPool3d(3, 2), (2, 7, 5, 6)),
    ("AvgPool3d", lambda nn: nn.AvgPool3d(2), (2, 3, 4, 6, 4)),
    ("AvgPool3d-args", lambda nn: nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     (1, 2, 6, 5, 7)),
    ("AvgPool3d-divisor", lambda nn: nn.AvgPool3d((2, 2, 3), divisor_override=5), (2, 2, 4, 4, 6)),
    ("AdaptiveAvgPool3d", lambda nn: nn.AdaptiveAvgPool3d((2, 3, 4)), (2, 3, 5, 7, 6)),
    ("AdaptiveAvgPool3d-None", lambda nn: nn.AdaptiveAvgPool3d((3, None, 2)), (3, 7, 5, 5)),
    ("AdaptiveMaxPool3d", lambda nn: nn.AdaptiveMaxPool3d((2, 3, 2)), (2, 3, 5, 7, 6)),
    ("AdaptiveMaxPool3d-idx", lambda nn: nn.AdaptiveMaxPool3d(3, return_indices=True), (2, 2, 7, 5, 4)),
    ("LPPool3d", lambda nn: nn.LPPool3d(2, 2), (2, 3, 4, 6, 4)),
    ("LPPool3d-p3", lambda nn: nn.LPPool3d(3, (2, 3, 2), stride=(1, 2, 2)), (2, 2, 5, 7, 6)),
    ("MaxPool3d-idx", lambda nn: nn.MaxPool3d(2, return_indices=True), (2, 2, 4, 6, 4)),
]


@needs_torch
@pytest.mark.parametrize("name,ctor,shape", POOLS, ids=[p[0] for p in POOLS])
def test_pool3d_vs_torch(name, ctor, shape):
    x = f(*shape)
    if name.startswith("LPPool3d"):
        x = np.abs(x) + 0.1           # keep x ** p real and the root well-conditioned
    outputs = (lambda o: o[0]) if name.endswith("-idx") else None
    compare_layer(ctor, [x], outputs=outputs)
    em, tm = ctor(ember.nn), ctor(torch.nn)
    assert repr(em) == repr(tm)
    if name.endswith("-idx"):
        oe, ot = em(ember.tensor(x.astype("float32"))), tm(torch.tensor(x.astype("float32")))
        assert_close(oe[1], ot[1])


@needs_torch
def test_functional_pool3d_aliases():
    x = f(2, 3, 6, 5, 4).astype("float32")
    e, t = ember.tensor(x), torch.tensor(x)
    F = torch.nn.functional
    assert_close(EF.max_pool3d_with_indices(e, 2), F.max_pool3d_with_indices(t, 2))
    assert_close(EF.adaptive_max_pool3d(e, (3, 2, 2), return_indices=True),
                 F.adaptive_max_pool3d(t, (3, 2, 2), return_indices=True))
    assert_close(EF.adaptive_max_pool3d_with_indices(e, 2), F.adaptive_max_pool3d_with_indices(t, 2))
    x2 = x[:, :, 0]
    assert_close(EF.adaptive_max_pool2d_with_indices(ember.tensor(x2), (4, 3)),
                 F.adaptive_max_pool2d_with_indices(torch.tensor(x2), (4, 3)))
    x1 = x[:, :, 0, 0]
    assert_close(EF.adaptive_max_pool1d_with_indices(ember.tensor(x1), 4),
                 F.adaptive_max_pool1d_with_indices(torch.tensor(x1), 4))
    xa = np.abs(x) + 0.1
    for p in (1.5, float("inf")):
        assert_close(EF.lp_pool3d(ember.tensor(xa), p, 2), F.lp_pool3d(torch.tensor(xa), p, 2))


# ---------------------------------------------------------------------- max unpooling
UNPOOLS = [
    (1, dict(kernel_size=2), (2, 3, 8), None),
    (1, dict(kernel_size=3, stride=2, padding=1), (3, 9), None),
    (2, dict(kernel_size=2), (2, 3, 6, 8), None),
    (2, dict(kernel_size=3, stride=2, padding=1), (2, 2, 7, 9), None),
    (2, dict(kernel_size=2), (2, 3, 7, 9), [7, 9]),           # odd input: output_size restores it
    (2, dict(kernel_size=2, stride=2), (3, 6, 6), None),      # unbatched
    (3, dict(kernel_size=2), (2, 2, 4, 6, 4), None),
    (3, dict(kernel_size=(2, 3, 2), stride=(2, 2, 1)), (1, 2, 5, 7, 4), [2, 2, 5, 7, 4]),
]


@needs_torch
@pytest.mark.parametrize("nd,kw,shape,output_size", UNPOOLS)
def test_max_unpool_vs_torch(nd, kw, shape, output_size):
    x = f(*shape).astype("float32")
    tpool = getattr(torch.nn, f"MaxPool{nd}d")(**kw, return_indices=True)
    epool = getattr(ember.nn, f"MaxPool{nd}d")(**kw, return_indices=True)
    tu = getattr(torch.nn, f"MaxUnpool{nd}d")(**kw)
    eu = getattr(ember.nn, f"MaxUnpool{nd}d")(**kw)
    assert repr(eu) == repr(tu)
    xt = torch.tensor(x, requires_grad=True)
    xe = ember.tensor(x, requires_grad=True)
    vt, it = tpool(xt)
    ve, ie = epool(xe)
    assert_close(ie, it)
    ot = tu(vt, it, output_size=output_size)
    oe = eu(ve, ie, output_size=output_size)
    assert_close(oe, ot)
    c = np.random.default_rng().standard_normal(tuple(ot.shape)).astype("float32")
    (ot * torch.tensor(c)).sum().backward()
    (oe * ember.tensor(c)).sum().backward()
    assert_close(xe.grad, xt.grad)
    # the functional form, with the values as a leaf (gradient = gather of the output gradient)
    v = ve.detach().requires_grad_()
    vt2 = vt.detach().requires_grad_()
    fe = getattr(EF, f"max_unpool{nd}d")(v, ie, output_size=output_size, **kw)
    ft = getattr(torch.nn.functional, f"max_unpool{nd}d")(vt2, it, output_size=output_size, **kw)
    assert_close(fe, ft)
    (fe * ember.tensor(c)).sum().backward()
    (ft * torch.tensor(c)).sum().backward()
    assert_close(v.grad, vt2.grad)


@needs_torch
def test_max_unpool_errors():
    x = ember.tensor(f(1, 1, 4, 4).astype("float32"))
    v, i = EF.max_pool2d(x, 2, return_indices=True)
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x.numpy()), 2, return_indices=True)
    with pytest.raises(ValueError) as ee:
        EF.max_unpool2d(v, i, 2, output_size=[9, 9])
    with pytest.raises(ValueError) as et:
        torch.nn.functional.max_unpool2d(tv, ti, 2, output_size=[9, 9])
    assert str(ee.value) == str(et.value)
    with pytest.raises(ValueError) as ee:
        EF.max_unpool2d(v, i, 2, output_size=[4, 4, 4])
    with pytest.raises(ValueError) as et:
        torch.nn.functional.max_unpool2d(tv, ti, 2, output_size=[4, 4, 4])
    assert str(ee.value) == str(et.value)


# ---------------------------------------------------------------------- dropout / losses / aliases
@needs_torch
def test_feature_alpha_dropout():
    e, t = ember.nn.FeatureAlphaDropout(0.3), torch.nn.FeatureAlphaDropout(0.3)
    assert repr(e) == repr(t)
    x = ember.tensor(f(8, 16, 5, 5).astype("float32"))
    e.eval()
    assert e(x) is x or np.array_equal(e(x).numpy(), x.numpy())
    e.train()
    # same seed, same numbers as torch (session 31: torch's arithmetic and mask draws), and whole
    # channels share one affine map: a*x+b where kept, one constant where dropped
    ember.manual_seed(11)
    torch.manual_seed(11)
    y = e(x).numpy()
    ty = t.train()(torch.tensor(x.numpy())).numpy()
    np.testing.assert_array_equal(y, ty)
    per_channel_const = np.ptp(y.reshape(8, 16, -1), axis=2) == 0
    assert per_channel_const.any() and not per_channel_const.all()
    assert EF.feature_alpha_dropout(x, 0.5, training=False) is x


@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    rng = np.random.default_rng()
    N, C = 5, 6
    tgt = np.full((N, C), -1, dtype=np.int64)
    for n in range(N):
        k = rng.integers(0, C + 1)
        tgt[n, :k] = rng.permutation(C)[:k]
        if k < C:
            tgt[n, k + 1:] = rng.integers(0, C, size=C - k - 1)   # after the -1: ignored
    for x_shape, t in (((N, C), tgt), ((C,), tgt[0])):
        x = f(*x_shape)
        compare_layer(lambda nn: nn.MultiLabelMarginLoss(reduction=reduction), [x, t])
    assert repr(ember.nn.MultiLabelMarginLoss()) == repr(torch.nn.MultiLabelMarginLoss())


@needs_torch
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss(swap):
    a, p, n = f(6, 5), f(6, 5), f(6, 5)
    compare_layer(lambda nn: nn.TripletMarginWithDistanceLoss(swap=swap, margin=0.7), [a, p, n])

    def cos_dist(nn):
        return lambda x, y: 1.0 - nn.functional.cosine_similarity(x, y)
    compare_layer(lambda nn: nn.TripletMarginWithDistanceLoss(distance_function=cos_dist(nn), swap=swap,
                                                              reduction="none"), [a, p, n])
    assert repr(ember.nn.TripletMarginWithDistanceLoss()) == repr(torch.nn.TripletMarginWithDistanceLoss())
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        ember.nn.TripletMarginWithDistanceLoss(margin=0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        EF.triplet_margin_with_distance_loss(ember.tensor(a), ember.tensor(p), ember.tensor(n[0]))


@needs_torch
def test_inplace_activation_aliases():
    x = f(4, 5).astype("float32")
    for name, args in (("selu_", ()), ("celu_", (0.7,)), ("rrelu_", (0.1, 0.3))):
        e, t = ember.tensor(x.copy()), torch.tensor(x.copy())
        re, rt = getattr(EF, name)(e, *args), getattr(torch.nn.functional, name)(t, *args)
        assert re is e
        assert_close(e, t)


# ---------------------------------------------------------------------- lazy modules
LAZY = [
    ("LazyLinear", lambda nn: nn.LazyLinear(4), (3, 5), "Linear"),
    ("LazyLinear-nobias", lambda nn: nn.LazyLinear(4, bias=False), (2, 3, 5), "Linear"),
    ("LazyConv1d", lambda nn: nn.LazyConv1d(4, 3, padding=1), (2, 3, 7), "Conv1d"),
    ("LazyConv2d", lambda nn: nn.LazyConv2d(4, 3, stride=2, groups=2), (2, 6, 7, 7), "Conv2d"),
    ("LazyConv3d", lambda nn: nn.LazyConv3d(2, 2, bias=False), (3, 4, 5, 4), "Conv3d"),
    ("LazyConvTranspose1d", lambda nn: nn.LazyConvTranspose1d(4, 3, stride=2), (2, 3, 5), "ConvTranspose1d"),
    ("LazyConvTranspose2d", lambda nn: nn.LazyConvTranspose2d(4, 2, output_padding=1, stride=2), (2, 3, 4, 5),
     "ConvTranspose2d"),
    ("LazyConvTranspose3d", lambda nn: nn.LazyConvTranspose3d(2, 2), (1, 2, 3, 4, 3), "ConvTranspose3d"),
    ("LazyBatchNorm1d", lambda nn: nn.LazyBatchNorm1d(), (6, 5), "BatchNorm1d"),
    ("LazyBatchNorm2d", lambda nn: nn.LazyBatchNorm2d(momentum=0.3, affine=False), (4, 3, 5, 5), "BatchNorm2d"),
    ("LazyBatchNorm3d", lambda nn: nn.LazyBatchNorm3d(track_running_stats=False), (2, 3, 4, 3, 3),
     "BatchNorm3d"),
    ("LazyInstanceNorm1d", lambda nn: nn.LazyInstanceNorm1d(), (3, 4, 6), "InstanceNorm1d"),
    ("LazyInstanceNorm2d", lambda nn: nn.LazyInstanceNorm2d(affine=False, track_running_stats=False),
     (2, 3, 5, 5), "InstanceNorm2d"),
    ("LazyInstanceNorm3d", lambda nn: nn.LazyInstanceNorm3d(bias=False), (2, 3, 3, 4, 3), "InstanceNorm3d"),
]


@needs_torch
@pytest.mark.parametrize("name,ctor,shape,becomes", LAZY, ids=[p[0] for p in LAZY])
def test_lazy_vs_torch(name, ctor, shape, becomes):
    em, tm = ctor(ember.nn), ctor(torch.nn)
    assert repr(em) == repr(tm)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    assert em.has_uninitialized_params() == tm.has_uninitialized_params()
    for (k, pe), (_, pt) in zip(em.named_parameters(), tm.named_parameters()):
        assert isinstance(pe, UninitializedParameter) and is_lazy(pe), k
        assert repr(pe) == repr(pt) == "<UninitializedParameter>"
    x = f(*shape).astype("float32")
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    # first forward: shapes inferred, module becomes the regular class
    ye = em(xe)
    tm(xt)
    assert type(em) is getattr(ember.nn, becomes)
    assert type(tm) is getattr(torch.nn, becomes)
    assert not any(is_lazy(t) for t in list(em.parameters()) + list(em.buffers()))
    assert repr(em) == repr(tm)
    sd_e, sd_t = em.state_dict(), tm.state_dict()
    assert list(sd_e.keys()) == list(sd_t.keys())
    for k in sd_t:
        assert tuple(sd_e[k].shape) == tuple(sd_t[k].shape), k
        assert type(sd_e[k]) is ember.Tensor
    for p in em.parameters():
        assert type(p) is ember.nn.Parameter and p.requires_grad
    # initialized like the regular module: the regular module's reset_parameters ranges
    if "Norm" in name:
        if em.affine:
            assert np.all(em.weight.detach().numpy() == 1)
    elif ye.numel():
        fan_in = em.weight.shape[1] * int(np.prod(em.weight.shape[2:]))
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(em.weight.detach().numpy()).max() <= bound + 1e-6
        assert np.abs(em.weight.detach().numpy()).std() > 0
    # same weights as torch's materialized module: same outputs, gradients, buffers
    em.load_state_dict(t2e_state(sd_t))
    x2 = f(*shape).astype("float32")
    xe, xt = ember.tensor(x2, requires_grad=True), torch.tensor(x2, requires_grad=True)
    oe, ot = em(xe), tm(xt)
    assert_close(oe, ot, rtol=1e-4, atol=1e-5)
    c = np.random.default_rng().standard_normal(tuple(ot.shape)).astype("float32")
    (oe * ember.tensor(c)).sum().backward()
    (ot * torch.tensor(c)).sum().backward()
    assert_close(xe.grad, xt.grad, rtol=1e-4, atol=1e-4)
    for (k, pe), (_, pt) in zip(em.named_parameters(), tm.named_parameters()):
        assert_close(pe.grad, pt.grad, rtol=1e-4, atol=1e-4, msg=k)
    for (k, be), (_, bt) in zip(em.named_buffers(), tm.named_buffers()):
        assert_close(be, bt, rtol=1e-5, atol=1e-6, msg=k)


@needs_torch
def test_lazy_load_state_dict_and_dtype():
    # a lazy module loads a materialized state (shapes come from the checkpoint)
    src = ember.nn.Linear(5, 3)
    lazy = ember.nn.LazyLinear(3)
    lazy.load_state_dict(src.state_dict())
    assert not lazy.has_uninitialized_params()
    x = ember.tensor(f(2, 5).astype("float32"))
    assert_close(lazy(x), src(x))
    assert type(lazy) is ember.nn.Linear
    # dtype moves before the dry run are kept
    m = ember.nn.LazyConv1d(2, 3).double()
    assert m.weight.dtype is ember.float64 and is_lazy(m.weight)
    out = m(ember.tensor(f(1, 4, 6)))
    assert out.dtype is ember.float64 and m.weight.dtype is ember.float64 and m.in_channels == 4
    # deepcopy of an uninitialized module; optimizer holds the same Parameter objects
    lz = ember.nn.Sequential(ember.nn.LazyLinear(4), ember.nn.ReLU(), ember.nn.LazyLinear(2))
    lz2 = copy.deepcopy(lz)
    params = list(lz.parameters())
    lz(ember.tensor(f(3, 7).astype("float32")))
    assert [tuple(p.shape) for p in params] == [(4, 7), (4,), (2, 4), (2,)]
    assert all(a is b for a, b in zip(params, lz.parameters()))
    assert all(is_lazy(p) for p in lz2.parameters())


def test_uninitialized_errors():
    p = UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and p.requires_grad and isinstance(p, ember.nn.Parameter)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        p.shape
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        p + 1
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        ember.nn.LazyLinear(3).weight.numel()
    b = UninitializedBuffer()
    assert not b.requires_grad
    b.materialize((2, 3), dtype=ember.float64)
    assert type(b) is ember.Tensor and tuple(b.shape) == (2, 3) and b.dtype is ember.float64
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to LazyConv2d"):
        ember.nn.LazyConv2d(2, 3)(ember.randn(3, 5))


# ---------------------------------------------------------------------- compiled vs eager
def test_compiled_pool3d_and_unpool2d():
    x = ember.tensor(f(2, 3, 6, 6, 4).astype("float32"))
    for mod in (ember.nn.MaxPool3d(2, stride=(2, 1, 2)), ember.nn.AvgPool3d(3, stride=2, padding=1)):
        cm = ember.compile(mod)
        assert_close(cm(x), mod(x))

    class PoolUnpool(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = ember.nn.MaxPool2d(2, return_indices=True)
            self.unpool = ember.nn.MaxUnpool2d(2)

        def forward(self, x):
            v, i = self.pool(x)
            return self.unpool(v * 2.0, i)

    m = PoolUnpool()
    x2 = f(2, 3, 6, 8).astype("float32")
    xe = ember.tensor(x2, requires_grad=True)
    xc = ember.tensor(x2, requires_grad=True)
    eager = m(xe)
    comp = ember.compile(m)(xc)
    assert_close(comp, eager)
    c = ember.tensor(np.random.default_rng().standard_normal(tuple(eager.shape)).astype("float32"))
    (eager * c).sum().backward()
    (comp * c).sum().backward()
    assert_close(xc.grad, xe.grad)
