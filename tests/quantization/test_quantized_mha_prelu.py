"""Quantized PReLU (bit for bit torch's kernel, including its positive-slope quirk) and the
quantizable / quantized MultiheadAttention (prepare / calibrate / convert with the same weights
as torch 2.13: same structure, state dict keys and outputs)."""
from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _ints(t):
    return np.asarray(t.int_repr().numpy()).astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_quantized_prelu_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    channels = 1 if seed % 2 else 5
    x = (rng.standard_normal((3, 5, 4, 6)) * 3).astype(np.float32)
    w = rng.uniform(-0.5, 1.0, channels).astype(np.float32)
    xs, xz = float(rng.uniform(0.01, 0.1)), int(rng.integers(0, 256))
    ys, yz = float(rng.uniform(0.01, 0.1)), int(rng.integers(0, 256))
    # a weight zero point above 155 with scale 0.01 cannot hold 1.0: torch's kernel then gives
    # positive inputs a gain below one (the slope for positives is 1.0 on the weight's grid)
    ws, wz = float(rng.uniform(0.003, 0.01)), int(rng.integers(0, 256))
    tm = torch.ao.nn.quantized.PReLU(ys, yz, channels)
    em = ember.ao.nn.quantized.PReLU(ys, yz, channels)
    tm.set_weight(torch.quantize_per_tensor(torch.tensor(w), ws, wz, torch.quint8))
    em.set_weight(ember.quantize_per_tensor(ember.tensor(w), ws, wz, ember.quint8))
    t = _ints(tm(torch.quantize_per_tensor(torch.tensor(x), xs, xz, torch.quint8)))
    e = _ints(em(ember.quantize_per_tensor(ember.tensor(x), xs, xz, ember.quint8)))
    np.testing.assert_array_equal(e, t)
    assert em._get_name() == tm._get_name() == "QuantizedPReLU"


def test_prelu_gain_quirk_and_errors():
    em = ember.ao.nn.quantized.PReLU(0.01, 0, 1)
    em.set_weight(ember.quantize_per_tensor(ember.tensor([0.0]), 0.01, 200, ember.quint8))
    x = ember.quantize_per_tensor(ember.full((4,), 1.0), 0.1, 100, ember.quint8)
    tm = torch.ao.nn.quantized.PReLU(0.01, 0, 1)
    tm.set_weight(torch.quantize_per_tensor(torch.tensor([0.0]), 0.01, 200, torch.quint8))
    tx = torch.quantize_per_tensor(torch.full((4,), 1.0), 0.1, 100, torch.quint8)
    np.testing.assert_array_equal(_ints(em(x)), _ints(tm(tx)))          # 55, not 100
    assert _ints(em(x))[0] == 55
    with pytest.raises(RuntimeError, match="Found dtype QUInt8 but expected QInt8"):
        em(ember.quantize_per_tensor(ember.full((4,), 1.0), 0.1, 0, ember.qint8))
    em3 = ember.ao.nn.quantized.PReLU(0.01, 0, 3)
    em3.set_weight(ember.quantize_per_tensor(ember.tensor([0.1, 0.2, 0.3]), 0.01, 0, ember.quint8))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        em3(ember.quantize_per_tensor(ember.ones(2, 4), 0.1, 0, ember.quint8))


def test_prelu_prepare_convert_matches_torch():
    def build(lib):
        q = eq if lib is ember else tq
        return lib.nn.Sequential(q.QuantStub(), lib.nn.Conv2d(2, 3, 1), lib.nn.PReLU(3), q.DeQuantStub())
    torch.manual_seed(0)
    tm, em = build(torch).eval(), build(ember).eval()
    with torch.no_grad():
        tm[2].weight.copy_(torch.tensor([0.1, -0.2, 0.3]))
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    qc_t = tq.QConfig(activation=tq.MinMaxObserver.with_args(dtype=torch.quint8),
                      weight=tq.MinMaxObserver.with_args(dtype=torch.quint8))
    qc_e = eq.QConfig(activation=eq.MinMaxObserver.with_args(dtype=ember.quint8),
                      weight=eq.MinMaxObserver.with_args(dtype=ember.quint8))
    tm.qconfig, em.qconfig = tq.get_default_qconfig("x86"), eq.get_default_qconfig("x86")
    tm[2].qconfig, em[2].qconfig = qc_t, qc_e            # the slopes quantized to quint8, as torch expects
    tp, ep = tq.prepare(tm), eq.prepare(em)
    for _ in range(2):
        x = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
        tp(torch.tensor(x))
        ep(ember.tensor(x))
    tc, ec = tq.convert(tp), eq.convert(ep)
    assert type(ec[2]) is ember.ao.nn.quantized.PReLU
    np.testing.assert_array_equal(_ints(ec[2].weight), _ints(tc[2].weight))
    x = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(ec(ember.tensor(x)).numpy(), tc(torch.tensor(x)).numpy())


def _mha_net(lib, **kw):
    q = eq if lib is ember else tq

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.mha = lib.nn.MultiheadAttention(8, 2, **kw)
            self.dequant = q.DeQuantStub()

        def forward(self, x, mask=None):
            x = self.quant(x)
            o, w = self.mha(x, x, x, attn_mask=mask)
            return self.dequant(o), self.dequant(w)
    return Net()


_NUM = re.compile(r"scale=[0-9.e-]+")


@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"add_zero_attn": True}, {"bias": False},
                                {"add_bias_kv": True}],
                         ids=["default", "batch_first", "zero_attn", "no_bias", "bias_kv"])
def test_quantized_mha_prepare_convert_matches_torch(kw):
    torch.manual_seed(0)
    tm, em = _mha_net(torch, **kw).eval(), _mha_net(ember, **kw).eval()
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(2)
    tm.qconfig = tq.get_default_qconfig("x86")
    em.qconfig = eq.get_default_qconfig("x86")
    tp, ep = tq.prepare(copy.deepcopy(tm)), eq.prepare(copy.deepcopy(em))
    assert type(ep.mha) is ember.ao.nn.quantizable.MultiheadAttention
    assert sorted(ep.state_dict()) == sorted(tp.state_dict())
    mask = np.triu(np.full((5, 5), -1e4, np.float32), 1)
    for i in range(3):
        x = rng.standard_normal((5, 3, 8)).astype(np.float32)
        m = (torch.tensor(mask), ember.tensor(mask)) if i == 1 and not kw.get("batch_first") else (None, None)
        (to, tw), (eo, ew) = tp(torch.tensor(x), m[0]), ep(ember.tensor(x), m[1])
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    tc, ec = tq.convert(tp), eq.convert(ep)
    assert type(ec.mha) is ember.ao.nn.quantized.MultiheadAttention
    assert _NUM.sub("S", repr(ec).replace("ember.", "torch.")) == _NUM.sub("S", repr(tc))
    assert sorted(ec.state_dict()) == sorted(tc.state_dict())
    assert ec.mha.out_proj.zero_point == tc.mha.out_proj.zero_point
    for _ in range(2):
        x = rng.standard_normal((5, 3, 8)).astype(np.float32)
        (to, tw), (eo, ew) = tc(torch.tensor(x)), ec(ember.tensor(x))
        # the observed scales agree to float32 round-off (linear outputs summed in another order)
        np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-4, atol=1e-4 * tc.mha.out_proj.scale)
        # the head-averaged weights (a quantized mean over the heads' dim: dequantize, mean,
        # requantize): the same grid points; with an extra key column (add_zero_attn / bias_k) the
        # observed weights' scale is one float32 ulp off torch's, and the requantized mean can
        # then land one step apart (the integers before the mean agree)
        step = float(tc.mha.quant_attn_output_weights.scale)
        extra_key = kw.get("add_zero_attn") or kw.get("add_bias_kv")
        np.testing.assert_allclose(ew.numpy(), tw.numpy(), atol=(1.01 if extra_key else 1e-3) * step)


def test_quantized_mha_errors_and_dequantize():
    with pytest.raises(NotImplementedError, match="non-observed MHA"):
        ember.ao.nn.quantized.MultiheadAttention.from_float(ember.nn.MultiheadAttention(4, 2))
    with pytest.raises(AssertionError, match="must have 'qconfig'"):
        ember.ao.nn.quantizable.MultiheadAttention.from_float(ember.nn.MultiheadAttention(4, 2))
    m = ember.ao.nn.quantizable.MultiheadAttention(4, 2)
    x = ember.randn(3, 2, 4)
    with pytest.raises(AssertionError, match="causal mask not supported"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="The size of the 2D attn_mask is not correct"):
        m(x, x, x, attn_mask=ember.zeros(2, 2))
    # dequantize() of the converted module gives back a float MHA computing the same thing
    torch.manual_seed(3)
    em = _mha_net(ember).eval()
    em.qconfig = eq.get_default_qconfig("x86")
    ep = eq.prepare(em)
    ep(ember.randn(5, 3, 8))
    ec = eq.convert(ep)
    fp = ec.mha.dequantize()
    # (as torch's: the quantized module's _FLOAT_MODULE is the quantizable one, so that is what comes back)
    assert type(fp) is ember.ao.nn.quantizable.MultiheadAttention
    assert torch.ao.nn.quantized.MultiheadAttention._FLOAT_MODULE is torch.ao.nn.quantizable.MultiheadAttention
    wq = ec.mha.linear_Q.weight().dequantize().numpy()
    np.testing.assert_array_equal(fp.in_proj_weight.detach().numpy()[:8], wq)


def test_quantizable_mha_separate_kv_dims_matches_torch():
    torch.manual_seed(4)
    tf = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=5)
    ef = ember.nn.MultiheadAttention(8, 2, kdim=6, vdim=5)
    ef.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tf.state_dict().items()})
    with torch.no_grad():
        tf.in_proj_bias.uniform_(-0.5, 0.5)            # nonzero biases: the split must place them
    ef.in_proj_bias.data = ember.tensor(tf.in_proj_bias.detach().numpy().copy())
    tf.qconfig = tq.get_default_qconfig("x86")
    ef.qconfig = eq.get_default_qconfig("x86")
    to_ = torch.ao.nn.quantizable.MultiheadAttention.from_float(tf)
    eo_ = ember.ao.nn.quantizable.MultiheadAttention.from_float(ef)
    assert sorted(eo_.state_dict()) == sorted(to_.state_dict())
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((5, 3, 8), (4, 3, 6), (4, 3, 5)))
    pad = np.zeros((3, 4), bool)
    pad[1, 3] = True
    (ta, tw), (ea, ew) = (to_(torch.tensor(q), torch.tensor(k), torch.tensor(v), key_padding_mask=torch.tensor(pad),
                              average_attn_weights=False),
                          eo_(ember.tensor(q), ember.tensor(k), ember.tensor(v), key_padding_mask=ember.tensor(pad),
                              average_attn_weights=False))
    np.testing.assert_allclose(ea.detach().numpy(), ta.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    # and the float module agrees with both (the split projections compute nn.MultiheadAttention)
    fa, _ = ef(ember.tensor(q), ember.tensor(k), ember.tensor(v), key_padding_mask=ember.tensor(pad))
    np.testing.assert_allclose(ea.detach().numpy(), fa.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,dim", [((3, 2, 5, 6), 1), ((4, 6), 0), ((3, 4, 5), (0, 2)), ((2, 3, 7), 2)])
def test_quantized_mean_over_any_dims_bit_for_bit(shape, dim):
    """(the heads' average of the quantized MHA) torch dequantizes, averages and requantizes when the
    reduced dims are not the innermost ones; the innermost ones average the integers."""
    rng = np.random.default_rng(len(shape))
    for _ in range(3):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        s, z = float(rng.uniform(0.003, 0.01)), int(rng.integers(0, 256))
        t = torch.quantize_per_tensor(torch.tensor(x), s, z, torch.quint8).mean(dim=dim)
        e = ember.quantize_per_tensor(ember.tensor(x), s, z, ember.quint8).mean(dim=dim)
        np.testing.assert_array_equal(_ints(e), _ints(t))
