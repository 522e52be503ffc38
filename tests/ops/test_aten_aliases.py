"""Top-level ATen-signature spellings (ember._aten_aliases) against PyTorch's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

RNG = np.random.default_rng(11)


def _both(*shape, positive=False):
    a = RNG.standard_normal(shape).astype(np.float64)
    a = np.abs(a) + 0.1 if positive else a
    return ember.tensor(a), torch.tensor(a)


def _same(e, t):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _same(a, b)
        return
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
def test_pools_and_shuffles():
    e, t = _both(2, 3, 10)
    for name, args in [("adaptive_avg_pool1d", (4,)), ("adaptive_max_pool1d", (4,)), ("avg_pool1d", (3, 2, 1)),
                       ("max_pool1d", (3, 2, 1)), ("max_pool1d_with_indices", (3,)), ("constant_pad_nd", ([1, 2], 0.5))]:
        _same(getattr(ember, name)(e, *args), getattr(torch, name)(t, *args))
    e4, t4 = _both(1, 4, 6, 6)
    _same(ember.max_pool2d(e4, 2), torch.max_pool2d(t4, 2))
    _same(ember.pixel_shuffle(e4, 2), torch.pixel_shuffle(t4, 2))
    _same(ember.pixel_unshuffle(e4, 2), torch.pixel_unshuffle(t4, 2))
    _same(ember.channel_shuffle(e4, 2), torch.channel_shuffle(t4, 2))
    e5, t5 = _both(1, 2, 4, 4, 4)
    _same(ember.max_pool3d(e5, 2, 1), torch.max_pool3d(t5, 2, 1))


@needs_torch
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_with_int_reductions(reduction):
    a, ta = _both(5, 4)
    b, tb = _both(5, 4)
    y = np.where(RNG.random(5) > 0.5, 1.0, -1.0)
    ey, ty = ember.tensor(y), torch.tensor(y)
    _same(ember.cosine_embedding_loss(a, b, ey, 0.1, reduction), torch.cosine_embedding_loss(ta, tb, ty, 0.1, reduction))
    _same(ember.margin_ranking_loss(a[:, 0], b[:, 0], ey, 0.2, reduction),
          torch.margin_ranking_loss(ta[:, 0], tb[:, 0], ty, 0.2, reduction))
    _same(ember.hinge_embedding_loss(a[:, 0], ey, 0.5, reduction), torch.hinge_embedding_loss(ta[:, 0], ty, 0.5, reduction))
    p, tp = _both(5, 4, positive=True)
    _same(ember.kl_div(a.log_softmax(-1), p.softmax(-1), reduction),
          torch.kl_div(ta.log_softmax(-1), tp.softmax(-1), reduction))
    _same(ember.poisson_nll_loss(a, p, True, False, 1e-8, reduction),
          torch.poisson_nll_loss(ta, tp, True, False, 1e-8, reduction))
    _same(ember.triplet_margin_loss(a, b, p, 1.0, 2, 1e-6, False, reduction),
          torch.triplet_margin_loss(ta, tb, tp, 1.0, 2, 1e-6, False, reduction))
    with pytest.raises(ValueError, match="reduction must be 0"):
        ember.kl_div(a, p, 3)


@needs_torch
def test_norms_fill_rms_prelu_grid():
    a, ta = _both(3, 4, 5)
    with pytest.warns(UserWarning, match="frobenius_norm is deprecated"):
        _same(ember.frobenius_norm(a, [1, 2]), torch.frobenius_norm(ta, [1, 2]))
    with pytest.warns(UserWarning, match="nuclear_norm is deprecated"):
        _same(ember.nuclear_norm(a[0]), torch.nuclear_norm(ta[0]))
        _same(ember.nuclear_norm(a, [1, 2], True), torch.nuclear_norm(ta, [1, 2], True))
    _same(ember.fill(a, 2.5), torch.fill(ta, 2.5))
    w, tw = _both(5)
    _same(ember.rms_norm(a, [5], w, 1e-5), torch.rms_norm(ta, [5], tw, 1e-5))
    _same(ember.prelu(a, w[:4]), torch.prelu(ta, tw[:4]))
    img, timg = _both(1, 2, 5, 5)
    grid, tgrid = _both(1, 3, 3, 2)
    for interp in (0, 1):
        for pad in (0, 1, 2):
            _same(ember.grid_sampler(img, grid, interp, pad, False), torch.grid_sampler(timg, tgrid, interp, pad, False))
    theta, ttheta = _both(1, 2, 3)
    _same(ember.affine_grid_generator(theta, [1, 2, 4, 4], False),
          torch.affine_grid_generator(ttheta, [1, 2, 4, 4], False))


def test_dropouts_keep_or_scale():
    x = ember.randn(400, 8, 3) + 5
    out, mask = ember.native_dropout(x, 0.25, True)
    assert mask.dtype is ember.bool
    assert ember.allclose(out[mask], x[mask] / 0.75) and (out[~mask] == 0).all().item()
    same, keep_all = ember.native_dropout(x, 0.25, False)
    assert ember.equal(same, x) and keep_all.all().item()
    f = ember.feature_dropout(x, 0.5, True)
    per_channel = (f == 0).all(dim=-1)           # whole channels dropped
    assert ((f != 0).all(dim=-1) | per_channel).all().item() and 0.3 < per_channel.float().mean().item() < 0.7
    assert ember.equal(ember.feature_dropout(x, 0.5, False), x)
    assert ember.alpha_dropout(x, 0.2, False) is x or ember.equal(ember.alpha_dropout(x, 0.2, False), x)


def test_frombuffer_and_dlpack_share_memory():
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = ember.frombuffer(buf, dtype=ember.float32, count=4, offset=4)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    t[0] = 9.0
    assert np.frombuffer(buf, dtype=np.float32)[1] == 9.0
    with pytest.warns(UserWarning, match="not writable"):
        r = ember.frombuffer(b"\x01\x02", dtype=ember.uint8)
    assert r.tolist() == [1, 2]
    arr = RNG.standard_normal(3)
    d = ember.from_dlpack(arr)
    arr[0] = 42.0
    assert d[0].item() == 42.0
