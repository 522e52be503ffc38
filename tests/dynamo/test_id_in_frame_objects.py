"""``id()`` of objects made inside the compiled frame: comparisons between such ids are decided
while tracing (no break), truthiness is True, an id leaving the frame is the id of the object
the program gets; using the number itself breaks the graph and Python computes it."""
import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, random_tensor

RNG = np.random.default_rng(31)


class Node:
    def __init__(self, v):
        self.v = v


def _x():
    return random_tensor(RNG, 3, 4)


def test_id_comparisons_of_frame_objects_decided_statically():
    def f(x):
        a, b = Node(x), Node(x * 2)
        c = a
        lst, d = [a, b], {"k": 1}
        same = id(a) == id(c)
        diff = id(a) != id(b)
        other = id(lst) == id(d)
        y = x + (1.0 if same else -1.0) + (2.0 if diff else -2.0) + (4.0 if other else 0.0)
        if id(a):                             # never 0
            y = y * 3
        return y, same, diff, other

    x = _x()
    assert_one_graph(f, x)
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for _ in range(2):
        x = _x()
        got, ref = cf(x), f(x)
        np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-6)
        assert got[1:] == ref[1:] == (True, True, False)
    assert cnt.frame_count == 1


def test_id_of_frame_object_vs_outside_object_and_dedup_loop():
    def f(x, outside):
        seen_ids = []
        nodes = [Node(x), Node(x + 1)]
        nodes.append(nodes[0])
        total = x * 0
        for n in nodes:
            i = id(n)
            if any(i == s for s in seen_ids):
                continue
            seen_ids.append(i)
            total = total + n.v
        return total, len(seen_ids)

    x = _x()
    assert_one_graph(f, x, Node(1))
    got, ref = ember.compile(f, backend="eager")(x, Node(1)), f(x, Node(1))
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-6)
    assert got[1] == ref[1] == 2


def test_returned_id_is_the_returned_objects():
    def f(x):
        o = Node(x * 2)
        return o, id(o), [o], id(o) == id(o)

    x = _x()
    assert_one_graph(f, x)
    o, i, lst, eq = ember.compile(f, backend="eager")(x)
    assert i == id(o) and lst[0] is o and eq is True
    np.testing.assert_allclose(o.v.numpy(), (x * 2).numpy())


def test_id_value_used_by_value_breaks_and_runs_correctly():
    def f(x):
        o = Node(x)
        k = id(o) % 7                         # the number itself: only known at run time
        return x + 1, k == id(o) % 7, isinstance(k, int)

    x = _x()
    ex = dynamo.explain(f)(x)
    assert ex.graph_break_count >= 1
    assert any("id()" in str(r) for r in ex.break_reasons), ex.break_reasons
    got = ember.compile(f, backend="eager")(x)
    np.testing.assert_allclose(got[0].numpy(), (x + 1).numpy())
    assert got[1:] == (True, True)


def test_id_as_dict_key_and_printing_break():
    def f(x):
        o = Node(x)
        memo = {id(o): o}
        return memo[id(o)].v + 1

    x = _x()
    np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), (x + 1).numpy())
    assert dynamo.explain(f)(x).graph_break_count >= 1

    def g(x):
        o = []
        return x * 2, str(id(o)) == str(id(o))

    got = ember.compile(g, backend="eager")(x)
    assert got[1] is True


def test_id_of_tensor_made_in_frame_still_breaks():
    def f(x):
        y = x + 1
        z = y.add_(1)
        return y * 2, id(y) == id(z)

    x = _x()
    got, ref = ember.compile(f, backend="eager")(x), f(x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] is ref[1] is True
