"""Shared helpers: trace a function of prims, compile it, compare with eager."""
import contextlib

import numpy as np

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor import compile_fx
from ember.tensor import _make

RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    return _make(RNG.uniform(lo, hi, size=shape).astype(dtype))


def randint(*shape, dtype=np.int32, lo=-50, hi=50):
    a = RNG.integers(lo, hi, size=shape).astype(dtype)
    return _make(a)


def compile_and_run(fn, *inputs, allow_fallback=(), dynamic=False, gradients=False):
    """(compiled function, compiled outputs, eager outputs) as flat lists of numpy arrays.
    ``gradients``: compile the graph as the aot runtime does a backward graph (its outputs are
    gradients, whose layout the caller does not see)."""
    gm = make_fx(fn)(*inputs)
    if gradients:
        for n in gm.graph.nodes:
            if n.op == "output":
                n.meta["gradients"] = True
    cf = compile_fx(gm, list(inputs), dynamic=dynamic)
    assert cf.compiled is not None, cf.eager_reason
    for fb in cf.compiled.fallbacks:
        assert any(fb.startswith("prims." + a) for a in allow_fallback), f"unexpected fallback: {fb}"
    out = cf(*inputs)
    ref = gm(*inputs)
    return cf, _flat(out), _flat(ref)


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flat(v)]
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _flat(x[k])]
    return [x.numpy() if isinstance(x, ember.Tensor) else x]


def assert_same(got, want, rtol=0.0, atol=0.0):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)


def count_kernels(cf):
    return cf.compiled.n_kernels


@contextlib.contextmanager
def patched_config(**values):
    """``ember.inductor.config`` knobs set for a ``with`` block, restored after it."""
    from ember.inductor import config
    old = {k: getattr(config, k) for k in values}
    for k, v in values.items():
        setattr(config, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(config, k, v)
