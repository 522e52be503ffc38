"""QAT Embedding / EmbeddingBag (ember.ao.nn.qat) and the dynamic-QAT Linear against torch 2.13:
the row-wise float-qparams fake quantization of the table in training, prepare_qat with
get_embedding_qat_module_mappings, convert with get_embedding_static_quant_module_mappings."""
from __future__ import annotations

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


def _model(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 6)
            self.bag = nn.EmbeddingBag(12, 6, mode="sum")
            self.fc = nn.Linear(6, 3)

        def forward(self, idx, bag_idx, offsets):
            return self.fc(self.emb(idx).sum(1) + self.bag(bag_idx, offsets))
    return Net()


def test_qat_embedding_training_and_convert_match_torch():
    torch.manual_seed(0)
    tm, em = _model(torch), _model(ember)
    _copy(em, tm)
    for m, q in ((tm, tq), (em, eq)):
        m.train()
        m.emb.qconfig = q.default_embedding_qat_qconfig
        m.bag.qconfig = q.default_embedding_qat_qconfig
    tq.prepare_qat(tm, mapping=tq.get_embedding_qat_module_mappings(), inplace=True)
    eq.prepare_qat(em, mapping=eq.get_embedding_qat_module_mappings(), inplace=True)
    assert type(em.emb) is ember.ao.nn.qat.Embedding and type(em.bag) is ember.ao.nn.qat.EmbeddingBag
    assert type(em.fc) is ember.nn.Linear      # no qconfig: stays float
    assert repr(em).replace("ember.", "torch.") == repr(tm)
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    eopt = ember.optim.SGD(em.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for _ in range(3):
        idx = rng.integers(0, 12, (5, 3))
        bag_idx = rng.integers(0, 12, 9)
        offsets = np.array([0, 2, 5, 6, 8])
        target = rng.integers(0, 3, 5)
        tl = torch.nn.functional.cross_entropy(tm(*(torch.tensor(a) for a in (idx, bag_idx, offsets))),
                                               torch.tensor(target))
        el = ember.nn.functional.cross_entropy(em(*(ember.tensor(a) for a in (idx, bag_idx, offsets))),
                                               ember.tensor(target))
        np.testing.assert_allclose(float(el), float(tl), rtol=1e-4, atol=1e-5)
        for opt in (topt, eopt):
            opt.zero_grad()
        tl.backward()
        el.backward()
        topt.step()
        eopt.step()
    # the fake quantizers learned the same row parameters
    np.testing.assert_allclose(em.emb.weight_fake_quant.scale.numpy(), tm.emb.weight_fake_quant.scale.numpy(),
                               rtol=1e-5)
    np.testing.assert_allclose(em.bag.weight_fake_quant.zero_point.numpy(),
                               tm.bag.weight_fake_quant.zero_point.numpy(), rtol=1e-5, atol=1e-6)
    tc = tq.convert(tm.eval(), mapping=tq.get_embedding_static_quant_module_mappings())
    ec = eq.convert(em.eval(), mapping=eq.get_embedding_static_quant_module_mappings())
    assert type(ec.emb) is ember.ao.nn.quantized.Embedding and type(ec.bag) is ember.ao.nn.quantized.EmbeddingBag
    np.testing.assert_array_equal(np.asarray(ec.emb.weight().int_repr()._data), tc.emb.weight().int_repr().numpy())
    idx = rng.integers(0, 12, (4, 3))
    np.testing.assert_allclose(ec.emb(ember.tensor(idx)).numpy(), tc.emb(torch.tensor(idx)).numpy(), rtol=1e-6,
                               atol=1e-6)


def test_qat_embedding_forward_is_fake_quantized_rows():
    qc = eq.default_embedding_qat_qconfig
    emb = ember.nn.Embedding(7, 4)
    emb.qconfig = qc
    q = ember.ao.nn.qat.Embedding.from_float(emb)
    np.testing.assert_array_equal(q.weight.detach().numpy(), emb.weight.detach().numpy())
    out = q(ember.tensor([[0, 3, 6]])).detach().numpy()[0]
    w = emb.weight.detach().numpy()
    scale = q.weight_fake_quant.scale.numpy()
    zp = q.weight_fake_quant.zero_point.numpy()
    for row, i in zip(out, (0, 3, 6)):
        lvl = np.clip(np.rint(w[i] / scale[i] + zp[i]), 0, 255)      # float qparams: zp is a float offset
        np.testing.assert_allclose(row, (lvl - zp[i]) * scale[i], rtol=1e-5, atol=1e-6)
    back = q.to_float()
    assert type(back) is ember.nn.Embedding
    np.testing.assert_array_equal(back.weight.detach().numpy(), w)


def test_qat_embedding_errors_match_torch():
    for lib, q in ((torch, tq), (ember, eq)):
        with pytest.raises(AssertionError, match="qconfig must be provided"):
            lib.ao.nn.qat.Embedding(3, 2)
        with pytest.raises(AssertionError, match="per_channel_affine_float_qparams"):
            lib.ao.nn.qat.EmbeddingBag(3, 2, qconfig=q.default_qat_qconfig)
        lin = lib.nn.Linear(2, 2)
        lin.qconfig = q.default_embedding_qat_qconfig
        with pytest.raises(AssertionError, match="only works for Embedding"):
            lib.ao.nn.qat.Embedding.from_float(lin)


def test_dynamic_qat_linear_matches_torch():
    torch.manual_seed(3)
    tl, el = torch.nn.Linear(5, 4), ember.nn.Linear(5, 4)
    _copy(el, tl)
    for lib, q, lin in ((torch, tq, tl), (ember, eq, el)):
        lin.qconfig = q.default_dynamic_qat_qconfig
    tq_ = torch.ao.nn.qat.dynamic.Linear.from_float(tl)
    eq_ = ember.ao.nn.qat.dynamic.Linear.from_float(el)
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(eq_(ember.tensor(x)).detach().numpy(), tq_(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    td = torch.ao.nn.quantized.dynamic.Linear.from_float(tq_)
    ed = ember.ao.nn.quantized.dynamic.Linear.from_float(eq_)
    np.testing.assert_array_equal(np.asarray(ed.weight().int_repr()._data), td.weight().int_repr().numpy())
    np.testing.assert_allclose(ed(ember.tensor(x)).numpy(), td(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)
    for lib, q in ((torch, tq), (ember, eq)):
        with pytest.raises(ValueError, match="Dynamic QAT requires a memoryless observer"):
            lib.ao.nn.qat.dynamic.Linear(2, 2, qconfig=q.default_qat_qconfig)
