"""Pointwise ops kept whole (their numpy kernels run as extern calls: ``prims.coverage.EXTERN``)
compile under ``dynamic=True``: their output layout comes from the inputs' symbolic sizes
(``lowering.WHOLE_OP_LAYOUTS``), one graph for every size."""
import numpy as np
import pytest

import ember

CASES = {
    "i0": lambda x, y: ember.i0(x) * 2 + 1,
    "special_i1e": lambda x, y: ember.special.i1e(x) - y,
    "special_erfcx": lambda x, y: ember.special.erfcx(x.abs()) + y,
    "polygamma": lambda x, y: ember.polygamma(1, x.abs() + 0.5) * y,
    "special_zeta": lambda x, y: ember.special.zeta(x.abs() + 1.5, y.abs() + 0.5),
    "special_chebyshev_polynomial_t": lambda x, y: ember.special.chebyshev_polynomial_t(x, 3) + y,
    "igamma": lambda x, y: ember.igamma(x.abs() + 0.1, y.abs() + 0.1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pointwise_whole_op_compiles_once_for_every_size(name, strict_dynamic):
    fn = CASES[name]
    ember.compiler.reset()
    from ember.dynamo.convert_frame import counters
    before = counters["frames"]
    cf = ember.compile(fn, dynamic=True)
    rng = np.random.default_rng()
    for n in (3, 5, 8):
        x = ember.tensor(rng.standard_normal((n, 4)).astype(np.float32))
        y = ember.tensor(rng.standard_normal((1, 4)).astype(np.float32))
        np.testing.assert_allclose(cf(x, y).numpy(), fn(x, y).numpy(), rtol=1e-6, atol=1e-6)
    assert counters["frames"] - before == 1
