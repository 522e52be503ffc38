"""Quantization-aware training (fuse_modules_qat, prepare_qat, the QAT modules, convert) against
torch 2.13: the same model, data and SGD steps give the same losses (to float32 round-off,
accumulated over the steps) and, after convert, a quantized model whose outputs agree."""
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


def _model(lib, with_bn):
    nn = lib.nn
    q = (eq if lib is ember else tq)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4) if with_bn else nn.Identity()
            self.relu = nn.ReLU()
            self.flat = nn.Flatten()
            self.fc = nn.Linear(4 * 5 * 5, 6)
            self.relu2 = nn.ReLU()
            self.fc2 = nn.Linear(6, 3)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.relu(self.bn(self.conv(self.quant(x))))
            x = self.relu2(self.fc(self.flat(x)))
            return self.dequant(self.fc2(x))
    return Net()


def _copy(em, tm):
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("with_bn,version", [(True, 1), (False, 0), (True, 0)])
def test_qat_loop_matches_torch(with_bn, version):
    torch.manual_seed(0)
    tm = _model(torch, with_bn)
    em = _model(ember, with_bn)
    _copy(em, tm)
    fuse = [["conv", "bn", "relu"] if with_bn else ["conv", "relu"], ["fc", "relu2"]]
    tm.train()
    em.train()
    tm = tq.fuse_modules_qat(tm, fuse)
    em = eq.fuse_modules_qat(em, fuse)
    tm.qconfig = tq.get_default_qat_qconfig("x86", version)
    em.qconfig = eq.get_default_qat_qconfig("x86", version)
    tq.prepare_qat(tm, inplace=True)
    eq.prepare_qat(em, inplace=True)
    assert [type(m).__name__ for m in em.modules()] == [type(m).__name__ for m in tm.modules()]
    assert repr(em).replace("ember.", "torch.") == repr(tm)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    eopt = ember.optim.SGD(em.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(version + 2 * with_bn)
    target = rng.integers(0, 3, 8)
    for step in range(5):
        if step == 3:          # the tutorial's late-training switches: observers off, batch norm frozen
            tm.apply(tq.disable_observer)
            em.apply(eq.disable_observer)
            tm.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
            em.apply(ember.ao.nn.intrinsic.qat.freeze_bn_stats)
        x = rng.standard_normal((8, 2, 5, 5)).astype(np.float32)
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(target))
        el = ember.nn.functional.cross_entropy(em(ember.tensor(x)), ember.tensor(target))
        np.testing.assert_allclose(float(el), float(tl), rtol=2e-4, atol=2e-5)
        topt.zero_grad()
        eopt.zero_grad()
        tl.backward()
        el.backward()
        topt.step()
        eopt.step()
    for (tk, tv), (ek, ev) in zip(sorted(tm.named_parameters()), sorted(em.named_parameters())):
        assert tk == ek
        np.testing.assert_allclose(ev.detach().numpy(), tv.detach().numpy(), rtol=1e-3, atol=1e-4)
    for (tk, tv), (ek, ev) in zip(sorted(tm.named_buffers()), sorted(em.named_buffers())):
        assert tk == ek
        np.testing.assert_allclose(ev.detach().numpy().astype(np.float64), tv.detach().numpy().astype(np.float64),
                                   rtol=1e-3, atol=1e-4)
    if with_bn:
        assert tm.conv.freeze_bn and em.conv.freeze_bn and not em.conv.bn.training
    tm.eval()
    em.eval()
    tc, ec = tq.convert(tm), eq.convert(em)
    # the learned scales agree to float32 round-off of the trajectories, the structure exactly
    num = re.compile(r"scale=[0-9.e-]+")
    assert num.sub("scale=S", repr(ec).replace("ember.", "torch.")) == num.sub("scale=S", repr(tc))
    for name in ("conv", "fc", "fc2"):
        assert getattr(ec, name).scale == pytest.approx(getattr(tc, name).scale, rel=1e-4)
        assert getattr(ec, name).zero_point == getattr(tc, name).zero_point
    x = rng.standard_normal((3, 2, 5, 5)).astype(np.float32)
    to, eo = tc(torch.tensor(x)).numpy(), ec(ember.tensor(x)).numpy()
    step = tc.fc2.scale
    assert np.abs(to - eo).max() <= 2 * step + 1e-6


def test_qat_modules_and_aliases():
    qc = eq.get_default_qat_qconfig()
    lin = ember.nn.Linear(4, 3)
    lin.qconfig = qc
    q = ember.ao.nn.qat.Linear.from_float(lin)
    assert q.weight is lin.weight and q.bias is lin.bias          # shared Parameters, as torch
    x = ember.randn(2, 4)
    wfq = q.weight_fake_quant(q.weight)
    np.testing.assert_array_equal(q(x).detach().numpy(),
                                  ember.nn.functional.linear(x, wfq, q.bias).detach().numpy())
    # the fake-quantized weight is on the int8 grid of the learned scale
    s = q.weight_fake_quant.scale.numpy()[:, None]
    np.testing.assert_allclose(np.rint(wfq.detach().numpy() / s), wfq.detach().numpy() / s, atol=1e-3)
    assert ember.nn.qat.Linear is ember.ao.nn.qat.Linear
    assert ember.nn.intrinsic.ConvBn2d is ember.ao.nn.intrinsic.ConvBn2d
    assert ember.nn.intrinsic.qat.ConvBnReLU2d is ember.ao.nn.intrinsic.qat.ConvBnReLU2d
    with pytest.raises(AssertionError, match="qconfig must be provided"):
        ember.ao.nn.qat.Conv2d(1, 1, 1)
    with pytest.raises(AssertionError, match="Incorrect types for input modules"):
        ember.ao.nn.intrinsic.ConvBn2d(ember.nn.Linear(1, 1), ember.nn.BatchNorm2d(1))
    assert ember.nn.quantizable.LSTM is ember.ao.nn.quantizable.LSTM
    assert ember.nn.quantizable.MultiheadAttention is ember.ao.nn.quantizable.MultiheadAttention
    with pytest.raises(AttributeError, match="ConvBn4d"):
        ember.ao.nn.intrinsic.ConvBn4d
