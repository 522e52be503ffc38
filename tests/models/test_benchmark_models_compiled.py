"""The benchmark zoo's models (benchmarks/models.py, shrunk) compiled with the default backend:
every graph compiles -- ``config.debug_lowering`` makes a failure raise instead of running that
graph eagerly, which would hide it behind correct values -- and the outputs and gradients match
eager's. A scheduler or codegen change that breaks one pattern of a real model (the ResNet
backward's BatchNorm sums beside its ReLU masks, nanoGPT's bias gradients) fails here."""
import copy
import os
import sys

import numpy as np
import pytest

import ember
from ember.inductor import config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from benchmarks import models  # noqa: E402


@pytest.fixture
def raise_on_compile_failure():
    old = config.debug_lowering
    config.debug_lowering = True
    try:
        yield
    finally:
        config.debug_lowering = old


@pytest.mark.parametrize("which,scale", [("mlp", 0.1), ("nanogpt", 0.125), ("resnet", 0.25), ("lstm", 0.125)])
def test_benchmark_model_compiles_and_matches_eager(raise_on_compile_failure, which, scale):
    ember.manual_seed(0)
    case = getattr(models, which)(ember, scale)
    model, ref = case.model, copy.deepcopy(case.model)
    compiled = ember.compile(model)
    x = case.make_input()
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), ref(x).numpy(), rtol=2e-4, atol=2e-5)
    out = compiled(x)
    case.loss(out, x).backward()
    want = ref(x)
    case.loss(want, x).backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=2e-4, atol=2e-5)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-3, atol=3e-5, err_msg=name)
