"""The convolution extern of the CPU inductor (``lowering._convolution``): prims.convolution
lowers to a call of the native kernels writing into the preallocated output (no fallback to
the prim's reference), for forward, transposed and weight-gradient-shaped convolutions, with
bias and groups, static and symbolic sizes; and a compiled conv-BN-ReLU training step matches
eager."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor import compile_fx

from ._helpers import assert_same, compile_and_run, rand

from ember.prims.table import decompose  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", [
    # x shape, w shape, bias, stride, padding, dilation, transposed, output_padding, groups
    ((3, 4, 9, 8), (6, 2, 3, 3), True, [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    ((2, 3, 8, 8), (5, 3, 1, 1), False, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    ((2, 4, 5, 6), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], True, [1, 0], 1),
    ((2, 4, 5, 6), (4, 2, 3, 2), False, [1, 1], [1, 0], [1, 1], True, [0, 0], 2),
    # weight-gradient shaped (3x3 output, 8x8 kernel), as the _conv_weight_grad decomposition emits
    ((4, 6, 10, 10), (5, 6, 8, 8), False, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    ((1, 4, 7), (4, 2, 3), True, [2], [1], [1], False, [0], 2),
])
def test_convolution_lowers_to_the_native_extern(cfg, dtype):
    xs, ws, bias, s, p, d, tr, op, g = cfg
    x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
    b = rand(ws[1] * g if tr else ws[0], dtype=dtype) if bias else None

    def fn(x, w, b):
        return P.abs(P.convolution(x, w, b, s, p, d, tr, op, g)) if b is not None else \
            P.convolution(x, w, None, s, p, d, tr, op, g)
    cf, got, want = compile_and_run(lambda x, w, *b: fn(x, w, b[0] if b else None), x, w, *([b] if bias else []))
    assert cf.compiled.fallbacks == []
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for a, e in zip(got, want):
        assert_same(a, e, **tol)


def test_strided_view_input_is_not_copied():
    """A permuted input reaches the extern as a strided view of its buffer (the im2col reads
    strides), so the graph has no copy kernel for it."""
    x, w = rand(8, 3, 6, 6), rand(4, 8, 3, 3)

    def fn(x, w):
        return P.convolution(P.permute(x, [1, 0, 2, 3]), w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    cf, got, want = compile_and_run(fn, x, w)
    assert cf.compiled.fallbacks == []
    assert cf.compiled.n_kernels == 0
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_symbolic_sizes():
    x, w = rand(2, 4, 9, 10), rand(5, 4, 3, 3)     # distinct sizes: equal ones share a symbol

    def fn(x, w):
        return P.convolution(x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    gm = make_fx(fn)(x, w)
    cf = compile_fx(gm, [x, w], dynamic=True)
    assert cf.compiled is not None, cf.eager_reason
    assert cf.compiled.fallbacks == []
    for shape in ((2, 4, 9, 10), (6, 4, 12, 7), (7, 4, 17, 8)):
        xi = rand(*shape)
        got = cf(xi, w).numpy()
        want = F.conv2d(xi, w, stride=2, padding=1).numpy()
        assert_same(got, want, rtol=1e-5, atol=1e-5)
    assert len(cf.variants) == 1


def test_conv_bn_relu_training_step_matches_eager():
    """Forward, input gradient (transposed conv) and weight gradient (the swapped forward) of a
    ResNet-style block compiled, against the eager prims graph."""
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, track_running_stats=False), nn.ReLU(),
                          nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16, track_running_stats=False), nn.ReLU(),
                          nn.Conv2d(16, 16, 1, stride=2, bias=True))
    x = ember.randn(4, 3, 12, 12, requires_grad=True)

    def step(x):
        loss = model(x).logsumexp(1).mean()
        return (loss, *ember.autograd.grad(loss, [x] + list(model.parameters())))

    gm = decompose(step)(x)
    cf = compile_fx(gm, [x])
    assert cf.compiled is not None, cf.eager_reason
    assert cf.compiled.fallbacks == []
    with ember.no_grad():
        got, want = cf(x), gm(x)
    assert len(got) == 2 + len(list(model.parameters()))
    for a, e in zip(got, want):
        assert_same(a.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
