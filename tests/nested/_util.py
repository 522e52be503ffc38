"""Helpers for the ember.nested tests: random ragged batches built identically in ember and torch."""
from __future__ import annotations

import numpy as np

import ember

LAYOUTS = ("strided", "jagged")
DTYPES = ("float32", "float64")
TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-10)}


def lengths(rng, b=None):
    """Random sequence lengths, always including a 0 and a 1 (the edge cases) when b >= 3."""
    b = b or int(rng.integers(3, 6))
    ls = list(rng.integers(0, 6, size=b))
    ls[0], ls[1] = 1, 0
    rng.shuffle(ls)
    return [int(x) for x in ls]


def arrays(rng, lens, tail, dtype="float64"):
    return [rng.standard_normal((n,) + tuple(tail)).astype(dtype) for n in lens]


def pair(arrs, layout, requires_grad=False):
    """The same nested tensor in ember and torch (``nested_tensor``: a leaf)."""
    import torch
    e = ember.nested.nested_tensor([ember.tensor(a) for a in arrs], layout=getattr(ember, layout),
                                   requires_grad=requires_grad)
    t = torch.nested.nested_tensor([torch.tensor(a) for a in arrs], layout=getattr(torch, layout),
                                   requires_grad=requires_grad)
    return e, t


def comps(nt):
    return [c.detach().numpy() if hasattr(c, "numpy") else c for c in nt.unbind()]


def assert_nested_close(e, t, dtype="float64"):
    assert e.is_nested and t.is_nested
    ec, tc = e.unbind(), t.unbind()
    assert len(ec) == len(tc)
    for a, b in zip(ec, tc):
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).replace("ember.", "") == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL[dtype])


def as_np(x):
    return x.detach().numpy()
