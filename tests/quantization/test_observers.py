"""Observers, fake quantization and qconfigs against torch 2.13's torch.ao.quantization."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _data(rng, shape, kind):
    if kind == "normal":
        return (rng.standard_normal(shape) * 2 + 0.3).astype(np.float32)
    if kind == "positive":
        return rng.uniform(0.1, 5.0, shape).astype(np.float32)
    if kind == "outliers":
        x = rng.standard_normal(shape).astype(np.float32)
        x.reshape(-1)[:3] = [40.0, -25.0, 60.0]
        return x
    return rng.uniform(-3, -0.5, shape).astype(np.float32)


def _same_qparams(e, t, rtol=0.0):
    es, ez = e
    ts, tz = t
    assert es.dtype.name == str(ts.dtype).replace("torch.", "") and ez.dtype.name == str(tz.dtype).replace("torch.", "")
    np.testing.assert_allclose(es.numpy(), ts.numpy(), rtol=rtol, atol=0)
    np.testing.assert_allclose(ez.numpy(), tz.numpy(), rtol=rtol, atol=1e-4 if ez.dtype.is_floating_point else 0)


OBS = [
    ("MinMaxObserver", {}), ("MinMaxObserver", {"qscheme": "per_tensor_symmetric", "dtype": "qint8"}),
    ("MinMaxObserver", {"reduce_range": True}), ("MinMaxObserver", {"quant_min": 0, "quant_max": 15}),
    ("MinMaxObserver", {"dtype": "qint8", "quant_min": -8, "quant_max": 7, "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"dtype": "quint8", "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"dtype": "qint32"}),
    ("MovingAverageMinMaxObserver", {}), ("MovingAverageMinMaxObserver", {"averaging_constant": 0.3, "dtype": "qint8"}),
    ("PerChannelMinMaxObserver", {}), ("PerChannelMinMaxObserver", {"ch_axis": 1, "qscheme": "per_channel_symmetric",
                                                                      "dtype": "qint8"}),
    ("PerChannelMinMaxObserver", {"qscheme": "per_channel_affine_float_qparams"}),
    ("MovingAveragePerChannelMinMaxObserver", {"ch_axis": 1, "averaging_constant": 0.5}),
]


def _kwargs(mod, kw):
    out = {}
    for k, v in kw.items():
        out[k] = getattr(mod, v) if isinstance(v, str) else v
    return out


@pytest.mark.parametrize("name,kw", OBS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OBS)])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative"])
def test_minmax_observers(name, kw, kind):
    rng = np.random.default_rng(hash((name, kind, str(kw))) % 2 ** 32)
    eo = getattr(eq, name)(**_kwargs(ember, kw))
    to = getattr(tq, name)(**_kwargs(torch, kw))
    for _ in range(3):
        x = _data(rng, (4, 6, 5), kind)
        out = eo(ember.tensor(x))
        to(torch.tensor(x))
        assert isinstance(out, ember.Tensor)
    np.testing.assert_array_equal(eo.min_val.numpy(), to.min_val.numpy())
    np.testing.assert_array_equal(eo.max_val.numpy(), to.max_val.numpy())
    _same_qparams(eo.calculate_qparams(), to.calculate_qparams())
    assert (eo.quant_min, eo.quant_max) == (to.quant_min, to.quant_max)
    assert repr(eo).replace("ember.", "torch.") == repr(to)


@pytest.mark.parametrize("kind", ["normal", "outliers", "positive"])
@pytest.mark.parametrize("kw", [{}, {"reduce_range": True}, {"qscheme": "per_tensor_symmetric", "dtype": "qint8"},
                                {"bins": 256}])
def test_histogram_observer(kind, kw):
    rng = np.random.default_rng(len(kind) * 7 + len(kw))
    eo = eq.HistogramObserver(**_kwargs(ember, kw))
    to = tq.HistogramObserver(**_kwargs(torch, kw))
    for i in range(3):
        x = _data(rng, (200,), kind) * (1 + i)      # the range grows: histograms are re-binned
        eo(ember.tensor(x))
        to(torch.tensor(x))
    assert float(eo.min_val) == float(to.min_val) and float(eo.max_val) == float(to.max_val)
    # torch's histc and re-binning run in float32 with its own bin-edge rounding: a count may land in
    # a neighbouring bin, so the histogram and the searched range agree to a bin or two
    np.testing.assert_allclose(eo.histogram.numpy().sum(), to.histogram.numpy().sum(), rtol=1e-5)
    es, ez = eo.calculate_qparams()
    ts, tz = to.calculate_qparams()
    np.testing.assert_allclose(es.numpy(), ts.numpy(), rtol=0.02)
    assert abs(int(ez) - int(tz)) <= 2


def test_placeholder_noop_and_defaults():
    assert repr(eq.PlaceholderObserver()).replace("ember.", "torch.") == repr(tq.PlaceholderObserver())
    assert repr(eq.NoopObserver()) == repr(tq.NoopObserver())
    x = ember.randn(3)
    assert eq.PlaceholderObserver()(x) is x and eq.NoopObserver()(x) is x
    for cls in (eq.PlaceholderObserver, eq.NoopObserver):
        with pytest.raises(Exception, match="calculate_qparams should not be called"):
            cls().calculate_qparams()
    for name in ("default_observer", "default_weight_observer", "default_per_channel_weight_observer",
                 "default_dynamic_quant_observer", "default_histogram_observer", "default_float_qparams_observer"):
        assert repr(getattr(eq, name)).replace("ember.", "torch.") == repr(getattr(tq, name)), name
    for b in ("x86", "fbgemm", "qnnpack", "onednn"):
        assert repr(eq.get_default_qconfig(b)).replace("ember.", "torch.") == repr(tq.get_default_qconfig(b))
        assert repr(eq.get_default_qat_qconfig(b)).replace("ember.", "torch.") == repr(tq.get_default_qat_qconfig(b))
    for name in ("default_qconfig", "default_dynamic_qconfig", "per_channel_dynamic_qconfig", "default_qat_qconfig",
                 "default_per_channel_qconfig", "float16_dynamic_qconfig", "default_qat_qconfig_v2"):
        assert repr(getattr(eq, name)).replace("ember.", "torch.") == repr(getattr(tq, name)), name
    with pytest.raises(AssertionError, match="not supported. backend must be one of"):
        eq.get_default_qconfig("tpu")
    with pytest.raises(ValueError, match="QConfig received observer instance"):
        eq.QConfig(activation=eq.MinMaxObserver(), weight=eq.default_weight_observer)
    a, b = eq.default_observer(), eq.default_observer()
    assert a is not b and a.quant_max == 127
    w = eq.MinMaxObserver()
    with pytest.warns(UserWarning, match="must run observer before calling calculate_qparams"):
        s, z = w.calculate_qparams()
    assert s.tolist() == [1.0] and z.tolist() == [0]
    with pytest.raises(AssertionError, match="Used-specified quantization range must include 0"):
        eq.MinMaxObserver(quant_min=1, quant_max=10)
    with pytest.raises(NotImplementedError, match="per_tensor_symmetric"):
        eq.MinMaxObserver(qscheme=ember.per_channel_affine)


@pytest.mark.parametrize("seed", range(3))
def test_fake_quantize_functions(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((6, 50)) * 3).astype(np.float32)
    g = rng.standard_normal((6, 50)).astype(np.float32)
    s, z = float(rng.uniform(0.01, 0.1)), int(rng.integers(0, 20))
    for qmin, qmax in ((0, 255), (-128, 127), (0, 40)):
        z2 = min(max(z, qmin), qmax)
        ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        eo = ember.fake_quantize_per_tensor_affine(ex, s, z2, qmin, qmax)
        to = torch.fake_quantize_per_tensor_affine(tx, s, z2, qmin, qmax)
        np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
        eo.backward(ember.tensor(g))
        to.backward(torch.tensor(g))
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
        # tensor scale / zero point
        eo2 = ember.fake_quantize_per_tensor_affine(ember.tensor(x), ember.tensor([s]), ember.tensor([z2], dtype=ember.int32),
                                                    qmin, qmax)
        to2 = torch.fake_quantize_per_tensor_affine(torch.tensor(x), torch.tensor([s]), torch.tensor([z2], dtype=torch.int32),
                                                    qmin, qmax)
        np.testing.assert_array_equal(eo2.numpy(), to2.numpy())
    for axis in (0, 1):
        n = x.shape[axis]
        sc = rng.uniform(0.01, 0.1, n).astype(np.float32)
        zp = rng.integers(-10, 10, n).astype(np.int32)
        ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        eo = ember.fake_quantize_per_channel_affine(ex, ember.tensor(sc), ember.tensor(zp), axis, -128, 127)
        to = torch.fake_quantize_per_channel_affine(tx, torch.tensor(sc), torch.tensor(zp), axis, -128, 127)
        np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
        eo.backward(ember.tensor(g))
        to.backward(torch.tensor(g))
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


def _err(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def test_fake_quantize_errors():
    for m in (ember, torch):
        m._x = m.randn(3, 4)
    cases = [lambda m: m.fake_quantize_per_tensor_affine(m._x, 0.1, 300, 0, 255),
             lambda m: m.fake_quantize_per_tensor_affine(m._x, 0.1, 0, 10, 5),
             lambda m: m.fake_quantize_per_channel_affine(m._x, m.ones(4), m.zeros(4, dtype=m.long), 1, 0, 255),
             lambda m: m.fake_quantize_per_channel_affine(m._x, m.ones(3), m.zeros(3, dtype=m.int32), 1, 0, 255)]
    for f in cases:
        assert _err(lambda: f(ember)) == _err(lambda: f(torch))


@pytest.mark.parametrize("make", [
    lambda m: m.FakeQuantize(), lambda m: m.default_fake_quant(), lambda m: m.default_weight_fake_quant(),
    lambda m: m.default_per_channel_weight_fake_quant(), lambda m: m.default_fused_act_fake_quant(),
    lambda m: m.default_fused_per_channel_wt_fake_quant(), lambda m: m.default_histogram_fake_quant(),
])
def test_fake_quantize_module(make):
    rng = np.random.default_rng(11)
    em, tm = make(eq), make(tq)
    assert repr(em).replace("ember.", "torch.") == repr(tm)
    for step in range(3):
        x = (rng.standard_normal((4, 8)) * (step + 1)).astype(np.float32)
        ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        eo, to = em(ex), tm(tx)
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=0, atol=float(to.detach().abs().max()) * 0.02)
        eo.sum().backward()
        to.sum().backward()
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
        np.testing.assert_allclose(em.scale.numpy(), tm.scale.numpy(), rtol=0.02)
    em.disable_observer()
    before = em.scale.numpy().copy()
    em(ember.tensor(rng.standard_normal((4, 8)).astype(np.float32) * 100))
    np.testing.assert_array_equal(em.scale.numpy(), before)
    em.disable_fake_quant()
    y = ember.randn(4, 8)
    assert em(y).equal(y)
    sd = em.state_dict()
    em2 = copy.deepcopy(make(eq))
    em2.load_state_dict(sd)
    np.testing.assert_array_equal(em2.scale.numpy(), em.scale.numpy())


def test_quantization_alias():
    import ember.quantization as legacy
    assert legacy.MinMaxObserver is eq.MinMaxObserver and ember.quantization.QConfig is eq.QConfig
    assert legacy.observer.HistogramObserver is eq.HistogramObserver
