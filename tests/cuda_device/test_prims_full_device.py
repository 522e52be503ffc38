"""``prims.full`` on the cuda device (the cupy stand-in): the fill value reaches ``cupy.full``
as a numpy scalar, never a host 0-d array (which cupy calls refuse; a compiled cuda graph's
eager fallback ran ``prims.full`` and failed there)."""
import numpy as np
import pytest

import ember
import ember.prims as P


@pytest.mark.parametrize("dtype,value,want", [
    (ember.float32, 1.5, 1.5), (ember.float16, 1.0001, np.float16(1.0001)), (ember.float64, -2.25, -2.25),
    (ember.int32, 3, 3), (ember.int64, -7, -7), (ember.int8, 300, np.int8(44)), (ember.bool, 2, True),
    (ember.float32, 3, 3.0)])
def test_full_on_the_device(fake_cupy, dtype, value, want):
    t = P.full([2, 3], value, dtype, device="cuda")
    assert t.device.type == "cuda" and t.dtype is dtype
    got = t.cpu().numpy()
    assert got.shape == (2, 3) and got.dtype == dtype.np
    np.testing.assert_array_equal(got, np.full((2, 3), want, dtype=dtype.np))


def test_full_on_the_host_unchanged():
    t = P.full([4], 2.5, ember.float32)
    assert type(t._data) is np.ndarray
    np.testing.assert_array_equal(t.numpy(), np.full(4, 2.5, np.float32))
