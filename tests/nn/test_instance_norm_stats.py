"""InstanceNorm with track_running_stats: running statistics updated in training, used in eval,
eager and compiled, against torch.nn (it raised "not supported" before)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (4, 3, 7)), ("InstanceNorm2d", (4, 3, 5, 5)),
                                       ("InstanceNorm3d", (2, 3, 3, 4, 2)), ("InstanceNorm2d", (3, 5, 5))])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("compiled", [False, True])
def test_running_stats_match_torch(cls, shape, affine, momentum, compiled):
    rng = np.random.default_rng(7)
    tm = getattr(torch.nn, cls)(3, affine=affine, track_running_stats=True, momentum=momentum)
    em = getattr(ember.nn, cls)(3, affine=affine, track_running_stats=True, momentum=momentum)
    if affine:
        w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(w)), tm.bias.copy_(torch.tensor(b))
        with ember.no_grad():
            em.weight.copy_(ember.tensor(w)), em.bias.copy_(ember.tensor(b))
    run = ember.compile(em) if compiled else em
    for step in range(4):
        if step == 3:
            tm.eval(), em.eval()
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
        yt, ye = tm(xt), run(xe)
        yt.pow(2).sum().backward()
        ye.pow(2).sum().backward()
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(em.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5, atol=1e-5)
