"""``takewhile``, ``dropwhile``, ``accumulate`` and ``compress`` step by step (session 56).

They took every item at the call, and called their predicate or function on every item then:
a loop growing the list it walked through them stopped at the old length, a predicate reading
what the loop body changed saw the old state, and its prints came before the body's. Silent
wrong answers, each compared here with plain Python (results, raised errors, printed text,
argument mutation). Over a generator they were refused; now they are lazy there too. At a graph
break they hand on ``resumable_iters.TakeWhile``/``DropWhile``/``Accumulate``/``Compress``, which
the resume function models item by item."""
import itertools
import operator

import pytest

import ember
from ember import dynamo

from ._util import CountingBackend
from .test_views_and_reversed_s54 import _check, _same, _t


def _copies(a):
    return (a[0], list(a[1]))


def takewhile_grows(x, ys):
    out = []
    for y in itertools.takewhile(lambda v: v.sum().item() < 1e9, ys):    # (.item(): in the predicate)
        if len(ys) < 6:
            ys.append(y * 2)
        out.append(y)
    return out


def takewhile_reads_what_the_body_changes(x, ys):
    lim = [3]
    out = []
    for k in itertools.takewhile(lambda k: k < lim[0], [0, 1, 2, 3, 4, 5]):
        lim[0] = 5
        out.append(ys[k % len(ys)] * k)
    return out


def takewhile_prints_between_steps(x, ys):
    def pred(k):
        print("pred", k)
        return k < 3
    out = x
    for k in itertools.takewhile(pred, range(6)):
        print("body", k)
        out = out + k
    return out


def dropwhile_grows(x, ys):
    out = []
    for k in itertools.dropwhile(lambda k: k < 2, list(range(4))):
        out.append(x * k)
        if len(out) < 4:
            ys.append(x + k)
    return out, len(ys)


def dropwhile_list_grows(x, ys):
    ks = [0, 1, 2, 3]
    out = []
    for k in itertools.dropwhile(lambda k: k < 2, ks):
        if len(ks) < 7:
            ks.append(k + 10)
        out.append(ys[0] * k)
    return out, ks


def accumulate_grows(x, ys):
    out = []
    for t in itertools.accumulate(ys):
        if len(ys) < 6:
            ys.append(t * 0.5)
        out.append(t)
    return out


def accumulate_with_func_and_initial(x, ys):
    ks = [1, 2, 3]
    out = []
    for t in itertools.accumulate(ks, operator.mul, initial=2):
        if len(ks) < 6:
            ks.append(t % 5 + 1)
        out.append(x * t)
    return out, ks


def accumulate_func_reads_the_body(x, ys):
    scale = [1.0]

    def f(a, b):
        return a * scale[0] + b
    out = []
    for t in itertools.accumulate(ys, f):
        scale[0] = 2.0
        out.append(t)
    return out


def compress_grows(x, ys):
    sel = [1, 0, 1, 1]
    out = []
    for y in itertools.compress(ys, sel):
        if len(ys) < 6:
            ys.append(y + 1)
            sel.append(len(ys) % 2)
        out.append(y)
    return out


def compress_selectors_grow(x, ys):
    sel = [1, 1]
    out = []
    for y in itertools.compress(ys, sel):
        sel.append(1)
        out.append(y)
    return out


def _gen(x, n):
    for i in range(n):
        print("gen", i)
        yield x * i


def over_a_generator(x, ys):
    """Lazy over a generator (they were refused there): the generator's prints interleave."""
    a = [t for t in itertools.takewhile(lambda t: t.sum().item() < 100, _gen(x.abs() + 1, 4))]
    b = list(itertools.dropwhile(lambda t: t.sum().item() < 1, _gen(x.abs() + 1, 3)))
    c = list(itertools.accumulate(_gen(x, 3)))
    d = list(itertools.compress(_gen(x, 4), [1, 0, 1]))
    return a, b, c, d


def predicate_raises_where_python_does(x, ys):
    out = []
    try:
        for k in itertools.takewhile(lambda k: 10 // (2 - k) > 0, range(5)):
            out.append(x * k)
    except ZeroDivisionError as e:
        out.append(str(e))
    return out


def next_and_list_mix(x, ys):
    it = itertools.accumulate(ys)
    first = next(it)
    ys.append(x)
    return first, list(it)


def _grow_at_a_break(ys, y):
    if len(ys) < 6 and y.sum().item() > -1e9:     # (a break: .item())
        ys.append(y + 1)


def takewhile_grows_at_a_break(x, ys):
    out = []
    for y in itertools.takewhile(lambda v: v is not None, ys):
        _grow_at_a_break(ys, y)
        out.append(y * 2)
    return out


def dropwhile_grows_at_a_break(x, ys):
    out = []
    for y in itertools.dropwhile(lambda v: len(out) < 0, ys):
        _grow_at_a_break(ys, y)
        out.append(y * 2)
    return out


def accumulate_grows_at_a_break(x, ys):
    out = []
    for t in itertools.accumulate(ys):
        _grow_at_a_break(ys, t)
        out.append(t)
    return out


def compress_grows_at_a_break(x, ys):
    sel = [1, 0, 1, 1, 1, 1]
    out = []
    for y in itertools.compress(ys, sel):
        _grow_at_a_break(ys, y)
        out.append(y)
    return out


@pytest.mark.parametrize("fn", [
    takewhile_grows, takewhile_reads_what_the_body_changes, takewhile_prints_between_steps, dropwhile_grows,
    dropwhile_list_grows, accumulate_grows, accumulate_with_func_and_initial, accumulate_func_reads_the_body,
    compress_grows, compress_selectors_grow, over_a_generator, predicate_raises_where_python_does,
    next_and_list_mix, takewhile_grows_at_a_break, dropwhile_grows_at_a_break, accumulate_grows_at_a_break,
    compress_grows_at_a_break], ids=lambda f: f.__name__)
def test_takewhile_dropwhile_accumulate_compress_step_as_python(fn):
    _check(fn, _t(3), [_t(3) for _ in range(3)], copies=_copies)


@pytest.mark.parametrize("call", [
    lambda x: itertools.accumulate(), lambda x: itertools.takewhile(bool),
    lambda x: itertools.dropwhile(bool, [1], [2]), lambda x: itertools.compress([1]),
    lambda x: itertools.compress([1], [1], selectors=[1]), lambda x: itertools.accumulate([1], func=None, x=1)])
def test_bad_arguments_raise_as_python(call):
    def f(x):
        try:
            call(x)
        except TypeError as e:
            return x + 1, type(e).__name__
        return x, "no error"
    _check(f, _t(3))


def _break_each_step(kind):
    def f(x, ys):
        if kind == "takewhile":
            it = itertools.takewhile(lambda v: v is not None, ys)
        elif kind == "dropwhile":
            it = itertools.dropwhile(lambda v: v is None, ys)
        elif kind == "accumulate":
            it = itertools.accumulate(ys, initial=x)
        elif kind == "accumulate_func":
            it = itertools.accumulate(ys, operator.mul)
        else:
            it = itertools.compress(ys, [1] * 8)
        acc = x
        for a in it:
            acc = (acc * a).sin() + a.sum().item()          # (a break in every step)
        return acc
    return f


def _compiles_between_breaks(f, calls, min_sin, repeat=None):
    """``f`` (a loop whose body breaks the graph in every step, ``.item()``) compiled: on each of
    ``calls`` (argument tuples) it gives Python's result; the loop's tensor work is in the graphs
    (at least ``min_sin`` sins); only the body's breaks fall back, no part of the loop runs eagerly;
    and ``repeat`` (arguments of a kind seen before, made anew each time) reuses the entries: a
    lambda rebuilt at a break is a new object every call, guarded by its code, not its identity."""
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    for make in calls:
        args = make()
        _same(cf(*args), f(*args))
    ops = [getattr(n.target, "__name__", n.target) for g in be.graphs for n in g.graph.nodes
           if n.op in ("call_function", "call_method")]
    assert ops.count("sin") >= min_sin, ops
    assert all(r.startswith("graph break: Tensor.item()") for _, r in dynamo.fallback_reasons), \
        dynamo.fallback_reasons
    assert dynamo.counters["eager_fallback"] == 0
    if repeat is not None:
        before = dynamo.counters["recompiles"], be.frame_count
        for _ in range(2):
            args = repeat()
            _same(cf(*args), f(*args))
        assert (dynamo.counters["recompiles"], be.frame_count) == before


def _lists(x, *lengths):
    """Argument makers ``(x, [n random tensors])``, one per length (fresh tensors per call)."""
    return [lambda n=n: (x, [_t(3) for _ in range(n)]) for n in lengths]


@pytest.mark.parametrize("kind", ["takewhile", "dropwhile", "accumulate", "accumulate_func", "compress"])
def test_a_loop_breaking_each_step_compiles_between_breaks(kind):
    """The break hands on the iterator's state and the resume function models it item by item:
    its tensor work compiles, and calls with other list lengths give Python's results."""
    x = _t(3)
    _compiles_between_breaks(_break_each_step(kind), _lists(x, 4, 4, 5, 2), 1, _lists(x, 4)[0])


def test_over_unchanged_lists_they_compile_whole():
    def f(x, ys):
        acc = x
        for t in itertools.accumulate(ys):
            acc = acc + t.sin()
        for y in itertools.takewhile(lambda y: y is not None, itertools.compress(ys, [1, 0, 1])):
            acc = acc * y
        for y in itertools.dropwhile(lambda y: y is ys[0], ys):
            acc = acc - y
        return acc
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x, ys = _t(3), [_t(3) for _ in range(4)]
    _same(cf(x, ys), f(x, ys))
    assert be.frame_count == 1 and not dynamo.fallback_reasons


# ------------------------------------------------------------------ a set loop at a graph break
# At a break inside a loop over a set, the break handed on a tuple of the elements left: a
# breaking call that added or removed an element went unnoticed, and the loop went on where
# CPython raises ``RuntimeError: Set changed size during iteration``. It hands on a
# ``resumable_iters.SetIter`` over the set itself now.

def _poke_set(s, v, how):
    """A call that breaks the graph (``.item()``) and may change the set."""
    if v.sum().item() > -1e9:
        if how == 1 and len(s) < 6:
            s.add(len(s) + 100)
        elif how == 2 and len(s) > 1:
            s.discard(max(s))


def set_loop_changed_at_a_break(x, how):
    s = {1, 2, 3, 40}
    out = []
    try:
        for e in s:
            out.append(x * e)
            _poke_set(s, x, how)
    except RuntimeError as err:
        out.append(str(err))
    return out, sorted(s)


def set_loop_changed_after_a_break(x, how):
    s = {5, 6, 7}
    out = []
    try:
        for e in s:
            _poke_set(s, x, 0)
            out.append(x + e)
            if how and e == 6:
                s.add(60)          # (in the resumed trace, after the break)
    except RuntimeError as err:
        out.append(str(err))
    return out


def set_iterator_raises_again(x, how):
    s = {1, 2}
    it = iter(s)
    first = next(it)
    _poke_set(s, x, 1)
    errs = []
    for _ in range(2):
        try:
            next(it)
        except RuntimeError as err:
            errs.append(str(err))
    return x * first, errs


@pytest.mark.parametrize("how", [0, 1, 2])
@pytest.mark.parametrize("fn", [set_loop_changed_at_a_break, set_loop_changed_after_a_break, set_iterator_raises_again],
                         ids=lambda f: f.__name__)
def test_a_set_loop_at_a_break_raises_as_python(fn, how):
    _check(fn, _t(3), how)


def test_an_outside_set_changed_by_the_breaking_call():
    def f(x, s):
        out = []
        try:
            for e in s:
                out.append(x * e)
                _poke_set(s, x, 1)
        except RuntimeError as err:
            out.append(str(err))
        return out
    _check(f, _t(3), {3, 4, 5}, copies=lambda a: (a[0], set(a[1])))


def test_a_set_loop_breaking_each_step_compiles_between_breaks():
    def f(x, n):
        s = {n, n + 1, n + 2, 7}
        acc = x
        for e in s:
            acc = (acc * e).sin() + acc.sum().item()        # (a break in every step)
        return acc
    x = _t(3)
    _compiles_between_breaks(f, [lambda: (x, 1), lambda: (x, 1), lambda: (x, 2)], 4, lambda: (x, 2))


# ------------------------------------------------------------------ chain.from_iterable
# Its outer iterable was read at the call: a loop appending an iterable to the outer list got
# the old ones only (CPython's chain takes the next iterable when it reaches it).

def chain_from_iterable_outer_grows(x, ys):
    outer = [ys[:2], [x]]
    out = []
    for y in itertools.chain.from_iterable(outer):
        if len(outer) < 4:
            outer.append([y * 10])
        out.append(y)
    return out


def chain_from_iterable_of_a_generator(x, ys):
    return list(itertools.chain.from_iterable([y, y * 2] for y in _gen(x, 3)))


def chain_from_iterable_outer_grows_at_a_break(x, ys):
    outer = [ys, [x]]
    out = []
    for y in itertools.chain.from_iterable(outer):
        _grow_at_a_break(outer, y)       # (appends a tensor: the next iterable, iterated row by row)
        out.append(y * 2)
    return out


@pytest.mark.parametrize("fn", [chain_from_iterable_outer_grows, chain_from_iterable_of_a_generator,
                                chain_from_iterable_outer_grows_at_a_break], ids=lambda f: f.__name__)
def test_chain_from_iterable_reads_its_outer_iterable_step_by_step(fn):
    _check(fn, _t(3), [_t(3) for _ in range(3)], copies=_copies)


def test_chain_from_iterable_breaking_each_step_compiles_between_breaks():
    def f(x, ys):
        acc = x
        for a in itertools.chain.from_iterable([ys, ys[:1]]):
            acc = (acc * a).sin() + a.sum().item()          # (a break in every step)
        return acc
    x = _t(3)
    _compiles_between_breaks(f, _lists(x, 3, 3, 4), 4, _lists(x, 3)[0])


# ------------------------------------------------------------------ map, filter, starmap at a break
# A graph break inside a loop over ``map``/``filter``/``starmap`` of lists ran the whole frame
# eagerly ("a generator (or enumerate/zip/map/filter of one) alive across a graph break"): they
# were lazy but could not be handed on. They hand on ``StarMap``/``Filter`` now.

def map_grows_at_a_break(x, ys):
    out = []
    for y in map(lambda a, b: a * b, ys, ys[:1] + ys):
        _grow_at_a_break(ys, y)
        out.append(y)
    return out


def filter_grows_at_a_break(x, ys):
    out = []
    for y in filter(lambda a: a.sum().item() > -1e9, ys):
        _grow_at_a_break(ys, y)
        out.append(y)
    return out


def filter_none_at_a_break(x, ys):
    ks = [0, 1, 2, 0, 3]
    out = []
    for k in filter(None, ks):
        _grow_at_a_break(ys, x)
        out.append(ys[-1] * k)
    return out


def starmap_at_a_break(x, ys):
    pairs = [(y, y + 1) for y in ys]
    out = []
    for y in itertools.starmap(lambda a, b: a - b * 2, pairs):
        _grow_at_a_break(pairs, y)       # (appends a tensor: unpacked by rows when reached)
        out.append(y)
    return out


@pytest.mark.parametrize("fn", [map_grows_at_a_break, filter_grows_at_a_break, filter_none_at_a_break,
                                starmap_at_a_break], ids=lambda f: f.__name__)
def test_map_filter_starmap_at_a_break_as_python(fn):
    _check(fn, _t(2), [_t(2) for _ in range(3)], copies=_copies)


@pytest.mark.parametrize("kind", ["map", "map2", "filter", "starmap"])
def test_map_filter_starmap_breaking_each_step_compile_between_breaks(kind):
    def f(x, ys):
        if kind == "map":
            it = map(lambda a: a * 2, ys)
        elif kind == "map2":
            it = map(lambda a, b: a * b, ys, ys[1:])
        elif kind == "filter":
            it = filter(lambda a: a is not None, ys)
        else:
            it = itertools.starmap(lambda a, b: a + b, zip(ys, ys))
        acc = x
        for a in it:
            acc = (acc * a).sin() + a.sum().item()          # (a break in every step)
        return acc
    x = _t(3)
    _compiles_between_breaks(f, _lists(x, 4, 4, 5), 3, _lists(x, 4)[0])
