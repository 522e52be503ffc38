"""Sizes evaluated at run time are computed in integers (``fx.experimental.exact_eval``): sympy's
``lambdify(modules="math")`` computed ``floor(s/3 + 2/3)`` -- ``(n + 2) // 3``, a ceil_mode
pooling size -- in floats, one short at n = 7. Silent wrong answers it made: a size guard that
passed where it must fail (a graph compiled for H=6 reused at H=7: a pooling output with a row
too many), an int returned by a compiled frame, a dynamic graph's saved sizes."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.fx.experimental.exact_eval import exact_function
from ember.fx.experimental.symbolic_shapes import sympy


def _s(*names):
    return [sympy.Symbol(n, integer=True, positive=True) for n in names]


@pytest.mark.parametrize("n", range(2, 40))
def test_floor_and_ceiling_of_quotients_are_exact(n):
    (s,) = _s("s0")
    for e, want in [(sympy.floor(s / 3 + sympy.Rational(2, 3)), (n + 2) // 3),
                    (sympy.ceiling(s / 3), -(-n // 3)),
                    (3 * sympy.floor(s / 3 + sympy.Rational(2, 3)) < s + 1, 3 * ((n + 2) // 3) < n + 1),
                    (sympy.Eq(sympy.Mod(s, 4), 1), n % 4 == 1),
                    (sympy.Max(s - 5, 2) * sympy.Min(s, 7), max(n - 5, 2) * min(n, 7))]:
        got = exact_function([s], e)(n)
        assert got == want and type(got) is type(want), (e, n, got, want)


def test_what_cannot_be_printed_is_evaluated_by_sympy():
    s, t = _s("s0", "s1")
    f = exact_function([s, t], s / t + sympy.Rational(1, 2) < 2)     # a true division
    assert f(1, 2) is True and f(3, 2) is False and f(7, 2) is False


def test_ceil_mode_pool_guard_recompiles_for_the_size_it_does_not_hold():
    def f(a):
        return F.avg_pool2d(a, (2, 2), stride=(3, 1), padding=(1, 1), ceil_mode=True, count_include_pad=False)

    ember.dynamo.reset()
    c = ember.compile(f, dynamic=True)
    for shp in [(1, 6, 7), (1, 7, 9), (1, 9, 5), (1, 10, 6)]:
        x = ember.from_numpy(np.random.default_rng(0).uniform(-2, 2, shp))
        got, want = c(x), f(x)
        assert tuple(got.shape) == tuple(want.shape), shp
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_returned_size_expression_is_exact():
    def f(x):
        return x * 2, (x.shape[-1] + 2) // 3

    ember.dynamo.reset()
    c = ember.compile(f, dynamic=True)
    for n in (4, 7, 10, 100):
        assert c(ember.randn(n))[1] == (n + 2) // 3
