"""sort / argsort / msort / topk of quantized tensors against torch 2.13: the values (integers and
parameters) bit for bit; the indices equal to torch's for sort (stable) and, for topk, wherever
there are no ties (torch's partial sort orders tied indices its own way)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore")


def _pair(x, dtype, scale=0.05, zp=3):
    return (ember.quantize_per_tensor(ember.tensor(x), scale, zp, getattr(ember, dtype)),
            torch.quantize_per_tensor(torch.tensor(x), scale, zp, getattr(torch, dtype)))


def _same_q(e, t):
    assert tuple(e.shape) == tuple(t.shape) and str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert (e.q_scale(), e.q_zero_point()) == (t.q_scale(), t.q_zero_point())
    assert e.int_repr().numpy().tobytes() == t.int_repr().contiguous().numpy().tobytes()


@pytest.mark.parametrize("dtype", ["quint8", "qint8", "qint32"])
@pytest.mark.parametrize("dim,descending", [(-1, False), (0, True), (1, False), (1, True)])
def test_sort_matches_torch(dtype, dim, descending):
    rng = np.random.default_rng(abs(dim) * 2 + descending)
    for _ in range(3):
        x = rng.uniform(-3, 3, (4, 7, 5)).astype(np.float32)          # many ties once quantized
        e, t = _pair(x, dtype, scale=0.3)
        es, ts = ember.sort(e, dim=dim, descending=descending), torch.sort(t, dim=dim, descending=descending)
        _same_q(es.values, ts.values)
        assert np.array_equal(es.indices.numpy(), ts.indices.numpy())
        assert np.array_equal(e.argsort(dim=dim, descending=descending).numpy(),
                              torch.argsort(t, dim=dim, descending=descending).numpy())
        ev, ei = e.sort(dim, descending, stable=True)
        _same_q(ev, ts.values)
    _same_q(ember.msort(e), torch.msort(t))
    et, tt = e.transpose(0, 2), t.transpose(0, 2)                 # a non-contiguous input
    _same_q(ember.sort(et, 1).values, torch.sort(tt, 1).values)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [-1, 0])
def test_topk_matches_torch(largest, dim):
    rng = np.random.default_rng(5 + largest + 2 * dim)
    for k in (1, 3, 6):
        # distinct integers: no ties, so the indices are determined
        ints = rng.permutation(200)[:6 * 9].reshape(6, 9).astype(np.float32)
        e, t = _pair(ints * 0.5 - 40, "qint8", scale=0.5, zp=0)
        er, tr = ember.topk(e, k, dim=dim, largest=largest), torch.topk(t, k, dim=dim, largest=largest)
        _same_q(er.values, tr.values)
        assert np.array_equal(er.indices.numpy(), tr.indices.numpy())
    # with ties: the values agree, the indices point at them
    x = rng.uniform(-1, 1, (5, 11)).astype(np.float32)
    e, t = _pair(x, "quint8", scale=0.2, zp=10)
    er, tr = e.topk(4, dim=dim, largest=largest), t.topk(4, dim=dim, largest=largest)
    _same_q(er.values, tr.values)
    picked = np.take_along_axis(e.int_repr().numpy(), er.indices.numpy(), axis=dim)
    assert np.array_equal(picked, er.values.int_repr().numpy())


def test_sort_topk_edge_cases_and_errors():
    e, t = _pair(np.float32(1.3), "quint8")
    es, ts = ember.sort(e), torch.sort(t)
    _same_q(es.values, ts.values)
    assert es.indices.shape == ts.indices.shape == () and int(es.indices) == 0
    _same_q(ember.topk(e, 1).values, torch.topk(t, 1).values)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.topk(e, 2)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ec = ember.quantize_per_channel(ember.tensor(x), ember.tensor([0.1, 0.2, 0.3]), ember.tensor([0, 1, 2]), 0,
                                    ember.qint8)
    tc = torch.quantize_per_channel(torch.tensor(x), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2]), 0,
                                    torch.qint8)
    for fn in (lambda m, q: m.sort(q), lambda m, q: m.topk(q, 2)):
        with pytest.raises(RuntimeError) as te:
            fn(torch, tc)
        with pytest.raises(RuntimeError) as ee:
            fn(ember, ec)
        assert str(ee.value) == str(te.value)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.topk(_pair(x, "quint8")[0], 5)
