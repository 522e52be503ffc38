"""Integer division by zero in compiled kernels raises as eager does.

Eager ember (and PyTorch) raise ``RuntimeError: ZeroDivisionError`` for an integer ``//``,
``%``, ``fmod`` or ``div(..., rounding_mode=...)`` by zero. Until session 52 the C++ kernels
returned 0 there: a silent wrong answer. Now the division helpers set the kernel's error flag
(as an out-of-range index does) and the wrapper raises after the call; the flag is cleared,
so the next call runs normally.
"""
import numpy as np
import pytest

import ember

OPS = {
    "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
    "fmod": lambda a, b: ember.fmod(a, b),
    "trunc_div": lambda a, b: ember.div(a, b, rounding_mode="trunc"),
    "floor_div": lambda a, b: ember.div(a, b, rounding_mode="floor"),
}


def _raises(fn, *args):
    try:
        fn(*args)
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", sorted(OPS))
def test_division_by_zero_raises_like_eager(op, dtype):
    fn = OPS[op]

    def f(a, b):
        return fn(a * 1, b) + 1          # (fused with other pointwise work)
    compiled = ember.compile(f)
    rng = np.random.default_rng(52)
    a = ember.tensor(rng.integers(1, 100, 37).astype(dtype))
    ok = rng.integers(1, 9, 37).astype(dtype)
    bad = ok.copy()
    bad[rng.integers(0, 37)] = 0
    for b in (ok, bad, ok):
        bt = ember.tensor(b)
        want = _raises(f, a, bt)
        got = _raises(compiled, a, bt)
        assert got == want, (b, got, want)
        if want is None:
            assert ember.equal(compiled(a, bt), f(a, bt))
    assert _raises(f, a, ember.tensor(bad)) == "ZeroDivisionError"


def test_float_division_by_zero_is_ieee():
    f = ember.compile(lambda a, b: (a // b, a % b, a / b))
    a, b = ember.tensor([1.0, -2.0, 0.0]), ember.tensor([0.0, 0.0, 0.0])
    for g, w in zip(f(a, b), (a // b, a % b, a / b)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
