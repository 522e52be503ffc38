"""``ember._dynamo.mark_static(t, dim)``: a marked dim never becomes symbolic (automatic dynamic
shapes, ``dynamic=True``); a size change there recompiles with the new size as a constant.
``mark_static_address`` is accepted as a no-op on CPU."""
import numpy as np
import pytest

import ember
import ember._dynamo as edynamo
from ember import dynamo

from ._util import CountingBackend, assert_same, random_tensor

RNG = np.random.default_rng(5)


def f(x):
    return x.reshape(x.shape[0], -1).sum(1) * 2.0 + x.shape[1]


def _graph_is_dynamic(gm):
    return gm.meta["dynamic"]


def test_mark_static_dim_is_never_made_dynamic():
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    sizes = (3, 4, 5, 6)
    for n in sizes:
        x = random_tensor(RNG, n, 2, 3)
        edynamo.mark_static(x, 0)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == len(sizes)          # every size recompiled ...
    assert not any(_graph_is_dynamic(g) for g in cnt.graphs)   # ... with static sizes
    # the same size again reuses its entry
    x = random_tensor(RNG, 4, 2, 3)
    edynamo.mark_static(x, 0)
    assert_same(f(x), cf(x))
    assert cnt.frame_count == len(sizes)


def test_unmarked_control_becomes_dynamic():
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for n in (3, 4, 5, 6):
        x = random_tensor(RNG, n, 2, 3)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 2 and _graph_is_dynamic(cnt.graphs[1])


def test_mark_static_one_dim_other_dim_still_automatic():
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for n in (3, 4, 5):
        x = random_tensor(RNG, 2, n, 3)
        edynamo.mark_static(x, 0)
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 2 and _graph_is_dynamic(cnt.graphs[1])
    x = random_tensor(RNG, 7, 4, 3)                 # dim 0 changes: static, recompiles
    edynamo.mark_static(x, 0)
    assert_same(f(x), cf(x))
    assert cnt.frame_count == 3


def test_mark_static_wins_over_dynamic_true_and_mark_dynamic():
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, dynamic=True)
    for n in (3, 4):
        x = random_tensor(RNG, n, 2, 3)
        edynamo.mark_static(x)                      # all dims
        assert_same(f(x), cf(x))
    assert cnt.frame_count == 2 and not any(_graph_is_dynamic(g) for g in cnt.graphs)
    x = random_tensor(RNG, 5, 2, 3)
    dynamo.mark_dynamic(x, 0)
    edynamo.mark_static(x, [0, -1])
    assert x._ember_dynamic_dims == frozenset() and x._ember_static_dims == {0, 2}
    dynamo.mark_dynamic(x, 0)                       # the later mark wins
    assert 0 not in x._ember_static_dims and 0 in x._ember_dynamic_dims


def test_mark_static_bad_arguments():
    x = random_tensor(RNG, 2, 3)
    with pytest.raises(IndexError, match="out of range"):
        edynamo.mark_static(x, 2)
    with pytest.raises(TypeError, match="'dim'"):
        edynamo.mark_static(x, "0")
    with pytest.raises(TypeError, match="'t'"):
        edynamo.mark_static([1, 2])
    m = ember.nn.Linear(2, 2)
    assert edynamo.mark_static(m) is m


def test_mark_static_address_is_accepted():
    x = random_tensor(RNG, 2, 3)
    assert edynamo.mark_static_address(x) is x
    assert edynamo.mark_static_address(x, guard=False) is x
    with pytest.raises(TypeError, match="'t'"):
        edynamo.mark_static_address(3)
    cf = ember.compile(f, backend="eager")
    assert_same(f(x), cf(x))


def test_mark_static_matches_torch_names():
    torch = pytest.importorskip("torch")
    for name in ("mark_static", "mark_static_address", "mark_dynamic", "allow_in_graph", "disallow_in_graph"):
        assert hasattr(torch._dynamo, name) and hasattr(edynamo, name)


def test_mark_static_random_size_sequences():
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies

    @hyp.settings(max_examples=8, deadline=None)
    @hyp.given(st.lists(st.integers(2, 6), min_size=2, max_size=5), st.integers(0, 2))
    def run(sizes, dim):
        dynamo.reset()
        cnt = CountingBackend()
        cf = ember.compile(f, backend=cnt)
        for n in sizes:
            shape = [2, 3, 4]
            shape[dim] = n
            x = random_tensor(RNG, *shape)
            edynamo.mark_static(x, dim)
            assert_same(f(x), cf(x))
        # the marked dim never became symbolic; the other dims never changed: one entry per size
        assert not any(_graph_is_dynamic(g) for g in cnt.graphs)
        assert cnt.frame_count == len(set(sizes))

    run()
