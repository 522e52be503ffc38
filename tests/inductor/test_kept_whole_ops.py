"""Ops kept whole on purpose (``ember.prims.coverage.EXTERN``) in the inductor: a LAPACK
factorisation runs as an extern call to its eager kernel inside the compiled graph; an op whose
output size depends on the data (nonzero) is never compiled -- the example's size would be
baked into every kernel after it -- so the graph runs eagerly, with the right values for an
input of another count."""
import numpy as np

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor.compile_fx import compile_fx
from ember.prims import decomposition_table


def _compiled(f, x):
    gm = make_fx(f, decomposition_table=decomposition_table())(x)
    return compile_fx(gm, [x])


def test_lapack_op_is_an_extern_call():
    g = np.random.default_rng(1)
    m = g.standard_normal((4, 4))
    x = ember.tensor(m @ m.T + 4 * np.eye(4))

    def f(a):
        return ember.linalg.inv(a) * 2 + 1

    c = _compiled(f, x)
    assert getattr(c, "eager_reason", None) is None
    y = ember.tensor(m.T @ m + 3 * np.eye(4))
    np.testing.assert_allclose(c(y).numpy(), f(y).numpy(), rtol=1e-12)


def test_data_dependent_op_is_not_compiled():
    def f(a):
        return ember.nonzero(a > 0).sum() * 1.0

    x = ember.tensor(np.array([1.0, -1.0, 2.0, -3.0, 4.0, 5.0]))
    c = _compiled(f, x)
    assert "nonzero" in (c.eager_reason or "")
    y = ember.tensor(np.array([-1.0, 1.0, -2.0, -3.0, -4.0, 5.0]))     # two positives, not four
    np.testing.assert_array_equal(c(y).numpy(), f(y).numpy())
