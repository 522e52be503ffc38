"""ember.ao.nn.quantized.reference against torch 2.13's: the same float weights and weight_qparams
give the same fake-quantized weights, outputs, names and state dicts."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

warnings.filterwarnings("ignore")


def _qparams(lib, per_channel, n, rng, dtype="qint8"):
    if per_channel:
        return {"qscheme": lib.per_channel_affine, "dtype": getattr(lib, dtype),
                "scale": lib.tensor(rng.uniform(0.005, 0.02, n).astype(np.float32)),
                "zero_point": lib.tensor(rng.integers(-3, 4, n)), "axis": 0}
    return {"qscheme": lib.per_tensor_affine, "dtype": getattr(lib, dtype), "scale": 0.01, "zero_point": 2}


def _both(rng_seed, per_channel, n):
    return (_qparams(torch, per_channel, n, np.random.default_rng(rng_seed)),
            _qparams(ember, per_channel, n, np.random.default_rng(rng_seed)))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("kind", ["Linear", "Conv1d", "Conv2d", "Conv3d"])
def test_reference_linear_conv_match_torch(kind, per_channel):
    torch.manual_seed(0)
    shapes = {"Linear": ((6, 4), (3, 6)), "Conv1d": ((2, 3, 3), (2, 2, 7)), "Conv2d": ((2, 3, 3), (2, 2, 5, 5)),
              "Conv3d": ((2, 3, 2), (1, 2, 4, 4, 4))}
    args, xshape = shapes[kind]
    tf = getattr(torch.nn, kind)(*args)
    ef = getattr(ember.nn, kind)(*args)
    ef.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tf.state_dict().items()})
    n = tf.weight.shape[0]
    tqp, eqp = _both(1, per_channel, n)
    tr = getattr(torch.ao.nn.quantized.reference, kind).from_float(tf, tqp)
    er = getattr(ember.ao.nn.quantized.reference, kind).from_float(ef, eqp)
    assert er._get_name() == tr._get_name()
    np.testing.assert_array_equal(er.get_weight().detach().numpy(), tr.get_weight().detach().numpy())
    np.testing.assert_array_equal(np.asarray(er.get_quantized_weight().int_repr().numpy()),
                                  tr.get_quantized_weight().int_repr().numpy())
    x = np.random.default_rng(2).standard_normal(xshape).astype(np.float32)
    np.testing.assert_allclose(er(ember.tensor(x)).detach().numpy(), tr(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    tsd, esd = tr.state_dict(), er.state_dict()
    assert sorted(esd) == sorted(tsd)
    assert str(esd["weight_qscheme"]).replace("ember.", "torch.") == str(tsd["weight_qscheme"])


def test_reference_embeddings_match_torch():
    torch.manual_seed(3)
    tf, ef = torch.nn.Embedding(10, 4), ember.nn.Embedding(10, 4)
    ef.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tf.state_dict().items()})
    rng = np.random.default_rng(4)
    s = rng.uniform(0.005, 0.02, 10).astype(np.float32)
    z = rng.uniform(0, 200, 10).astype(np.float32)
    tqp = {"qscheme": torch.per_channel_affine_float_qparams, "dtype": torch.quint8, "scale": torch.tensor(s),
           "zero_point": torch.tensor(z), "axis": 0}
    eqp = {"qscheme": ember.per_channel_affine_float_qparams, "dtype": ember.quint8, "scale": ember.tensor(s),
           "zero_point": ember.tensor(z), "axis": 0}
    tr = torch.ao.nn.quantized.reference.Embedding.from_float(tf, tqp)
    er = ember.ao.nn.quantized.reference.Embedding.from_float(ef, eqp)
    idx = rng.integers(0, 10, (3, 2))
    np.testing.assert_allclose(er(ember.tensor(idx)).detach().numpy(), tr(torch.tensor(idx)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    tb, eb = torch.nn.EmbeddingBag(10, 4, mode="sum"), ember.nn.EmbeddingBag(10, 4, mode="sum")
    eb.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tb.state_dict().items()})
    trb = torch.ao.nn.quantized.reference.EmbeddingBag.from_float(tb, tqp)
    erb = ember.ao.nn.quantized.reference.EmbeddingBag.from_float(eb, eqp)
    flat, offs = rng.integers(0, 10, 7), np.array([0, 3, 5])
    np.testing.assert_allclose(erb(ember.tensor(flat), ember.tensor(offs)).detach().numpy(),
                               trb(torch.tensor(flat), torch.tensor(offs)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert erb._get_name() == trb._get_name()


def test_reference_errors():
    with pytest.raises(AssertionError, match="is not supported in reference quantized"):
        ember.ao.nn.quantized.reference.Linear(2, 2, weight_qparams={"qscheme": ember.per_tensor_symmetric,
                                                                      "dtype": ember.qint8, "scale": 1.0,
                                                                      "zero_point": 0})
    with pytest.raises(NotImplementedError, match="ConvTranspose2d is not supported"):
        ember.ao.nn.quantized.reference.ConvTranspose2d
    # a float16 "quantization" is a cast, as torch's
    lin = ember.ao.nn.quantized.reference.Linear(3, 2, weight_qparams={"qscheme": ember.per_tensor_affine,
                                                                        "dtype": ember.float16, "scale": 1.0,
                                                                        "zero_point": 0})
    assert lin.get_quantized_weight().dtype is ember.float16
    w = lin.get_weight()
    assert w.dtype is ember.float32
    np.testing.assert_array_equal(w.detach().numpy(), lin.weight.detach().numpy().astype(np.float16).astype(np.float32))
