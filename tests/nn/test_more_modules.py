"""Upsampling, pixel/channel shuffle, fold/unfold, padding, LP pooling and MultiMarginLoss modules
against torch.nn: repr, forward values and input gradients, and the errors for bad arguments."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch
from _helpers import compare_layer

pytestmark = needs_torch

RTOL, ATOL = 1e-5, 1e-6


def _lib(nn):
    return torch if nn is torch.nn else ember


def _weight(values):
    """A constructor argument tensor built by the library whose ``nn`` the ctor gets."""
    return lambda nn: _lib(nn).tensor(np.asarray(values, dtype=np.float32))


# (id, ctor(nn), input shapes (or arrays), options); float inputs are drawn fresh per case
CASES = [
    # ---- upsampling
    ("Upsample-nearest-x2", lambda nn: nn.Upsample(scale_factor=2), [(2, 3, 4, 5)], {}),
    ("Upsample-nearest-size", lambda nn: nn.Upsample(size=(5, 7)), [(2, 3, 3, 4)], {}),
    ("Upsample-nearest-1d-down", lambda nn: nn.Upsample(size=4), [(2, 3, 9)], {}),
    ("Upsample-nearest-3d", lambda nn: nn.Upsample(scale_factor=(1.5, 2, 0.5)), [(1, 2, 4, 3, 6)], {}),
    ("Upsample-nearest-exact", lambda nn: nn.Upsample(scale_factor=1.7, mode="nearest-exact"), [(2, 2, 5, 6)], {}),
    ("Upsample-linear-ac", lambda nn: nn.Upsample(size=9, mode="linear", align_corners=True), [(2, 3, 5)], {}),
    ("Upsample-linear", lambda nn: nn.Upsample(scale_factor=2.5, mode="linear"), [(2, 3, 4)], {}),
    ("Upsample-bilinear", lambda nn: nn.Upsample(scale_factor=1.5, mode="bilinear"), [(2, 3, 4, 5)], {}),
    ("Upsample-bilinear-ac-size", lambda nn: nn.Upsample(size=(7, 3), mode="bilinear", align_corners=True),
     [(1, 2, 4, 5)], {}),
    ("Upsample-bilinear-recompute",
     lambda nn: nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [(2, 2, 5, 4)], {}),
    ("Upsample-bicubic", lambda nn: nn.Upsample(scale_factor=2, mode="bicubic"), [(1, 2, 4, 5)], {}),
    ("Upsample-bicubic-ac", lambda nn: nn.Upsample(size=(6, 9), mode="bicubic", align_corners=True),
     [(2, 1, 4, 5)], {}),
    ("Upsample-trilinear", lambda nn: nn.Upsample(scale_factor=2, mode="trilinear"), [(1, 2, 3, 4, 2)], {}),
    ("Upsample-trilinear-ac", lambda nn: nn.Upsample(size=(4, 5, 3), mode="trilinear", align_corners=True),
     [(1, 2, 2, 3, 4)], {}),
    ("Upsample-area", lambda nn: nn.Upsample(size=(3, 2), mode="area"), [(2, 3, 7, 5)], {}),
    ("UpsamplingNearest2d-x2", lambda nn: nn.UpsamplingNearest2d(scale_factor=2), [(2, 3, 3, 4)], {}),
    ("UpsamplingNearest2d-size", lambda nn: nn.UpsamplingNearest2d(size=(5, 3)), [(1, 2, 4, 4)], {}),
    ("UpsamplingBilinear2d-x2", lambda nn: nn.UpsamplingBilinear2d(scale_factor=2), [(2, 3, 3, 4)], {}),
    ("UpsamplingBilinear2d-size", lambda nn: nn.UpsamplingBilinear2d(size=(3, 7)), [(1, 2, 5, 4)], {}),
    # ---- pixel / channel shuffle
    ("PixelShuffle-2", lambda nn: nn.PixelShuffle(2), [(2, 8, 3, 4)], {}),
    ("PixelShuffle-3", lambda nn: nn.PixelShuffle(3), [(1, 18, 2, 2)], {}),
    ("PixelShuffle-unbatched", lambda nn: nn.PixelShuffle(2), [(8, 3, 3)], {}),
    ("PixelShuffle-5d", lambda nn: nn.PixelShuffle(2), [(2, 2, 8, 2, 3)], {}),
    ("PixelUnshuffle-2", lambda nn: nn.PixelUnshuffle(2), [(2, 3, 4, 6)], {}),
    ("PixelUnshuffle-3-unbatched", lambda nn: nn.PixelUnshuffle(3), [(2, 6, 3)], {}),
    ("ChannelShuffle-2", lambda nn: nn.ChannelShuffle(2), [(2, 6, 3, 3)], {}),
    ("ChannelShuffle-3-1d", lambda nn: nn.ChannelShuffle(3), [(2, 6, 4)], {}),
    ("ChannelShuffle-3-3d", lambda nn: nn.ChannelShuffle(3), [(1, 9, 2, 2, 3)], {}),
    # ---- fold / unfold
    ("Unfold-2", lambda nn: nn.Unfold(2), [(2, 3, 5, 6)], {}),
    ("Unfold-args", lambda nn: nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2)), [(1, 2, 7, 8)], {}),
    ("Unfold-unbatched", lambda nn: nn.Unfold(3, padding=1), [(2, 4, 4)], {}),
    ("Fold-2", lambda nn: nn.Fold((4, 5), 2), [(2, 12, 12)], {}),
    ("Fold-args", lambda nn: nn.Fold(5, (2, 3), dilation=(1, 2), padding=1, stride=2), [(1, 12, 6)], {}),
    ("Fold-unbatched", lambda nn: nn.Fold(3, 2), [(8, 4)], {}),
    # ---- padding (int and asymmetric tuples, batched and unbatched, negative = cropping)
    ("ZeroPad1d", lambda nn: nn.ZeroPad1d(2), [(2, 3, 5)], {}),
    ("ZeroPad1d-tuple-2d", lambda nn: nn.ZeroPad1d((1, 3)), [(3, 5)], {}),
    ("ZeroPad2d", lambda nn: nn.ZeroPad2d(1), [(2, 3, 4, 5)], {}),
    ("ZeroPad2d-tuple-neg", lambda nn: nn.ZeroPad2d((1, -1, 3, 0)), [(2, 4, 5)], {}),
    ("ZeroPad3d", lambda nn: nn.ZeroPad3d(1), [(1, 2, 3, 3, 3)], {}),
    ("ZeroPad3d-tuple", lambda nn: nn.ZeroPad3d((1, 2, 0, 1, 2, 0)), [(2, 3, 2, 4)], {}),
    ("ConstantPad1d", lambda nn: nn.ConstantPad1d(2, 3.5), [(2, 3, 4)], {}),
    ("ConstantPad1d-tuple", lambda nn: nn.ConstantPad1d((0, 3), -1.25), [(3, 4)], {}),
    ("ConstantPad2d", lambda nn: nn.ConstantPad2d((1, 2, 3, 4), -1), [(2, 3, 4, 5)], {}),
    ("ConstantPad2d-int", lambda nn: nn.ConstantPad2d(2, 0.5), [(3, 4, 4)], {}),
    ("ConstantPad3d", lambda nn: nn.ConstantPad3d(1, 0.5), [(1, 2, 3, 4, 2)], {}),
    ("ConstantPad3d-tuple", lambda nn: nn.ConstantPad3d((2, 1, 0, 3, 1, -1), 2.0), [(2, 3, 3, 3)], {}),
    ("ReflectionPad1d", lambda nn: nn.ReflectionPad1d(2), [(2, 3, 5)], {}),
    ("ReflectionPad1d-tuple", lambda nn: nn.ReflectionPad1d((3, 1)), [(3, 6)], {}),
    ("ReflectionPad2d", lambda nn: nn.ReflectionPad2d((1, 2, 3, 0)), [(2, 3, 4, 5)], {}),
    ("ReflectionPad2d-int", lambda nn: nn.ReflectionPad2d(2), [(3, 4, 3)], {}),
    ("ReflectionPad3d", lambda nn: nn.ReflectionPad3d(1), [(1, 2, 3, 4, 2)], {}),
    ("ReflectionPad3d-tuple", lambda nn: nn.ReflectionPad3d((2, 1, 0, 3, 1, 2)), [(2, 3, 4, 4)], {}),
    ("ReplicationPad1d", lambda nn: nn.ReplicationPad1d(3), [(2, 3, 4)], {}),
    ("ReplicationPad1d-tuple", lambda nn: nn.ReplicationPad1d((0, 4)), [(3, 2)], {}),
    ("ReplicationPad2d", lambda nn: nn.ReplicationPad2d((2, 0, 1, 3)), [(2, 3, 4, 5)], {}),
    ("ReplicationPad2d-int", lambda nn: nn.ReplicationPad2d(1), [(3, 2, 2)], {}),
    ("ReplicationPad3d", lambda nn: nn.ReplicationPad3d((1, 2, 3, 4, 5, 6)), [(1, 2, 3, 4, 2)], {}),
    ("ReplicationPad3d-int", lambda nn: nn.ReplicationPad3d(2), [(2, 2, 3, 2)], {}),
    ("CircularPad1d", lambda nn: nn.CircularPad1d(2), [(2, 3, 5)], {}),
    ("CircularPad1d-tuple", lambda nn: nn.CircularPad1d((3, 1)), [(3, 4)], {}),
    ("CircularPad2d", lambda nn: nn.CircularPad2d((1, 2, 3, 4)), [(2, 3, 4, 5)], {}),
    ("CircularPad2d-neg", lambda nn: nn.CircularPad2d((-1, 2, 0, -2)), [(3, 4, 5)], {}),
    ("CircularPad3d", lambda nn: nn.CircularPad3d(1), [(1, 2, 3, 4, 2)], {}),
    ("CircularPad3d-tuple", lambda nn: nn.CircularPad3d((2, 1, 0, 3, 1, 2)), [(2, 3, 4, 4)], {}),
    # ---- LP pooling (fractional/odd powers on positive inputs: x**p is NaN / non-convex for x < 0)
    ("LPPool1d", lambda nn: nn.LPPool1d(2, 3), [(2, 3, 10)], {}),
    ("LPPool1d-frac-ceil", lambda nn: nn.LPPool1d(1.5, 3, 2, True), [(2, 3, 9)], {"positive": True}),
    ("LPPool1d-unbatched", lambda nn: nn.LPPool1d(2, 2, stride=1), [(3, 6)], {}),
    ("LPPool2d", lambda nn: nn.LPPool2d(2, (2, 3)), [(2, 3, 6, 7)], {}),
    ("LPPool2d-p3-stride", lambda nn: nn.LPPool2d(3, 2, stride=1), [(1, 2, 5, 5)], {"positive": True}),
    ("LPPool2d-ceil", lambda nn: nn.LPPool2d(2, 3, stride=2, ceil_mode=True), [(2, 2, 6, 6)], {}),
    # ---- MultiMarginLoss (input, integer target)
    ("MultiMarginLoss", lambda nn: nn.MultiMarginLoss(), [(4, 5), ("target", 5, (4,))], {}),
    ("MultiMarginLoss-p2-weight-sum",
     lambda nn: nn.MultiMarginLoss(p=2, margin=0.5, weight=_weight([0.5, 1.0, 2.0, 0.25, 1.5])(nn),
                                   reduction="sum"), [(6, 5), ("target", 5, (6,))], {}),
    ("MultiMarginLoss-none", lambda nn: nn.MultiMarginLoss(margin=2.0, reduction="none"),
     [(3, 4), ("target", 4, (3,))], {}),
    ("MultiMarginLoss-1d", lambda nn: nn.MultiMarginLoss(p=2), [(5,), ("target", 5, ())], {}),
]


def _inputs(name, shapes, positive=False):
    """Fresh random arrays for one case (seeded by the case name so a failure reproduces)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    out = []
    for s in shapes:
        if s and s[0] == "target":
            out.append(rng.integers(0, s[1], size=s[2]).astype(np.int64))
        elif positive:
            out.append(rng.uniform(0.1, 2.0, size=s).astype(np.float32))
        else:
            out.append(rng.standard_normal(s).astype(np.float32))
    return out


@pytest.mark.parametrize("name,ctor,shapes,opts", CASES, ids=[c[0] for c in CASES])
def test_forward_backward_vs_torch(name, ctor, shapes, opts):
    compare_layer(ctor, _inputs(name, shapes, **opts), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name,ctor,shapes,opts", CASES, ids=[c[0] for c in CASES])
def test_repr_and_state_vs_torch(name, ctor, shapes, opts):
    em, tm = ctor(ember.nn), ctor(torch.nn)
    assert repr(em) == repr(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    public = {k: v for k, v in vars(tm).items() if not k.startswith("_") and k != "training"}
    for k, v in public.items():   # the same attribute names and (plain) values
        assert getattr(em, k) == v, k


@pytest.mark.parametrize("ctor", [
    lambda nn: nn.Upsample(size=[3, 4]),
    lambda nn: nn.Upsample(scale_factor=(2, 3), mode="bilinear", align_corners=False),
    lambda nn: nn.Upsample(),
    lambda nn: nn.ZeroPad2d([1, 2, 3, 4]),
    lambda nn: nn.ConstantPad3d((1, 2), 7),
    lambda nn: nn.LPPool2d(1.5, (2, 3), stride=(1, 2), ceil_mode=True),
    lambda nn: nn.Fold(output_size=(4, 5), kernel_size=(2, 2), dilation=2, padding=(1, 0), stride=3),
    lambda nn: nn.Sequential(nn.ReflectionPad2d(1), nn.PixelShuffle(2), nn.ChannelShuffle(4)),
])
def test_repr_other_arguments(ctor):
    assert repr(ctor(ember.nn)) == repr(ctor(torch.nn))


def test_channel_shuffle_functional():
    x = np.random.default_rng(7).standard_normal((3, 12, 2)).astype(np.float32)
    for g in (1, 2, 3, 4, 6, 12):
        np.testing.assert_array_equal(ember.nn.functional.channel_shuffle(ember.tensor(x), g).numpy(),
                                      torch.nn.functional.channel_shuffle(torch.tensor(x), g).numpy())


def _raises_like_torch(ctor, shape, match):
    """Building and calling the module fails in ember with torch's exception type and message."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    with pytest.raises(Exception) as te:
        ctor(torch.nn)(torch.tensor(x))
    with pytest.raises(te.type, match=match):
        ctor(ember.nn)(ember.tensor(x))


@pytest.mark.parametrize("ctor,shape,match", [
    (lambda nn: nn.ZeroPad2d((1, 2, 3)), (1, 2, 4, 4), "divisible by 2"),
    (lambda nn: nn.ReflectionPad2d(4), (1, 2, 4, 4), "Padding size should be less than"),
    (lambda nn: nn.ReflectionPad2d(1.5), (1, 2, 4, 4), "must be tuple of ints"),
    (lambda nn: nn.ReplicationPad3d(1), (2, 3), "Padding length should be less than or equal"),
    (lambda nn: nn.ReplicationPad1d(1), (2, 3, 4, 5), "Padding size 2 is not supported for 4D input"),
    (lambda nn: nn.CircularPad2d(5), (1, 2, 4, 4), "wrapping around more than once"),
    (lambda nn: nn.CircularPad2d(1), (4, 4), r"expected 3D or 4D input \(got 2D input\)"),
    (lambda nn: nn.PixelShuffle(3), (1, 8, 2, 2), "divisible by the square of upscale_factor"),
    (lambda nn: nn.PixelShuffle(0), (1, 8, 2, 2), "positive upscale_factor"),
    (lambda nn: nn.PixelUnshuffle(3), (1, 2, 4, 6), "height to be divisible by downscale_factor"),
    (lambda nn: nn.ChannelShuffle(4), (2, 6, 3), "Number of channels must be divisible by groups"),
    (lambda nn: nn.ChannelShuffle(0), (2, 6, 3), "groups to divide channels in must be positive"),
    (lambda nn: nn.ChannelShuffle(2), (2, 6), "expects input with > 2 dims"),
    (lambda nn: nn.Upsample(), (1, 1, 3, 3), "either size or scale_factor should be defined"),
    (lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"), (1, 1, 3), "needs 4D input"),
    (lambda nn: nn.Fold(3, 2), (1, 4, 5), "match the calculated number of sliding blocks"),
    (lambda nn: nn.Fold(3, 2), (1, 5, 4), "divisible by the product of kernel_size"),
    (lambda nn: nn.Unfold(5), (1, 1, 3, 3), "must be at least one"),
])
def test_bad_arguments_raise_like_torch(ctor, shape, match):
    _raises_like_torch(ctor, shape, match)


@pytest.mark.parametrize("kwargs,match", [
    ({"p": 3}, "only p == 1 and p == 2 supported"),
    ({"weight": np.ones((2, 2), np.float32)}, "expected weight to be None or 1D tensor, got 2D"),
])
def test_multi_margin_loss_bad_constructor(kwargs, match):
    for lib in (torch, ember):
        kw = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        with pytest.raises(ValueError, match=match):
            lib.nn.MultiMarginLoss(**kw)


def test_exported_like_torch():
    names = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
             "Unfold", "Fold", "LPPool1d", "LPPool2d", "MultiMarginLoss", "ChannelShuffle"]
    names += [f"{k}Pad{d}d" for k in ("Zero", "Constant", "Reflection", "Replication", "Circular") for d in (1, 2, 3)]
    for n in names:
        assert getattr(ember.nn, n) is getattr(ember.nn.modules, n), n
        assert n in ember.nn.modules.__all__, n
        assert hasattr(torch.nn, n), n
