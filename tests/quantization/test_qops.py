"""Ops on quantized tensors (cat/stack, max/min, mean, max/avg/adaptive-avg pooling, the
nn.quantized.functional helpers) against torch 2.13: integers and qparams bit for bit."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

warnings.filterwarnings("ignore")
F, TF = ember.nn.functional, torch.nn.functional


def _q(rng, shape, dtype="quint8", scale=None, zp=None):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    scale = float(rng.uniform(0.02, 0.2)) if scale is None else scale
    lo, hi = (0, 255) if dtype == "quint8" else (-128, 127)
    zp = int(rng.integers(lo, hi)) if zp is None else zp
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, getattr(ember, dtype)),
            torch.quantize_per_tensor(torch.tensor(x), scale, zp, getattr(torch, dtype)))


def _same(e, t):
    if isinstance(t, tuple):
        for a, b in zip(e, t):
            _same(a, b)
        return
    if t.is_quantized:
        assert e.is_quantized and str(e.dtype).replace("ember", "torch") == str(t.dtype)
        assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
        np.testing.assert_array_equal(e.int_repr().numpy(), t.int_repr().numpy())
    else:
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_reductions_and_joins(seed, dtype):
    rng = np.random.default_rng(seed)
    (e, t), (e2, t2) = _q(rng, (2, 3, 5, 4), dtype), _q(rng, (2, 3, 5, 4), dtype)
    _same(ember.cat([e, e], 1), torch.cat([t, t], 1))
    _same(ember.cat([e, e2, e], -1), torch.cat([t, t2, t], -1))     # others requantized with the first's
    _same(ember.stack([e, e2]), torch.stack([t, t2]))
    _same(ember.stack([e, e2], 2), torch.stack([t, t2], 2))
    _same(ember.max(e), torch.max(t))
    _same(e.min(), t.min())
    for dim in (0, 1, -1):
        _same(ember.max(e, dim), torch.max(t, dim))
        _same(e.min(dim, keepdim=True), t.min(dim, keepdim=True))
    _same(ember.mean(e), torch.mean(t))
    for dims in ((2, 3), 1, -1, (0, 2)):
        _same(e.mean(dims), t.mean(dims))
        _same(ember.mean(e, dims, keepdim=True), torch.mean(t, dims, keepdim=True))


@pytest.mark.parametrize("seed", range(3))
def test_pooling(seed):
    rng = np.random.default_rng(10 + seed)
    e, t = _q(rng, (2, 3, 7, 9), "quint8" if seed % 2 else "qint8")
    for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
               {"kernel_size": (2, 3), "stride": 1, "dilation": 2}, {"kernel_size": 3, "stride": 2, "ceil_mode": True}):
        _same(F.max_pool2d(e, **kw), TF.max_pool2d(t, **kw))
    _same(ember.nn.MaxPool2d(2)(e[0]), torch.nn.MaxPool2d(2)(t[0]))         # unbatched
    for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
               {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
               {"kernel_size": 3, "stride": 2, "ceil_mode": True}, {"kernel_size": 2, "divisor_override": 3}):
        _same(F.avg_pool2d(e, **kw), TF.avg_pool2d(t, **kw))
    for out in (1, (2, 3), (4, 5), (7, 9), (3, None)):
        _same(F.adaptive_avg_pool2d(e, out), TF.adaptive_avg_pool2d(t, out))
    _same(ember.nn.AdaptiveAvgPool2d((2, 2))(e[1]), torch.nn.AdaptiveAvgPool2d((2, 2))(t[1]))


def test_views_relu_flatten_keep_integers():
    rng = np.random.default_rng(3)
    e, t = _q(rng, (2, 3, 4, 4))
    _same(ember.flatten(F.relu(e), 1), torch.flatten(TF.relu(t), 1))
    _same(e.reshape(6, 16).transpose(0, 1), t.reshape(6, 16).transpose(0, 1))


def test_errors_as_torch():
    rng = np.random.default_rng(4)
    (e, t), (e8, t8) = _q(rng, (2, 3)), _q(rng, (2, 3), "qint8")
    x = rng.standard_normal((4, 3)).astype(np.float32)
    ep = ember.quantize_per_channel(ember.tensor(x), ember.tensor([.1, .2, .3, .4]), ember.tensor([0, 1, 2, 3]), 0,
                                    ember.quint8)
    tp = torch.quantize_per_channel(torch.tensor(x), torch.tensor([.1, .2, .3, .4]), torch.tensor([0, 1, 2, 3]), 0,
                                    torch.quint8)
    cases = [(lambda m, a, b, p: m.cat([a, b])),                 # mixed dtypes
             (lambda m, a, b, p: m.cat([p, p])),                 # per-channel
             (lambda m, a, b, p: m.max(p)), (lambda m, a, b, p: m.min(p)), (lambda m, a, b, p: m.mean(p))]
    for case in cases:
        with pytest.raises(Exception) as te:
            case(torch, t, t8, tp)
        with pytest.raises(type(te.value)) as ee:
            case(ember, e, e8, ep)
        assert str(ee.value) == str(te.value)
    with pytest.raises(NotImplementedError, match="qscheme"):
        ember.cat([e, ember.randn(2, 3)])


@pytest.mark.parametrize("seed", range(2))
def test_quantized_functional(seed):
    rng = np.random.default_rng(20 + seed)
    eqf, tqf = ember.nn.quantized.functional, torch.ao.nn.quantized.functional
    assert eqf.max_pool2d is ember.ao.nn.quantized.functional.max_pool2d
    e, t = _q(rng, (2, 3, 6, 7))
    _same(eqf.max_pool2d(e, 2), tqf.max_pool2d(t, 2))
    _same(eqf.max_pool1d(e[0], 3, 2), tqf.max_pool1d(t[0], 3, 2))
    _same(eqf.avg_pool2d(e, 3, 2, 1), tqf.avg_pool2d(t, 3, 2, 1))
    _same(eqf.adaptive_avg_pool2d(e, (4, 3)), tqf.adaptive_avg_pool2d(t, (4, 3)))
    for lo, hi in ((-1.0, 1.0), (-0.123, 2.777)):
        _same(eqf.clamp(e, lo, hi), tqf.clamp(t, lo, hi))
        _same(eqf.hardtanh(e, lo, hi), tqf.hardtanh(t, lo, hi))
        _same(ember.clamp(e, lo, hi), torch.clamp(t, lo, hi))
        _same(eqf.threshold(e, lo, hi), tqf.threshold(t, lo, hi))
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(4).astype(np.float32)
    ew = ember.quantize_per_tensor(ember.tensor(w), 0.01, 0, ember.qint8)
    tw = torch.quantize_per_tensor(torch.tensor(w), 0.01, 0, torch.qint8)
    eo = eqf.conv2d(e, ew, ember.tensor(b), padding=1, scale=0.2, zero_point=100)
    to = tqf.conv2d(t, tw, torch.tensor(b), padding=1, scale=0.2, zero_point=100)
    d = np.abs(eo.int_repr().numpy().astype(int) - to.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 0.02          # fbgemm's requantization (as nn.quantized.Conv2d)
    wl = rng.standard_normal((5, 7)).astype(np.float32) * 0.3
    el = eqf.linear(e, ember.quantize_per_tensor(ember.tensor(wl), 0.01, 0, ember.qint8), None, 0.3, 60)
    tl = tqf.linear(t, torch.quantize_per_tensor(torch.tensor(wl), 0.01, 0, torch.qint8), None, 0.3, 60)
    d = np.abs(el.int_repr().numpy().astype(int) - tl.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 0.02


def test_quantized_functional_errors():
    eqf, tqf = ember.nn.quantized.functional, torch.ao.nn.quantized.functional
    x = np.ones((1, 1, 4, 4), np.float32)
    for name, args in (("avg_pool2d", (2,)), ("adaptive_avg_pool2d", (1,)), ("clamp", (0.0, 1.0)),
                       ("hardtanh", ()), ("threshold", (0.0, 1.0))):
        with pytest.raises(ValueError) as te:
            getattr(tqf, name)(torch.tensor(x), *args)
        with pytest.raises(ValueError, match=str(te.value).replace(".", r"\.")):
            getattr(eqf, name)(ember.tensor(x), *args)
    q = ember.quantize_per_tensor(ember.tensor(x), 0.1, 0, ember.quint8)
    with pytest.raises(NotImplementedError, match="return_indices is not yet implemented!"):
        eqf.max_pool2d(q, 2, return_indices=True)
    with pytest.raises(NotImplementedError, match="Only torch.qint8 is supported for weight tensor!"):
        eqf.conv2d(q, q, None)
    with pytest.raises(NotImplementedError, match="avg_pool3d"):
        eqf.avg_pool3d(q, 2)


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_quantized_activations(dtype):
    rng = np.random.default_rng(30 if dtype == "quint8" else 31)
    eqf, tqf = ember.nn.quantized.functional, torch.ao.nn.quantized.functional
    e, t = _q(rng, (4000,), dtype)
    ozp = 100 if dtype == "quint8" else 5
    _same(eqf.elu(e, 0.05, ozp), tqf.elu(t, 0.05, ozp))
    _same(eqf.elu(e, 0.03, ozp, alpha=0.7), tqf.elu(t, 0.03, ozp, alpha=0.7))
    _same(eqf.celu(e, 0.05, ozp, 1.5), tqf.celu(t, 0.05, ozp, 1.5))
    _same(eqf.leaky_relu(e, 0.1, scale=0.05, zero_point=ozp), tqf.leaky_relu(t, 0.1, scale=0.05, zero_point=ozp))
    _same(eqf.hardsigmoid(e), tqf.hardsigmoid(t))
    e64, t64 = _q(rng, (4096,), dtype)            # a multiple of torch's vector width: no scalar tail
    _same(eqf.hardswish(e64, 0.05, ozp), tqf.hardswish(t64, 0.05, ozp))
    with pytest.raises(NotImplementedError, match="leaky_relu"):
        eqf.leaky_relu(e, 0.1)


def test_nearest_upsampling():
    rng = np.random.default_rng(40)
    e, t = _q(rng, (2, 3, 4, 5))
    eqf, tqf = ember.nn.quantized.functional, torch.ao.nn.quantized.functional
    for mode in ("nearest", "nearest-exact"):
        for kw in ({"scale_factor": 2}, {"size": (7, 9)}, {"scale_factor": 1.5}, {"scale_factor": (0.5, 1.7)}):
            _same(F.interpolate(e, mode=mode, **kw), TF.interpolate(t, mode=mode, **kw))
            _same(eqf.interpolate(e, mode=mode, **kw), tqf.interpolate(t, mode=mode, **kw))
    _same(eqf.upsample_nearest(e, scale_factor=3), tqf.upsample_nearest(t, scale_factor=3))
    _same(ember.nn.Upsample(scale_factor=2)(e), torch.nn.Upsample(scale_factor=2)(t))
    e1 = ember.quantize_per_tensor(ember.randn(2, 3, 6), 0.1, 0, ember.quint8)
    with pytest.raises(NotImplementedError):                 # torch has no quantized 1-d nearest kernel either
        F.interpolate(e1, scale_factor=2)
    with pytest.raises(NotImplementedError, match="bilinear"):
        eqf.interpolate(e, scale_factor=2, mode="bilinear")


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_fixed_grid_activations_and_flip(dtype):
    rng = np.random.default_rng(50 if dtype == "quint8" else 51)
    e, t = _q(rng, (3, 4, 5), dtype)
    _same(ember.sigmoid(e), torch.sigmoid(t))
    _same(ember.tanh(e), torch.tanh(t))
    _same(ember.nn.Sigmoid()(e), torch.nn.Sigmoid()(t))
    _same(F.hardsigmoid(e), TF.hardsigmoid(t))
    _same(ember.flip(e, (0, 2)), torch.flip(t, (0, 2)))
    _same(e.flip(-1), t.flip(-1))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    ep = ember.quantize_per_channel(ember.tensor(x), ember.tensor([.1, .2, .3]), ember.tensor([0, 1, 2]), 0,
                                    ember.quint8)
    tp = torch.quantize_per_channel(torch.tensor(x), torch.tensor([.1, .2, .3]), torch.tensor([0, 1, 2]), 0,
                                    torch.quint8)
    with pytest.raises(RuntimeError) as te:
        torch.flip(tp, (0,))
    with pytest.raises(RuntimeError, match=str(te.value)):
        ember.flip(ep, (0,))
