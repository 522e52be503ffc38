"""Comprehensions that break the graph inside (session 53).

On 3.11 a comprehension is a function of its own, called with ``iter(...)`` of the iterable as
argument ``.0``. When its body breaks the graph, its caller breaks at the call, and the
comprehension's frame is compiled on its own: that frame used to run eagerly whole ("FOR_ITER
over a non-iterator"), since ``.0`` was an opaque object. Its tuple, list or range iterator is
now modelled item by item, as a resume function's loop iterator is, so the body's tensor work
compiles between the breaks, as on 3.12+, where comprehensions are inlined. A list is read as
CPython's iterator reads it: a call at a break may grow the list, and the loop sees the new
items."""
import sys

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

_rng = np.random.default_rng(530)


def _t(*shape):
    return random_tensor(_rng, *shape)


def _check(fn, *args, copies=None):
    """fn compiled against fn plain, twice; returns the fallback reasons of the compiled runs."""
    dynamo.reset()
    cf = ember.compile(fn, backend=CountingBackend())
    for _ in range(2):
        a1 = copies(args) if copies else args
        a2 = copies(args) if copies else args
        want, got = fn(*a1), cf(*a2)
        _same(got, want)
        if copies:
            _same(a2, a1)
    return [r for _, r in dynamo.fallback_reasons]


def _same(got, want):
    if isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, set):
        assert got == want
    elif isinstance(want, ember.Tensor):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    else:
        assert got == want


def _no_opaque_iterator(reasons):
    assert not any("non-iterator" in r for r in reasons), reasons


def test_list_comprehension_breaking_inside_compiles_its_body():
    def f(x, ys):
        zs = [y * 2 + x.sum().item() for y in ys]
        return zs[0] + zs[-1]
    reasons = _check(f, _t(3), [_t(3) for _ in range(4)])
    _no_opaque_iterator(reasons)
    assert any(".item()" in r for r in reasons)


@pytest.mark.parametrize("kind", ["tuple", "range", "set", "dict"])
def test_other_iterables_and_comprehensions(kind):
    def over_tuple(x, ys):
        return [y.relu() * x.max().item() for y in ys]

    def over_range(x, n):
        return [x * i + x.sum().item() for i in range(n)]

    def set_comp(x, ys):
        return {round(float((y * x).sum().item()), 3) for y in ys}

    def dict_comp(x, ys):
        return {i: y - x.mean().item() for i, y in enumerate(ys)}
    x, ys = _t(3), [_t(3) for _ in range(3)]
    fn, args = {"tuple": (over_tuple, (x, tuple(ys))), "range": (over_range, (x, 4)),
                "set": (set_comp, (x, ys)), "dict": (dict_comp, (x, ys))}[kind]
    _no_opaque_iterator(_check(fn, *args))


def _grow(ys, y):
    if len(ys) < 6 and y.sum().item() > -1e9:     # (a break: .item())
        ys.append(y + 1)
    return y


def test_a_call_at_a_break_that_grows_the_list_is_seen_by_the_loop():
    """``[g(ys, y) for y in ys]`` where g appends to ys: CPython's iterator yields the new items
    too. The append is done eagerly at a break and the loop continues on the same iterator."""
    def f(x, ys):
        return [_grow(ys, y) * x for y in ys]
    reasons = _check(f, _t(3), [_t(3), _t(3)], copies=lambda a: (a[0], list(a[1])))
    _no_opaque_iterator(reasons)


LOG = []


def test_mutating_another_list_in_the_body_breaks_and_stays_right():
    """The trace refuses to mutate an outside list while a list iterator argument is live (it
    could be that very list): the append breaks the graph, and runs as in Python."""
    def f(x, ys):
        out = [LOG.append(y.shape[0]) or (y * x).sum().item() for y in ys]
        return out
    LOG.clear()
    _check(f, _t(3), [_t(3) for _ in range(3)])
    assert LOG == [3] * 3 * 2 * 2


def test_new_list_length_recompiles_or_reuses_correctly():
    def f(x, ys):
        return [y + x.sum().item() for y in ys]
    dynamo.reset()
    cf = ember.compile(f, backend=CountingBackend())
    x = _t(2)
    for n in (3, 3, 5, 1, 0, 5):
        ys = [_t(2) for _ in range(n)]
        _same(cf(x, ys), f(x, ys))
    _no_opaque_iterator([r for _, r in dynamo.fallback_reasons])


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ inlines comprehensions (PEP 709): no frame of their own")
def test_comprehension_frame_compiles_its_tensor_work_on_311():
    def f(x, ys):
        return [(y * 2 + 1).sin() + x.sum().item() for y in ys]
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x, ys = _t(3), [_t(3) for _ in range(3)]
    _same(cf(x, ys), f(x, ys))
    ops = [n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
           for g in be.graphs for n in g.graph.nodes if n.op in ("call_function", "call_method")]
    assert "sin" in ops, ops          # (the comprehension's body, compiled in its own frame)


# ------------------------------------------------------------------ loops over a list they grow
# (all Python versions) Before session 53 ``iter()`` of a list took a copy of its items, so a loop
# that appended to the list it walked stopped at the old length: a silent wrong answer.

def loop_grows(x, ys):
    out = []
    for y in ys:
        if len(ys) < 6:
            ys.append(y + 1)
        out.append(y * x)
    return out


def loop_grows_at_a_break(x, ys):
    out = []
    for y in ys:
        if len(ys) < 6 and y.sum().item() > -1e9:
            ys.append(y + 1)
        out.append(y * x)
    return out


def comprehension_grows(x, ys):
    return [ys.append(y + 1) or y * x for y in ys if len(ys) < 6]


def loop_shrinks(x, ys):
    out = []
    for y in ys:
        ys.pop()
        out.append(y - x)
    return out


def iterator_by_hand(x, ys):
    it = iter(ys)
    first = next(it)
    ys.append(first * 3)
    rest = list(it)            # sees the appended item
    ys.append(x)
    after = list(it)           # exhausted: stays so, whatever is appended
    return first, rest, after, len(ys)


def enumerate_grows(x, ys):
    out = []
    for i, y in enumerate(ys, 1):
        if len(ys) < 6:
            ys.append(y + i)
        out.append(y * x)
    return out


def enumerate_grows_at_a_break(x, ys):
    out = []
    for i, y in enumerate(ys):
        if len(ys) < 6 and y.sum().item() > -1e9:
            ys.append(y + i)
        out.append(y * x * i)
    return out


def zip_grows_at_a_break(x, ys):
    out = []
    for a, (k, b) in zip(ys, enumerate(ys)):
        if len(ys) < 6 and a.sum().item() > -1e9:
            ys.append(a + 1)
        out.append(a * b + k)
    return out


def zip_of_a_tuple_and_a_growing_list(x, ys):
    out = []
    for c, y in zip((1.0, 2.0, 3.0, 4.0, 5.0), ys):
        if len(ys) < 4:
            ys.append(y * c)
        out.append(y + c)
    return out


@pytest.mark.parametrize("fn", [loop_grows, loop_grows_at_a_break, comprehension_grows, loop_shrinks,
                                iterator_by_hand, enumerate_grows, enumerate_grows_at_a_break,
                                zip_grows_at_a_break, zip_of_a_tuple_and_a_growing_list],
                         ids=lambda f: f.__name__)
def test_a_loop_sees_the_list_as_it_is_at_each_step(fn):
    _check(fn, _t(3), [_t(3) for _ in range(3)], copies=lambda a: (a[0], list(a[1])))


def local_list_grows(x):
    ys = [x, x * 2]
    out = []
    for y in ys:
        if len(ys) < 5:
            ys.append(y + 1)
        out.append(y.sum())
    return out, ys


def test_a_list_made_in_the_frame_too():
    _check(local_list_grows, _t(3))


SEEN = []


def appends_to_seen(x, ys):
    return [SEEN.append(y) or y * x.sum().item() for y in ys if len(SEEN) < 6]


def test_a_comprehension_over_the_list_its_body_grows_on_a_later_call():
    """Traced first over another list (the body's appends go to ``SEEN``), then called over
    ``SEEN`` itself: CPython's iterator then sees each append. A guard tells the two apart."""
    dynamo.reset()
    cf = ember.compile(appends_to_seen, backend=CountingBackend())
    x = _t(2)
    for over_seen in (False, False, True, True):
        results = []
        start, others = [_t(2)], [_t(2) for _ in range(3)]
        for fn in (appends_to_seen, cf):
            SEEN[:] = start
            ys = SEEN if over_seen else list(others)
            out = fn(x, ys)
            results.append((out, list(SEEN)))
        _same(results[1][0], results[0][0])
        _same(results[1][1], results[0][1])
        if over_seen:
            assert len(results[0][1]) == 6       # (the loop saw its own appends)


def _template():
    return [SEEN.append(y) or y * 2 for y in () if len(SEEN) < 6]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ inlines comprehensions (PEP 709): no frame of their own")
def test_comprehension_frame_guards_that_its_iterator_is_not_over_the_list_it_grows():
    """The comprehension's own frame, called directly with the iterator CPython would pass: first
    over another list, compiled without a break while its body appends to ``SEEN``; then over
    ``SEEN`` itself, where the compiled loop (its items read up front) would miss the appends."""
    import types
    code = next(c for c in _template.__code__.co_consts if isinstance(c, types.CodeType))
    assert code.co_name == "<listcomp>" and code.co_varnames[0] == ".0"
    comp = types.FunctionType(code, globals())
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(comp, backend=be)
    for over_seen in (False, True):
        start, others = [_t(2)], [_t(2)]      # (one item each: the length guards pass both)
        results = []
        for fn in (comp, cf):
            SEEN[:] = start
            results.append((fn(iter(SEEN if over_seen else list(others))), list(SEEN)))
        _same(results[1], results[0])
        reasons = [r for _, r in dynamo.fallback_reasons]
        if not over_seen:
            assert be.frame_count == 1 and not reasons      # compiled whole, no break
        else:   # recompiled (the guard failed): this time the append breaks the graph
            assert any("mutating the list a list iterator argument walks" in r for r in reasons), reasons
    assert len(results[0][1]) == 6


def dict_grows(x, d):
    for k in d:
        if len(d) < 5:
            d[k + 10] = x * k
    return x + len(d)


def dict_grows_caught(x, d):
    try:
        for k in d:
            d[k + 10] = x * k
    except RuntimeError as e:
        return x * len(d), str(e)
    return x, ""


def dict_same_size(x, d):
    for k in d:
        d[k] = x * k            # (values only: no error)
    return d


@pytest.mark.parametrize("fn", [dict_grows, dict_grows_caught, dict_same_size], ids=lambda f: f.__name__)
def test_a_loop_over_a_dict_that_changes_size_raises_as_in_python(fn):
    """CPython's dict iterator raises RuntimeError at the step after a key was added or removed;
    the compiled loop used to go on over the old keys and return."""
    x = _t(2)
    dynamo.reset()
    cf = ember.compile(fn, backend=CountingBackend())
    outcomes = []
    for run in (fn, cf):
        d = {1: 1.0, 2: 2.0}
        try:
            outcomes.append(("ok", run(x, d), d))
        except RuntimeError as e:
            outcomes.append(("raised", str(e), d))
    (k1, v1, d1), (k2, v2, d2) = outcomes
    assert k1 == k2, outcomes
    if k1 == "raised":
        assert v1 == v2 == "dictionary changed size during iteration"
    else:
        _same(v2, v1)
    assert d1.keys() == d2.keys()
