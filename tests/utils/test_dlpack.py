"""DLPack exchange: ember tensors export through __dlpack__, ember.from_dlpack /
ember.utils.dlpack import numpy and PyTorch tensors and raw capsules -- memory shared."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils.dlpack import from_dlpack, to_dlpack
from oracle import needs_torch, torch

RNG = np.random.default_rng(23)


def test_numpy_reads_and_writes_an_ember_tensor():
    t = ember.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    view = t.t()
    a = np.from_dlpack(view)
    assert a.shape == (4, 3) and a.strides == (4, 16)
    a[1, 2] = 42.0
    assert t[2, 1].item() == 42.0
    assert ember.from_dlpack(a) is not None and ember.from_dlpack(t) is t


def test_capsules_and_refusals():
    t = ember.tensor(RNG.integers(0, 9, size=5))
    back = from_dlpack(to_dlpack(t))
    back[0] = -3
    assert t[0].item() == -3 and back.dtype is ember.int64
    with pytest.raises(BufferError, match="require gradient"):
        np.from_dlpack(ember.ones(2, requires_grad=True))
    bf = ember.ones(2, dtype=ember.bfloat16)
    try:
        a = np.from_dlpack(bf)
    except BufferError as e:            # numpy < 2.5: its DLPack import has no bfloat16
        assert "bfloat16" in str(e)
    else:                               # numpy >= 2.5 takes it as ml_dtypes' bfloat16: the same memory
        assert str(a.dtype) == "bfloat16" and a.astype(np.float32).tolist() == [1.0, 1.0]
        a[0] = 3
        assert bf[0].item() == 3.0
    assert ember.ones(1).__dlpack_device__()[1] == 0


@needs_torch
def test_exchange_with_pytorch_both_ways():
    t = ember.tensor(RNG.standard_normal((2, 5)))
    tt = torch.from_dlpack(t)
    tt[0, 0] = 7.0
    assert t[0, 0].item() == 7.0 and tt.dtype == torch.float64
    src = torch.arange(6, dtype=torch.int32).view(2, 3)
    e = ember.from_dlpack(src)
    src[1, 2] = 100
    assert e.dtype is ember.int32 and e[1, 2].item() == 100
    z = torch.randn(3, dtype=torch.complex64)
    assert ember.allclose(ember.from_dlpack(z), ember.tensor(z.numpy()))


@needs_torch
def test_legacy_capsule_is_copied_with_a_warning():
    src = torch.arange(4.0)
    with pytest.warns(UserWarning, match="read-only memory"):
        e = from_dlpack(torch.utils.dlpack.to_dlpack(src))
    e[0] = 9.0
    assert src[0].item() == 0.0 and e.tolist() == [9.0, 1.0, 2.0, 3.0]
