"""The inductor's Winograd choice (``config.conv_winograd``, ``ops/_conv_winograd.py``): a
compiled ResNet-style block runs its 3x3 stride-1 forward, input-gradient and weight-gradient
convolutions by Winograd F(2x2, 3x3) and matches eager (which keeps the direct kernels); with the knob off,
or in eager, the kernel is never taken."""
from collections import Counter

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.inductor import compile_fx, config
from ember.ops import _conv_native, _conv_winograd
from ember.prims.table import decompose

from ._helpers import assert_same


@pytest.fixture
def taken(monkeypatch):
    """The (x shape, w shape) of every convolution the Winograd kernel computes."""
    if _conv_native.lib() is None:
        pytest.skip("no native convolution library on this machine")
    calls = []
    real = _conv_winograd.applies

    def spy(x_shape, w_shape, *rest):
        ok = real(x_shape, w_shape, *rest)
        if ok:
            calls.append((tuple(x_shape), tuple(w_shape)))
        return ok
    monkeypatch.setattr(_conv_winograd, "applies", spy)
    return calls


def _block():
    ember.manual_seed(0)
    bn = dict(track_running_stats=False)     # (a traced training step: no in-place running statistics)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16, **bn), nn.ReLU(),
                         nn.Conv2d(16, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24, **bn), nn.ReLU(),
                         nn.Conv2d(24, 24, 3, padding=1, bias=True), nn.ReLU(),
                         nn.Conv2d(24, 32, 3, stride=2, padding=1, bias=False))


def _step_graph(model, x):
    def step(x):
        loss = model(x).logsumexp(1).mean()
        return (loss, *ember.autograd.grad(loss, [x] + list(model.parameters())))
    return decompose(step)(x)


@pytest.mark.parametrize("winograd", [True, False])
def test_training_step_matches_eager(taken, winograd, monkeypatch):
    monkeypatch.setattr(config, "conv_winograd", winograd)
    model = _block()
    x = ember.randn(4, 3, 12, 10, requires_grad=True)
    gm = _step_graph(model, x)
    cf = compile_fx(gm, [x])
    assert cf.compiled is not None, cf.eager_reason
    assert cf.compiled.fallbacks == []
    taken.clear()
    with ember.no_grad():
        got, want = cf(x), gm(x)
    if winograd:
        # forwards and weight gradients of the 16 -> 24 and 24 -> 24 convolutions and the input
        # gradients flowing into them (flipped filter, channels swapped); not the stem (3 channels
        # in; its input gradient 3 channels out) nor the stride-2 one
        assert Counter(taken) == {((4, 16, 12, 10), (24, 16, 3, 3)): 2,
                                  ((4, 24, 12, 10), (24, 24, 3, 3)): 3,
                                  ((4, 24, 12, 10), (16, 24, 3, 3)): 1}
    else:
        assert taken == []
    for a, e in zip(got, want):
        assert_same(a.numpy(), e.numpy(), rtol=2e-4, atol=2e-5)


def test_eager_keeps_the_direct_kernels(taken):
    model = _block()
    x = ember.randn(2, 3, 8, 8, requires_grad=True)
    model(x).sum().backward()
    assert taken == []


def test_compiled_module_matches_eager(taken):
    """End to end through ember.compile: inference outputs within float32 tolerance of eager."""
    ember.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 16, 3, padding=1)).eval()
    x = ember.randn(3, 3, 16, 16)
    with ember.no_grad():
        want = model(x).numpy()
        got = ember.compile(model)(x).numpy()
    assert taken, "the compiled module took no Winograd convolution"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
