"""Dict views and ``reversed(list)`` read their containers live (session 54).

``d.keys()``, ``d.values()`` and ``d.items()`` used to be tuples of the items at the call: a
view taken before the dict changed kept the old items (``len(ks)`` counted 2 where Python
counts 3), printed as a tuple, and a loop over ``d.items()`` that added a key went on instead
of raising. A loop over ``d.items()`` that set a later key's value saw the old value.
``reversed(ys)`` took a copy of the list: a loop that shrank or rewrote the list it walked
backwards saw the old items. Each is compared with plain Python, on every version."""
import collections
import itertools

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

_rng = np.random.default_rng(540)


def _t(*shape):
    return random_tensor(_rng, *shape)


def _same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, ember.Tensor):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    else:
        assert got == want


def _outcome(fn, args):
    try:
        return "ok", fn(*args)
    except Exception as e:      # (the exception Python raises is part of the behaviour)
        return type(e).__name__, str(e)


def _check(fn, *args, copies=None):
    """fn compiled against fn plain, twice (results, raised errors, printed text and the mutation
    of the arguments); returns the fallback reasons of the compiled runs."""
    import contextlib
    import io
    dynamo.reset()
    cf = ember.compile(fn, backend=CountingBackend())
    for _ in range(2):
        a1 = copies(args) if copies else args
        a2 = copies(args) if copies else args
        out1, out2 = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out1):
            want = _outcome(fn, a1)
        with contextlib.redirect_stdout(out2):
            got = _outcome(cf, a2)
        assert got[0] == want[0], (got, want)
        _same(got[1], want[1])
        assert out2.getvalue() == out1.getvalue()
        if copies:
            _same(a2, a1)
    return [r for _, r in dynamo.fallback_reasons]


# ------------------------------------------------------------------ dict views

def view_taken_before_a_change(x):
    d = {"a": x, "b": x + 1}
    ks, vs, its = d.keys(), d.values(), d.items()
    d["c"] = x * 2
    d["a"] = x * 3
    return x + len(ks), list(ks), list(vs), [k for k, _ in its], sum(vs)


def view_types_and_membership(x):
    d = {"a": x, "b": x + 1}
    ks, vs, its = d.keys(), d.values(), d.items()
    return (isinstance(ks, type({}.keys())), isinstance(vs, type({}.values())),
            isinstance(its, type({}.items())), "a" in ks, "z" in ks, type(ks).__name__, x)


def view_printed(x):
    d = {"a": 1, "b": 2.5}
    print(d.keys(), d.values(), d.items())
    d["c"] = 3
    ks = d.keys()
    print(len(ks), ks)
    return x * len(ks)


def items_loop_sees_a_later_value(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for k, v in d.items():
        if k == "a":
            d["c"] = v * 10          # (an existing key: no size change)
        out.append(v)
    return out


def values_loop_sees_a_later_value(x):
    d = {"a": x, "b": x + 1}
    out = []
    for v in d.values():
        d["b"] = x * 5
        out.append(v * 2)
    return out


def items_loop_adds_a_key(x):
    d = {"a": x, "b": x + 1}
    for k, v in d.items():
        d[k + "2"] = v
    return d


def items_loop_adds_a_key_caught(x):
    d = {"a": x, "b": x + 1}
    try:
        for k, v in d.values() and d.items():
            d[k + "2"] = v
    except RuntimeError as e:
        return str(e), len(d), x
    return "", len(d), x


def keys_loop_deletes(x):
    d = {"a": x, "b": x + 1}
    for k in d.keys():
        del d["b"]
    return d


def last_step_adds_a_key(x):
    """The size is checked at the step after the last item too, as CPython's iterator does."""
    d = {"a": x}
    for k in d.items():
        d["b"] = x
    return d


def views_in_helpers(x):
    d = {"b": x + 1, "a": x}
    pairs = dict(zip(d.keys(), d.values()))
    return (sorted(d.keys()), tuple(d.items())[0][0], pairs, [i for i, _ in enumerate(d.items())],
            max(d.values(), key=lambda t: t.sum().item()), list(map(len, [d.keys(), d.values()])))


@pytest.mark.parametrize("fn", [view_taken_before_a_change, view_types_and_membership, view_printed,
                                items_loop_sees_a_later_value, values_loop_sees_a_later_value,
                                items_loop_adds_a_key, items_loop_adds_a_key_caught, keys_loop_deletes,
                                last_step_adds_a_key, views_in_helpers],
                         ids=lambda f: f.__name__)
def test_dict_views_are_live(fn):
    _check(fn, _t(3))


def view_subscripted(x):
    d = {"a": x}
    try:
        return d.keys()[0]
    except TypeError as e:
        return str(e)


def test_a_view_is_not_subscriptable():
    _check(view_subscripted, _t(2))


def items_loop_breaking_inside(x, d):
    out = []
    for k, v in d.items():
        print(k)                         # (a graph break inside the loop)
        d[k] = v + x
        out.append(d[k].sum())
    return out, d


def items_loop_replacing_a_key(x):
    """A key removed and another added in the loop (the same size): CPython follows its table;
    the trace refuses and the frame runs as in Python."""
    d = {"a": x, "b": x + 1}
    out = []
    try:
        for k in d:
            out.append(k)
            if k == "a":
                del d["b"]
                d["c"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out, x


def test_breaks_and_same_size_changes_match_python():
    reasons = _check(items_loop_breaking_inside, _t(3), {"a": _t(3), "b": _t(3)},
                     copies=lambda a: (a[0], dict(a[1])))
    assert not any("dict changed" in r for r in reasons), reasons
    reasons = _check(items_loop_replacing_a_key, _t(3))
    assert any("keys changed during a loop" in r for r in reasons), reasons


def test_view_of_an_outside_dict_changed_by_the_frame():
    def f(x, d):
        ks = d.keys()
        d["new"] = x
        return len(ks), list(ks), ks
    dynamo.reset()
    cf = ember.compile(f, backend=CountingBackend())
    x = _t(2)
    d1, d2 = {"a": x}, {"a": x}
    n1, l1, v1 = f(x, d1)
    n2, l2, v2 = cf(x, d2)
    assert (n2, l2) == (n1, l1) and type(v2) is type(v1) and list(v2) == list(v1)
    d2["later"] = 1                 # (a view the compiled code returned is over the caller's dict)
    assert "later" in v2


# ------------------------------------------------------------------ reversed(list)

def reversed_shrinks(x, ys):
    out = []
    for y in reversed(ys):
        out.append(y * 2)
        if len(ys) > 2:
            del ys[-2:]              # (below the iterator's index: the loop ends)
    return out


def reversed_rewrites(x, ys):
    out = []
    for y in reversed(ys):
        out.append(y + x)
        ys[0] = x * 7
    return out


def reversed_grows_unseen(x, ys):
    out = []
    for y in reversed(ys):
        if len(ys) < 6:
            ys.append(y * 3)         # (past the reverse iterator: not reached)
        out.append(y)
    return out


def reversed_shrinks_at_a_break(x, ys):
    out = []
    for i, y in enumerate(reversed(ys)):
        out.append(y * i)
        if y.sum().item() > -1e9 and i == 1:       # (a break: .item())
            del ys[:2]
    return out


def reversed_rewritten_at_a_break(x, ys):
    out = []
    for y in reversed(ys):
        if y.sum().item() > -1e9:
            ys[0] = y * 5
        out.append(y - x)
    return out


def reversed_by_hand(x, ys):
    r = reversed(ys)
    first = next(r)
    ys.insert(0, x * 5)            # (shifts the items: the iterator's index now names another)
    rest = list(r)
    return first, rest, list(r)


def reversed_in_a_comprehension(x, ys):
    return [y * x + y.max().item() for y in reversed(ys)]


@pytest.mark.parametrize("fn", [reversed_shrinks, reversed_rewrites, reversed_grows_unseen,
                                reversed_shrinks_at_a_break, reversed_rewritten_at_a_break,
                                reversed_by_hand, reversed_in_a_comprehension],
                         ids=lambda f: f.__name__)
def test_reversed_reads_the_list_as_it_is_at_each_step(fn):
    reasons = _check(fn, _t(3), [_t(3) for _ in range(4)], copies=lambda a: (a[0], list(a[1])))
    assert not any("non-iterator" in r for r in reasons), reasons


def test_reversed_of_a_local_list_and_of_a_tuple():
    def f(x):
        ys = [x, x + 1, x + 2]
        out = [y for y in reversed(ys)]
        ys.pop()
        return out, list(reversed(ys)), list(reversed((x, x * 2)))
    _check(f, _t(2))


def test_a_reversed_loop_breaking_each_step_compiles_between_breaks():
    """The resume function gets the reverse iterator itself and models it item by item (as a
    list iterator): one compiled entry for every step, not an eager loop."""
    def f(x, ys):
        acc = x
        for y in reversed(ys):
            acc = (acc * y).sin() + y.sum().item()
        return acc
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x = _t(3)
    for n in (4, 4, 2):
        ys = [_t(3) for _ in range(n)]
        _same(cf(x, ys), f(x, ys))
    ops = [getattr(n.target, "__name__", n.target) for g in be.graphs for n in g.graph.nodes
           if n.op in ("call_function", "call_method")]
    assert "sin" in ops
    assert not any("non-iterator" in r for _, r in dynamo.fallback_reasons)


# ------------------------------------------------------------------ sets

def set_loop_adds(x):
    s = {1, 2, 3}
    for e in s:
        s.add(e + 10)
    return x


def set_loop_discards_caught(x):
    s = {1, 2, 3}
    try:
        for e in s:
            if e == 2:
                s.discard(1)
    except RuntimeError as e:
        return str(e), x
    return "", x


def set_loop_adds_at_the_last_step(x):
    s = {5}
    for e in s:
        s.add(e + 1)
    return x


def set_loop_breaking_inside(x):
    s = {1, 2, 3}
    for e in s:
        print(e)
        x = x * e + 1
    return x, sorted(s)


def set_loop_unchanged_size(x):
    s = {1, 2, 3}
    out = []
    for e in s:
        out.append(x * e)
        s.add(e)                # (already there: no change)
    return out


@pytest.mark.parametrize("fn", [set_loop_adds, set_loop_discards_caught, set_loop_adds_at_the_last_step,
                                set_loop_breaking_inside, set_loop_unchanged_size],
                         ids=lambda f: f.__name__)
def test_a_loop_over_a_set_that_changes_size_raises_as_in_python(fn):
    _check(fn, _t(3))


# ------------------------------------------------------------------ OrderedDict and dict subclasses

class OrderedSub(collections.OrderedDict):
    pass


def _mapping(kind, x):
    return {"subclass": OrderedSub, "ordered": collections.OrderedDict, "dict": dict}[kind](a=x, b=x + 1)


def mapping_loop_adds(kind, x):
    d = _mapping(kind, x)
    out = []
    try:
        for k in d:
            out.append(k)
            d["c" + k] = x
    except RuntimeError as e:
        out.append(str(e))
    ks = d.keys()
    d["z"] = x
    return out, len(ks), list(d.items())[0][0], type(ks).__name__


def mapping_loop_replaces_a_key(kind, x):
    """An OrderedDict raises on any change of its keys; a plain dict's case refuses to trace."""
    d = _mapping(kind, x)
    out = []
    try:
        for k, v in d.items():
            out.append(k)
            if k == "a":
                del d["b"]
                d["c"] = v
    except RuntimeError as e:
        out.append(str(e))
    return out


def mapping_values_loop_adds_once(kind, x):
    """An OrderedDict's iterator holds its next key: a key added at the last step is not seen."""
    d = _mapping(kind, x)
    out = []
    try:
        for v in d.values():
            out.append(v)
            if len(d) < 3:
                d["q"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out, len(d)


def mapping_loop_adds_at_the_last_step(kind, x):
    d = _mapping(kind, x)
    out = []
    try:
        for k in d:
            out.append(k)
            if k == "b":
                d["q"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out, list(d)


@pytest.mark.parametrize("kind", ["subclass", "ordered", "dict"])
@pytest.mark.parametrize("fn", [mapping_loop_adds, mapping_loop_replaces_a_key, mapping_values_loop_adds_once,
                                mapping_loop_adds_at_the_last_step], ids=lambda f: f.__name__)
def test_ordered_dicts_and_subclasses_raise_as_in_python(fn, kind):
    _check(fn, kind, _t(2))


# ------------------------------------------------------------------ itertools over lists
# chain, chain.from_iterable, pairwise, zip_longest and islice read their iterables step by step
# in Python. Over lists they took every item at the call, so a loop growing the list it walked
# through them stopped at the old length (a silent wrong answer), as plain loops did before
# session 53.

def chain_grows(x, ys):
    out = []
    for y in itertools.chain(ys, [x * 5]):
        if len(ys) < 5:
            ys.append(y * 2)
        out.append(y)
    return out


def chain_from_iterable_grows(x, ys):
    out = []
    for y in itertools.chain.from_iterable([ys, (x,)]):
        if len(ys) < 5:
            ys.append(y * 3)
        out.append(y)
    return out


def pairwise_grows(x, ys):
    out = []
    for a, b in itertools.pairwise(ys):
        if len(ys) < 6:
            ys.append(a + b)
        out.append(a - b)
    return out


def zip_longest_grows(x, ys):
    out = []
    for a, b in itertools.zip_longest(ys, [x, x], fillvalue=x * 0):
        if len(ys) < 5:
            ys.append(a * 2)
        out.append(a + b)
    return out


def islice_grows(x, ys):
    out = []
    for y in itertools.islice(ys, 1, 8, 2):
        if len(ys) < 8:
            ys.append(y * 3)
        out.append(y)
    return out


def islice_consumes_as_python(x, ys):
    """After its last item, islice consumes up to ``stop`` at its next step."""
    it = iter(ys)
    first = list(itertools.islice(it, 0, 3, 2))
    return first, list(it)


def chain_over_a_dict_that_grows(x, ys):
    d = {"a": x}
    out = []
    try:
        for k in itertools.chain(d, ["z"]):
            out.append(k)
            d[k + "1"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out


def _grow_at_a_break(ys, y):
    if len(ys) < 6 and y.sum().item() > -1e9:     # (a break: .item())
        ys.append(y + 1)


def chain_grows_at_a_break(x, ys):
    out = []
    for y in itertools.chain(ys, [x]):
        _grow_at_a_break(ys, y)
        out.append(y * 2)
    return out


def pairwise_grows_at_a_break(x, ys):
    out = []
    for a, b in itertools.pairwise(ys):
        _grow_at_a_break(ys, a)
        out.append(a - b)
    return out


def zip_longest_grows_at_a_break(x, ys):
    out = []
    for a, b in itertools.zip_longest(ys, [x, x], fillvalue=x * 0):
        _grow_at_a_break(ys, a)
        out.append(a + b)
    return out


def islice_grows_at_a_break(x, ys):
    out = []
    for y in itertools.islice(ys, 1, 7, 2):
        _grow_at_a_break(ys, y)
        out.append(y)
    return out


def _gen(x):
    for i in range(4):
        yield x * i


def pairwise_and_zip_longest_of_a_generator(x, ys):
    """Lazy over a generator too (they were refused there)."""
    return [a + b for a, b in itertools.pairwise(_gen(x))], list(itertools.zip_longest(_gen(x), ys[:2]))[-1][0]


@pytest.mark.parametrize("fn", [chain_grows, chain_from_iterable_grows, pairwise_grows, zip_longest_grows,
                                islice_grows, islice_consumes_as_python, chain_over_a_dict_that_grows,
                                chain_grows_at_a_break, pairwise_grows_at_a_break, zip_longest_grows_at_a_break,
                                islice_grows_at_a_break, pairwise_and_zip_longest_of_a_generator],
                         ids=lambda f: f.__name__)
def test_itertools_read_lists_step_by_step(fn):
    _check(fn, _t(3), [_t(3) for _ in range(3)], copies=lambda a: (a[0], list(a[1])))


def test_itertools_over_unchanged_lists_still_compile_whole():
    def f(x, ys):
        acc = x
        for a, b in itertools.pairwise(itertools.chain(ys, [x])):
            acc = acc + (a * b).sin()
        for y in itertools.islice(ys, 0, None, 2):
            acc = acc * y
        for a, b in itertools.zip_longest(ys, ys[:1], fillvalue=x):
            acc = acc - a * b
        return acc
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x, ys = _t(3), [_t(3) for _ in range(4)]
    _same(cf(x, ys), f(x, ys))
    assert be.frame_count == 1 and not dynamo.fallback_reasons


def _break_each_step(kind):
    def f(x, ys):
        if kind == "chain":
            it = itertools.chain(ys, [x])
        elif kind == "pairwise":
            it = itertools.pairwise(ys)
        elif kind == "zip_longest":
            it = itertools.zip_longest(ys, ys[:2], fillvalue=x)
        else:
            it = itertools.islice(ys, 1, None, 2)
        acc = x
        for item in it:
            a = item[0] * item[1] if isinstance(item, tuple) else item
            acc = (acc * a).sin() + a.sum().item()          # (a break in every step)
        return acc
    return f


@pytest.mark.parametrize("kind", ["chain", "pairwise", "zip_longest", "islice"])
def test_a_loop_over_itertools_of_lists_breaking_each_step_compiles_between_breaks(kind):
    """The break hands on the iterator's state (``resumable_iters``) and the resume function
    models it item by item: its tensor work compiles, and list lengths are guarded."""
    f = _break_each_step(kind)
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x = _t(3)
    for n in (4, 4, 5, 2):
        ys = [_t(3) for _ in range(n)]
        _same(cf(x, ys), f(x, ys))
    ops = [getattr(n.target, "__name__", n.target) for g in be.graphs for n in g.graph.nodes
           if n.op in ("call_function", "call_method")]
    assert "sin" in ops
    assert not any("non-iterator" in r for _, r in dynamo.fallback_reasons), dynamo.fallback_reasons


def comprehension_over_a_chain_breaking(x, ys):
    return [y * 2 + y.sum().item() for y in itertools.chain(ys, (x,))]


def test_a_comprehension_over_a_chain_breaking_inside():
    reasons = _check(comprehension_over_a_chain_breaking, _t(3), [_t(3) for _ in range(3)])
    assert not any("non-iterator" in r for r in reasons), reasons
