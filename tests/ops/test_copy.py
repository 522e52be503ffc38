"""copy_, fill_, zero_ against PyTorch: values, broadcasting, casting, version
bumps and gradients through the written tensor."""
import numpy as np
import pytest

import ember
from oracle import assert_close, needs_torch, torch

pytestmark = needs_torch


@pytest.mark.parametrize("src_shape", [(3,), (2, 3), (1, 3), ()])
@pytest.mark.parametrize("dst_dtype", ["float32", "float64", "int64"])
def test_copy_values(src_shape, dst_dtype):
    v = np.random.default_rng().standard_normal(src_shape).astype(np.float32) * 3
    e = ember.zeros(2, 3, dtype=getattr(ember, dst_dtype))
    t = torch.zeros(2, 3, dtype=getattr(torch, dst_dtype))
    e.copy_(ember.tensor(v))
    t.copy_(torch.tensor(v))
    assert_close(e, t)
    assert e._version == 1


def test_copy_shape_mismatch():
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember.zeros(2, 3).copy_(ember.ones(4))


def test_copy_gradient_routes_to_source():
    v = np.random.default_rng().standard_normal(3).astype(np.float32)
    cot = np.random.default_rng().standard_normal((2, 3)).astype(np.float32)
    grads = []
    for m in (ember, torch):
        a = m.tensor(v, requires_grad=True)
        h = m.zeros(2, 3) * a.sum()        # non-leaf destination
        h.copy_(a * 2)
        (h * m.tensor(cot)).sum().backward()
        grads.append(a.grad)
    assert_close(grads[0], grads[1])


def test_fill_and_zero():
    e = ember.randn(2, 2)
    e.fill_(1.5)
    assert_close(e, np.full((2, 2), 1.5, dtype=np.float32))
    e.zero_()
    assert_close(e, np.zeros((2, 2), dtype=np.float32))
    assert e._version == 2
    e.fill_(ember.tensor(3.0))
    assert e.sum().item() == 12.0
    with pytest.raises(RuntimeError, match="0-dimension"):
        e.fill_(ember.ones(2))


def test_fill_on_leaf_requiring_grad_errors():
    a = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        a.fill_(0)
    with ember.no_grad():
        a.zero_()
    assert a.sum().item() == 0
