"""Text made from sizes traced symbolically must read as the numbers eager prints.

After a size changes, dynamo traces it as a symbol (automatic dynamic shapes). Text built from
such a size must specialise it: take its value and guard it, as torch.compile does. Before
session 51, several paths printed the symbol instead:

- ``f"{x.shape}"`` and ``'%s' % (x.shape,)`` (CPython compiles this one to an f-string) gave
  ``ember.Size([s0, 4])``;
- ``str(x.shape)``, ``repr(x.size())`` and ``str(tuple(x.shape))`` gave ``(s0, 4)``.

All of these were silent wrong answers. ``'v%d/%s' % (n, tuple(x.shape))`` (a ``%`` with a tuple
of values) was not traced, so the whole frame ran eagerly.
"""
import collections
import contextlib
import io

import pytest

import ember
from ember import dynamo


def _run(f, shapes, *extra):
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    for s in shapes:
        x = ember.randn(*s)
        got_out, want_out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(got_out):
            got = cf(x, *extra)
        with contextlib.redirect_stdout(want_out):
            want = f(x, *extra)
        assert ember.equal(got[0], want[0])
        assert got[1:] == want[1:], (s, got[1:], want[1:])
        assert got_out.getvalue() == want_out.getvalue()
    return dict(dynamo.counters)


SHAPES = [(3, 4), (5, 4), (6, 4)]       # the second call makes dim 0 symbolic


def _texts_of_a_shape(x):
    return (x * 2, f"{x.shape}", "%s" % (x.shape,), str(x.shape), repr(x.size()), str(tuple(x.shape)),
            "{}".format(x.shape), f"{x.shape[0]:>5}", str([x.shape[0], 1]), str({"a": x.shape[0]}),
            "-".join(map(str, x.shape)), hash(x.shape) == hash(tuple(x.shape)))


def test_text_of_a_symbolic_shape_is_its_value():
    c = _run(_texts_of_a_shape, SHAPES)
    assert c["eager_fallback"] == 0 and c["compiled"] >= 2


def _percent(x, k):
    return (x + 1, "v%d/%s" % (2, tuple(x.shape)), "%d items" % k, "n=%d %5.1f" % (k, x.shape[0] / 2),
            "%(n)d-%(s)s" % {"n": x.shape[0], "s": "q"}, "%r|%s" % (x.shape[0], x.dtype), b"%d" % x.shape[1])


@pytest.mark.parametrize("k", [7, 8])
def test_percent_formatting_with_a_tuple_or_dict_is_traced(k):
    c = _run(_percent, SHAPES, k)
    assert c["eager_fallback"] == 0, dynamo.fallback_reasons
    assert c["compiled"] >= 2


def _percent_of_item(x):
    v = x.sum().item()               # a graph break; v is a float argument of the resume function
    return x * 3, "%.4f" % (v,), "%s" % v, f"{v:.4f}"


_Pair = collections.namedtuple("_Pair", "n m")


def _namedtuple_of_sizes(x):
    p = _Pair(x.shape[0], 2)
    return x * 2, str(p), "%s-%s" % p, f"{p}", repr([p])


def test_a_namedtuple_holding_a_symbolic_size_formats_as_its_values():
    c = _run(_namedtuple_of_sizes, SHAPES)
    assert c["eager_fallback"] == 0 and c["internal_errors"] == 0, dynamo.fallback_reasons


def test_percent_formatting_of_an_item_after_a_break():
    c = _run(_percent_of_item, SHAPES)
    assert c["eager_fallback"] == 0, dynamo.fallback_reasons


def _percent_raises(x):
    return x, "%d %d" % (x.shape[0],)


def test_percent_formatting_that_raises_raises_the_same_error():
    dynamo.reset()
    cf = ember.compile(_percent_raises, backend="eager")
    with pytest.raises(TypeError, match="not enough arguments"):
        cf(ember.randn(3))
