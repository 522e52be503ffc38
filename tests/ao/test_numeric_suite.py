"""ember.ao.ns._numeric_suite (eager) against torch.ao.ns._numeric_suite (torch 2.13): on the same
float model, quantized the same way, compare_weights / compare_model_stub / compare_model_outputs
return the same keys and (to the quantized kernels' agreement) the same values."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.ns._numeric_suite as tns  # noqa: E402
import torch.ao.quantization as tq  # noqa: E402

import ember.ao.ns._numeric_suite as ens  # noqa: E402

warnings.filterwarnings("ignore")


def _net(lib):
    nn = lib.nn
    q = eq if lib is ember else tq
    nnq = lib.ao.nn.quantized

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.conv = nn.Conv2d(2, 3, 3)
            self.relu = nn.ReLU()
            self.flat = nn.Flatten()
            self.fc = nn.Linear(3 * 3 * 3, 4)
            self.ff = nnq.FloatFunctional()
            self.sub = nn.Sequential(nn.Linear(4, 4))
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            x = self.flat(self.relu(self.conv(self.quant(x))))
            x = self.fc(x)
            x = self.ff.add(x, self.sub(x))
            return self.dequant(x)
    return Net()


def _pair():
    torch.manual_seed(0)
    tm, em = _net(torch).eval(), _net(ember).eval()
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    calib = [rng.standard_normal((4, 2, 5, 5)).astype(np.float32) for _ in range(3)]
    out = []
    for lib, q, m in ((torch, tq, tm), (ember, eq, em)):
        m.qconfig = q.get_default_qconfig("x86")
        p = q.prepare(copy.deepcopy(m))
        for x in calib:
            p(lib.tensor(x))
        out.append((m, q.convert(p)))
    return out[0], out[1], rng


def _np(t):
    if getattr(t, "is_quantized", False):
        t = t.dequantize()
    return np.asarray(t.detach().numpy(), np.float64)


def test_compare_weights_matches_torch():
    (tf, tqm), (ef, eqm), _ = _pair()
    twd = tns.compare_weights(tf.state_dict(), tqm.state_dict())
    ewd = ens.compare_weights(ef.state_dict(), eqm.state_dict())
    assert sorted(ewd) == sorted(twd) == ["conv.weight", "fc._packed_params._packed_params",
                                          "sub.0._packed_params._packed_params"]
    for k in twd:
        np.testing.assert_array_equal(_np(ewd[k]["float"]), _np(twd[k]["float"]))
        assert ewd[k]["quantized"].is_quantized
        np.testing.assert_array_equal(np.asarray(ewd[k]["quantized"].int_repr().numpy()),
                                      twd[k]["quantized"].int_repr().numpy())


def test_compare_model_stub_matches_torch():
    (tf, tqm), (ef, eqm), rng = _pair()
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    tob = tns.compare_model_stub(tf, tqm, {torch.nn.Linear, torch.nn.Conv2d}, torch.tensor(x))
    eob = ens.compare_model_stub(ef, eqm, {ember.nn.Linear, ember.nn.Conv2d}, ember.tensor(x))
    assert sorted(eob) == sorted(tob) == ["conv.stats", "fc.stats", "sub.0.stats"]
    assert type(eqm.conv) is ens.Shadow and type(eqm.sub[0]) is ens.Shadow
    for k in tob:
        assert sorted(eob[k]) == ["float", "quantized"]
        for side in ("float", "quantized"):
            assert len(eob[k][side]) == len(tob[k][side]) == 1
            e, t = _np(eob[k][side][0]), _np(tob[k][side][0])
            step = tob[k]["quantized"][0].q_scale()
            np.testing.assert_allclose(e, t, atol=2 * step)


def test_compare_model_outputs_matches_torch():
    (tf, tqm), (ef, eqm), rng = _pair()
    x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
    tact = tns.compare_model_outputs(tf, tqm, torch.tensor(x))
    eact = ens.compare_model_outputs(ef, eqm, ember.tensor(x))
    assert sorted(eact) == sorted(tact)
    assert {"conv.stats", "fc.stats", "quant.stats"} <= set(tact)
    for k in tact:
        assert len(eact[k]["float"]) == len(tact[k]["float"])
        assert len(eact[k]["quantized"]) == len(tact[k]["quantized"])
        for e, t in zip(eact[k]["float"], tact[k]["float"]):
            np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=1e-5)
        for e, t in zip(eact[k]["quantized"], tact[k]["quantized"]):
            assert getattr(e, "is_quantized", False) == t.is_quantized
            step = t.q_scale() if t.is_quantized else 1e-3
            np.testing.assert_allclose(_np(e), _np(t), atol=2 * step)
    # get_logger_dict finds the same loggers
    assert sorted(ens.get_logger_dict(eqm)) == sorted(tns.get_logger_dict(tqm))


def test_dynamic_lstm_and_linear_weights():
    torch.manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.LSTM(3, 4), )
    em = ember.nn.Sequential(ember.nn.LSTM(3, 4))
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    tq_ = tq.quantize_dynamic(tm, {torch.nn.LSTM})
    eq_ = eq.quantize_dynamic(em, {ember.nn.LSTM})
    twd = tns.compare_weights(tm.state_dict(), tq_.state_dict())
    ewd = ens.compare_weights(em.state_dict(), eq_.state_dict())
    assert sorted(ewd) == sorted(twd) == ["0._all_weight_values.0.param"]
    k = "0._all_weight_values.0.param"
    np.testing.assert_array_equal(_np(ewd[k]["float"]), _np(twd[k]["float"]))
    np.testing.assert_array_equal(np.asarray(ewd[k]["quantized"].int_repr().numpy()),
                                  twd[k]["quantized"].int_repr().numpy())


def test_loggers_and_shadow_ops():
    lg = ens.OutputLogger()
    t = ember.randn(2)
    assert lg(t) is t and lg.stats["tensor_val"] == [t]
    assert ens.Logger().dtype is ember.quint8
    sl = ens.ShadowLogger()
    sl((ember.ones(1), ember.zeros(1)), (ember.full((1,), 2.0), ember.zeros(1)))
    assert float(sl.stats["quantized"][0]) == 1.0 and float(sl.stats["float"][0]) == 2.0
    qf = ember.ao.nn.quantized.QFunctional()
    qf.scale, qf.zero_point = 0.1, 10
    sh = ens.Shadow(qf, ember.ao.nn.quantized.FloatFunctional(), ens.ShadowLogger)
    a = ember.quantize_per_tensor(ember.tensor([0.5, 1.0]), 0.1, 10, ember.quint8)
    out = sh.add(a, a)
    np.testing.assert_allclose(out.dequantize().numpy(), [1.0, 2.0], atol=1e-6)
    # (as torch's ShadowLogger: an output of more than one element is logged as its first one)
    tsh = tns.Shadow(torch.ao.nn.quantized.QFunctional(), torch.ao.nn.quantized.FloatFunctional(), tns.ShadowLogger)
    tsh.orig_module.scale, tsh.orig_module.zero_point = 0.1, 10
    ta = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 10, torch.quint8)
    tsh.add(ta, ta)
    np.testing.assert_allclose(sh.logger.stats["float"][0].numpy(), tsh.logger.stats["float"][0].numpy())
    np.testing.assert_allclose(sh.logger.stats["quantized"][0].dequantize().numpy(),
                               tsh.logger.stats["quantized"][0].dequantize().numpy())
    sh.cat([a, a], 0)
    sh.mul(a, a)
    assert len(sh.logger.stats["float"]) == 3
    with pytest.raises(NotImplementedError, match="FX graph mode numeric suite"):
        ember.ao.ns._numeric_suite_fx
