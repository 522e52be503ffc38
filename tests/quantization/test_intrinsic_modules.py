"""The fused modules of ember.ao.nn.intrinsic beyond the 2-d conv-bn ones, against torch 2.13:
ConvBn1d/3d, ConvBnReLU1d/3d, LinearBn1d (fuse_modules / fuse_modules_qat, prepare_qat, training
steps, convert), and the oneDNN fusions LinearLeakyReLU / LinearTanh / ConvAdd2d / ConvAddReLU2d
(quantized integers bit for bit with torch's onednn engine), plus the dynamic LinearReLU."""
from __future__ import annotations

import operator
import re
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _copy(em, tm):
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _net(lib, kind):
    """QuantStub -> (conv1d | conv3d | linear) -> bn -> [relu] -> flatten -> fc -> DeQuantStub."""
    nn = lib.nn
    q = eq if lib is ember else tq

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            if kind == "1d":
                self.conv, self.bn, feat = nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), 4 * 6
            elif kind == "3d":
                self.conv, self.bn, feat = nn.Conv3d(2, 3, 2), nn.BatchNorm3d(3), 3 * 2 * 2 * 2
            else:
                self.conv, self.bn, feat = nn.Linear(5, 6), nn.BatchNorm1d(6), 6
            self.relu = nn.ReLU()
            self.flat = nn.Flatten()
            self.fc = nn.Linear(feat, 3)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.bn(self.conv(self.quant(x)))
            if kind != "linear":
                x = self.relu(x)
            return self.dequant(self.fc(self.flat(x)))
    return Net()


_SHAPES = {"1d": (8, 2, 6), "3d": (8, 2, 3, 3, 3), "linear": (8, 5)}
_FUSED = {"1d": "ConvBnReLU1d", "3d": "ConvBnReLU3d", "linear": "LinearBn1d"}


@pytest.mark.parametrize("kind", ["1d", "3d", "linear"])
def test_qat_conv_bn_nd_and_linear_bn_match_torch(kind):
    torch.manual_seed(1)
    tm, em = _net(torch, kind), _net(ember, kind)
    _copy(em, tm)
    fuse = [["conv", "bn"] if kind == "linear" else ["conv", "bn", "relu"]]
    tm = tq.fuse_modules_qat(tm.train(), fuse)
    em = eq.fuse_modules_qat(em.train(), fuse)
    assert type(em.conv).__name__ == type(tm.conv).__name__ == _FUSED[kind]
    tm.qconfig = tq.get_default_qat_qconfig("x86")
    em.qconfig = eq.get_default_qat_qconfig("x86")
    tq.prepare_qat(tm, inplace=True)
    eq.prepare_qat(em, inplace=True)
    assert type(em.conv) is getattr(ember.ao.nn.intrinsic.qat, _FUSED[kind])
    assert repr(em).replace("ember.", "torch.") == repr(tm)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    topt = torch.optim.SGD(tm.parameters(), lr=0.05)
    eopt = ember.optim.SGD(em.parameters(), lr=0.05)
    rng = np.random.default_rng(len(kind))
    target = rng.integers(0, 3, 8)
    for step in range(4):
        if step == 2 and kind != "linear":
            tm.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
            em.apply(ember.ao.nn.intrinsic.qat.freeze_bn_stats)
        x = rng.standard_normal(_SHAPES[kind]).astype(np.float32)
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(target))
        el = ember.nn.functional.cross_entropy(em(ember.tensor(x)), ember.tensor(target))
        np.testing.assert_allclose(float(el), float(tl), rtol=2e-4, atol=2e-5)
        topt.zero_grad()
        eopt.zero_grad()
        tl.backward()
        el.backward()
        topt.step()
        eopt.step()
    for (tk, tv), (ek, ev) in zip(sorted(tm.state_dict().items()), sorted(em.state_dict().items())):
        assert tk == ek
        np.testing.assert_allclose(np.asarray(ev.detach().numpy(), np.float64),
                                   np.asarray(tv.detach().numpy(), np.float64), rtol=1e-3, atol=1e-4)
    if kind != "linear":
        assert em.conv.freeze_bn and not em.conv.bn.training
    tf, ef = tm.conv.to_float(), em.conv.to_float()
    assert type(ef).__name__ == type(tf).__name__
    tc, ec = tq.convert(tm.eval()), eq.convert(em.eval())
    num = re.compile(r"scale=[0-9.e-]+")
    assert num.sub("scale=S", repr(ec).replace("ember.", "torch.")) == num.sub("scale=S", repr(tc))
    assert ec.conv.scale == pytest.approx(tc.conv.scale, rel=1e-3)
    x = rng.standard_normal(_SHAPES[kind]).astype(np.float32)
    to, eo = tc(torch.tensor(x)).numpy(), ec(ember.tensor(x)).numpy()
    assert np.abs(to - eo).max() <= 2 * tc.fc.scale + 1e-6


@pytest.mark.parametrize("kind", ["1d", "3d"])
def test_fuse_modules_eval_nd_matches_torch(kind):
    torch.manual_seed(2)
    tm, em = _net(torch, kind), _net(ember, kind)
    _copy(em, tm)
    rng = np.random.default_rng(3)
    for _ in range(2):   # non-trivial running statistics
        x = rng.standard_normal(_SHAPES[kind]).astype(np.float32)
        tm(torch.tensor(x))
        em(ember.tensor(x))
    tm.eval()
    em.eval()
    tf = tq.fuse_modules(tm, [["conv", "bn", "relu"]])
    ef = eq.fuse_modules(em, [["conv", "bn", "relu"]])
    assert type(ef.conv).__name__ == type(tf.conv).__name__ == f"ConvReLU{kind}"
    assert type(ef.bn).__name__ == "Identity"
    x = rng.standard_normal(_SHAPES[kind]).astype(np.float32)
    np.testing.assert_allclose(ef(ember.tensor(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    # the QAT fuser builds the intrinsic ConvBn{1,3}d
    tq_ = tq.fuse_modules_qat(tm.train(), [["conv", "bn"]])
    eq_ = eq.fuse_modules_qat(em.train(), [["conv", "bn"]])
    assert type(eq_.conv) is getattr(ember.ao.nn.intrinsic, f"ConvBn{kind}")
    assert type(tq_.conv).__name__ == f"ConvBn{kind}"


def test_fused_module_type_checks_and_aliases():
    nni = ember.ao.nn.intrinsic
    nn = ember.nn
    with pytest.raises(AssertionError, match="Incorrect types for input modules"):
        nni.ConvBn1d(nn.Conv2d(1, 1, 1), nn.BatchNorm1d(1))
    with pytest.raises(AssertionError, match="Incorrect types for input modules"):
        nni.LinearTanh(nn.Linear(1, 1), nn.ReLU())
    with pytest.raises(AssertionError, match="qconfig must be provided"):
        ember.ao.nn.intrinsic.qat.ConvBn3d(1, 1, 1)
    for name in ("ConvBn1d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU3d", "LinearBn1d"):
        assert getattr(ember.nn.intrinsic, name) is getattr(nni, name)
        assert getattr(ember.nn.intrinsic.qat, name) is getattr(nni.qat, name)
    assert ember.nn.qat.Embedding is ember.ao.nn.qat.Embedding
    assert ember.nn.intrinsic.quantized.dynamic.LinearReLU is nni.quantized.dynamic.LinearReLU
    # ConvAdd2d keeps torch's structure: the conv as child "0", the add callable as a plain attribute
    tc = torch.ao.nn.intrinsic.ConvAddReLU2d(torch.nn.Conv2d(2, 2, 1), operator.add, torch.nn.ReLU())
    ec = nni.ConvAddReLU2d(nn.Conv2d(2, 2, 1), operator.add, nn.ReLU())
    assert repr(ec) == repr(tc)
    assert sorted(ec.state_dict()) == sorted(tc.state_dict())
    _copy(ec, tc)
    x1, x2 = np.random.default_rng(4).standard_normal((2, 1, 2, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(ec(ember.tensor(x1), ember.tensor(x2)).detach().numpy(),
                               tc(torch.tensor(x1), torch.tensor(x2)).detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.fixture
def onednn():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "onednn"
    yield
    torch.backends.quantized.engine = old


def _q(lib, a, scale, zp, dtype="quint8"):
    return lib.quantize_per_tensor(lib.tensor(a), scale, zp, getattr(lib, dtype))


def _ints(t):
    return np.asarray(t.int_repr().numpy()).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantized_linear_activation_fusions_bit_for_bit(onednn, seed):
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(3, 20)), int(rng.integers(2, 9))
    x = rng.standard_normal((6, k)).astype(np.float32) * 2
    w = rng.standard_normal((n, k)).astype(np.float32) * 0.4
    b = rng.standard_normal(n).astype(np.float32)
    xs, xz = float(rng.uniform(0.01, 0.08)), int(rng.integers(0, 256))
    ys, yz = float(rng.uniform(0.01, 0.08)), int(rng.integers(0, 256))
    per_channel = seed == 2
    for name, args in (("LinearLeakyReLU", (float(rng.uniform(0.01, 0.3)),)), ("LinearTanh", ())):
        tm = getattr(torch.ao.nn.intrinsic.quantized, name)(k, n, *args)
        em = getattr(ember.ao.nn.intrinsic.quantized, name)(k, n, *args)
        if per_channel:
            s = rng.uniform(0.002, 0.01, n)
            tw = torch.quantize_per_channel(torch.tensor(w), torch.tensor(s), torch.zeros(n, dtype=torch.long), 0,
                                            torch.qint8)
            ew = ember.quantize_per_channel(ember.tensor(w), ember.tensor(s), ember.zeros(n, dtype=ember.long), 0,
                                            ember.qint8)
        else:
            tw, ew = _q(torch, w, 0.005, 0, "qint8"), _q(ember, w, 0.005, 0, "qint8")
        tm.set_weight_bias(tw, torch.tensor(b))
        em.set_weight_bias(ew, ember.tensor(b))
        tm.scale, tm.zero_point = ys, yz
        em.scale, em.zero_point = ys, yz
        t, e = _ints(tm(_q(torch, x, xs, xz))), _ints(em(_q(ember, x, xs, xz)))
        np.testing.assert_array_equal(e, t)
        assert em._get_name() == tm._get_name()


@pytest.mark.parametrize("seed", [0, 1])
def test_quantized_conv_add_bit_for_bit(onednn, seed):
    rng = np.random.default_rng(10 + seed)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(4).astype(np.float32)
    extra = rng.standard_normal((2, 4, 4, 3)).astype(np.float32) * 2
    for name in ("ConvAdd2d", "ConvAddReLU2d"):
        tm = getattr(torch.ao.nn.intrinsic.quantized, name)(3, 4, 3)
        em = getattr(ember.ao.nn.intrinsic.quantized, name)(3, 4, 3)
        tm.set_weight_bias(_q(torch, w, 0.01, 0, "qint8"), torch.tensor(b))
        em.set_weight_bias(_q(ember, w, 0.01, 0, "qint8"), ember.tensor(b))
        tm.scale, tm.zero_point = 0.06, 120
        em.scale, em.zero_point = 0.06, 120
        t = _ints(tm(_q(torch, x, 0.04, 128), _q(torch, extra, 0.05, 110)))
        e = _ints(em(_q(ember, x, 0.04, 128), _q(ember, extra, 0.05, 110)))
        np.testing.assert_array_equal(e, t)
        assert em._get_name() == tm._get_name()
    with pytest.raises(ValueError, match=re.escape("Input shape must be `(N, C, H, W)`!")):
        em(_q(ember, x[0], 0.04, 128), _q(ember, extra, 0.05, 110))


def test_convert_linear_leaky_relu_and_tanh_models(onednn):
    """prepare / calibrate / convert of models holding the fused float modules (eager mode)."""
    rng = np.random.default_rng(7)

    def build(lib):
        q = eq if lib is ember else tq
        nni = lib.ao.nn.intrinsic
        nn = lib.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.quant = q.QuantStub()
                self.a = nni.LinearLeakyReLU(nn.Linear(6, 5), nn.LeakyReLU(0.2))
                self.b = nni.LinearTanh(nn.Linear(5, 4), nn.Tanh())
                self.dequant = q.DeQuantStub()

            def forward(self, x):
                return self.dequant(self.b(self.a(self.quant(x))))
        return Net()

    torch.manual_seed(3)
    tm, em = build(torch).eval(), build(ember).eval()
    _copy(em, tm)
    tm.qconfig = tq.get_default_qconfig("onednn")
    em.qconfig = eq.get_default_qconfig("onednn")
    tp, ep = tq.prepare(tm), eq.prepare(em)
    for _ in range(3):
        x = rng.standard_normal((10, 6)).astype(np.float32)
        tp(torch.tensor(x))
        ep(ember.tensor(x))
    tc, ec = tq.convert(tp), eq.convert(ep)
    assert repr(ec).replace("ember.", "torch.") == repr(tc)
    x = rng.standard_normal((10, 6)).astype(np.float32)
    np.testing.assert_array_equal(ec(ember.tensor(x)).numpy(), tc(torch.tensor(x)).numpy())


def test_dynamic_linear_relu_matches_torch():
    torch.manual_seed(5)
    tm = torch.nn.Sequential(torch.ao.nn.intrinsic.LinearReLU(torch.nn.Linear(7, 5), torch.nn.ReLU()))
    em = ember.nn.Sequential(ember.ao.nn.intrinsic.LinearReLU(ember.nn.Linear(7, 5), ember.nn.ReLU()))
    _copy(em, tm)
    tq_ = tq.quantize_dynamic(tm, {torch.ao.nn.intrinsic.LinearReLU})
    eq_ = eq.quantize_dynamic(em, {ember.ao.nn.intrinsic.LinearReLU})
    assert type(eq_[0]).__name__ == type(tq_[0]).__name__ == "LinearReLU"
    assert eq_[0]._get_name() == tq_[0]._get_name()
    x = np.random.default_rng(6).standard_normal((4, 7)).astype(np.float32)
    np.testing.assert_allclose(eq_(ember.tensor(x)).numpy(), tq_(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert (eq_(ember.tensor(x)).numpy() >= 0).all()
