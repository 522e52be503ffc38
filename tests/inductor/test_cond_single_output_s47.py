"""A compiled ``ember.cond`` whose branches return one tensor: the inductor's extern returned a
1-tuple, read as an array with a leading dim of 1 (a (2, 3) result came back (1, 2, 3), and the
backward then failed its size guard)."""
import numpy as np
import pytest

import ember


def _cond(x, w):
    return ember.cond(x.sum() > 0, lambda x, w: (x @ w).sin(), lambda x, w: (x @ w).cos(), (x, w))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_single_output_cond_forward_and_backward_match_eager(sign):
    rng = np.random.default_rng()
    x = ember.tensor(np.abs(rng.standard_normal((2, 4))).astype(np.float32) * sign)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    ember.compiler.reset()
    results = []
    for fn in (_cond, ember.compile(_cond, backend="inductor")):
        w = ember.tensor(w0, requires_grad=True)
        out = fn(x, w)
        out.sum().backward()
        results.append((out.detach().numpy(), w.grad.numpy()))
    (eo, eg), (co, cg) = results
    assert co.shape == eo.shape == (2, 3)
    np.testing.assert_allclose(co, eo, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cg, eg, rtol=1e-5, atol=1e-5)
