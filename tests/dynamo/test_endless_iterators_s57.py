"""Endless and callable iterators, generator ``send``, strict ``zip``, Counter and heapq in
compiled frames (session 57).

Each broke the graph (and most ran the whole frame eagerly): ``itertools.count``/``cycle`` and
an endless ``repeat`` ("constructing a count object"), ``iter(fn, sentinel)``, ``gen.send``,
``partial.keywords``, ``zip(strict=True)`` with a length mismatch, ``collections.Counter``
(its C counting helper) and ``heapq`` (C functions). Each is compared with plain Python here
(results, raised errors and their messages, printed text), and must compile without a break;
at a graph break inside their loops, the loop's tensor work must still compile between the
breaks (``resumable_iters.Count``/``Repeat``/``Cycle``/``CallIter``, a strict ``zip``).
Taking every item of an endless iterator (``list(count())``) is refused, not traced for ever."""
import collections
import functools
import heapq
import itertools
import operator

import numpy as np
import pytest

import ember
from ember import dynamo

from .test_lazy_itertools_s56 import _compiles_between_breaks
from .test_views_and_reversed_s54 import _check, _t


def _no_breaks(fn, *args, copies=None):
    reasons = _check(fn, *args, copies=copies)
    assert reasons == [], reasons
    assert dynamo.counters["eager_fallback"] == 0


# ------------------------------------------------------------------ itertools.count

def count_in_zip(x):
    for i, c in zip(range(3), itertools.count(5, 2)):
        x = x * c + i
    return x


def count_of_floats_stops_on_a_test(x):
    s = x
    for c in itertools.count(0.5, 0.1):        # (adds 0.1 item by item: drifts as CPython's does)
        if c > 1.2:
            break
        s = s + c
    return s, c


def count_by_keywords_and_next(x):
    it = itertools.count(step=-3, start=10)
    a, b = next(it), next(it)
    return x * a + b, next(it)


def count_under_islice_and_enumerate(x):
    out = []
    for k, c in enumerate(itertools.islice(itertools.count(7), 2, 6)):
        out.append(x * c - k)
    return out


@pytest.mark.parametrize("fn", [count_in_zip, count_of_floats_stops_on_a_test, count_by_keywords_and_next,
                                count_under_islice_and_enumerate])
def test_count_compiles_without_a_break(fn):
    _no_breaks(fn, _t(3))


def count_loop_with_a_break(x, ys):
    for y, c in zip(ys, itertools.count(1)):
        x = x + y.sin() * c
        if x.sum().item() > 1e9:
            break
    return x


def test_count_at_a_graph_break_goes_on_from_where_it_was():
    _compiles_between_breaks(count_loop_with_a_break, [lambda: (_t(3), [_t(3) for _ in range(4)])], 4,
                             repeat=lambda: (_t(3), [_t(3) for _ in range(4)]))


def endless_map_until_it_raises(x):
    def f(k):
        if k == 4:
            raise KeyError(k)
        return x * k
    try:
        return list(map(f, itertools.count()))
    except KeyError as e:
        return x + e.args[0]


def test_an_endless_iterator_consumed_until_the_consumer_raises():
    _no_breaks(endless_map_until_it_raises, _t(3))


def test_endless_refusal_names_the_iterator():
    """Taking every item of count/repeat/cycle is refused at once (the frame falls back, where
    the program runs as it would have); one built on them at ``MAX_UNPACKED`` items."""
    from ember.dynamo.exc import Unsupported
    from ember.dynamo.variables import builtin as b
    from ember.dynamo.variables.lists import IteratorVariable
    for it, name in ((b.count_of(0, 1), "count"), (b.repeat_of(None), "repeat"),
                     (b.cycle_of(IteratorVariable([]), [], 0), "cycle")):
        with pytest.raises(Unsupported, match=f"endless {name}"):
            it.unpack_by_steps(None)
    it = b.enumerate_of(b.count_of(0, 1), 0)
    it.MAX_UNPACKED = 50
    with pytest.raises(Unsupported, match="more than 50"):
        it.unpack_by_steps(None)


@pytest.mark.parametrize("args", [(1.5,), ("a",), (float("inf"),), (1, 2, 3)])
def test_count_of_other_arguments_runs_as_python(args):
    def f(x):
        return x + next(itertools.count(*args))
    _check(f, _t(3))


# ------------------------------------------------------------------ repeat, cycle

def repeat_endless_in_zip(x):
    s = x
    for k, r in zip(range(3), itertools.repeat(x * 2)):
        s = s + r * k
    return s


def repeat_with_times_keyword(x):
    return [x * v for v in itertools.repeat(3, times=2)], list(itertools.repeat(x, -1))


def cycle_over_a_list(x):
    out = []
    for k, w in zip(range(7), itertools.cycle([1, 2, 3])):
        out.append(x * w + k)
    return out


def cycle_over_a_generator_runs_it_once(x):
    def gen():
        for k in range(2):
            print("made", k)
            yield x + k
    return [v * 2 for _, v in zip(range(5), itertools.cycle(gen()))]


def cycle_of_an_empty_list_ends(x):
    return [v for v in itertools.cycle([])], x


@pytest.mark.parametrize("fn", [repeat_endless_in_zip, repeat_with_times_keyword, cycle_over_a_list,
                                cycle_over_a_generator_runs_it_once])
def test_repeat_and_cycle_compile_without_a_break(fn):
    _no_breaks(fn, _t(3))


def test_cycle_of_an_empty_list_gives_nothing():
    _check(cycle_of_an_empty_list_ends, _t(3))


def cycle_loop_with_a_break(x, ys):
    for k, y in zip(range(7), itertools.cycle(ys)):
        x = x + y.sin() * k
        x.sum().item()
    return x


def repeat_loop_with_a_break(x, y):
    for k, r in zip(range(3), itertools.repeat(y)):
        x = x + r.sin() * k
        x.sum().item()
    return x


def test_cycle_and_repeat_at_a_graph_break():
    _compiles_between_breaks(cycle_loop_with_a_break, [lambda: (_t(3), [_t(3), _t(3), _t(3)])], 7)
    _compiles_between_breaks(repeat_loop_with_a_break, [lambda: (_t(3), _t(3))], 3)


# ------------------------------------------------------------------ iter(fn, sentinel)

def call_iter_until_sentinel(x):
    it = iter([1, 2, 3, 0, 5])
    s = x
    for v in iter(lambda: next(it), 0):
        s = s + v
    return s, next(it)


def call_iter_ends_on_stop_iteration(x):
    it = iter([1, 2])
    got = [x * v for v in iter(lambda: next(it), 0)]
    return got


def call_iter_over_a_closure_counter(x):
    state = [0]

    def tick():
        state[0] += 1
        return state[0]
    out = x
    for v in iter(tick, 4):
        out = out * v
    return out, state[0]


def call_iter_sentinel_none(x):
    vals = [x, x * 2, None, x]
    it = iter(vals)
    return [t + 1 for t in iter(it.__next__, None)]


@pytest.mark.parametrize("fn", [call_iter_until_sentinel, call_iter_ends_on_stop_iteration,
                                call_iter_over_a_closure_counter])
def test_iter_of_a_callable_compiles_without_a_break(fn):
    _no_breaks(fn, _t(3))


def test_iter_of_a_callable_over_tensors_runs_as_python():
    _check(call_iter_sentinel_none, _t(3))


def call_iter_loop_with_a_break(x):
    state = [0]

    def tick():
        state[0] += 1
        return state[0]
    for v in iter(tick, 4):
        x = x + x.sin() * v
        x.sum().item()
    return x


def test_iter_of_a_callable_at_a_graph_break():
    _compiles_between_breaks(call_iter_loop_with_a_break, [lambda: (_t(3),)], 3)


# ------------------------------------------------------------------ generator send / close

def send_values(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total += v
    g = acc()
    next(g)
    a = g.send(2)
    b = g.send(5)
    return x * a + b


def send_none_starts_it(x):
    def gen():
        got = yield x
        yield got * 2
    g = gen()
    first = g.send(None)
    return first, g.send(x + 1)


def send_to_a_just_started_generator(x):
    def gen():
        yield x
    return gen().send(3)


def send_past_the_end(x):
    def gen():
        y = yield 1
        return y
    g = gen()
    next(g)
    try:
        g.send(x)
    except StopIteration:
        return x - 1
    return x


def close_then_next(x):
    def gen():
        yield x
        yield x * 2
    g = gen()
    a = next(g)
    g.close()
    return a, next(g, "done"), g.close()


@pytest.mark.parametrize("fn", [send_values, send_none_starts_it, send_past_the_end, close_then_next])
def test_generator_send_and_close_compile_without_a_break(fn):
    _no_breaks(fn, _t(3))


def test_send_to_a_just_started_generator_raises_as_python():
    _check(send_to_a_just_started_generator, _t(3))


# ------------------------------------------------------------------ partial.keywords

def partial_keywords_read_and_written(x):
    p = functools.partial(ember.add, alpha=2)
    r = p(x, x) * len(p.keywords)
    p.keywords["alpha"] = 3
    return r + p(x, x), sorted(p.keywords)


def partial_keywords_of_an_argument(x, p):
    return p(x, x) + p.keywords["alpha"]


def test_partial_keywords():
    _no_breaks(partial_keywords_read_and_written, _t(3))
    _no_breaks(partial_keywords_of_an_argument, _t(3), functools.partial(ember.add, alpha=2))


def test_writing_an_argument_partials_keywords_is_replayed():
    def f(x, p):
        p.keywords["alpha"] = 5
        return p(x, x)
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    x = _t(3)
    p1, p2 = functools.partial(ember.add, alpha=2), functools.partial(ember.add, alpha=2)
    np.testing.assert_allclose(cf(x, p1).numpy(), f(x, p2).numpy(), rtol=1e-6)
    assert p1.keywords == p2.keywords == {"alpha": 5}
    assert dynamo.fallback_reasons == []


# ------------------------------------------------------------------ zip(strict=True)

def zip_strict_over(x, its):
    try:
        for t in zip(*its, strict=True):
            x = x + t[0]
    except ValueError as e:
        return x - 1, str(e)
    return x


@pytest.mark.parametrize("its", [([1, 2], [1]), ([1], [1], [3, 4]), ((1, 2), range(2), [3]), ([1], (2,))])
def test_zip_strict_mismatches_raise_pythons_errors(its):
    """(shorter second, longer third, shorter third, equal: CPython's messages, raised after the
    items before the mismatch went through the loop)"""
    _no_breaks(zip_strict_over, _t(3), its)


def zip_strict_equal_lengths(x):
    return [x * a + b for a, b in zip([1, 2], (3, 4), strict=True)]


def zip_strict_over_a_list_the_loop_grows(x):
    ys = [1, 2]
    out = x
    for a, b in zip(ys, [5, 6, 7], strict=True):
        if len(ys) < 3:
            ys.append(3)
        out = out + a * b
    return out


@pytest.mark.parametrize("fn", [zip_strict_equal_lengths, zip_strict_over_a_list_the_loop_grows])
def test_zip_strict_compiles_without_a_break(fn):
    _no_breaks(fn, _t(3))


def zip_strict_loop_with_a_break(x, ys):
    for a, b in zip(ys, range(len(ys) - 1), strict=True):
        x = x + a.sin() * b
        x.sum().item()
    return x


def test_zip_strict_mismatch_after_a_graph_break():
    ys = [_t(3) for _ in range(3)]
    _check(zip_strict_loop_with_a_break, _t(3), ys)
    dynamo.reset()
    cf = ember.compile(zip_strict_loop_with_a_break, backend="eager")
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is shorter than argument 1"):
        cf(_t(3), ys)
    # the loop's steps compiled between the breaks; the last resume function, which raises,
    # runs eagerly (a frame that raises uncaught does)
    reasons = [r for _, r in dynamo.fallback_reasons]
    assert all(r.startswith("graph break: Tensor.item()") for r in reasons[:-1]) and len(reasons) == 3, reasons
    assert reasons[-1].startswith("ValueError: zip() argument 2 is shorter than argument 1 (the program raises)")


# ------------------------------------------------------------------ Counter, heapq, itemgetter

def counter_counts(x):
    c = collections.Counter("abcab")
    c.update([1, 1, "a"])
    c["z"] += 2
    return x * c["a"], c.most_common(2), c.most_common(), c


def heap_operations(x, vals):
    h = []
    for v in vals:
        heapq.heappush(h, v)
    popped = [heapq.heappop(h) for _ in range(3)]
    r = heapq.heappushpop(h, 0.5)
    s = heapq.heapreplace(h, 0.25)
    heapq.heapify(vals)
    return x * popped[0], popped, r, s, h, vals, heapq.nlargest(3, vals), heapq.nsmallest(2, vals)


def heap_errors(x, which):
    if which == 0:
        return heapq.heappop([])
    if which == 1:
        return heapq.heappush((1,), 2)
    return heapq.heapify("ab")


def sorted_by_getters(x):
    pairs = [(3, "c"), (1, "a"), (2, "b")]
    by_name = sorted(pairs, key=operator.itemgetter(1), reverse=True)
    both = operator.itemgetter(1, 0)(pairs[0])
    return x * by_name[0][0], by_name, both, operator.attrgetter("shape", "dtype")(x)


_SHAPE = operator.attrgetter("shape")


def getter_from_a_global(x):
    return x * len(_SHAPE(x))


def test_counter_heapq_and_getters_compile_without_a_break():
    _no_breaks(counter_counts, _t(3))
    rng = np.random.default_rng(57)
    for _ in range(3):
        vals = [float(v) for v in rng.standard_normal(int(rng.integers(4, 12)))]
        _no_breaks(heap_operations, _t(3), vals, copies=lambda a: (a[0], list(a[1])))
    _no_breaks(sorted_by_getters, _t(3))
    _no_breaks(getter_from_a_global, _t(3))


@pytest.mark.parametrize("which", [0, 1, 2])
def test_heapq_errors_are_pythons(which):
    _check(heap_errors, _t(3), which)
