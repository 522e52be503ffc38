"""Quantized 1-, 2- and 3-d convolutions (F.conv1d/2d/3d, nn.quantized.Conv1d/Conv3d, grouped,
reflect-padded, per-channel weights, the static prepare/convert flow) bit for bit against torch
2.13's fbgemm kernels; their reprs, state_dicts and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _pair_q(x, scale, zp):
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, ember.quint8),
            torch.quantize_per_tensor(torch.tensor(x), scale, zp, torch.quint8))


def _weights(rng, shape, per_channel):
    w = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    if per_channel:
        sc = (np.abs(w).reshape(shape[0], -1).max(1) / 127).astype(np.float64)
        zp = np.zeros(shape[0], np.int64)
        return (ember.quantize_per_channel(ember.tensor(w), ember.tensor(sc), ember.tensor(zp), 0, ember.qint8),
                torch.quantize_per_channel(torch.tensor(w), torch.tensor(sc), torch.tensor(zp), 0, torch.qint8))
    return (ember.quantize_per_tensor(ember.tensor(w), 0.01, 0, ember.qint8),
            torch.quantize_per_tensor(torch.tensor(w), 0.01, 0, torch.qint8))


def _same_q(e, t):
    assert tuple(e.shape) == tuple(t.shape)
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    assert e.int_repr().numpy().tobytes() == t.int_repr().contiguous().numpy().tobytes()


_SPATIAL = {1: (13,), 2: (7, 8), 3: (5, 6, 5)}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("groups,per_channel", [(1, False), (2, True), (4, False)])
def test_functional_conv_matches_torch(nd, groups, per_channel):
    rng = np.random.default_rng(10 * nd + groups)
    eqf, tqf = ember.ao.nn.quantized.functional, torch.ao.nn.quantized.functional
    for draw in range(2):
        x = rng.standard_normal((2, 4) + _SPATIAL[nd]).astype(np.float32)
        e, t = _pair_q(x, 0.04, 60 + draw)
        ew, tw = _weights(rng, (8, 4 // groups) + (3,) * nd, per_channel)
        b = rng.standard_normal(8).astype(np.float32) if draw == 0 else None
        kw = dict(stride=1 + draw, padding=1, dilation=2 if nd == 1 else 1, groups=groups, scale=0.15,
                  zero_point=90)
        eo = getattr(eqf, f"conv{nd}d")(e, ew, None if b is None else ember.tensor(b), **kw)
        to = getattr(tqf, f"conv{nd}d")(t, tw, None if b is None else torch.tensor(b), **kw)
        _same_q(eo, to)


@pytest.mark.parametrize("nd", [1, 3])
def test_modules_repr_state_dict_and_errors(nd):
    nnq_e, nnq_t = ember.ao.nn.quantized, torch.ao.nn.quantized
    args = (4, 6, 3)
    kw = dict(padding=1, groups=2, bias=False)
    em, tm = getattr(nnq_e, f"Conv{nd}d")(*args, **kw), getattr(nnq_t, f"Conv{nd}d")(*args, **kw)
    assert repr(em) == repr(tm)
    em2 = getattr(nnq_e, f"Conv{nd}d")(4, 6, 2, stride=2, dilation=2)
    tm2 = getattr(nnq_t, f"Conv{nd}d")(4, 6, 2, stride=2, dilation=2)
    assert repr(em2) == repr(tm2)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    assert tuple(em.weight().shape) == tuple(tm.weight().shape)
    rng = np.random.default_rng(nd)
    ew, _ = _weights(rng, (6, 4) + (2,) * nd, False)
    em2.set_weight_bias(ew, ember.tensor(rng.standard_normal(6).astype(np.float32)))
    em2.scale, em2.zero_point = 0.3, 7
    loaded = getattr(nnq_e, f"Conv{nd}d")(4, 6, 2, stride=2, dilation=2)
    loaded.load_state_dict(em2.state_dict())
    x = rng.standard_normal((1, 4) + (7,) * nd).astype(np.float32)
    e, _ = _pair_q(x, 0.05, 100)
    a, b = loaded(e), em2(e)
    # (the state_dict holds the scale as a float32 tensor, as torch's: 0.3 comes back as float32(0.3))
    assert (a.q_scale(), a.q_zero_point()) == (float(np.float32(0.3)), 7) and b.q_scale() == 0.3
    assert a.int_repr().numpy().tobytes() == b.int_repr().numpy().tobytes()
    bad = ember.quantize_per_tensor(ember.randn(4, *(7,) * nd), 0.1, 0, ember.quint8)
    with pytest.raises(ValueError) as te:
        tm(torch.quantize_per_tensor(torch.randn(4, *(7,) * nd), 0.1, 0, torch.quint8))
    with pytest.raises(ValueError, match=str(te.value).replace("(", r"\(").replace(")", r"\)")):
        em(bad)
    with pytest.raises(ValueError, match="'padding_mode' circular is not supported by quantized convolution"):
        getattr(nnq_e, f"Conv{nd}d")(4, 6, 3, padding_mode="circular")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        getattr(nnq_e, f"Conv{nd}d")(5, 6, 3, groups=2)
    with pytest.raises(RuntimeError, match="expected a quantized input"):
        em(ember.randn(1, 4, *(7,) * nd))
    eqf = ember.ao.nn.quantized.functional
    with pytest.raises(NotImplementedError, match="Only torch.qint8 is supported for weight tensor!"):
        getattr(eqf, f"conv{nd}d")(e, e, None)
    with pytest.raises(NotImplementedError, match="Only zero-padding is supported!"):
        getattr(eqf, f"conv{nd}d")(e, ew, None, padding_mode="reflect")


def test_conv1d_reflect_padding_matches_torch():
    rng = np.random.default_rng(7)
    em = ember.ao.nn.quantized.Conv1d(3, 5, 3, padding=2, padding_mode="reflect")
    tm = torch.ao.nn.quantized.Conv1d(3, 5, 3, padding=2, padding_mode="reflect")
    ew, tw = _weights(rng, (5, 3, 3), True)
    b = rng.standard_normal(5).astype(np.float32)
    em.set_weight_bias(ew, ember.tensor(b))
    tm.set_weight_bias(tw, torch.tensor(b))
    em.scale, em.zero_point = tm.scale, tm.zero_point = 0.1, 64
    e, t = _pair_q(rng.standard_normal((2, 3, 9)).astype(np.float32), 0.03, 128)
    _same_q(em(e), tm(t))
    with pytest.raises(AssertionError, match="Conv3d does not support reflection padding"):
        ember.ao.nn.quantized.Conv3d(3, 5, 3, padding_mode="reflect")


def _model(lib, q):
    nn = lib.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.c1 = nn.Conv1d(3, 4, 3, padding=1)
            self.r1 = nn.ReLU()
            self.c3 = nn.Conv3d(4, 2, 2)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.r1(self.c1(self.quant(x)))                      # (N, 4, L)
            x = x.reshape(x.shape[0], 4, 2, 3, 4)
            return self.dequant(self.c3(x))

    return M()


@pytest.mark.parametrize("per_channel", [False, True])
def test_static_flow_with_conv1d_conv3d_matches_torch(per_channel):
    rng = np.random.default_rng(21 + per_channel)
    em, tm = _model(ember, eq).eval(), _model(torch, tq).eval()
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.4).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
    em.qconfig = eq.default_per_channel_qconfig if per_channel else eq.default_qconfig
    tm.qconfig = tq.default_per_channel_qconfig if per_channel else tq.default_qconfig
    em = eq.fuse_modules(em, ["c1", "r1"])
    tm = tq.fuse_modules(tm, ["c1", "r1"])
    assert type(em.c1).__name__ == type(tm.c1).__name__ == "ConvReLU1d"
    eq.prepare(em, inplace=True)
    tq.prepare(tm, inplace=True)
    for _ in range(3):
        x = rng.standard_normal((2, 3, 24)).astype(np.float32)
        em(ember.tensor(x))
        tm(torch.tensor(x))
    eq.convert(em, inplace=True)
    tq.convert(tm, inplace=True)
    # the float convolutions calibrated on sum in another order: observed ranges agree to float32
    # rounding, so the reprs agree to 6 digits and the outputs to a quantization step
    assert _rounded(repr(em.c1)) == _rounded(repr(tm.c1)) and _rounded(repr(em.c3)) == _rounded(repr(tm.c3))
    x = rng.standard_normal((2, 3, 24)).astype(np.float32)
    eo, to = em(ember.tensor(x)).numpy(), tm(torch.tensor(x)).numpy()
    step = float(tm.c3.scale)
    assert np.abs(eo - to).max() <= 1.01 * step and (np.abs(eo - to) > step / 2).mean() < 0.05


def _rounded(s):
    import re
    return re.sub(r"\d+\.\d+(e-?\d+)?", lambda m: f"{float(m.group()):.6g}", s)


@pytest.fixture
def fbgemm_engine():
    """torch's default x86 engine runs transposed convolutions through another library whose
    results differ from the float reference (checked: off by up to ~20 steps for stride 1);
    ember computes as the fbgemm engine, which agrees with the reference."""
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = old


@pytest.mark.usefixtures("fbgemm_engine")
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=1, output_padding=1, groups=2),
                                dict(stride=2, dilation=2, padding=3), dict(stride=3, output_padding=2, dilation=2)])
def test_conv_transpose_matches_torch(nd, kw):
    rng = np.random.default_rng(nd * 7 + len(kw))
    g = kw.get("groups", 1)
    em = getattr(ember.ao.nn.quantized, f"ConvTranspose{nd}d")(4, 6, 3, **kw)
    tm = getattr(torch.ao.nn.quantized, f"ConvTranspose{nd}d")(4, 6, 3, **kw)
    assert repr(em) == repr(tm)
    assert tuple(em.weight().shape) == tuple(tm.weight().shape)
    ew, tw = _weights(rng, (4, 6 // g) + (3,) * nd, False)
    b = rng.standard_normal(6).astype(np.float32)
    em.set_weight_bias(ew, ember.tensor(b))
    tm.set_weight_bias(tw, torch.tensor(b))
    em.scale, em.zero_point = tm.scale, tm.zero_point = 0.2, 90
    e, t = _pair_q(rng.standard_normal((2, 4) + _SPATIAL[nd][:nd]).astype(np.float32), 0.05, 70)
    _same_q(em(e), tm(t))


@pytest.mark.usefixtures("fbgemm_engine")
def test_conv_transpose_static_flow_and_errors():
    rng = np.random.default_rng(31)

    def build(lib, q):
        m = lib.nn.Sequential(q.QuantStub(), lib.nn.ConvTranspose2d(3, 4, 3, stride=2), q.DeQuantStub()).eval()
        return m

    em, tm = build(ember, eq), build(torch, tq)
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.4).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
    em.qconfig, tm.qconfig = eq.default_qconfig, tq.default_qconfig
    eq.prepare(em, inplace=True)
    tq.prepare(tm, inplace=True)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    em(ember.tensor(x))
    tm(torch.tensor(x))
    eq.convert(em, inplace=True)
    tq.convert(tm, inplace=True)
    assert type(em[1]).__name__ == type(tm[1]).__name__ == "ConvTranspose2d"
    em[1].scale, em[1].zero_point = tm[1].scale, tm[1].zero_point       # (float calibration: last-bit ranges)
    em[0].scale, em[0].zero_point = ember.tensor(tm[0].scale.numpy()), ember.tensor(tm[0].zero_point.numpy())
    assert em(ember.tensor(x)).numpy().tobytes() == tm(torch.tensor(x)).numpy().tobytes()
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose1d'):
        ember.ao.nn.quantized.ConvTranspose1d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match=r"Input shape must be `\(N, C, T, H, W\)`!"):
        ember.ao.nn.quantized.ConvTranspose3d(2, 2, 3)(ember.quantize_per_tensor(ember.randn(2, 3, 3, 3), 0.1, 0,
                                                                                 ember.quint8))
    pc = ember.ao.nn.quantized.ConvTranspose1d(2, 2, 3)
    pc.set_weight_bias(ember.quantize_per_channel(ember.randn(2, 2, 3), ember.tensor([0.1, 0.2]),
                                                  ember.tensor([0, 0]), 0, ember.qint8), None)
    with pytest.raises(NotImplementedError, match="per-channel"):
        pc(ember.quantize_per_tensor(ember.randn(1, 2, 5), 0.1, 0, ember.quint8))


def test_qat_conv1d_conv3d_flow_matches_torch():
    """QAT with Conv3d (+ReLU) and Conv1d modules: the same prepared / converted trees, the same
    fake-quantized forward (to float rounding), the same trained integer weights after convert."""
    rng = np.random.default_rng(41)

    def build(lib, q):
        nn = lib.nn
        return nn.Sequential(q.QuantStub(), nn.Conv3d(2, 3, 2), nn.ReLU(), q.DeQuantStub()).train()

    em, tm = build(ember, eq), build(torch, tq)
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.4).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
    em = eq.fuse_modules_qat(em, ["1", "2"])
    tm = tq.fuse_modules_qat(tm, ["1", "2"])
    em.qconfig, tm.qconfig = eq.get_default_qat_qconfig("x86", 0), tq.get_default_qat_qconfig("x86", 0)
    eq.prepare_qat(em, inplace=True)
    tq.prepare_qat(tm, inplace=True)
    assert [type(m).__name__ for m in em.modules()] == [type(m).__name__ for m in tm.modules()]
    x = rng.standard_normal((2, 2, 4, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)
    em.eval(), tm.eval()
    ec, tc = eq.convert(em), tq.convert(tm)
    assert [m._get_name() for m in ec] == [m._get_name() for m in tc]
    assert ec[1].weight().int_repr().numpy().tobytes() == tc[1].weight().int_repr().numpy().tobytes()
    c1 = ember.nn.Conv1d(2, 3, 3)
    c1.qconfig = eq.get_default_qat_qconfig()
    q1 = ember.ao.nn.qat.Conv1d.from_float(c1)
    assert q1.weight is c1.weight and type(q1.to_float()) is ember.nn.Conv1d
    y = q1(ember.randn(1, 2, 6))
    assert tuple(y.shape) == (1, 3, 4)
