"""Top-level quantization functions: ember.q_scale / q_zero_point / q_per_channel_*,
quantize_per_tensor's deprecation warning (torch 2.13: once per process), and
ember.fused_moving_avg_obs_fake_quant (state updated in place) against torch."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

warnings.filterwarnings("ignore")


def test_accessor_functions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    e = ember.quantize_per_tensor(ember.tensor(x), 0.05, 7, ember.quint8)
    t = torch.quantize_per_tensor(torch.tensor(x), 0.05, 7, torch.quint8)
    assert (ember.q_scale(e), ember.q_zero_point(e)) == (torch.q_scale(t), torch.q_zero_point(t))
    sc, zp = [0.1, 0.2, 0.05], [0, 3, -2]
    ec = ember.quantize_per_channel(ember.tensor(x.T.copy()), ember.tensor(sc, dtype=ember.float64),
                                    ember.tensor(zp), 1, ember.qint8)
    tc = torch.quantize_per_channel(torch.tensor(x.T.copy()), torch.tensor(sc, dtype=torch.float64),
                                    torch.tensor(zp), 1, torch.qint8)
    np.testing.assert_array_equal(ember.q_per_channel_scales(ec).numpy(), torch.q_per_channel_scales(tc).numpy())
    np.testing.assert_array_equal(ember.q_per_channel_zero_points(ec).numpy(),
                                  torch.q_per_channel_zero_points(tc).numpy())
    assert ember.q_per_channel_axis(ec) == torch.q_per_channel_axis(tc) == 1
    for fn in ("q_scale", "q_per_channel_axis"):
        with pytest.raises(TypeError) as te:
            getattr(torch, fn)(3)
        with pytest.raises(TypeError, match=str(te.value).replace("(", r"\(").replace(")", r"\)")):
            getattr(ember, fn)(3)
    with pytest.raises(NotImplementedError, match="aten::q_scale"):
        ember.q_scale(ember.tensor(x))
    with pytest.raises(RuntimeError, match="kPerTensorAffine"):
        ember.q_scale(ec)


_WARN_SCRIPT = """
import warnings, sys
lib = __import__(sys.argv[1])
x = lib.randn(3)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    lib.quantize_per_tensor(x, 0.1, 0, lib.quint8)
    lib.quantize_per_channel(lib.randn(2, 3), lib.tensor([0.1, 0.2]), lib.tensor([0, 0]), 0, lib.qint8)
    lib.quantize_per_tensor(x, 0.1, 0, lib.quint8)
print(len(w), w[0].category.__name__, str(w[0].message))
"""


def test_deprecation_warning_once_per_process():
    outs = [subprocess.run([sys.executable, "-c", _WARN_SCRIPT, lib], capture_output=True, text=True, timeout=120)
            .stdout.strip() for lib in ("torch", "ember")]
    assert outs[0].startswith("1 UserWarning torch.quantize_per_tensor")
    assert outs[1] == outs[0].split(" (Triggered internally at")[0]      # torch adds where its C++ warned


@pytest.mark.parametrize("per_row,symmetric", [(False, False), (False, True), (True, True)])
def test_fused_moving_avg_obs_fake_quant(per_row, symmetric):
    rng = np.random.default_rng(int(per_row) * 2 + int(symmetric))
    shape = (4, 6)
    nrow = shape[0] if per_row else 1
    qmin, qmax = (-128, 127) if symmetric else (0, 255)

    def state(lib):
        return [lib.tensor([1], dtype=lib.long), lib.tensor([1], dtype=lib.long),
                lib.full((nrow,) if per_row else (), float("inf")), lib.full((nrow,) if per_row else (), float("-inf")),
                lib.ones(nrow), lib.zeros(nrow, dtype=lib.int32)]
    es, ts = state(ember), state(torch)
    for step in range(4):
        x = (rng.standard_normal(shape) * (1 + step)).astype(np.float32)
        if step == 3:                                  # observer off: the state stays, fake quant still runs
            es[0][0] = 0
            ts[0][0] = 0
        eo = ember.fused_moving_avg_obs_fake_quant(ember.tensor(x), *es, 0.05, qmin, qmax, 0, per_row, symmetric)
        to = torch.fused_moving_avg_obs_fake_quant(torch.tensor(x), *ts, 0.05, qmin, qmax, 0, per_row, symmetric)
        np.testing.assert_array_equal(eo.numpy(), to.numpy())
        for a, b in zip(es[2:], ts[2:]):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    es[1][0] = 0
    x = ember.randn(*shape)
    assert ember.fused_moving_avg_obs_fake_quant(x, *es, 0.05, qmin, qmax, 0, per_row, symmetric) is x


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_quantized_max_pool_and_batch_norm(dtype):
    rng = np.random.default_rng(60)
    x = (rng.standard_normal((2, 4, 9, 8)) * 2).astype(np.float32)
    zp = 70 if dtype == "quint8" else -5
    e = ember.quantize_per_tensor(ember.tensor(x), 0.04, zp, getattr(ember, dtype))
    t = torch.quantize_per_tensor(torch.tensor(x), 0.04, zp, getattr(torch, dtype))

    def same(a, b):
        assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
        np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
    same(ember.quantized_max_pool2d(e, [2, 2]), torch.quantized_max_pool2d(t, [2, 2]))
    same(ember.quantized_max_pool2d(e[0], [3, 3], [2, 2], [1, 1], [1, 1], True),
         torch.quantized_max_pool2d(t[0], [3, 3], [2, 2], [1, 1], [1, 1], True))
    same(ember.quantized_max_pool1d(e[0], [3], [1]), torch.quantized_max_pool1d(t[0], [3], [1]))
    same(ember.quantized_max_pool1d(e[:, :, 0], [2]), torch.quantized_max_pool1d(t[:, :, 0], [2]))
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    m, v = rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)
    for src_e, src_t in ((e, t), (e[:, :, 0], t[:, :, 0])):
        same(ember.quantized_batch_norm(src_e, *(ember.tensor(a) for a in (w, b, m, v)), 1e-5, 0.07, zp // 2),
             torch.quantized_batch_norm(src_t, *(torch.tensor(a) for a in (w, b, m, v)), 1e-5, 0.07, zp // 2))
    with pytest.raises(RuntimeError, match="Bias must be provided"):
        ember.quantized_batch_norm(e, ember.tensor(w), None, ember.tensor(m), ember.tensor(v), 1e-5, 0.1, 0)
    with pytest.raises(NotImplementedError, match="aten::quantized_max_pool2d"):
        ember.quantized_max_pool2d(ember.tensor(x), [2, 2])
