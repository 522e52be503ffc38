"""ember ops -> prims (the decomposition table) -> compiled C++, against the
eager prims graph: an MLP forward and a full training step (loss + gradients)."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._helpers import assert_same

from ember.prims.table import decompose  # noqa: E402
from ember.inductor import compile_fx  # noqa: E402


@pytest.fixture(scope="module")
def mlp():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10))
    x = ember.randn(32, 64)
    y = ember.randint(0, 10, (32,))
    return model, x, y


def _run(gm, cf, args):
    with ember.no_grad():   # the eager prims graph has no derivatives of its own
        got, want = cf(*args), gm(*args)
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    return [g.numpy() for g in got], [w.numpy() for w in want]


def test_mlp_forward(mlp):
    model, x, _ = mlp
    gm = decompose(lambda x: F.softmax(model(x), -1))(x)
    cf = compile_fx(gm, [x])
    assert cf.compiled is not None, cf.eager_reason
    assert cf.compiled.fallbacks == []
    got, want = _run(gm, cf, [x])
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-6)
    # bias+GELU+LayerNorm after the first matmul is one kernel, bias+softmax after the second another
    assert cf.compiled.n_kernels == 2


def test_mlp_training_step(mlp):
    model, x, y = mlp

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        return (loss, *ember.autograd.grad(loss, list(model.parameters())))

    gm = decompose(step)(x, y)
    cf = compile_fx(gm, [x, y])
    assert cf.compiled is not None, cf.eager_reason
    assert cf.compiled.fallbacks == []
    got, want = _run(gm, cf, [x, y])
    assert len(got) == 1 + len(list(model.parameters()))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-6)
    assert cf.compiled.n_kernels <= 10
