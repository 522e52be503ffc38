"""relu, relu6, hardtanh and clamp keep a -0.0 input (PyTorch returns x where it equals the
bound), eager and compiled; printed, that is ``-0.`` as in PyTorch."""
import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

_VALUES = [-0.0, 0.0, -1.0, 1.0, 6.0, -3.0, 0.5, float("nan")]


def _cases(lib, x):
    F = lib.nn.functional
    return {"relu": lib.relu(x), "relu6": F.relu6(x), "hardtanh": F.hardtanh(x), "clamp_min0": x.clamp(min=0.0),
            "clamp_max0": x.clamp(max=0.0), "clamp_negzero": x.clamp(min=-0.0, max=-0.0),
            "hardtanh_0_6": F.hardtanh(x, 0.0, 6.0), "clip": lib.clip(x, 0.0, 1.0)}


def _same_bits(got, want, what):
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), what
    assert np.array_equal(got[~nan], want[~nan]), what
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan])), f"{what}: signed zeros {got} vs {want}"


@needs_torch
@pytest.mark.parametrize("n", [8, 40])       # (PyTorch's scalar tail and vectorised paths)
@pytest.mark.parametrize("compiled", [False, True])
def test_signed_zeros_like_pytorch(n, compiled):
    x = np.resize(np.array(_VALUES, dtype=np.float32), n)
    want = {k: v.numpy() for k, v in _cases(torch, torch.tensor(x)).items()}
    fn = (lambda t: _cases(ember, t))
    if compiled:
        ember.dynamo.reset()
        fn = ember.compile(fn)
    got = fn(ember.tensor(x))
    for k in want:
        _same_bits(got[k].numpy(), want[k], k)


def test_relu_of_negative_zero_prints_like_pytorch():
    assert repr(ember.relu(ember.tensor([-0.0, 0.0, -2.0]))) == "tensor([-0., 0., 0.])"
