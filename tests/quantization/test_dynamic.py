"""Dynamic quantization (quantize_dynamic, DynamicQuantizedLinear) against torch 2.13 (fbgemm)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq
from ember.ao.nn.quantized._int_gemm import exact_int_matmul

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore")


def _pair(rng, sizes, bias=True):
    """The same float MLP in ember and torch."""
    layers_e, layers_t = [], []
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32) if bias else None
        el, tl = ember.nn.Linear(k, n, bias=bias), torch.nn.Linear(k, n, bias=bias)
        el.weight.data, tl.weight.data = ember.tensor(w), torch.tensor(w)
        if bias:
            el.bias.data, tl.bias.data = ember.tensor(b), torch.tensor(b)
        layers_e.append(el)
        layers_t.append(tl)
        if i < len(sizes) - 2:
            layers_e.append(ember.nn.ReLU())
            layers_t.append(torch.nn.ReLU())
    return ember.nn.Sequential(*layers_e), torch.nn.Sequential(*layers_t)


CASES = [((16, 8), (5,), "set", True), ((300, 40, 7), (7,), "set", True), ((2000, 30), (4,), "set", True),
         ((64, 32, 10), (2, 3), "per_channel", True), ((48, 10), (6,), "set", False),
         ((33, 17), (9,), "default", True), ((20, 12), (3,), "name", True)]


@pytest.mark.parametrize("sizes,lead,spec,bias", CASES)
def test_quantize_dynamic_matches_torch(sizes, lead, spec, bias):
    rng = np.random.default_rng(sum(sizes))
    em, tm = _pair(rng, sizes, bias)
    if spec == "set":
        eqm, tqm = eq.quantize_dynamic(em, {ember.nn.Linear}), tq.quantize_dynamic(tm, {torch.nn.Linear})
    elif spec == "per_channel":
        eqm = eq.quantize_dynamic(em, {ember.nn.Linear: eq.per_channel_dynamic_qconfig})
        tqm = tq.quantize_dynamic(tm, {torch.nn.Linear: tq.per_channel_dynamic_qconfig})
    elif spec == "name":
        eqm = eq.quantize_dynamic(em, {"0": eq.default_dynamic_qconfig})
        tqm = tq.quantize_dynamic(tm, {"0": tq.default_dynamic_qconfig})
    else:
        eqm, tqm = eq.quantize_dynamic(em, dtype=ember.qint8), tq.quantize_dynamic(tm, dtype=torch.qint8)
    assert repr(eqm).replace("ember.", "torch.") == repr(tqm)
    assert isinstance(em[0], ember.nn.Linear)          # inplace=False: the float model is untouched
    for shift in (0.0, 0.7, -2.0):
        x = (rng.standard_normal(lead + (sizes[0],)) + shift).astype(np.float32)
        eo = eqm(ember.tensor(x))
        to = tqm(torch.tensor(x))
        assert eo.dtype is ember.float32 and tuple(eo.shape) == tuple(to.shape)
        # the integers are torch's and so is the float epilogue: bit for bit on this CPU backend
        np.testing.assert_array_equal(eo.numpy(), to.detach().numpy())
    for i, mod in enumerate(eqm):
        if hasattr(mod, "weight") and callable(mod.weight):
            np.testing.assert_array_equal(mod.weight().int_repr().numpy(), tqm[i].weight().int_repr().numpy())


def test_float16_dynamic():
    rng = np.random.default_rng(3)
    em, tm = _pair(rng, (24, 12))
    eqm = eq.quantize_dynamic(em, {ember.nn.Linear}, dtype=ember.float16)
    tqm = tq.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.float16)
    assert repr(eqm).replace("ember.", "torch.") == repr(tqm)
    x = rng.standard_normal((5, 24)).astype(np.float32)
    np.testing.assert_allclose(eqm(ember.tensor(x)).numpy(), tqm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_state_dict_roundtrip(tmp_path):
    rng = np.random.default_rng(4)
    em, tm = _pair(rng, (10, 6, 3))
    eqm = eq.quantize_dynamic(em, {ember.nn.Linear})
    tqm = tq.quantize_dynamic(tm, {torch.nn.Linear})
    esd, tsd = eqm.state_dict(), tqm.state_dict()
    assert list(esd) == list(tsd)
    assert esd["0._packed_params.dtype"] is ember.qint8
    w, b = esd["0._packed_params._packed_params"]
    assert w.is_quantized and w.equal(eqm[0].weight())
    path = tmp_path / "q.pt"
    ember.save(esd, path)
    fresh = eq.quantize_dynamic(_pair(np.random.default_rng(99), (10, 6, 3))[0], {ember.nn.Linear})
    x = ember.tensor(rng.standard_normal((4, 10)).astype(np.float32))
    assert not np.array_equal(fresh(x).numpy(), eqm(x).numpy())
    fresh.load_state_dict(ember.load(path))
    np.testing.assert_array_equal(fresh(x).numpy(), eqm(x).numpy())


def test_inplace_and_unsupported_layers():
    rng = np.random.default_rng(5)
    em, _ = _pair(rng, (8, 4))
    out = eq.quantize_dynamic(em, {ember.nn.Linear}, inplace=True)
    assert out is em and type(em[0]).__name__ == "Linear" and em[0]._get_name() == "DynamicQuantizedLinear"
    assert ember.nn.quantized.dynamic.Linear is ember.ao.nn.quantized.dynamic.Linear
    with pytest.raises(AssertionError, match="only supported with float_qparams_weight_only_qconfig"):   # as torch
        eq.quantize_dynamic(ember.nn.Sequential(ember.nn.Embedding(5, 3)), {ember.nn.Embedding})
    assert eq.quantize_dynamic(ember.nn.Sequential(ember.nn.EmbeddingBag(5, 3)), dtype=ember.quint8)[0]._get_name() \
        == "QuantizedEmbeddingBag"
    q = eq.quantize_dynamic(_pair(rng, (8, 4))[0], {ember.nn.Linear})
    with pytest.raises(RuntimeError, match="expected scalar type Float"):
        q(ember.randn(2, 8, dtype=ember.float64))


@pytest.mark.parametrize("seed", range(3))
def test_exact_int_matmul(seed):
    rng = np.random.default_rng(seed)
    for k, lo, hi in ((3000, -128, 128), (1500, -255, 256), (100, -2000, 2000)):
        a = rng.integers(lo, hi, (5, k))
        w = rng.integers(lo, hi, (k, 7))
        np.testing.assert_array_equal(exact_int_matmul(a, w), a.astype(np.int64) @ w.astype(np.int64))


def test_compile_dynamic_model_and_quantized_inputs():
    rng = np.random.default_rng(12)
    em, _ = _pair(rng, (8, 4, 2))
    qm = eq.quantize_dynamic(em, {ember.nn.Linear})
    x = ember.tensor(rng.standard_normal((3, 8)).astype(np.float32))
    np.testing.assert_array_equal(ember.compile(qm)(x).numpy(), qm(x).numpy())
    q = ember.quantize_per_tensor(x, 0.1, 0, ember.qint8)
    with pytest.raises(NotImplementedError, match="ember.quantization"):
        ember.compile(lambda t: t.dequantize() * 2)(q)
