"""Weight-only quantized Embedding (quint8 rows with float scales / zero points) against torch
2.13: the quantized table, lookups bit for bit, quantize_dynamic and the static flow, repr,
state_dict, dequantization of float-qparams tensors, errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _pair(rng, n=10, d=12):
    w = (rng.standard_normal((n, d)) * rng.uniform(0.1, 3)).astype(np.float32)
    em, tm = ember.nn.Embedding(n, d), torch.nn.Embedding(n, d)
    em.weight.data = ember.tensor(w)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    return em, tm


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantize_dynamic_embedding_matches_torch(seed):
    rng = np.random.default_rng(seed)
    em, tm = _pair(rng)
    eqm = eq.quantize_dynamic(ember.nn.Sequential(em, ember.nn.Linear(12, 3)), dtype=ember.quint8)
    tqm = tq.quantize_dynamic(torch.nn.Sequential(tm, torch.nn.Linear(12, 3)), dtype=torch.quint8)
    assert repr(eqm).replace("ember", "torch") == repr(tqm)
    ew, tw = eqm[0].weight(), tqm[0].weight()
    assert ew.int_repr().numpy().tobytes() == tw.int_repr().numpy().tobytes()
    assert ew.q_per_channel_scales().numpy().tobytes() == tw.q_per_channel_scales().numpy().tobytes()
    assert ew.q_per_channel_zero_points().numpy().tobytes() == tw.q_per_channel_zero_points().numpy().tobytes()
    assert ew.dequantize().numpy().tobytes() == tw.dequantize().numpy().tobytes()
    for _ in range(3):
        idx = rng.integers(0, 10, (3, 5))
        assert eqm[0](ember.tensor(idx)).numpy().tobytes() == tqm[0](torch.tensor(idx)).numpy().tobytes()
    assert sorted(eqm[0].state_dict()) == sorted(tqm[0].state_dict())
    loaded = ember.ao.nn.quantized.Embedding(10, 12)
    loaded.load_state_dict(eqm[0].state_dict())
    idx = ember.tensor(rng.integers(0, 10, 7))
    assert loaded(idx).numpy().tobytes() == eqm[0](idx).numpy().tobytes()


def test_static_flow_and_errors():
    rng = np.random.default_rng(4)
    em, tm = _pair(rng, 6, 4)
    em.qconfig, tm.qconfig = eq.float_qparams_weight_only_qconfig, tq.float_qparams_weight_only_qconfig
    es = eq.convert(eq.prepare(ember.nn.Sequential(em)))
    ts = tq.convert(tq.prepare(torch.nn.Sequential(tm)))
    assert es[0]._get_name() == ts[0]._get_name() == "QuantizedEmbedding"
    idx = rng.integers(0, 6, (2, 3))
    assert es[0](ember.tensor(idx)).numpy().tobytes() == ts[0](torch.tensor(idx)).numpy().tobytes()
    e2, _ = _pair(rng, 6, 4)
    e2.qconfig = eq.default_qconfig
    with pytest.raises(AssertionError, match="only supported with float_qparams_weight_only_qconfig"):
        ember.ao.nn.quantized.Embedding.from_float(e2)
    e2.qconfig = eq.float_qparams_weight_only_qconfig_4bit
    with pytest.raises(NotImplementedError, match="quint4x2"):
        ember.ao.nn.quantized.Embedding.from_float(e2)
    with pytest.raises(AssertionError, match="only works for Embedding"):
        ember.ao.nn.quantized.Embedding.from_float(ember.nn.Linear(2, 2))
    with pytest.raises(IndexError, match="index out of range in self"):
        es[0](ember.tensor([6]))


@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_sum_matches_torch(include_last_offset):
    rng = np.random.default_rng(8 + include_last_offset)
    w = (rng.standard_normal((20, 16)) * 2).astype(np.float32)
    em = ember.nn.EmbeddingBag(20, 16, mode="sum", include_last_offset=include_last_offset)
    tm = torch.nn.EmbeddingBag(20, 16, mode="sum", include_last_offset=include_last_offset)
    em.weight.data = ember.tensor(w)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    eqm = eq.quantize_dynamic(ember.nn.Sequential(em), dtype=ember.quint8)[0]
    tqm = tq.quantize_dynamic(torch.nn.Sequential(tm), dtype=torch.quint8)[0]
    assert repr(eqm).replace("ember", "torch") == repr(tqm)
    for _ in range(3):
        idx = rng.integers(0, 20, 11)
        off = np.array([0, 3, 3, 7] + ([11] if include_last_offset else []))
        psw = rng.uniform(0.5, 2, 11).astype(np.float32)
        a = eqm(ember.tensor(idx), ember.tensor(off))
        b = tqm(torch.tensor(idx), torch.tensor(off))
        assert a.numpy().tobytes() == b.numpy().tobytes()
        a = eqm(ember.tensor(idx), ember.tensor(off), per_sample_weights=ember.tensor(psw))
        b = tqm(torch.tensor(idx), torch.tensor(off), per_sample_weights=torch.tensor(psw))
        assert a.numpy().tobytes() == b.numpy().tobytes()
    idx2 = rng.integers(0, 20, (4, 3))
    if not include_last_offset:
        assert eqm(ember.tensor(idx2)).numpy().tobytes() == tqm(torch.tensor(idx2)).numpy().tobytes()
    # torch's quantized bag sums whatever the mode; ember refuses "mean" / "max"
    mean_bag = ember.nn.EmbeddingBag(20, 16, mode="mean")
    qmean = eq.quantize_dynamic(ember.nn.Sequential(mean_bag), dtype=ember.quint8)[0]
    with pytest.raises(NotImplementedError, match="mode='mean'"):
        qmean(ember.tensor(idx), ember.tensor(np.array([0, 3])))
