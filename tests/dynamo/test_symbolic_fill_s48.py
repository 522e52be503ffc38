"""``ember.full(size, n)`` / ``ember.tensor(n)`` / ``scalar_tensor(n)`` of a symbolic int (a loop
counter after a per-step graph break, an int argument that changed) are traced as
``zeros(size, dtype) + n`` (session 48): the graph reads ``n``, so a new value reuses it (the
example run of ``full`` specialised each value: a decoding loop recompiled every step until
the recompile limit)."""
import warnings

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend


def _loop(cache, x, n, make):
    out = []
    for step in range(n):
        y = x * cache[:, step] + make(step)
        out.append(y)
        if (y > 1e6).all():       # a graph break in every step
            break
    return ember.stack(out)


_MAKERS = {
    "full": lambda s: ember.full((2,), s),
    "full_float": lambda s: ember.full((2,), s, dtype=ember.float32),
    "tensor": lambda s: ember.tensor(s),
    "as_tensor": lambda s: ember.as_tensor(s),
    "scalar_tensor": lambda s: ember.scalar_tensor(s),
    "full_kw": lambda s: ember.full(size=(1,), fill_value=s * 2 + 1),
}


@pytest.mark.parametrize("name", list(_MAKERS))
def test_loop_counter_fill_does_not_recompile_per_step(name):
    rng = np.random.default_rng(0)
    cache = ember.tensor(rng.standard_normal((2, 12)).astype(np.float32))
    x = ember.tensor(rng.standard_normal(2).astype(np.float32))
    make = _MAKERS[name]
    want = _loop(cache, x, 12, make)
    dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dynamo.RecompileLimitExceeded)
        got = ember.compile(_loop, backend=CountingBackend())(cache, x, 12, make)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert dynamo.counters["recompiles"] <= 3, dynamo.counters["recompiles"]


def _from_arg(x, n):
    return x + ember.full((3,), n), ember.tensor(n) * 2


def test_int_argument_fill_matches_eager_and_torch():
    """An int argument that changed (traced symbolic): values and dtypes as eager and torch."""
    torch = pytest.importorskip("torch")
    x = ember.tensor(np.random.default_rng(1).standard_normal(3).astype(np.float32))
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(_from_arg, backend=cnt)
    for n in (3, 5, 9, 40):
        got = cf(x, n)
        want = _from_arg(x, n)
        tw = (torch.tensor(x.numpy()) + torch.full((3,), n), torch.tensor(n) * 2)
        for g, w, t in zip(got, want, tw):
            assert g.dtype == w.dtype and str(t.dtype).split(".")[-1] == str(g.dtype).split(".")[-1]
            np.testing.assert_array_equal(g.numpy(), w.numpy())
            np.testing.assert_array_equal(g.numpy(), t.numpy())
    assert cnt.frame_count == 2       # static first call, then one symbolic graph
