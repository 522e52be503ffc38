"""NumPy on Python constants inside compiled frames is folded while tracing (one graph, values as
eager); NumPy on tensors or arrays, and np.random draws, still break the graph."""
import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, check, random_tensor

_rng = np.random.default_rng(3)
SCALE = np.float32(1.5)


def _x(*shape):
    return random_tensor(_rng, *shape)


def folded(x):
    a = x * np.float32(2.0) + np.sqrt(2.0) + np.prod(x.shape) + SCALE
    b = a.clamp(max=float(np.finfo(np.float32).max)) * np.exp(np.float64(0.5)).item()
    n = np.int64(3) // 2
    return b + np.float64(3).astype(np.float32) + np.pi + n + np.iinfo(np.int8).max, np.dtype("float32").itemsize


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_numpy_on_constants_folds_intoassert_one_graph(backend):
    if backend == "eager":
        check(folded, lambda: (_x(3, 4),))
    x = _x(3, 4)
    got = ember.compile(folded, backend=backend)(x)
    want = folded(x)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
    assert got[0].dtype == want[0].dtype and got[1] == want[1]
    assert_one_graph(folded, x)


def test_outside_numpy_scalar_is_guarded():
    global SCALE
    cnt = CountingBackend()
    cf = ember.compile(lambda x: x * SCALE, backend=cnt)
    x = _x(4)
    old = SCALE
    try:
        np.testing.assert_allclose(cf(x).numpy(), (x * 1.5).numpy())
        SCALE = np.float32(-2.0)
        np.testing.assert_allclose(cf(x).numpy(), (x * -2.0).numpy())
    finally:
        SCALE = old
    assert cnt.frame_count == 2


@pytest.mark.parametrize("case", ["random", "tensor", "array"])
def test_numpy_on_data_still_breaks(case):
    arr = np.arange(4.0)

    def draw(x):
        return x + np.random.rand()

    def on_tensor(x):
        return x + float(np.sum(x.numpy()))

    def on_array(x):
        return x + np.sum(arr)
    fn = {"random": draw, "tensor": on_tensor, "array": on_array}[case]
    ex = dynamo.explain(fn)(_x(4))
    assert ex.graph_break_count >= 1
    if case != "random":
        x = _x(4)
        np.testing.assert_allclose(ember.compile(fn, backend=CountingBackend())(x).numpy(), fn(x).numpy(),
                                   rtol=1e-6)
