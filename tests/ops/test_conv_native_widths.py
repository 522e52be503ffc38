"""The native convolution kernels at both vector widths on any host.

``ember/ops/_conv_native.py`` writes its kernels in the host's vector width: 64 bytes with
AVX-512 (MR x NR = 8 x 32 float blocks), 32 bytes without (8 x 16). A machine runs only its
own width by default, so here the library is built a second time with the *other* width
(defining ``EMBER_VB`` ahead of the source; GCC lowers a 64-byte vector to two 32-byte ones on
an AVX2 host, slowly but correctly) and every kernel -- the three forwards, both input
gradients, both weight gradients, the register transposes of the channels-last copies -- is
checked against torch with it, on shapes whose channel counts are multiples of one width's
block and not the other's."""
from __future__ import annotations

import numpy as np
import pytest

from conv_widths import other_width_library
from ember.ops import _conv_native, nn_ops as K
from oracle import needs_torch, torch

pytestmark = needs_torch
RNG = np.random.default_rng(20261130)


@pytest.fixture(scope="module")
def other_width():
    """(the other width's lazy library, its _NR table), built once for the module."""
    if _conv_native.lib() is None:
        pytest.skip("no native convolution library on this machine (no C++ compiler or OpenBLAS)")
    return other_width_library()


def _r(*shape, dtype):
    return RNG.uniform(-2, 2, size=shape).astype(dtype)


# (N, C, spatial, O, kernel, stride, padding, dilation, groups): channels 16/32/48/64 so that the
# weight gradient's and the channels-last forward's shape rules pick different kernels per width
CASES = [
    (3, 16, (9, 8), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 32, (9, 9), 32, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    (2, 64, (8, 8), 48, (3, 3), (1, 1), (1, 1), (1, 1), 2),
    (3, 48, (7, 9), 32, (1, 1), (2, 2), (0, 0), (1, 1), 1),
    (2, 32, (6, 16), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 64, (6, 32), 64, (3, 3), (2, 1), (1, 1), (1, 1), 1),
    (2, 16, (4, 5, 6), 8, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 1), 1),
]


@pytest.mark.parametrize("fwd_kernel", [0, 1, 2, 3], ids=["by_shape", "panels", "channels_last", "rows"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_other_width_vs_torch(case, dt, fwd_kernel, other_width, monkeypatch):
    lazy, nr = other_width
    monkeypatch.setattr(_conv_native, "lib", lazy)
    monkeypatch.setattr(_conv_native, "_NR", nr)
    monkeypatch.setattr(_conv_native, "FORWARD_KERNEL", fwd_kernel)
    N, C, sp, O, k, s, p, d, G = case
    x, w = _r(N, C, *sp, dtype=dt), _r(O, C // G, *k, dtype=dt)
    out = K._conv_forward(np, x, w, list(s), list(p), list(d), G)
    g = _r(*out.shape, dtype=dt)
    gx = K._conv_input_grad_arr(np, g, w, list(s), list(p), list(d), G, x.shape)
    gw = K._conv_weight_grad_arr(np, g, x, list(s), list(p), list(d), G, w.shape)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    tw = torch.from_numpy(w.copy()).requires_grad_()
    ref = getattr(torch.nn.functional, f"conv{len(sp)}d")(tx, tw, None, s, p, d, G)
    ref.backward(torch.from_numpy(g.copy()))
    tol = dict(rtol=2e-4, atol=3e-4) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for got, want in ((out, ref.detach().numpy()), (gx, tx.grad.numpy()), (gw, tw.grad.numpy())):
        assert got.dtype == dt and got.shape == want.shape
        np.testing.assert_allclose(got, want, **tol)
