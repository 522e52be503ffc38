"""Sizes that a graph compiled for symbolic sizes computes in Python (its size outputs: what the
forward saves for the backward; a size read back from a dimension linear in it) are exact
integers.

They were ``sympy.lambdify(..., modules="math")`` functions: ``(n + 2) // 3`` is sympy's
``floor(n/3 + 2/3)``, evaluated in floats -- ``7/3 + 2/3 == 2.9999999999999996`` -- so for
n = 7, 10, 100, ... the size came out one short (the backward of a slice by it raised
"returned an invalid gradient ... got [2, 8] but expected shape compatible with [2, 7]").
Found by test_fuzz_functional_s45.py (dynamic mode, resized second call).
"""
import numpy as np
import pytest

import ember
from ember.fx.experimental.symbolic_shapes import sympy
from ember.inductor.dynamic import _int_fn


def test_size_function_floors_exactly():
    s = sympy.Symbol("s1", integer=True, positive=True)
    e = s - sympy.floor(s / 3 + sympy.Rational(2, 3))
    fn = _int_fn([s], e)
    for n in [6, 7, 10, 13, 100, 301, 10 ** 15 + 1]:
        assert fn(n) == n - (n + 2) // 3, n


@pytest.mark.parametrize("n", [7, 10, 100])
def test_slice_by_a_ceil_division_trains_under_dynamic(n):
    def f(x):
        return (x[:, : (x.shape[1] + 2) // 3] * 2).sin()

    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for m in [6, n]:          # compiled at 6 (exact in floats too), then called at n
        a = np.random.default_rng(m).uniform(-2, 2, (2, m))
        x1 = ember.from_numpy(a).requires_grad_(True)
        x2 = ember.from_numpy(a.copy()).requires_grad_(True)
        got, want = c(x1), f(x2)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-12)
    assert ember.dynamo.counters["recompiles"] == 0
