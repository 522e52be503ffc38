"""Dynamically quantized LSTM / GRU / RNN cells (quantize_dynamic, ember.quantized_lstm / _gru)
against torch 2.13 (fbgemm): same int8 weights, outputs equal to float32 round-off (torch's
vectorised exp/tanh differ from numpy's by an ulp; a different activation scale would differ by
a quantization step, ~1e-2)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")
ATOL = 2e-6


def _pair(kind, *args, seed=0, **kw):
    """The same float layer in ember and torch (torch's random init copied over)."""
    torch.manual_seed(seed)
    tm = getattr(torch.nn, kind)(*args, **kw)
    em = getattr(ember.nn, kind)(*args, **kw)
    for n, p in tm.named_parameters():
        getattr(em, n).data = ember.tensor(p.detach().numpy().copy())
    return em, tm


def _quantize(em, tm, kind, dtype="qint8"):
    et, tt = getattr(ember.nn, kind), getattr(torch.nn, kind)
    kw_e = {} if dtype == "qint8" else {"dtype": ember.float16}
    kw_t = {} if dtype == "qint8" else {"dtype": torch.float16}
    eqm = eq.quantize_dynamic(ember.nn.Sequential(em), {et}, **kw_e)
    tqm = tq.quantize_dynamic(torch.nn.Sequential(tm), {tt}, **kw_t)
    return eqm, tqm


def _close(e, t):
    np.testing.assert_allclose(e.numpy(), t.detach().numpy(), rtol=0, atol=ATOL)


SEQ_CASES = [("LSTM", (5, 7), {}), ("LSTM", (5, 7, 2), {"bidirectional": True}),
             ("GRU", (5, 7, 2), {"bidirectional": True}), ("GRU", (6, 4), {"batch_first": True}),
             ("LSTM", (6, 4, 3), {"batch_first": True})]


@pytest.mark.parametrize("kind,args,kw", SEQ_CASES)
@pytest.mark.parametrize("dtype", ["qint8", "float16"])
def test_sequence_modules_match_torch(kind, args, kw, dtype):
    rng = np.random.default_rng(len(args) * 7 + len(kw))
    em, tm = _pair(kind, *args, seed=len(args), **kw)
    eqm, tqm = _quantize(em, tm, kind, dtype)
    assert repr(eqm).replace("ember.", "torch.") == repr(tqm)
    assert eqm[0]._get_name() == f"DynamicQuantized{kind}"
    if dtype == "qint8":
        for k, w in tqm[0].get_weight().items():
            np.testing.assert_array_equal(eqm[0].get_weight()[k].int_repr().numpy(), w.int_repr().numpy())
    for shift in (0.0, 1.5):
        x = (rng.standard_normal((3, 4, args[0])) * 2 + shift).astype(np.float32)
        eo, eh = eqm[0](ember.tensor(x))
        to, th = tqm[0](torch.tensor(x))
        _close(eo, to)
        for a, b in zip(eh if kind == "LSTM" else (eh,), th if kind == "LSTM" else (th,)):
            _close(a, b)
    # explicit initial state
    dirs = 2 if kw.get("bidirectional") else 1
    layers = args[2] if len(args) > 2 else 1
    h0 = rng.standard_normal((layers * dirs, 3 if kw.get("batch_first") else 4, args[1])).astype(np.float32)
    hx_e = (ember.tensor(h0), ember.tensor(-h0)) if kind == "LSTM" else ember.tensor(h0)
    hx_t = (torch.tensor(h0), torch.tensor(-h0)) if kind == "LSTM" else torch.tensor(h0)
    _close(eqm[0](ember.tensor(x), hx_e)[0], tqm[0](torch.tensor(x), hx_t)[0])


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_torch(kind):
    rng = np.random.default_rng(11)
    kw = {"nonlinearity": "relu"} if kind == "RNNCell" else {}
    em, tm = _pair(kind, 5, 6, seed=3, **kw)
    eqm, tqm = _quantize(em, tm, kind)
    assert repr(eqm) == repr(tqm)
    for _ in range(3):
        x = (rng.standard_normal((4, 5)) * 2).astype(np.float32)
        h = rng.standard_normal((4, 6)).astype(np.float32)
        if kind == "LSTMCell":
            eo = eqm[0](ember.tensor(x), (ember.tensor(h), ember.tensor(h * 0.5)))
            to = tqm[0](torch.tensor(x), (torch.tensor(h), torch.tensor(h * 0.5)))
            _close(eo[0], to[0])
            _close(eo[1], to[1])
        else:
            _close(eqm[0](ember.tensor(x), ember.tensor(h)), tqm[0](torch.tensor(x), torch.tensor(h)))
    _close(eqm[0](ember.tensor(x))[0] if kind == "LSTMCell" else eqm[0](ember.tensor(x)),
           tqm[0](torch.tensor(x))[0] if kind == "LSTMCell" else tqm[0](torch.tensor(x)))


def test_default_spec_and_state_dict(tmp_path):
    em = ember.nn.Sequential(ember.nn.LSTM(4, 3, 2), ember.nn.Linear(3, 2))
    tm = torch.nn.Sequential(torch.nn.LSTM(4, 3, 2), torch.nn.Linear(3, 2))
    eqm, tqm = eq.quantize_dynamic(em), tq.quantize_dynamic(tm)          # the default spec covers LSTM
    assert repr(eqm).replace("ember.", "torch.") == repr(tqm)
    assert list(eqm.state_dict()) == list(tqm.state_dict())
    cm = eq.quantize_dynamic(ember.nn.Sequential(ember.nn.GRUCell(3, 2)))
    ct = tq.quantize_dynamic(torch.nn.Sequential(torch.nn.GRUCell(3, 2)))
    assert list(cm.state_dict()) == list(ct.state_dict())
    # save / load: a fresh module takes the saved weights
    path = tmp_path / "lstm.pt"
    ember.save(eqm[0].state_dict(), path)
    fresh = ember.ao.nn.quantized.dynamic.LSTM(4, 3, 2)
    x = ember.randn(5, 2, 4)
    assert not np.array_equal(fresh(x)[0].numpy(), eqm[0](x)[0].numpy())
    fresh.load_state_dict(ember.load(path))
    np.testing.assert_array_equal(fresh(x)[0].numpy(), eqm[0](x)[0].numpy())
    ember.save(cm.state_dict(), tmp_path / "cell.pt")
    fresh_cell = ember.nn.Sequential(ember.ao.nn.quantized.dynamic.GRUCell(3, 2))
    xc = ember.randn(4, 3)
    assert not np.array_equal(fresh_cell[0](xc).numpy(), cm[0](xc).numpy())
    fresh_cell.load_state_dict(ember.load(tmp_path / "cell.pt"))
    np.testing.assert_array_equal(fresh_cell[0](xc).numpy(), cm[0](xc).numpy())


def test_top_level_quantized_lstm_gru():
    rng = np.random.default_rng(5)
    for kind in ("LSTM", "GRU"):
        em, tm = _pair(kind, 4, 3, 2, seed=9, bidirectional=True)
        eqm, tqm = _quantize(em, tm, kind)
        x = rng.standard_normal((6, 2, 4)).astype(np.float32)
        h0 = rng.standard_normal((4, 2, 3)).astype(np.float32)
        ep = [m.param for m in eqm[0]._all_weight_values]
        tp = [m.param for m in tqm[0]._all_weight_values]
        if kind == "LSTM":
            eo = ember.quantized_lstm(ember.tensor(x), [ember.tensor(h0), ember.tensor(h0)], ep, True, 2, 0.0,
                                      False, True, False, dtype=ember.qint8, use_dynamic=True)
            to = torch.quantized_lstm(torch.tensor(x), [torch.tensor(h0), torch.tensor(h0)], tp, True, 2, 0.0,
                                      False, True, False, dtype=torch.qint8, use_dynamic=True)
            assert len(eo) == len(to) == 3
        else:
            eo = ember.quantized_gru(ember.tensor(x), ember.tensor(h0), ep, True, 2, 0.0, False, True, False)
            to = torch.quantized_gru(torch.tensor(x), torch.tensor(h0), tp, True, 2, 0.0, False, True, False)
            assert len(eo) == len(to) == 2
        for a, b in zip(eo, to):
            _close(a, b)


def test_errors_and_unsupported():
    q = ember.ao.nn.quantized.dynamic.LSTM(4, 3)
    t = torch.ao.nn.quantized.dynamic.LSTM(4, 3)
    for bad_e, bad_t in ((ember.randn(2, 4), torch.randn(2, 4)), (ember.randn(2, 3, 5), torch.randn(2, 3, 5))):
        with pytest.raises(RuntimeError) as te:
            t(bad_t)
        with pytest.raises(RuntimeError, match=str(te.value).replace("(", r"\(").replace(")", r"\)")):
            q(bad_e)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 3\), got \[1, 2, 3\]"):
        q(ember.randn(5, 3, 4), (ember.randn(1, 2, 3), ember.randn(1, 2, 3)))
    with pytest.raises(RuntimeError, match="Unsupported dtype for dynamic RNN quantization"):
        ember.ao.nn.quantized.dynamic.GRU(3, 2, dtype=ember.quint8)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        ember.fbgemm_linear_quantize_weight(ember.randn(3, 2, dtype=ember.float64))
    with pytest.raises(NotImplementedError, match="proj_size"):
        eq.quantize_dynamic(ember.nn.Sequential(ember.nn.LSTM(4, 3, proj_size=2)))
    assert ember.nn.quantized.dynamic.LSTM is ember.ao.nn.quantized.dynamic.LSTM


@pytest.mark.parametrize("kind,kw", [("LSTM", {}), ("GRU", {"bidirectional": True}),
                                     ("LSTM", {"bidirectional": True})])
def test_packed_sequences_match_torch(kind, kw):
    rng = np.random.default_rng(7)
    em, tm = _pair(kind, 4, 5, 2, seed=4, **kw)
    eqm, tqm = _quantize(em, tm, kind)
    seqs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (5, 2, 4)]
    ep = ember.nn.utils.rnn.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    h0 = rng.standard_normal((2 * (2 if kw else 1), 3, 5)).astype(np.float32)
    for hx in (None, h0):
        ehx = thx = None
        if hx is not None:
            ehx = (ember.tensor(hx), ember.tensor(-hx)) if kind == "LSTM" else ember.tensor(hx)
            thx = (torch.tensor(hx), torch.tensor(-hx)) if kind == "LSTM" else torch.tensor(hx)
        eo, eh = eqm[0](ep, ehx)
        to, th = tqm[0](tp, thx)
        assert isinstance(eo, ember.nn.utils.rnn.PackedSequence)
        _close(eo.data, to.data)
        np.testing.assert_array_equal(eo.batch_sizes.numpy(), to.batch_sizes.numpy())
        for a, b in zip(eh if kind == "LSTM" else (eh,), th if kind == "LSTM" else (th,)):
            _close(a, b)
    # torch's top-level packed form: (data, batch_sizes, hx, params, ...)
    ep_s = ember.nn.utils.rnn.pack_sequence([ember.tensor(s) for s in sorted(seqs, key=len, reverse=True)])
    tp_s = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in sorted(seqs, key=len, reverse=True)])
    params_e = [m.param for m in eqm[0]._all_weight_values]
    params_t = [m.param for m in tqm[0]._all_weight_values]
    bidir = bool(kw)
    if kind == "LSTM":
        eo = ember.quantized_lstm(ep_s.data, ep_s.batch_sizes, [ember.tensor(h0), ember.tensor(h0)], params_e, True,
                                  2, 0.0, False, bidir, dtype=ember.qint8, use_dynamic=True)
        to = torch.quantized_lstm(tp_s.data, tp_s.batch_sizes, [torch.tensor(h0), torch.tensor(h0)], params_t, True,
                                  2, 0.0, False, bidir, dtype=torch.qint8, use_dynamic=True)
    else:
        eo = ember.quantized_gru(ep_s.data, ep_s.batch_sizes, ember.tensor(h0), params_e, True, 2, 0.0, False, bidir)
        to = torch.quantized_gru(tp_s.data, tp_s.batch_sizes, torch.tensor(h0), params_t, True, 2, 0.0, False, bidir)
    for a, b in zip(eo, to):
        _close(a, b)


def _fbgemm_prep(lib, w):
    q, col, s, z = lib.fbgemm_linear_quantize_weight(lib.tensor(w))
    return q, lib.fbgemm_pack_quantized_matrix(q), col, s, z


def test_fbgemm_legacy_linear_bit_exact():
    rng = np.random.default_rng(8)
    for shift in (0.0, 0.8):
        x = (rng.standard_normal((2, 3, 40)) + shift).astype(np.float32)
        w = (rng.standard_normal((7, 40)) * 0.5 + shift).astype(np.float32)
        b = rng.standard_normal(7).astype(np.float32)
        (eq_, ep, ec, es, ez), (tq_, tp, tc, ts, tz) = _fbgemm_prep(ember, w), _fbgemm_prep(torch, w)
        assert (es, ez) == (ts, tz) and ep.dtype is ember.uint8
        np.testing.assert_array_equal(eq_.numpy(), tq_.numpy())
        np.testing.assert_array_equal(ec.numpy(), tc.numpy())
        eo = ember.fbgemm_linear_int8_weight_fp32_activation(ember.tensor(x), eq_, ep, ec, es, ez, ember.tensor(b))
        to = torch.fbgemm_linear_int8_weight_fp32_activation(torch.tensor(x), tq_, tp, tc, ts, tz, torch.tensor(b))
        np.testing.assert_array_equal(eo.numpy(), to.numpy())


@pytest.mark.parametrize("name,gates", [("quantized_lstm_cell", 4), ("quantized_gru_cell", 3),
                                        ("quantized_rnn_tanh_cell", 1), ("quantized_rnn_relu_cell", 1)])
def test_legacy_quantized_cells(name, gates):
    rng = np.random.default_rng(gates)
    hid, inp = 5, 4
    wih = rng.standard_normal((gates * hid, inp)).astype(np.float32)
    whh = rng.standard_normal((gates * hid, hid)).astype(np.float32)
    bih, bhh = rng.standard_normal(gates * hid).astype(np.float32), rng.standard_normal(gates * hid).astype(np.float32)
    x, h = rng.standard_normal((3, inp)).astype(np.float32), rng.standard_normal((3, hid)).astype(np.float32)
    outs = []
    for lib in (ember, torch):
        qi, pi, ci, si, zi = _fbgemm_prep(lib, wih)
        qh, ph, ch, sh, zh = _fbgemm_prep(lib, whh)
        hx = (lib.tensor(h), lib.tensor(h * 0.5)) if gates == 4 else lib.tensor(h)
        r = getattr(lib, name)(lib.tensor(x), hx, qi, qh, lib.tensor(bih), lib.tensor(bhh), pi, ph, ci, ch, si, sh,
                               zi, zh)
        outs.append(r if isinstance(r, tuple) else (r,))
    for a, b in zip(*outs):
        _close(a, b)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "LSTMCell"])
def test_per_channel_weights(kind):
    em, tm = _pair(kind, 4, 6, seed=12)
    eqm = eq.quantize_dynamic(ember.nn.Sequential(em), {getattr(ember.nn, kind): eq.per_channel_dynamic_qconfig})
    tqm = tq.quantize_dynamic(torch.nn.Sequential(tm), {getattr(torch.nn, kind): tq.per_channel_dynamic_qconfig})
    assert repr(eqm) == repr(tqm)
    x = np.random.default_rng(1).standard_normal((5, 3, 4) if "Cell" not in kind else (3, 4)).astype(np.float32)
    eo, to = eqm[0](ember.tensor(x)), tqm[0](torch.tensor(x))
    _close(eo[0] if isinstance(eo, tuple) else eo, to[0] if isinstance(to, tuple) else to)
    w = eqm[0].get_weight()["weight_ih_l0" if "Cell" not in kind else "weight_ih"]
    assert w.qscheme() is ember.per_channel_affine
