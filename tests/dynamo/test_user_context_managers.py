"""``with`` blocks over user context managers (@contextlib.contextmanager functions and methods,
classes with __enter__/__exit__) are traced into the graph, in the order eager runs them."""
import contextlib

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, check, random_tensor

_rng = np.random.default_rng(5)


def _x(*shape):
    return random_tensor(_rng, *shape)



@contextlib.contextmanager
def scaled(t, k):
    # code before the yield, the yielded value, and code after it (in a finally) all traced
    base = t * k
    try:
        yield base
    finally:
        STATE[1] = k


STATE = [0, None]


class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit")
        return False


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)
        self.depth = 0

    @contextlib.contextmanager
    def deeper(self):
        self.depth += 1
        yield self.depth
        self.depth -= 1

    def forward(self, x):
        with self.deeper() as d:
            y = self.lin(x) * d
        return y, self.depth


def test_contextmanager_function():
    def f(x):
        with scaled(x, 3.0) as b:
            y = b.sin()
        with scaled(y, 0.5):
            y = y + 1
        return y
    STATE[:] = [0, None]
    check(f, lambda: (_x(3, 4),))
    assert STATE == [0, 0.5]
    assert_one_graph(f, _x(3, 4))


def test_contextmanager_method_on_a_module():
    net = Net()
    x = _x(2, 4)
    expected = net(x)
    got = ember.compile(net, backend=CountingBackend())(x)
    np.testing.assert_allclose(got[0].detach().numpy(), expected[0].detach().numpy(), rtol=1e-6)
    assert got[1] == expected[1] == 0 and net.depth == 0
    assert_one_graph(net, x)


def test_class_context_manager_made_in_the_frame_and_outside():
    outside_log = []
    outside = Recorder(outside_log)

    def f(x):
        log = []
        with Recorder(log) as r:
            y = x.cos()
            r.log.append("body")
        with outside:
            y = y * 2
        return y, log
    x = _x(5)
    expected = f(x)
    n = len(outside_log)
    got = ember.compile(f, backend=CountingBackend())(x)
    np.testing.assert_allclose(got[0].numpy(), expected[0].numpy(), rtol=1e-6)
    assert got[1] == expected[1] == ["enter", "body", "exit"]
    assert outside_log[n:] == outside_log[:n] == ["enter", "exit"]
    assert_one_graph(f, x)


def test_break_inside_a_user_block_runs_eagerly_and_matches():
    def f(x):
        with scaled(x, 2.0) as b:
            v = b.sum().item()          # a graph break inside the block
        return x * v
    STATE[:] = [0, None]
    x = _x(3)
    expected = f(x)
    got = ember.compile(f, backend=CountingBackend())(x)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    assert STATE == [0, 2.0]


def test_generator_that_yields_twice_raises_like_eager():
    @contextlib.contextmanager
    def twice():
        yield
        yield

    def f(x):
        with twice():
            y = x + 1
        return y
    with pytest.raises(RuntimeError, match="didn't stop"):
        f(_x(2))
    with pytest.raises(RuntimeError, match="didn't stop"):
        ember.compile(f, backend=CountingBackend())(_x(2))


def test_exception_in_block_reaches_the_manager():
    seen = []

    @contextlib.contextmanager
    def catch():
        try:
            yield
        except ValueError as e:
            seen.append(str(e))

    def f(x):
        with catch():
            y = x + 1
            if x.shape[0] == 2:
                raise ValueError("two")
        return x * 3
    x = _x(2)
    expected = f(x)
    got = ember.compile(f, backend=CountingBackend())(x)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    assert seen == ["two", "two"]


@contextlib.contextmanager
def _logged(log, name):
    log.append(f"{name} in")
    yield name.upper()
    log.append(f"{name} out")


def test_contextmanager_order_nested():
    def f(x):
        log = []
        with _logged(log, "a") as a, _logged(log, "b") as b:
            log.append(a + b)
            y = x.exp()
        return y, log
    check(f, lambda: (_x(3),))
    assert f(_x(3))[1] == ["a in", "b in", "AB", "b out", "a out"]
    assert_one_graph(f, _x(3))


def test_contextlib_suppress_is_traced_and_suppresses_eagerly():
    def f(x, d):
        with contextlib.suppress(KeyError):
            y = x * d["k"]
        return x + 1

    x = _x(3)
    ex = dynamo.explain(f)(x, {"k": 2.0})
    assert ex.graph_break_count <= 1            # building the suppress object (a C-backed class)
    cf = ember.compile(f, backend=CountingBackend())
    np.testing.assert_allclose(cf(x, {"k": 2.0}).numpy(), f(x, {"k": 2.0}).numpy())
    np.testing.assert_allclose(cf(x, {}).numpy(), f(x, {}).numpy())      # KeyError suppressed


def test_suppress_sees_an_exception_the_graph_raises():
    # the graph raises at run time inside the block (an index out of range, not known while
    # tracing): the frame re-runs eagerly and contextlib.suppress swallows it, as in eager
    def f(x, idx):
        y = x + 1
        with contextlib.suppress(IndexError):
            y = y + x[idx].sum()
        return y
    x = _x(4)
    idx = ember.tensor([0, 2])
    cf = ember.compile(f)
    np.testing.assert_allclose(cf(x, idx).numpy(), f(x, idx).numpy(), rtol=1e-6)
    bad = ember.tensor([0, 7])
    np.testing.assert_allclose(cf(x, bad).numpy(), f(x, bad).numpy(), rtol=1e-6)
