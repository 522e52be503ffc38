"""Eager ``scatter_reduce(amax/amin, include_self=False)`` starts a float slot from -inf/+inf, as
PyTorch: a slot only -inf (amax) / +inf (amin) values reach is -inf/+inf (it held the finfo bound)."""
import numpy as np
import pytest

import ember


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("reduce,v", [("amax", float("-inf")), ("amin", float("inf"))])
def test_infinite_only_slot(dtype, reduce, v):
    dt = getattr(ember, dtype)
    x = ember.zeros(4, dtype=dt)
    src = ember.tensor([v, v, 2.0, -3.0], dtype=dt)
    out = x.scatter_reduce(0, ember.tensor([1, 1, 2, 2]), src, reduce, include_self=False)
    got = out.float().numpy()
    assert got[1] == v
    assert got[2] == (2.0 if reduce == "amax" else -3.0)
    assert got[0] == 0 and got[3] == 0


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(6).astype(np.float32)
    src = np.array([-np.inf, -np.inf, 1.5, np.nan, -2.0, np.inf], np.float32)
    idx = np.array([0, 0, 2, 3, 3, 5])
    for reduce in ("amax", "amin"):
        want = torch.from_numpy(a).scatter_reduce(0, torch.from_numpy(idx), torch.from_numpy(src), reduce,
                                                  include_self=False).numpy()
        got = ember.from_numpy(a).scatter_reduce(0, ember.from_numpy(idx), ember.from_numpy(src), reduce,
                                                 include_self=False).numpy()
        np.testing.assert_array_equal(got, want)
