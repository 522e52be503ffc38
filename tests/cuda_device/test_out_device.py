"""``out=`` across devices (ember/ops/_out.py), on the numpy-backed cupy stand-in: an out on
another device than the result is refused with torch's message; an out on the result's
device is written (and resized) like a CPU one."""
import warnings

import numpy as np
import pytest

import ember


def test_out_on_another_device_is_refused(fake_cupy):
    x = ember.randn(3, 4)
    z = ember.empty(3, 4, device="cuda")
    with pytest.raises(RuntimeError, match="Expected out tensor to have device cpu, but got cuda:0 instead"):
        ember.add(x, 1, out=z)
    with pytest.raises(RuntimeError, match="Expected out tensor to have device cuda:0, but got cpu instead"):
        ember.mul(x.to("cuda"), 2, out=ember.empty(3, 4))


def test_out_on_the_device_is_written_and_resized(fake_cupy):
    x = ember.randn(3, 4)
    z = ember.empty(3, 4, device="cuda")
    assert ember.add(x.to("cuda"), 1, out=z) is z
    np.testing.assert_allclose(z.cpu().numpy(), x.numpy() + 1, rtol=1e-6)
    w = ember.empty(2, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.cat([x.to("cuda"), x.to("cuda")], out=w)
    assert tuple(w.shape) == (6, 4) and w.device.type == "cuda"
    np.testing.assert_allclose(w.cpu().numpy(), np.concatenate([x.numpy(), x.numpy()]), rtol=1e-6)
