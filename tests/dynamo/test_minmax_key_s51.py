"""``max``/``min`` with ``key=`` or ``default=`` inside a compiled frame.

Before session 51, any keyword argument to ``max``/``min`` broke the graph with "max() of tensors
compares data", even when the keys were sizes (``max(ts, key=lambda t: t.shape[0])``). Now the key
is traced once per item, in order. When its values are constants, the item with the extreme key
is picked at trace time: the first such item on a tie, as Python picks it. Keys that are tensors
still break the graph. (``type(n).__name__``, the ``__name__`` of a builtin type, ran the whole
frame eagerly too; it is a constant now.)
"""
import pytest

import ember
from ember import dynamo


def _picks(a, b, c):
    t = max([a, b, c], key=lambda u: u.shape[0])          # b and c tie: b, the first
    s = min(a, b, key=lambda u: u.dim())
    e = max([], default=a)
    n = max([3, 1, 3.0])                                  # 3, the first of the equal ones
    m = min((x.shape[1] for x in (a, b)), default=0)
    k = max([c, b], key=len)                              # c, the first
    calls = []
    r = min([a, b, c], key=lambda u: calls.append(u.shape[1]) or -u.shape[1])
    return t * 2, s + 1, e, n, type(n).__name__, m, k, r, calls


@pytest.mark.parametrize("rows", [2, 7])
def test_max_min_with_key_and_default_match_python(rows):
    dynamo.reset()
    cf = ember.compile(_picks, backend="eager")
    for r in (rows, rows + 1):        # the second call makes the size symbolic
        a, b, c = ember.randn(r, 3), ember.randn(5, 3), ember.randn(5, 2)
        got, want = cf(a, b, c), _picks(a, b, c)
        for g, w in zip(got, want):
            if isinstance(w, ember.Tensor):
                assert ember.equal(g, w)
            else:
                assert g == w and type(g) is type(w)
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["eager_fallback"] == 0


def _by_values(a, b):
    return max([a, b], key=lambda u: u.sum()) * 1      # a tensor key: compares data


def test_a_tensor_key_still_breaks():
    dynamo.reset()
    a, b = ember.randn(3), ember.randn(3) + 10
    assert ember.equal(ember.compile(_by_values, backend="eager")(a, b), _by_values(a, b))
    assert dynamo.counters["graph_breaks"] + dynamo.counters["eager_fallback"] >= 1


def _empty(a):
    return a * max([], key=len)


def test_an_empty_sequence_without_default_raises_as_python():
    dynamo.reset()
    with pytest.raises(ValueError, match="empty"):
        ember.compile(_empty, backend="eager")(ember.randn(2))
