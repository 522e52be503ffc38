"""Winograd F(2x2, 3x3) (``ember/ops/_conv_winograd.py``), the compiled graphs' 3x3 stride-1
float32 convolutions: the forward and weight-gradient kernels against float64 direct ones on random shapes,
paddings, strided inputs and block boundaries (several images per block, partial blocks, tile
rows longer and shorter than a vector), at both vector widths; and the rule deciding where it
applies. The compiled path's use of it is tested in tests/inductor/test_conv_winograd_compiled.py."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conv_widths import other_width_library
from ember.ops import _conv_native, _conv_winograd, nn_ops as K

RNG = np.random.default_rng(20261201)


def _native():
    if _conv_native.lib() is None:
        pytest.skip("no native convolution library on this machine (no C++ compiler or OpenBLAS)")


def _reference(x, w, padding):
    return K._conv_forward_native(x.astype(np.float64), w.astype(np.float64), [1, 1], list(padding), [1, 1], 1)


def _winograd(x, w, padding):
    assert _conv_winograd.applies(x.shape, w.shape, [1, 1], padding, [1, 1], 1, x.dtype)
    return K._conv_forward_native(x, w, [1, 1], list(padding), [1, 1], 1, winograd=True)


def _check(got, want):
    # F(2x2, 3x3) rounds a few more times than the direct sum: measured ~3e-7 of the output's
    # scale; a wrong transform or a misplaced tile is off by the scale itself
    assert got.dtype == np.float32 and got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 5e-6, err


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(16, 40), o=st.integers(16, 40), th=st.integers(1, 9),
       tw=st.integers(1, 21), ph=st.integers(0, 2), pw=st.integers(0, 2), transposed=st.booleans())
def test_matches_a_float64_direct_convolution(n, c, o, th, tw, ph, pw, transposed):
    """Output 2 th x 2 tw: input sized to it for the padding; tile rows of 1..21 tiles cover
    the 4-, 8- and 16-lane transforms, their tails and the scattered output path."""
    _native()
    h, w_ = 2 * th + 2 - 2 * ph, 2 * tw + 2 - 2 * pw
    if h < 1 or w_ < 1:
        return
    if transposed:       # x read through its strides (height and width swapped in memory)
        x = RNG.standard_normal((n, c, w_, h), dtype=np.float32).transpose(0, 1, 3, 2)
    else:
        x = RNG.standard_normal((n, c, h, w_), dtype=np.float32)
    w = RNG.standard_normal((o, c, 3, 3), dtype=np.float32)
    _check(_winograd(x, w, (ph, pw)), _reference(x, w, (ph, pw)))


@pytest.mark.parametrize("shape", [(32, 32, 32, 32), (8, 64, 16, 16), (9, 128, 8, 8), (2, 24, 64, 64)])
def test_resnet_shapes_and_many_blocks(shape):
    """The benchmark ResNet's layers (blocks over several images, every thread busy) and a
    64x64 image (a block smaller than an image)."""
    _native()
    n, c, h, w_ = shape
    x = RNG.standard_normal(shape, dtype=np.float32)
    w = RNG.standard_normal((c, c, 3, 3), dtype=np.float32)
    _check(_winograd(x, w, (1, 1)), _reference(x, w, (1, 1)))


def test_input_gradient_takes_the_same_kernel():
    """A stride-1 3x3 input gradient is a forward correlation with the flipped filter: with
    ``winograd`` it runs this kernel, and it matches the float64 adjoint."""
    _native()
    g = RNG.standard_normal((3, 24, 12, 10), dtype=np.float32)
    w = RNG.standard_normal((24, 20, 3, 3), dtype=np.float32)
    got = K._conv_input_grad_native(g, w, [1, 1], [1, 1], [1, 1], 1, (3, 20, 12, 10), winograd=True)
    want = K._conv_input_grad_native(g.astype(np.float64), w.astype(np.float64), [1, 1], [1, 1], [1, 1], 1,
                                     (3, 20, 12, 10))
    _check(got, want)


def _wgrad_reference(dy, x, padding):
    return K._conv_weight_grad_native(dy.astype(np.float64), x.astype(np.float64), [1, 1], list(padding), [1, 1], 1,
                                      (dy.shape[1], x.shape[1], 3, 3))


def _wgrad_winograd(dy, x, padding):
    assert _conv_winograd.applies(x.shape, (dy.shape[1], x.shape[1], 3, 3), [1, 1], padding, [1, 1], 1, x.dtype)
    return K._conv_weight_grad_native(dy, x, [1, 1], list(padding), [1, 1], 1, (dy.shape[1], x.shape[1], 3, 3),
                                      winograd=True)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(16, 40), o=st.integers(16, 40), th=st.integers(1, 9),
       tw=st.integers(1, 21), ph=st.integers(0, 2), pw=st.integers(0, 2), transposed=st.booleans())
def test_weight_gradient_matches_float64(n, c, o, th, tw, ph, pw, transposed):
    """The weight gradient (dU = sum over tiles of (A dY A^T) . V, dW = G^T dU G): channel counts
    off the vector length (the channels-last copies' scalar tails, padded panels), padding rows
    and columns, tile rows of 1..21 tiles, an input read through its strides."""
    _native()
    h, w_ = 2 * th + 2 - 2 * ph, 2 * tw + 2 - 2 * pw
    if h < 1 or w_ < 1:
        return
    if transposed:
        x = RNG.standard_normal((n, c, w_, h), dtype=np.float32).transpose(0, 1, 3, 2)
    else:
        x = RNG.standard_normal((n, c, h, w_), dtype=np.float32)
    dy = RNG.standard_normal((n, o, 2 * th, 2 * tw), dtype=np.float32)
    _check(_wgrad_winograd(dy, x, (ph, pw)), _wgrad_reference(dy, x, (ph, pw)))


@pytest.mark.parametrize("shape", [(32, 32, 32, 32, 32), (8, 64, 64, 16, 16), (9, 128, 128, 8, 8),
                                   (5, 32, 64, 16, 16), (2, 24, 16, 64, 64)])
@pytest.mark.parametrize("nthreads", [1, 3])
def test_weight_gradient_resnet_shapes_and_threads(shape, nthreads, monkeypatch):
    """The ResNet's layers and a block smaller than an image, on one thread and on three (each
    thread sums its own blocks; the team's sums are added at the end)."""
    _native()
    monkeypatch.setattr(_conv_native, "threads", lambda: nthreads)
    n, c, o, h, w_ = shape
    x = RNG.standard_normal((n, c, h, w_), dtype=np.float32)
    dy = RNG.standard_normal((n, o, h, w_), dtype=np.float32)
    _check(_wgrad_winograd(dy, x, (1, 1)), _wgrad_reference(dy, x, (1, 1)))


def test_weight_gradient_through_the_forward_shape():
    """The compiled graphs' weight gradient arrives as a forward convolution (batch and channels
    swapped, the output gradient as kernel): with ``winograd`` that call takes the kernel too."""
    _native()
    x = RNG.standard_normal((4, 20, 10, 12), dtype=np.float32)
    dy = RNG.standard_normal((4, 24, 10, 12), dtype=np.float32)
    got = K._conv_forward_native(x.transpose(1, 0, 2, 3), dy.transpose(1, 0, 2, 3), [1, 1], [1, 1], [1, 1], 1,
                                 winograd=True)                      # (C, O, 3, 3)
    _check(got.transpose(1, 0, 2, 3), _wgrad_reference(dy, x, (1, 1)))


@pytest.mark.parametrize("case, expected", [
    (((2, 32, 8, 8), (32, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1, np.float32), True),
    (((2, 32, 8, 8), (32, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1, np.float64), False),   # float64: direct
    (((2, 32, 8, 8), (32, 32, 3, 3), [2, 2], [1, 1], [1, 1], 1, np.float32), False),   # strided
    (((2, 32, 8, 8), (32, 32, 3, 3), [1, 1], [1, 1], [2, 2], 1, np.float32), False),   # dilated
    (((2, 32, 8, 8), (32, 16, 3, 3), [1, 1], [1, 1], [1, 1], 2, np.float32), False),   # groups
    (((2, 32, 9, 8), (32, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1, np.float32), False),   # odd output height
    (((2, 32, 9, 8), (32, 32, 3, 3), [1, 1], [0, 1], [1, 1], 1, np.float32), False),   # odd output height
    (((2, 3, 8, 8), (32, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1, np.float32), False),     # 3 input channels
    (((2, 32, 8, 8), (8, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1, np.float32), False),    # 8 output channels
    (((2, 32, 8, 8), (32, 32, 5, 5), [1, 1], [2, 2], [1, 1], 1, np.float32), False),   # 5x5
    (((2, 32, 8), (32, 32, 3), [1], [1], [1], 1, np.float32), False),                  # 1-d
    (((2, 32, 2, 2), (32, 32, 3, 3), [1, 1], [0, 0], [1, 1], 1, np.float32), False),   # empty output
])
def test_where_it_applies(case, expected):
    x_shape, w_shape, s, p, d, g, dt = case
    assert _conv_winograd.applies(x_shape, w_shape, s, p, d, g, np.dtype(dt)) is expected


def test_not_applicable_shapes_keep_the_direct_kernel():
    """``winograd=True`` on a shape it does not apply to (odd output) is the direct result, bit
    for bit."""
    _native()
    x = RNG.standard_normal((2, 32, 9, 8), dtype=np.float32)
    w = RNG.standard_normal((32, 32, 3, 3), dtype=np.float32)
    a = K._conv_forward_native(x, w, [1, 1], [1, 1], [1, 1], 1, winograd=True)
    b = K._conv_forward_native(x, w, [1, 1], [1, 1], [1, 1], 1)
    assert np.array_equal(a, b)


def test_other_vector_width(monkeypatch):
    """The kernel built at the other vector width (32-byte vectors: no 16-lane transform; 64-byte
    on an AVX2 host, lowered to pairs) gives the same results within the same bound."""
    _native()
    lazy, _ = other_width_library()
    monkeypatch.setattr(_conv_native, "lib", lazy)
    for n, c, h, w_ in [(3, 32, 32, 32), (4, 64, 16, 16), (5, 48, 8, 8), (2, 16, 14, 22)]:
        x = RNG.standard_normal((n, c, h, w_), dtype=np.float32)
        w = RNG.standard_normal((c, c, 3, 3), dtype=np.float32)
        _check(_winograd(x, w, (1, 1)), _reference(x, w, (1, 1)))
    for n, c, o, h, w_ in [(3, 32, 32, 32, 32), (4, 48, 40, 8, 8), (2, 16, 24, 14, 22)]:
        x = RNG.standard_normal((n, c, h, w_), dtype=np.float32)
        dy = RNG.standard_normal((n, o, h, w_), dtype=np.float32)
        _check(_wgrad_winograd(dy, x, (1, 1)), _wgrad_reference(dy, x, (1, 1)))


def test_large_filters():
    """768 x 768 channels: the transformed filters (37 MB) and the weight gradient's per-thread
    sums (as large) take buffers of the call, not the thread's kept ones (over 8 MB); a 4x4 image
    is one tile row of two tiles."""
    _native()
    x = RNG.standard_normal((2, 768, 4, 4), dtype=np.float32)
    w = RNG.standard_normal((768, 768, 3, 3), dtype=np.float32)
    _check(_winograd(x, w, (1, 1)), _reference(x, w, (1, 1)))
    dy = RNG.standard_normal((2, 768, 4, 4), dtype=np.float32)
    _check(_wgrad_winograd(dy, x, (1, 1)), _wgrad_reference(dy, x, (1, 1)))
