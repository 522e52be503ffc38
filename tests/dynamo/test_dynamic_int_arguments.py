"""An int argument that changes between calls is traced as a symbolic size after the first
recompile (like torch's SymInt inputs): a decoding step's position used to slice a cache does
not compile again for every new position."""
import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend


def _run(fn, make_args, values, backend):
    for v in values:
        args = make_args(v)
        want = fn(*args)
        got = backend(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for a, b in zip(want, got):
            if isinstance(a, int):
                assert type(b) is int and a == b
            else:
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6)


def test_position_slices_a_cache_without_recompiling():
    buf = ember.randn(32, 4)

    def step(x, start):
        return x * buf[start:start + x.shape[1]], start

    cnt = CountingBackend()
    cf = ember.compile(step, backend=cnt)
    _run(step, lambda s: (ember.randn(2, 1, 4), s), [5, 6, 7, 8, 9, 12], cf)
    assert cnt.frame_count == 2        # the first value, then one symbolic entry


def test_int_in_float_arithmetic_and_compiled_values():
    def f(x, n):
        return x * n + x.view(-1)[n:].sum(), n

    for backend in ("aot_eager", "inductor"):
        dynamo.reset()
        cnt = CountingBackend()
        inner = dynamo.lookup_backend(backend)

        def counting(gm, ex, inner=inner):
            cnt.graphs.append(gm)
            return inner(gm, ex)
        cf = ember.compile(f, backend=counting)
        _run(f, lambda s: (ember.randn(4, 4),), [], cf)
        _run(f, lambda s: (ember.randn(4, 4), s), [3, 5, 7, 11], cf)
        assert cnt.frame_count == 2


def test_small_and_negative_values_still_correct():
    """0 and 1 are specialised (as sizes are), negative values are unspecialized numbers:
    both recompile and give eager's values."""
    buf = ember.randn(16, 3)

    def f(x, k):
        return x + buf[k]

    cf = ember.compile(f, backend="eager")
    _run(f, lambda k: (ember.randn(3),), [], cf)
    _run(f, lambda k: (ember.randn(3), k), [4, 5, 1, 0, -2, -3, 9], cf)
