"""The native convolution path (``ember/ops/_conv_native.py`` + the ``*_native`` kernels in
``nn_ops``) against torch: every branch it takes -- im2col + matmul, the 1x1/stride-1 direct
matmul, the stride-1 input gradient as a flipped-kernel correlation, col2im (strided, dilated,
transposed with output_padding), the weight-gradient-shaped forward (fewer output positions
than kernel taps), the channels-last kernels and their register-transposed copies, strided 1x1
convolutions on their subsampled view and the 1x1 input gradient's expand -- in 1-d/2-d/3-d,
with groups, padding, dilation, float32/float64, non-contiguous inputs, one to three threads;
plus gradcheck, double backward and random shapes (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember
import ember.nn.functional as F
from ember.inductor import config as inductor_config
from ember.ops import _conv_native, nn_ops as K
from oracle import check_against_torch, gradcheck_fn, needs_torch, torch

pytestmark = needs_torch
RNG = np.random.default_rng(20261121)


def _r(*shape, dtype=np.float64):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


def _tol(dt):
    return dict(rtol=2e-4, atol=2e-4) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _torch_conv(nd):
    return getattr(torch.nn.functional, f"conv{nd}d")


def _torch_grads(x, w, g, stride, padding, dilation, groups):
    tx = torch.from_numpy(x.copy()).requires_grad_()
    tw = torch.from_numpy(w.copy()).requires_grad_()
    out = _torch_conv(w.ndim - 2)(tx, tw, None, stride, padding, dilation, groups)
    out.backward(torch.from_numpy(g.copy()))
    return out.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def test_native_path_is_built():
    # the dev environment has g++ and numpy on OpenBLAS: a silent fallback to numpy would hide a
    # broken build (and cost the speed this path exists for)
    lib = _conv_native.lib()
    assert lib is not None
    assert all(p for p in lib[1:3])


# (N, C, spatial, O, kernel, stride, padding, dilation, groups)
CASES = [
    (4, 3, (9, 8), 5, (3, 3), (1, 1), (1, 1), (1, 1), 1),      # im2col; stride-1 igrad as a correlation
    (3, 4, (9, 10), 6, (3, 2), (2, 1), (1, 0), (1, 1), 2),     # strided: col2im; groups
    (2, 6, (10, 11), 6, (3, 3), (2, 1), (0, 2), (2, 1), 3),    # dilation, uneven padding
    (5, 4, (8, 8), 8, (1, 1), (1, 1), (0, 0), (1, 1), 2),      # 1x1 stride 1: x is the column matrix
    (3, 4, (7, 9), 8, (1, 1), (2, 2), (0, 0), (1, 1), 1),      # 1x1 stride 2 (the ResNet shortcut)
    (2, 2, (5, 5), 3, (1, 1), (1, 1), (1, 1), (1, 1), 1),      # 1x1 with padding: igrad via col2im
    (2, 4, (7, 7), 4, (3, 3), (3, 3), (2, 2), (2, 2), 4),      # depthwise, stride > kernel
    (1, 3, (6, 6), 2, (3, 3), (1, 1), (1, 1), (1, 1), 1),      # one image: the serial loop
    (3, 64, (6, 7), 40, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # 64 channels: the channels-last forward
    (2, 64, (9, 9), 36, (3, 3), (2, 2), (1, 1), (1, 1), 2),    # strided, 32 channels per group: channels-last
    (2, 3, (5, 32), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),     # output rows of 32: the row kernel
    (2, 4, (6, 32), 6, (3, 3), (2, 1), (2, 2), (2, 2), 2),     # row kernel: height stride, dilation, groups
    (2, 3, (34,), 5, (3,), (1,), (0,), (1,), 1),               # row kernel, 1-d
    (2, 16, (5, 16), 70, (3, 3), (1, 1), (1, 1), (1, 1), 1),   # row kernel, 64+ output channels: wide blocks
    (3, 2, (11,), 4, (3,), (2,), (1,), (2,), 1),               # 1-d
    (2, 2, (5, 4, 6), 3, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), 1),   # 3-d
]


@pytest.mark.parametrize("fwd_kernel", [0, 1, 2, 3], ids=["by_shape", "panels", "channels_last", "rows"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_kernels_vs_torch(case, dt, fwd_kernel, monkeypatch):
    """Every forward kernel is pinned on every case (the shape rule picks one of them; the row
    kernel, where its shape condition fails, falls back to panels); the stride-1 input gradient
    runs through the forward."""
    monkeypatch.setattr(_conv_native, "FORWARD_KERNEL", fwd_kernel)
    N, C, sp, O, k, s, p, d, G = case
    x, w = _r(N, C, *sp, dtype=dt), _r(O, C // G, *k, dtype=dt)
    out = K._conv_forward(np, x, w, list(s), list(p), list(d), G)
    g = _r(*out.shape, dtype=dt)
    ref, gx_ref, gw_ref = _torch_grads(x, w, g, s, p, d, G)
    gx = K._conv_input_grad_arr(np, g, w, list(s), list(p), list(d), G, x.shape)
    gw = K._conv_weight_grad_arr(np, g, x, list(s), list(p), list(d), G, w.shape)
    for got, want in ((out, ref), (gx, gx_ref), (gw, gw_ref)):
        assert got.dtype == dt and got.shape == want.shape
        np.testing.assert_allclose(got, want, **_tol(dt))
    # the numpy formulation (the path without a compiler) agrees too
    np.testing.assert_allclose(K._conv_forward_np(np, x, w, list(s), list(p), list(d), G), out, **_tol(dt))


@pytest.mark.parametrize("cfg", [
    (3, 32, (9, 7), 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, np.float32),
    (2, 64, (8, 9), 12, (3, 2), (2, 1), (1, 0), (1, 2), 2, np.float32),
    (2, 32, (5, 4, 6), 3, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), 1, np.float32),
    (3, 32, (6, 6), 4, (3, 3), (2, 2), (2, 2), (1, 1), 2, np.float64),
    (2, 16, (7, 5), 9, (2, 3), (1, 1), (0, 2), (1, 1), 1, np.float64),
    # small outputs: several images per accumulator block, the last block partial
    (9, 64, (6, 5), 8, (3, 3), (1, 1), (1, 1), (1, 1), 2, np.float32),
    (7, 32, (5, 5), 6, (3, 3), (2, 2), (1, 1), (1, 1), 1, np.float64),
], ids=[str(i) for i in range(7)])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_weight_grad_channels_last_kernel(cfg, layout):
    """Channels per group a multiple of 32 (float) / 16 (double), kernel larger than 1x1: the
    weight gradient's own kernel over a padded channels-last copy of x."""
    N, C, sp, O, k, s, p, d, G, dt = cfg
    x, w = _r(N, C, *sp, dtype=dt), _r(O, C // G, *k, dtype=dt)
    if layout == "channels_last":
        perm = (0,) + tuple(range(2, 2 + len(sp))) + (1,)
        x = np.ascontiguousarray(x.transpose(perm)).transpose(np.argsort(perm))
    out = K._conv_forward(np, x, w, list(s), list(p), list(d), G)
    g = _r(*out.shape, dtype=dt)
    _, _, gw_ref = _torch_grads(np.ascontiguousarray(x), w, g, s, p, d, G)
    gw = K._conv_weight_grad_arr(np, g, x, list(s), list(p), list(d), G, w.shape)
    np.testing.assert_allclose(gw, gw_ref, **(dict(rtol=2e-5, atol=5e-5) if dt == np.float32 else _tol(dt)))


@pytest.mark.parametrize("threads", [1, 2])
def test_thread_counts_agree(threads, monkeypatch):
    """Images spread over OpenMP threads (single-threaded BLAS in each) or run serially: same
    values; the weight gradient's per-thread partial sums are added in a fixed order."""
    monkeypatch.setattr(inductor_config, "threads", threads)
    x, w = _r(7, 6, 10, 9, dtype=np.float32), _r(4, 6, 3, 3, dtype=np.float32)
    out = K._conv_forward(np, x, w, [2, 1], [1, 1], [1, 1], 1)
    g = _r(*out.shape, dtype=np.float32)
    ref, gx_ref, gw_ref = _torch_grads(x, w, g, (2, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(K._conv_input_grad_arr(np, g, w, [2, 1], [1, 1], [1, 1], 1, x.shape), gx_ref,
                               rtol=1e-4, atol=1e-4)
    gw = K._conv_weight_grad_arr(np, g, x, [2, 1], [1, 1], [1, 1], 1, w.shape)
    np.testing.assert_allclose(gw, gw_ref, rtol=1e-4, atol=1e-4)
    assert np.array_equal(gw, K._conv_weight_grad_arr(np, g, x, [2, 1], [1, 1], [1, 1], 1, w.shape))


@pytest.mark.parametrize("layout", ["channels_last", "flipped", "sliced", "batch_minor"])
def test_noncontiguous_inputs(layout):
    """x is read through its strides (no copy); w and g are made contiguous by the kernels."""
    base = _r(6, 4, 9, 8)
    x = {"channels_last": np.ascontiguousarray(base.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
         "flipped": base[:, :, ::-1, ::-1],
         "sliced": _r(6, 8, 9, 16)[:, ::2, :, ::2],
         "batch_minor": np.ascontiguousarray(base.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)}[layout]
    assert not x.flags.c_contiguous
    w = _r(3, 5, 2, 6)[:, :4, :, ::2].swapaxes(2, 3)           # (3, 4, 3, 2), strided
    for s, p in (((1, 1), (1, 1)), ((2, 2), (1, 0))):
        out = K._conv_forward(np, x, w, list(s), list(p), [1, 1], 1)
        g = np.asfortranarray(_r(*out.shape))
        ref, gx_ref, gw_ref = _torch_grads(np.ascontiguousarray(x), np.ascontiguousarray(w), g, s, p, (1, 1), 1)
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(K._conv_input_grad_arr(np, g, w, list(s), list(p), [1, 1], 1, x.shape), gx_ref,
                                   rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(K._conv_weight_grad_arr(np, g, x, list(s), list(p), [1, 1], 1, w.shape), gw_ref,
                                   rtol=1e-10, atol=1e-10)
    # 1x1 stride 1 on a channels-last x: not the direct matmul (spatial block not contiguous)
    w1 = _r(5, 4, 1, 1)
    np.testing.assert_allclose(K._conv_forward(np, x, w1, [1, 1], [0, 0], [1, 1], 1),
                               _torch_conv(2)(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(w1)).numpy(),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("cfg", [(4, 6, 12, 5, 10, 1, 1, 1, 1), (3, 4, 11, 6, 4, 2, 1, 3, 2), (5, 8, 9, 4, 9, 1, 0, 1, 1),
                                 (2, 4, 8, 6, 8, 2, 2, 1, 2)])
def test_weight_gradient_shaped_forward(cfg, dt):
    """A forward convolution with fewer output positions than kernel taps is computed as a weight
    gradient (how the prims decomposition of _conv_weight_grad reaches the kernel); including the
    strided views of a permuted input it arrives as under the inductor."""
    B, C, S, O, J, s, p, d, G = cfg
    X, Wk = _r(B, C, S, S, dtype=dt), _r(O, C // G, J, J, dtype=dt)
    ref = _torch_conv(2)(torch.from_numpy(X), torch.from_numpy(Wk), None, s, p, d, G).numpy()
    assert ref.shape[2] * ref.shape[3] < J * J
    for Xv in (X, np.ascontiguousarray(X.swapaxes(0, 1)).swapaxes(0, 1)):
        for Wv in (Wk, np.ascontiguousarray(Wk.swapaxes(0, 1)).swapaxes(0, 1)):
            np.testing.assert_allclose(K._conv_forward(np, Xv, Wv, [s, s], [p, p], [d, d], G), ref, **_tol(dt))


@pytest.mark.parametrize("cfg", [
    ((2, 3, 5, 6), (3, 2, 3, 3), 1, 1, 1, 0, 1),     # stride 1: a forward correlation
    ((2, 3, 5, 6), (3, 2, 3, 3), 1, 1, 2, 1, 1),     # stride 1, dilation 2, output_padding 1: col2im
    ((2, 4, 4, 5), (4, 3, 2, 3), 2, 1, 1, 1, 2),     # strided, groups
    ((1, 2, 3, 3), (2, 3, 1, 1), 3, 0, 1, 2, 1),     # 1x1, stride 3, output_padding 2
])
def test_transposed_convolution(cfg):
    xs, ws, s, p, d, op, G = cfg
    check_against_torch(lambda m, x, w, b: (F if m is ember else torch.nn.functional).conv_transpose2d(
        x, w, b, s, p, op, G, d), [_r(*xs), _r(*ws), _r(ws[1] * G)], dtype="float64")


def test_module_step_vs_torch():
    """The ResNet block shapes (3x3 s1/s2 p1, 1x1 s2 shortcut) through autograd, float32."""
    def block(m, x, w1, w2, ws):
        f = F if m is ember else torch.nn.functional
        y = f.relu(f.conv2d(x, w1, None, 2, 1))
        return f.conv2d(y, w2, None, 1, 1) + f.conv2d(x, ws, None, 2)
    check_against_torch(block, [_r(4, 8, 16, 16, dtype=np.float32), _r(16, 8, 3, 3, dtype=np.float32),
                                _r(16, 16, 3, 3, dtype=np.float32), _r(16, 8, 1, 1, dtype=np.float32)],
                        rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("cfg", [dict(stride=1, padding=1), dict(stride=2, padding=1, groups=2),
                                 dict(stride=1, padding=0, kernel=1), dict(stride=2, padding=0, kernel=1, dilation=1)])
def test_gradcheck_and_double_backward(cfg):
    cfg = dict(cfg)
    kern = cfg.pop("kernel", 3)
    arrs = [_r(3, 4, 6, 5), _r(4, 4 // cfg.get("groups", 1), kern, kern), _r(4)]
    fn = lambda m, x, w, b: F.conv2d(x, w, b, **cfg)  # noqa: E731
    assert gradcheck_fn(fn, arrs)
    ins = [ember.tensor(a, requires_grad=True) for a in arrs]
    assert ember.autograd.gradgradcheck(lambda x, w, b: fn(ember, x, w, b), ins)


def test_half_keeps_the_numpy_path():
    """Only float32/float64 numpy arrays take the native path; float16 keeps the numpy formulation."""
    x, w = _r(2, 3, 5, 5, dtype=np.float16), _r(2, 3, 3, 3, dtype=np.float16)
    assert not _conv_native.supported(x, w)
    out = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1)
    assert out.dtype is ember.float16
    ref = _torch_conv(2)(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(w.astype(np.float32)), padding=1)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy(), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("cfg", [
    # (N, C, spatial, O, kernel, stride, padding, dilation, groups, dtype)
    (3, 32, (9, 9), 40, (3, 3), (2, 2), (1, 1), (1, 1), 1, np.float32),       # the ResNet shape, odd size
    (2, 20, (11, 13), 24, (3, 3), (2, 2), (1, 1), (1, 1), 1, np.float32),     # a partial channel block
    (2, 64, (10, 9), 12, (3, 2), (2, 3), (2, 0), (2, 1), 2, np.float32),      # dilation, uneven, groups
    (2, 16, (9, 8), 6, (2, 2), (3, 3), (0, 1), (1, 1), 1, np.float32),        # stride > kernel: empty phases
    (2, 16, (21,), 8, (5,), (3,), (4,), (1,), 1, np.float32),                 # 1-d, padding past the kernel
    (2, 16, (5, 6, 7), 4, (3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 1, 1), 1, np.float32),   # 3-d
    (3, 8, (9, 7), 10, (3, 3), (2, 2), (1, 1), (1, 1), 1, np.float64),        # double: 16-wide blocks
    (2, 24, (12, 12), 18, (3, 3), (2, 2), (1, 1), (2, 2), 3, np.float64),
], ids=[str(i) for i in range(8)])
def test_strided_input_grad_channels_last_kernel(cfg):
    """A stride above 1, a kernel larger than 1x1, input channels per group filling half the
    vector block: the input gradient's own kernel (per-phase taps over a padded channels-last
    copy of g) against torch."""
    N, C, sp, O, k, s, p, d, G, dt = cfg
    x, w = _r(N, C, *sp, dtype=dt), _r(O, C // G, *k, dtype=dt)
    out = K._conv_forward(np, x, w, list(s), list(p), list(d), G)
    g = _r(*out.shape, dtype=dt)
    _, gx_ref, _ = _torch_grads(x, w, g, s, p, d, G)
    gx = K._conv_input_grad_arr(np, g, w, list(s), list(p), list(d), G, x.shape)
    np.testing.assert_allclose(gx, gx_ref, **(dict(rtol=2e-5, atol=5e-5) if dt == np.float32 else _tol(dt)))


# ---------------------------------------------------------------- the channels-last / 1x1 paths
def _layout(x, layout):
    """x (contiguous) as the given memory layout: the same values, other strides."""
    if layout == "channels_last":
        perm = (0,) + tuple(range(2, x.ndim)) + (1,)
        return np.ascontiguousarray(x.transpose(perm)).transpose(np.argsort(perm))
    if layout == "batch_minor":
        perm = tuple(range(1, x.ndim)) + (0,)
        return np.ascontiguousarray(x.transpose(perm)).transpose(np.argsort(perm))
    if layout == "w_stride2":          # every other element of a wider buffer (width stride 2)
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    return x


def _check_all(x, w, s, p, d, G, dt):
    """Forward, input gradient and weight gradient of the native path against torch."""
    out = K._conv_forward(np, x, w, list(s), list(p), list(d), G)
    g = _r(*out.shape, dtype=dt)
    ref, gx_ref, gw_ref = _torch_grads(np.ascontiguousarray(x), w, g, s, p, d, G)
    gx = K._conv_input_grad_arr(np, g, w, list(s), list(p), list(d), G, x.shape)
    gw = K._conv_weight_grad_arr(np, g, x, list(s), list(p), list(d), G, w.shape)
    tol = dict(rtol=1e-4, atol=2e-4) if dt == np.float32 else _tol(dt)
    for got, want in ((out, ref), (gx, gx_ref), (gw, gw_ref)):
        assert got.dtype == dt and got.shape == want.shape
        np.testing.assert_allclose(got, want, **tol)


# (N, C, spatial, O, kernel, stride, padding, dilation, groups)
RESNET_CASES = [
    (3, 32, (32, 32), 64, (3, 3), (2, 2), (1, 1), (1, 1), 1),   # layer2 conv1: channels-last fwd/igrad/wgrad, full tiles
    (3, 64, (16, 16), 128, (3, 3), (2, 2), (1, 1), (1, 1), 1),  # layer3 conv1: 16-wide rows (half-vector interleave)
    (2, 32, (33, 33), 64, (3, 3), (2, 2), (0, 0), (1, 1), 1),   # the padded copy the compiled weight gradient gets
    (2, 64, (17, 17), 32, (3, 3), (2, 2), (0, 0), (1, 1), 1),   # odd widths: tile + scalar column
    (3, 32, (32, 32), 64, (1, 1), (2, 2), (0, 0), (1, 1), 1),   # 1x1 stride 2: subsampled view, zip expand
    (3, 64, (16, 16), 128, (1, 1), (2, 2), (0, 0), (1, 1), 1),  # 1x1 stride 2, 8-wide output rows
    (2, 64, (15, 15), 48, (1, 1), (2, 2), (0, 0), (1, 1), 1),   # 1x1 stride 2, odd size (the compiled slice)
    (2, 32, (20, 36), 40, (1, 1), (3, 2), (0, 0), (1, 1), 2),   # 1x1, uneven strides, groups
    (2, 32, (9, 34), 32, (1, 1), (1, 1), (1, 1), (1, 1), 1),    # 1x1 with padding: not subsampled
    (2, 32, (12, 40), 24, (1, 1), (1, 1), (0, 0), (1, 1), 1),   # 1x1 stride 1: channels-last weight gradient
    (3, 32, (8, 8), 32, (3, 3), (1, 1), (1, 1), (1, 1), 1),     # stride-1 weight gradient, several images a block
    (2, 48, (18, 34), 40, (3, 3), (2, 1), (1, 1), (1, 1), 1),   # stride (2, 1): one phase per width
    (2, 32, (13, 37), 36, (3, 3), (3, 3), (1, 2), (1, 1), 1),   # stride 3: generic interleave
    (2, 64, (10, 34), 64, (3, 3), (1, 2), (2, 1), (2, 1), 2),   # dilation, groups, channels-last fwd
    (2, 32, (6, 18, 20), 32, (3, 1, 3), (2, 1, 2), (1, 0, 1), (1, 1, 1), 1),   # 3-d
    (2, 32, (70,), 32, (1,), (2,), (0,), (1,), 1),              # 1-d 1x1 stride 2
    # the channels-last kernels' position blocks (6 or 8 with AVX2, short_blocks): every partial
    # block size, and the long reductions that keep 8
    (2, 32, (9, 11), 48, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # rows of 11: 6 + 5
    (2, 32, (5, 13), 40, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # rows of 13: 6 + 6 + 1
    (2, 32, (9, 17), 48, (3, 3), (2, 2), (1, 1), (1, 1), 1),    # stride 2, rows of 9: 6 + 3
    (2, 128, (8, 8), 32, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # 128 channels, rows of 8: 8-position blocks
    (2, 32, (16, 16), 128, (3, 3), (2, 2), (1, 1), (1, 1), 1),  # 128 output channels: input gradient's 8-blocks
]


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "w_stride2"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", RESNET_CASES, ids=[str(i) for i in range(len(RESNET_CASES))])
def test_channels_last_and_1x1_paths(case, dt, layout):
    """The ResNet's slow shapes and their edges: channels-last copies transposed in registers
    (full tiles, channel/width remainders, a width stride of 2), the weight gradient's own kernel
    at every kernel size, strided 1x1 convolutions on their subsampled view, the 1x1 input
    gradient's expand, the strided input gradient's phase interleave (strides 1, 2, 3)."""
    N, C, sp, O, k, s, p, d, G = case
    x, w = _layout(_r(N, C, *sp, dtype=dt), layout), _r(O, C // G, *k, dtype=dt)
    _check_all(x, w, s, p, d, G, dt)


@st.composite
def _native_case(draw):
    nd = draw(st.sampled_from([2, 2, 2, 1, 3]))
    G = draw(st.sampled_from([1, 1, 2]))
    Cg = draw(st.sampled_from([1, 3, 8, 16, 17, 32, 33, 48, 64]))
    Og = draw(st.sampled_from([1, 5, 8, 16, 17, 32, 40]))
    k = tuple(draw(st.sampled_from([1, 1, 2, 3])) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    p = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    top = {1: 70, 2: 40, 3: 9}[nd]
    sp = []
    for i in range(nd):
        lo = max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i])
        hi = top if i == nd - 1 else {1: 70, 2: 12, 3: 6}[nd]
        sp.append(draw(st.integers(lo, max(lo, hi))))
    return dict(N=draw(st.integers(1, 4)), C=Cg * G, sp=tuple(sp), O=Og * G, k=k, s=s, p=p, d=d, G=G,
                dt=draw(st.sampled_from([np.float32, np.float64])),
                layout=draw(st.sampled_from(["contiguous", "channels_last", "w_stride2", "batch_minor"])),
                fwd_kernel=draw(st.sampled_from([0, 0, 1, 2, 3])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=_native_case())
def test_native_paths_hypothesis(c):
    """Random shapes through every kernel choice (strides 1-3, padding, dilation, groups, 1x1,
    odd sizes, channel counts around the vector blocks, non-contiguous inputs, float32/float64)."""
    old = _conv_native.FORWARD_KERNEL
    _conv_native.FORWARD_KERNEL = c["fwd_kernel"]
    try:
        x = _layout(_r(c["N"], c["C"], *c["sp"], dtype=c["dt"]), c["layout"])
        w = _r(c["O"], c["C"] // c["G"], *c["k"], dtype=c["dt"])
        _check_all(x, w, c["s"], c["p"], c["d"], c["G"], c["dt"])
    finally:
        _conv_native.FORWARD_KERNEL = old


@pytest.mark.parametrize("cfg", [
    (5, 32, (9, 9), 24, (3, 3), (2, 2), (1, 1)),        # blocks of several images, the last one partial
    (3, 64, (16, 16), 40, (1, 1), (2, 2), (0, 0)),      # 1x1 stride 2: the subsampled channels-last gradient
    (2, 32, (12, 12), 8, (3, 3), (1, 1), (1, 1)),       # two blocks: with three threads one has none
])
def test_weight_grad_threads_deterministic(cfg, monkeypatch):
    """The channels-last weight gradient's per-thread sums (a thread's first block stores, later
    ones add; a thread without a block adds nothing), added in thread order: the same bits on
    every call for a given thread count, and torch's values for one to three threads."""
    N, C, sp, O, k, s, p = cfg
    x, w = _r(N, C, *sp, dtype=np.float32), _r(O, C, *k, dtype=np.float32)
    g = _r(*K._conv_forward(np, x, w, list(s), list(p), [1, 1], 1).shape, dtype=np.float32)
    _, _, gw_ref = _torch_grads(x, w, g, s, p, (1, 1), 1)
    for threads in (1, 2, 3):
        monkeypatch.setattr(inductor_config, "threads", threads)
        gw = K._conv_weight_grad_arr(np, g, x, list(s), list(p), [1, 1], 1, w.shape)
        np.testing.assert_allclose(gw, gw_ref, rtol=1e-4, atol=2e-4)
        for _ in range(3):
            assert np.array_equal(gw, K._conv_weight_grad_arr(np, g, x, list(s), list(p), [1, 1], 1, w.shape))
