"""Eager-mode static quantization (fuse_modules, prepare, calibrate, convert) against torch 2.13
on a small CNN: the same fused/observed/converted module trees and the same outputs."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _build(m, q):
    nn = m.nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(4, 6, 3, stride=2)
            self.relu2 = nn.ReLU()
            self.fc = nn.Linear(54, 8)
            self.relu3 = nn.ReLU()
            self.fc2 = nn.Linear(8, 3)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.quant(x)
            x = self.relu(self.bn(self.conv(x)))
            x = self.relu2(self.conv2(x))
            x = x.reshape(x.shape[0], -1)
            x = self.relu3(self.fc(x))
            return self.dequant(self.fc2(x))

    return CNN()


def _same_float_weights(em, tm, rng):
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.3).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
        for (_, tb), (_, eb) in zip(tm.named_buffers(), em.named_buffers()):
            if tb.dtype == torch.float32:
                v = rng.uniform(0.5, 1.5, tuple(tb.shape)).astype(np.float32)
                tb.copy_(torch.tensor(v))
                eb.data = ember.tensor(v)


def _norm(s):
    # scales come from observed float activations, whose last bits differ between the two conv
    # implementations: compare the module trees with the scale values masked
    return re.sub(r"scale=\d\.\d+(e-?\d+)?", "scale=S", s.replace("ember.", "torch."))


@pytest.mark.parametrize("backend", ["default", "x86", "qnnpack"])
def test_static_cnn_matches_torch(backend):
    rng = np.random.default_rng(len(backend))
    em, tm = _build(ember, eq), _build(torch, tq)
    _same_float_weights(em, tm, rng)
    em.eval()
    tm.eval()
    em.qconfig = eq.default_qconfig if backend == "default" else eq.get_default_qconfig(backend)
    tm.qconfig = tq.default_qconfig if backend == "default" else tq.get_default_qconfig(backend)
    groups = [["conv", "bn", "relu"], ["conv2", "relu2"], ["fc", "relu3"]]
    ef, tf = eq.fuse_modules(em, groups), tq.fuse_modules(tm, groups)
    assert repr(ef).replace("ember.", "torch.") == repr(tf)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ef(ember.tensor(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    ep, tp = eq.prepare(ef), tq.prepare(tf)
    assert repr(ep).replace("ember.", "torch.") == repr(tp)
    for _ in range(3):
        x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
        ep(ember.tensor(x))
        tp(torch.tensor(x))
    ec, tc = eq.convert(ep), tq.convert(tp)
    assert _norm(repr(ec)) == _norm(repr(tc))
    assert list(ec.state_dict()) == list(tc.state_dict())
    for name in ("conv", "conv2", "fc", "fc2"):
        np.testing.assert_allclose(getattr(ec, name).scale, getattr(tc, name).scale, rtol=1e-5)
        assert getattr(ec, name).zero_point == getattr(tc, name).zero_point
    x = rng.standard_normal((6, 3, 8, 8)).astype(np.float32)
    eo, to = ec(ember.tensor(x)).numpy(), tc(torch.tensor(x)).numpy()
    step = tc.fc2.scale
    # the output integers agree (an observed scale can differ in its last bit: a rare tie moves one step)
    diff = np.abs(np.rint(eo / step) - np.rint(to / step))
    assert diff.max() <= 1 and (diff > 0).mean() <= 0.1
    np.testing.assert_allclose(eo, to, atol=1.01 * step)


def test_quantized_linear_conv_direct():
    """The quantized layers on their own, with the same quantized inputs and weights as torch."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 7, 7)).astype(np.float32)
    w = (rng.standard_normal((5, 4, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    sc = rng.uniform(0.002, 0.01, 5)
    for relu, cls_e, cls_t in ((False, ember.ao.nn.quantized.Conv2d, torch.ao.nn.quantized.Conv2d),
                               (True, ember.ao.nn.intrinsic.quantized.ConvReLU2d,
                                torch.ao.nn.intrinsic.quantized.ConvReLU2d)):
        ec = cls_e(4, 5, 3, stride=(2, 1), padding=1, dilation=(1, 2))
        tc = cls_t(4, 5, 3, stride=(2, 1), padding=1, dilation=(1, 2))
        ec.set_weight_bias(ember.quantize_per_channel(ember.tensor(w), ember.tensor(sc), ember.zeros(5, dtype=ember.long),
                                                      0, ember.qint8), ember.tensor(b))
        tc.set_weight_bias(torch.quantize_per_channel(torch.tensor(w), torch.tensor(sc), torch.zeros(5, dtype=torch.long),
                                                      0, torch.qint8), torch.tensor(b))
        ec.scale = tc.scale = 0.05
        ec.zero_point = tc.zero_point = 100
        eo = ec(ember.quantize_per_tensor(ember.tensor(x), 0.03, 120, ember.quint8))
        to = tc(torch.quantize_per_tensor(torch.tensor(x), 0.03, 120, torch.quint8))
        assert eo.shape == tuple(to.shape) and eo.q_scale() == to.q_scale() and eo.q_zero_point() == to.q_zero_point()
        d = np.abs(eo.int_repr().numpy().astype(int) - to.int_repr().numpy().astype(int))
        assert d.max() <= 1 and (d > 0).mean() < 0.01
        assert repr(ec).replace("ember.", "torch.") == repr(tc)
    el, tl = ember.ao.nn.quantized.Linear(6, 4), torch.ao.nn.quantized.Linear(6, 4)
    wl = rng.standard_normal((4, 6)).astype(np.float32)
    el.set_weight_bias(ember.quantize_per_tensor(ember.tensor(wl), 0.02, 0, ember.qint8), ember.tensor(b[:4]))
    tl.set_weight_bias(torch.quantize_per_tensor(torch.tensor(wl), 0.02, 0, torch.qint8), torch.tensor(b[:4]))
    el.scale = tl.scale = 0.04
    el.zero_point = tl.zero_point = 60
    xl = rng.standard_normal((2, 5, 6)).astype(np.float32)
    eo = el(ember.quantize_per_tensor(ember.tensor(xl), 0.02, 128, ember.quint8))
    to = tl(torch.quantize_per_tensor(torch.tensor(xl), 0.02, 128, torch.quint8))
    d = np.abs(eo.int_repr().numpy().astype(int) - to.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 0.05
    with pytest.raises(RuntimeError, match="expected a quantized input"):
        el(ember.randn(2, 6))


def test_fuse_errors_and_qat():
    m = ember.nn.Sequential(ember.nn.Conv2d(1, 2, 3), ember.nn.BatchNorm2d(2))
    with pytest.raises(AssertionError, match="Fusion only for eval!"):        # as torch's
        eq.fuse_modules(m, ["0", "1"])
    with pytest.raises(AssertionError, match="did not find fuser method"):       # as torch's
        eq.fuse_modules(ember.nn.Sequential(ember.nn.ReLU(), ember.nn.Linear(2, 2)).eval(), ["0", "1"])
    with pytest.raises(AssertionError, match="training mode"):
        eq.prepare_qat(m.eval())
