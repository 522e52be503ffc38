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
