"""Static quantization of nn.LSTM through ember.ao.nn.quantizable.LSTM (observed float LSTM of
Linear / FloatFunctional pieces) and ember.ao.nn.quantized.LSTM, plus FloatFunctional /
QFunctional and quantized add / mul, against torch 2.13."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")

E_CUSTOM = {"float_to_observed_custom_module_class": {ember.nn.LSTM: ember.ao.nn.quantizable.LSTM},
            "observed_to_quantized_custom_module_class": {ember.ao.nn.quantizable.LSTM: ember.ao.nn.quantized.LSTM}}
T_CUSTOM = {"float_to_observed_custom_module_class": {torch.nn.LSTM: torch.ao.nn.quantizable.LSTM},
            "observed_to_quantized_custom_module_class": {torch.ao.nn.quantizable.LSTM: torch.ao.nn.quantized.LSTM}}


def _pair_q(x, scale, zp, dtype="quint8"):
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, getattr(ember, dtype)),
            torch.quantize_per_tensor(torch.tensor(x), scale, zp, getattr(torch, dtype)))


def _same_q(e, t):
    assert tuple(e.shape) == tuple(t.shape)
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    assert e.int_repr().numpy().tobytes() == t.int_repr().contiguous().numpy().tobytes()


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_quantized_add_mul_match_torch(dtype):
    rng = np.random.default_rng(1)
    for n in (5, 64, 77, 300):
        a = (rng.standard_normal(n) * 2).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        sa, sb, so = (float(v) for v in rng.uniform(0.005, 0.05, 3))
        za, zb, zo = (int(v) for v in rng.integers(0, 255, 3) - (128 if dtype == "qint8" else 0))
        ea, ta = _pair_q(a, sa, za, dtype)
        eb, tb = _pair_q(b, sb, zb, dtype)
        ef = ember.ao.nn.quantized.QFunctional()
        tf = torch.ao.nn.quantized.QFunctional()
        ef.scale, ef.zero_point = tf.scale, tf.zero_point = so, zo
        _same_q(ef.add(ea, eb), tf.add(ta, tb))
        _same_q(ef.add_relu(ea, eb), tf.add_relu(ta, tb))
        _same_q(ef.mul(ea, eb), tf.mul(ta, tb))
        _same_q(ef.cat([ea, eb], 0), tf.cat([ta, tb], 0))
    # broadcasting
    ea, ta = _pair_q(rng.standard_normal((3, 4)).astype(np.float32), 0.02, 100)
    eb, tb = _pair_q(rng.standard_normal((1, 4)).astype(np.float32), 0.03, 120)
    _same_q(ef.add(ea, eb), tf.add(ta, tb))
    _same_q(ef.mul(ea, eb), tf.mul(ta, tb))


def test_float_functional_and_qfunctional_modules():
    rng = np.random.default_rng(2)
    ff, tff = ember.ao.nn.quantized.FloatFunctional(), torch.ao.nn.quantized.FloatFunctional()
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    for name in ("add", "mul", "add_relu"):
        np.testing.assert_array_equal(getattr(ff, name)(ember.tensor(x), ember.tensor(y)).numpy(),
                                      getattr(tff, name)(torch.tensor(x), torch.tensor(y)).numpy())
    np.testing.assert_allclose(ff.matmul(ember.tensor(x), ember.tensor(y.T.copy())).numpy(),
                               tff.matmul(torch.tensor(x), torch.tensor(y.T.copy())).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ff.cat([ember.tensor(x), ember.tensor(y)], 1).numpy(),
                                  tff.cat([torch.tensor(x), torch.tensor(y)], 1).numpy())
    np.testing.assert_array_equal(ff.add_scalar(ember.tensor(x), 0.5).numpy(), tff.add_scalar(torch.tensor(x), 0.5))
    with pytest.raises(RuntimeError, match="FloatFunctional is not intended to use the 'forward'"):
        ff(ember.tensor(x))
    # observed in prepare, converted to a QFunctional with the observed parameters
    nn = ember.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = eq.QuantStub()
            self.f = ember.ao.nn.quantized.FloatFunctional()
            self.dequant = eq.DeQuantStub()

        def forward(self, a):
            a = self.quant(a)
            return self.dequant(self.f.add(a, a))

    m = M().eval()
    m.qconfig = eq.default_qconfig
    eq.prepare(m, inplace=True)
    assert type(m.f.activation_post_process).__name__ == "MinMaxObserver"
    m(ember.tensor(x))
    s, z = m.f.activation_post_process.calculate_qparams()
    eq.convert(m, inplace=True)
    assert type(m.f).__name__ == "QFunctional" and (m.f.scale, m.f.zero_point) == (float(s), int(z))
    assert type(m.f.activation_post_process).__name__ == "Identity"
    tq_f = torch.ao.nn.quantized.QFunctional()
    tq_f.scale, tq_f.zero_point = m.f.scale, m.f.zero_point
    assert repr(m.f) == repr(tq_f)
    assert sorted(m.f.state_dict()) == sorted(tq_f.state_dict()) == ["scale", "zero_point"]
    q2 = ember.ao.nn.quantized.QFunctional()
    q2.load_state_dict(m.f.state_dict())
    assert (q2.scale, q2.zero_point) == (float(np.float32(m.f.scale)), m.f.zero_point)
    with pytest.raises(AssertionError, match="QFunctional.from_float expects an instance of FloatFunctional"):
        ember.ao.nn.quantized.QFunctional.from_float(nn.ReLU())
    with pytest.raises(NotImplementedError, match="add_scalar"):
        q2.add_scalar(ember.quantize_per_tensor(ember.tensor(x), 0.1, 0, ember.quint8), 1.0)


def _build(lib, q, bidirectional, num_layers, batch_first):
    nn = lib.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = q.QuantStub()
            self.lstm = nn.LSTM(4, 5, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
            self.dequant = q.DeQuantStub()

        def forward(self, x):
            y, (h, c) = self.lstm(self.quant(x))
            return self.dequant(y), self.dequant(h), self.dequant(c)

    return M()


def _sync_qparams(em, tm):
    """Give ember's converted modules torch's observed output parameters: the float calibration
    runs sum in another order, so observed ranges may differ in the last float32 bit."""
    for (n1, m1), (n2, m2) in zip(em.named_modules(), tm.named_modules()):
        assert n1 == n2
        if hasattr(m2, "scale") and hasattr(m1, "scale") and not isinstance(m2.scale, torch.Tensor):
            m1.scale, m1.zero_point = float(m2.scale), int(m2.zero_point)


@pytest.mark.parametrize("bidirectional,num_layers,batch_first", [(False, 1, False), (True, 2, True)])
def test_static_quantized_lstm_matches_torch(bidirectional, num_layers, batch_first):
    rng = np.random.default_rng(7 + num_layers)
    em = _build(ember, eq, bidirectional, num_layers, batch_first).eval()
    tm = _build(torch, tq, bidirectional, num_layers, batch_first).eval()
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.4).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
    em.qconfig, tm.qconfig = eq.default_qconfig, tq.default_qconfig
    ep = eq.prepare(em, prepare_custom_config_dict=E_CUSTOM)
    tp = tq.prepare(tm, prepare_custom_config_dict=T_CUSTOM)
    assert ep.lstm._get_name() == tp.lstm._get_name() == "QuantizableLSTM"
    assert [n for n, _ in ep.named_modules()] == [n for n, _ in tp.named_modules()]
    shape = (3, 5, 4) if batch_first else (5, 3, 4)
    for _ in range(2):
        x = rng.standard_normal(shape).astype(np.float32)
        for a, b in zip(ep(ember.tensor(x)), tp(torch.tensor(x))):       # the observed float LSTM
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)
    eqm = eq.convert(ep, convert_custom_config_dict=E_CUSTOM)
    tqm = tq.convert(tp, convert_custom_config_dict=T_CUSTOM)
    assert eqm.lstm._get_name() == "QuantizedLSTM" and type(eqm.lstm) is ember.ao.nn.quantized.LSTM
    assert [n for n, _ in eqm.named_modules()] == [n for n, _ in tqm.named_modules()]
    _sync_qparams(eqm, tqm)
    for _ in range(2):
        x = rng.standard_normal(shape).astype(np.float32)
        for a, b in zip(eqm(ember.tensor(x)), tqm(torch.tensor(x))):
            assert tuple(a.shape) == tuple(b.shape)
            assert a.numpy().tobytes() == b.numpy().tobytes()


def test_quantizable_lstm_cell_and_errors():
    rng = np.random.default_rng(9)
    cell = ember.nn.LSTMCell(3, 4)
    cell.qconfig = eq.default_qconfig
    qc = ember.ao.nn.quantizable.LSTMCell.from_float(cell)
    tcell = torch.nn.LSTMCell(3, 4)
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tcell.named_parameters(), cell.named_parameters()):
            tp.copy_(torch.tensor(ep.detach().numpy()))
    tcell.qconfig = tq.default_qconfig
    tqc = torch.ao.nn.quantizable.LSTMCell.from_float(tcell)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for a, b in zip(qc(ember.tensor(x)), tqc(torch.tensor(x))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert qc._get_name() == "QuantizableLSTMCell"
    with pytest.raises(AssertionError, match="Expected module type"):
        ember.ao.nn.quantizable.LSTMCell.from_float(ember.nn.GRUCell(3, 4))
    with pytest.raises(AssertionError, match="bi and bh must both be None or both have values"):
        ember.ao.nn.quantizable.LSTMCell.from_params(ember.randn(16, 3), ember.randn(16, 4), ember.randn(16))
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        ember.ao.nn.quantizable.LSTM(3, 4, dropout=2)
    with pytest.raises(NotImplementedError, match="non-quantizable LSTM"):
        ember.ao.nn.quantizable.LSTM.from_observed(None)
    assert ember.ao.nn.quantizable.MultiheadAttention(4, 2)._get_name() == "QuantizableMultiheadAttention"


def test_default_custom_config_swaps_lstm_like_torch():
    rng = np.random.default_rng(12)
    em = _build(ember, eq, False, 1, False).eval()
    tm = _build(torch, tq, False, 1, False).eval()
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            v = (rng.standard_normal(tuple(tp.shape)) * 0.4).astype(np.float32)
            tp.copy_(torch.tensor(v))
            ep.data = ember.tensor(v)
    em.qconfig, tm.qconfig = eq.default_qconfig, tq.default_qconfig
    d = eq.get_default_custom_config_dict()
    assert d["float_to_observed_custom_module_class"][ember.nn.LSTM] is ember.ao.nn.quantizable.LSTM
    ep, tp = eq.prepare(em), tq.prepare(tm)                  # no custom config: the default one
    assert ep.lstm._get_name() == tp.lstm._get_name() == "QuantizableLSTM"
    data = [(ember.tensor(rng.standard_normal((4, 2, 4)).astype(np.float32)), None) for _ in range(2)]
    eq.default_eval_fn(ep, data)
    tq.default_eval_fn(tp, [(torch.tensor(x.numpy()), t) for x, t in data])
    eqm, tqm = eq.convert(ep), tq.convert(tp)
    assert eqm.lstm._get_name() == tqm.lstm._get_name() == "QuantizedLSTM"
    _sync_qparams(eqm, tqm)
    x = rng.standard_normal((4, 2, 4)).astype(np.float32)
    for a, b in zip(eqm(ember.tensor(x)), tqm(torch.tensor(x))):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_dynamic_lstm_with_projection_refused():
    """torch's quantize_dynamic drops an LSTM's projection weight and fails in forward ("The number
    of rows in the packB should be equal to K"); ember refuses at convert, naming the feature."""
    m = ember.nn.Sequential(ember.nn.LSTM(4, 6, proj_size=3))
    with pytest.raises(NotImplementedError, match="proj_size"):
        eq.quantize_dynamic(m)
    tm = tq.quantize_dynamic(torch.nn.Sequential(torch.nn.LSTM(4, 6, proj_size=3)))
    with pytest.raises(RuntimeError, match="packB"):
        tm(torch.randn(2, 1, 4))
    from ember.ao.quantization import QConfigMapping, default_dynamic_qconfig, quantize_fx
    with pytest.raises(NotImplementedError, match="quantizing LSTM"):     # (FX graph mode: no LSTM either)
        quantize_fx.prepare_fx(m, QConfigMapping().set_global(default_dynamic_qconfig), (ember.randn(2, 1, 4),))
