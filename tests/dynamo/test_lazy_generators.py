"""Generators are traced lazily: each ``next`` runs the generator's frame to its next ``yield``
(``variables/lists.GeneratorVariable``), and ``map``/``filter`` -- and ``enumerate``/``zip`` of a
generator -- compute each item when it is asked for.

Why: a generator used to run to its end when it was called, so every item was computed before
the consumer's loop body ran. A body that writes in place what the generator reads for its next
item (``for y in gen(): x.add_(y)``) then gave other values than eager -- a silent wrong answer.
Run lazily, user generator functions (a module's ``blocks()`` method) are captured too (they
broke the graph: "calling a user generator function").
"""
import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import assert_same, check


def _x():
    return (ember.from_numpy(np.random.default_rng().standard_normal(4).astype(np.float32)),)


def scaled(x, n):
    for i in range(n):
        yield x * i


def test_user_generator_sees_the_loop_bodys_writes():
    def f(x):
        for y in scaled(x, 3):
            x.add_(y)
        return x
    check(f, _x)


def test_nested_generator_and_generator_expression_see_the_writes():
    def f(x):
        def gen():
            for i in range(3):
                yield x * i
        for y in gen():
            x.add_(y)
        for y in (x * i for i in range(1, 3)):
            x.mul_(y.tanh())
        return x
    check(f, _x)


def test_map_and_filter_are_lazy():
    def f(x):
        for y in map(lambda i: x * i, range(3)):
            x.add_(y)
        for y in filter(lambda t: True, map(lambda i: x + i, range(2))):
            x.sub_(y * 0.25)
        return x
    check(f, _x)


def test_enumerate_and_zip_of_a_generator_are_lazy():
    def f(x):
        for i, y in enumerate(scaled(x, 3), start=1):
            x.add_(y * i)
        for a, y in zip([1.0, 2.0, 3.0, 4.0], scaled(x, 3)):     # the generator is the shorter
            x.add_(y * a)
        for y, a in zip(scaled(x, 5), [0.5, 0.25]):              # the list is the shorter
            x.add_(y * a)
        return x
    check(f, _x)


def test_generators_consumed_whole():
    def f(x):
        return (sum(scaled(x, 4)), ember.stack(list(scaled(x, 2))), tuple(x * i for i in range(3))[2],
                ember.cat([t for t in scaled(x, 3)]), max(len(list(scaled(x, 2))), 1))
    check(f, _x)


def test_next_with_and_without_default():
    def f(x):
        g = scaled(x, 3)
        a, b = next(g), next(g)
        c = next(g)
        done = next(g, None) is None
        try:
            next(g)
            raised = False
        except StopIteration:
            raised = True
        return a + b + c, done, raised
    check(f, _x)


def test_membership_consumes_up_to_the_match():
    def f(x):
        g = (i for i in range(10))
        found = 3 in g
        return x * next(g), found          # eager: 4, the item after the match
    check(f, _x)


def boom(x):
    yield x * 2
    raise ValueError("boom")


def test_exception_in_a_generator_surfaces_at_the_consumers_next():
    def f(x):
        out = x
        try:
            for y in boom(x):
                out = out + y                  # runs once before the generator raises, as eagerly
        except ValueError:
            out = out * 10
        return out
    check(f, _x)


class _Blocks(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = ember.nn.ModuleList([ember.nn.Linear(4, 4) for _ in range(3)])

    def blocks(self):
        for layer in self.layers:
            yield layer

    def forward(self, x):
        for layer in self.blocks():
            x = layer(x).relu()
        return x


def test_module_generator_method_is_one_graph():
    m = _Blocks()
    check(lambda x: m(x), lambda: (ember.randn(2, 4),))
    ex = dynamo.explain(lambda x: m(x))(ember.randn(2, 4))
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


def guarded(x):
    try:
        yield x
        yield x * 2
    finally:
        x.add_(1.0)           # a cleanup that runs when the generator ends (or is closed)


@pytest.mark.parametrize("take", [1, 3])
def test_yield_inside_try_runs_eagerly_and_correctly(take):
    """A generator paused inside a try/with block leaves a cleanup for its close: not traced
    (the frame runs eagerly), so an early stop still runs the finally block as in eager."""
    def f(x):
        out = []
        for i, y in enumerate(guarded(x)):
            out.append(y * 1.0)
            if i + 1 >= take:
                break
        return out[0], x
    x = _x()[0]
    want = f(x.clone())
    dynamo.reset()
    got = ember.compile(f, backend="eager")(x.clone())
    assert_same(want, got)


def test_generator_alive_across_a_graph_break_is_correct():
    def f(x):
        for y in scaled(x, 3):
            if y.sum().item() > 1e9:             # data-dependent: a graph break in the body
                x = x * 0
            x.add_(y)
        return x
    x = _x()[0]
    want = f(x.clone())
    dynamo.reset()
    got = ember.compile(f, backend="eager")(x.clone())
    assert_same(want, got)


def test_itertools_over_generators():
    import itertools

    def f(x):
        a = list(itertools.islice(scaled(x, 10), 2, 7, 2))
        b = list(itertools.chain(scaled(x, 2), [x + 1], scaled(x, 2)))
        c = list(itertools.starmap(lambda p, q: p * q, zip(scaled(x, 3), [1.0, 2.0, 3.0])))
        for y in itertools.islice(scaled(x, 100), 3):      # stepped three times, not a hundred
            x.add_(y)
        return ember.stack(a), ember.stack(b), ember.stack(c), x, all(True for _ in scaled(x, 2))
    check(f, _x)


def test_any_stops_at_the_deciding_item():
    def f(x):
        def items():
            yield x * 0 + 1
            raise ValueError("eager never gets here")
        return x * 2, any(True for _ in items())
    check(f, _x)
