"""Graphs that cannot raise need no eager re-run, so try frames may write into their inputs.

A graph over code in a try block (or one replaying print calls) is re-run eagerly from the
frame's start if it raises, and until session 52 such a frame refused any in-place op on an
input (a re-run would apply it twice) and ran eagerly: 78 of 400 fuzz programs. Now
``graph_raises.may_raise`` judges the graph's nodes against an allowlist of ops with no
value-dependent failure (static shapes); a graph of only such ops is compiled without the
re-run. Graphs with a tensor index, a rounding division, an unlisted op, or symbolic sizes
still count as raising, and their re-run still gives the handler the exception.
"""
import operator

import numpy as np
import pytest

import ember
from ember import dynamo
from ember.dynamo.graph_raises import may_raise

from ._util import CountingBackend


def _graphs(fn, *args):
    dynamo.reset()
    cnt = CountingBackend()
    ember.compile(fn, backend=cnt)(*args)
    return [g.graph for g in cnt.graphs]


def _one(fn, *args):
    graphs = _graphs(fn, *args)
    assert len(graphs) == 1, dynamo.fallback_reasons
    return graphs[0]


x, y = ember.randn(4, 3), ember.randn(4, 3)


@pytest.mark.parametrize("fn", [
    lambda a, b: (a * 2 + b).relu().sum(0),
    lambda a, b: ember.nn.functional.layer_norm(a @ b.t(), (4,)).softmax(-1),
    lambda a, b: (a[1:, ::2] + b[0, :2]).clamp(-1, 1),
    lambda a, b: ember.cat([a, b]).T.exp().mean(),
    lambda a, b: a.narrow(0, 1, 2) / (b.narrow(0, 0, 2) + 3),
])
def test_graphs_without_value_dependent_failures(fn):
    assert may_raise(_one(fn, x, y), symbolic=False) is False


@pytest.mark.parametrize("fn", [
    lambda a, b: a[b.argmax(0)],                                    # a tensor index
    lambda a, b: a.index_select(0, b.argmax(0)),                     # an unlisted op
    lambda a, b: ember.div(a.long(), b.long() + 10, rounding_mode="floor"),  # integer division by 0
    lambda a, b: ember.nn.functional.embedding(b.argmax(1), a),     # indices out of range
    lambda a, b: a.pow(b.long()),                                    # (integer powers: unlisted)
])
def test_graphs_that_may_raise(fn):
    assert may_raise(_one(fn, x, y), symbolic=False) is True


def test_symbolic_graphs_count_as_raising():
    g = _one(lambda a, b: a + b, x, y)
    assert may_raise(g, symbolic=True) is True


def test_getitem_of_a_tuple_result_is_safe():
    g = _one(lambda a, b: a.chunk(2, 1)[0] * b.split(2)[1].sum(), x, y)
    assert any(n.target is operator.getitem for n in g.nodes)
    assert may_raise(g, symbolic=False) is False


def _after_try(a, b, k):
    t = a * 2
    try:
        t = _check(t, k)
    except ValueError:
        t = t - 1.0
    a[0] += t[0]
    b.mul_(0.5)
    return t.sum(), a, b


def _check(u, n):
    if n > 2:
        raise ValueError("too big")
    return u * n


@pytest.mark.parametrize("k", [1, 5])
def test_inplace_on_inputs_after_a_try_block_is_compiled(k):
    """The fuzzer's pattern: the try block's graph op (``u * n``) cannot raise."""
    dynamo.reset()
    cf = ember.compile(_after_try, backend="eager")
    rng = np.random.default_rng(k)
    for _ in range(2):
        a = ember.tensor(rng.standard_normal((3, 2)).astype(np.float32))
        b = ember.tensor(rng.standard_normal(2).astype(np.float32))
        a2, b2 = a.clone(), b.clone()
        got, want = cf(a, b, k), _after_try(a2, b2, k)
        assert ember.allclose(got[0], want[0]) and ember.equal(a, a2) and ember.equal(b, b2)
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons


def _prints_and_writes(a):
    t = a * 2
    print("scaled", t.dim())
    a.add_(1)
    return t + a


def test_replayed_prints_with_a_write_into_an_input(capsys):
    a = ember.randn(4)
    a_eager = a.clone()
    dynamo.reset()
    want = _prints_and_writes(a_eager)
    out_eager = capsys.readouterr().out
    got = ember.compile(_prints_and_writes, backend="eager")(a)
    assert capsys.readouterr().out == out_eager == "scaled 1\n"
    assert ember.equal(got, want) and ember.equal(a, a_eager)
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["eager_fallback"] == 0


def _floor_div(a, b):
    t = a * 3
    try:
        q = ember.div(t, b, rounding_mode="floor")
    except RuntimeError:
        q = t * 0 - 1
    return q


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_graph_that_can_raise_still_reruns_for_the_handler(backend):
    """Integer floor division by a zero raises when the graph runs: the handler must see it."""
    dynamo.reset()
    cf = ember.compile(_floor_div, backend=backend)
    a = ember.tensor([4, 7, -5])
    for b in ([1, 2, 3], [1, 0, 3], [2, 2, 2]):
        bt = ember.tensor(b)
        assert ember.equal(cf(a, bt), _floor_div(a, bt)), b
    assert dynamo.counters["eager_fallback"] == 0

