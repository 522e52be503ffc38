"""In-place shape methods (unsqueeze_, squeeze_, t_, transpose_, swapdims_, swapaxes_, as_strided_,
resize_, resize_as_) against torch: geometry, values, version, autograd, errors; and under
ember.compile (a graph break: the method runs eagerly, later ops see the new shape)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

CASES = [
    ("unsqueeze_", (3, 4), (1,)),
    ("unsqueeze_", (3,), (-1,)),
    ("squeeze_", (3, 1, 4), ()),
    ("squeeze_", (3, 1, 4), (1,)),
    ("t_", (3, 4), ()),
    ("transpose_", (2, 3, 4), (0, 2)),
    ("swapdims_", (2, 3, 4), (1, 2)),
    ("swapaxes_", (2, 3, 4), (0, 1)),
    ("as_strided_", (4, 6), ((3, 2), (6, 2), 1)),
]


@needs_torch
@pytest.mark.parametrize("name,shape,args", CASES)
def test_geometry_values_and_version_match_torch(name, shape, args):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    t, e = torch.tensor(a), ember.tensor(a)
    rt, re = getattr(t, name)(*args), getattr(e, name)(*args)
    assert rt is t and re is e
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert e._version == t._version == 1


@needs_torch
@pytest.mark.parametrize("name,shape,args", CASES[:-1])
def test_gradients_flow_through_the_new_geometry(name, shape, args):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    tl, el = torch.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    ty, ey = tl * 2, el * 2
    getattr(ty, name)(*args), getattr(ey, name)(*args)
    w = np.random.default_rng(2).standard_normal(tuple(ty.shape)).astype(np.float32)
    (ty * torch.tensor(w)).sum().backward()
    (ey * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(el.grad.numpy(), tl.grad.numpy(), rtol=1e-6)


def test_a_leaf_that_requires_grad_is_refused():
    x = ember.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.unsqueeze_(0)
    with ember.no_grad():
        x.unsqueeze_(0)                      # as in PyTorch: allowed without grad mode
    assert tuple(x.shape) == (1, 3)


def test_a_view_keeps_its_base():
    z = ember.randn(2, 3)
    v = z[0]
    v.unsqueeze_(0)
    assert v._base is z and tuple(v.shape) == (1, 3)
    v.mul_(0)
    assert float(z[0].abs().sum()) == 0.0


def test_resize_like_torch():
    x = ember.arange(6.0)
    x.resize_(2, 3)
    assert tuple(x.shape) == (2, 3)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    x.resize_(4)
    np.testing.assert_array_equal(x.numpy(), np.arange(4.0))
    x.resize_(3, 3)                          # grows: the old elements first
    assert tuple(x.shape) == (3, 3)
    np.testing.assert_array_equal(x.numpy().reshape(-1)[:4], np.arange(4.0))
    x.resize_as_(ember.zeros(2, 2))
    assert tuple(x.shape) == (2, 2)
    with pytest.raises(RuntimeError, match="require grad"):
        ember.randn(2, requires_grad=True).resize_(4)
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.randn(2).resize_(-1)


@pytest.mark.parametrize("fn", [
    lambda x: x.unsqueeze_(0).sum(0) * 2,
    lambda x: (x.t_(), x + 1)[1],
    lambda x: (x.resize_(x.numel()), x.cumsum(0))[1],
    lambda x: x.mul(2).transpose_(0, 1).contiguous().view(-1),
])
def test_compiled_functions_see_the_new_shape(fn):
    a = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    xe, xc = ember.tensor(a), ember.tensor(a)
    want = fn(xe)
    got = ember.compile(fn)(xc)
    assert tuple(got.shape) == tuple(want.shape) and tuple(xc.shape) == tuple(xe.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
