"""Python ``random`` draws inside a compiled frame are made by the compiled code at run time, in
eager's order: results equal eager's for the same seed and the state afterwards is eager's.
A drawn value used in Python control flow is never specialised: the frame stays correct."""
import random

import numpy as np

import ember
from ember import dynamo

from ._util import assert_one_graph, assert_same, random_tensor

RNG = np.random.default_rng(5)


def noise(x):
    a = random.random()
    k = random.randint(1, 6)
    u = random.uniform(-1.0, 1.0)
    c = random.choice([0.5, 1.5, 2.5])
    return x * a + k - x * (u * 2) + c


def _compare(fn, *args, calls=4):
    cf = ember.compile(fn, backend="eager")
    for i in range(calls):
        random.seed(100 + i)
        expected = fn(*args)
        after_eager = random.random()
        random.seed(100 + i)
        got = cf(*args)
        after_compiled = random.random()
        assert_same(expected, got)
        assert after_eager == after_compiled


def test_draws_match_eager_and_state_after():
    x = random_tensor(RNG, 4)
    random.seed(0)
    assert_one_graph(noise, x)
    _compare(noise, x)


def test_draws_around_a_graph_break_keep_order():
    def f(x):
        a = random.random()
        y = x * a
        dynamo.graph_break()
        b = random.random()
        return y + b
    _compare(f, random_tensor(RNG, 3))


def test_drawn_value_in_control_flow_stays_correct():
    def f(x):
        if random.random() < 0.5:
            return x + 1
        return x - 1

    def g(x):
        n = random.randint(1, 3)
        return x * sum(range(n))
    _compare(f, random_tensor(RNG, 3), calls=8)
    _compare(g, random_tensor(RNG, 3), calls=6)


def test_returned_draw_and_rerun_in_try():
    def f(x, y):
        r = random.random()
        try:
            z = x + y               # raises for mismatched shapes: the frame re-runs eagerly
        except RuntimeError:
            z = x
        return z * r, r
    _compare(f, random_tensor(RNG, 3), random_tensor(RNG, 3))
    _compare(f, random_tensor(RNG, 3), random_tensor(RNG, 4))


def test_branch_on_a_drawn_number_breaks_at_the_branch_not_the_frame():
    """``if random.random() < p:``: the work before the branch is one graph, the branch is
    decided after it by the drawn number, each side resumes in a graph (torch: 2 graphs, 1 break)."""
    def f(x):
        y = x * 2
        if random.random() < 0.5:
            y = y + 1
        r = random.randint(0, 10)
        return y * r + random.uniform(1, 2)
    x = random_tensor(RNG, 3)
    random.seed(3)
    out = dynamo.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (2, 1), str(out)
    assert "used by value" in out.break_reasons[0].reason
    _compare(f, x, calls=8)

    def g(x):                       # the outcome kept and returned
        keep = random.random() > 0.3
        return (x.sin() if keep else -x), keep
    _compare(g, x, calls=8)
