"""A loop over a dict that breaks the graph hands on CPython's own dict iterator (session 55).

At a graph break inside ``for k in d`` (or over ``d.keys()``, ``d.values()``, ``d.items()``)
the resume function used to get a tuple of the items left, read at the break: a breaking call
that set a later key's value was not seen (the loop used the old value), and one that added or
removed a key did not raise ``dictionary changed size during iteration``. Now it gets
``resumable_iters.DictIter``: CPython's iterator over the dict itself, moved on to where the
loop stood, which the resume function's trace models item by item. Each program is compared
with plain Python (results, raised errors, printed text, argument mutation) on every version."""
import collections
import itertools

import pytest

import ember
from ember import dynamo
from ember.dynamo.variables.resumable_iters import DictIter

from ._util import CountingBackend
from .test_views_and_reversed_s54 import _check, _same, _t


def _broken(x):
    """True, through a graph break (``.item()``)."""
    return x.sum().item() > -1e9


def _set_c(d, k, x):
    if _broken(x) and k == "a":
        d["c"] = x * 100


def _add_z(d, k, x):
    if _broken(x) and k == "b":
        d["z"] = x


def _drop_c(d, k, x):
    if _broken(x) and k == "a":
        del d["c"]


# ------------------------------------------------------------------ the breaking call changes the dict

def items_value_set_by_the_breaking_call(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for k, v in d.items():
        _set_c(d, k, x)
        out.append(v * 2)
    return out


def values_value_set_by_the_breaking_call(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    return [v + 1 for v in d.values() if _set_c(d, "a", x) is None]


def keys_loop_key_added_by_the_breaking_call(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    try:
        for k in d:
            _add_z(d, k, x)
            out.append(k)
    except RuntimeError as e:
        out.append(str(e))
    return out, x


def items_loop_key_added_after_the_last_item(x):
    d = {"a": x, "b": x + 1}
    out = []
    try:
        for k, v in d.items():
            _add_z(d, k, x)
            out.append(v + 1)
    except RuntimeError as e:
        out.append(str(e))
    return out


def items_loop_key_removed_by_the_breaking_call(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    try:
        for k, v in d.items():
            _drop_c(d, k, x)
            out.append(v * 3)
    except RuntimeError as e:
        out.append(str(e))
    return out


def ordered_dict_changed_by_the_breaking_call(x):
    d = collections.OrderedDict(a=x, b=x + 1, c=x + 2)
    out = []
    try:
        for v in d.values():
            _add_z(d, "b", x)
            out.append(v * 2)
    except RuntimeError as e:
        out.append(str(e))
    return out


class _Bag(dict):
    pass


def dict_subclass_value_set_by_the_breaking_call(x):
    d = _Bag(a=x, b=x + 1, c=x + 2)
    out = []
    for k, v in d.items():
        _set_c(d, k, x)
        out.append(v - 1)
    return out, type(d).__name__


@pytest.mark.parametrize("fn", [items_value_set_by_the_breaking_call, values_value_set_by_the_breaking_call,
                                keys_loop_key_added_by_the_breaking_call, items_loop_key_added_after_the_last_item,
                                items_loop_key_removed_by_the_breaking_call,
                                ordered_dict_changed_by_the_breaking_call,
                                dict_subclass_value_set_by_the_breaking_call])
def test_the_breaking_call_changing_the_dict_matches_python(fn):
    _check(fn, _t(3))


def outside_dict_changed_on_both_sides(x, d):
    out = []
    for k, v in d.items():
        _set_c(d, k, x)
        out.append(v * 2)
        d[k] = v + 1                     # (the frame writes too: replayed before the breaking call)
    return out, d


def test_an_outside_dict_matches_python():
    _check(outside_dict_changed_on_both_sides, _t(3), {"a": _t(3), "b": _t(3), "c": _t(3)},
           copies=lambda a: (a[0], dict(a[1])))


# ------------------------------------------------------------------ the resume function changes the dict

def resumed_loop_sets_a_later_value(x):
    """After the break, the trace of the resume function holds the dict (``d`` is used after the
    loop) and sets a later value before its next step: the step reads it from the trace."""
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for k, v in d.items():
        _broken(x)
        d["c"] = v * 10
        out.append(v)
    return out, d


def resumed_loop_adds_a_key(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    try:
        for k in d:
            _broken(x)
            out.append(k)
            if k == "b":
                d["z"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out, len(d)


def resumed_loop_adds_after_the_last_item(x):
    d = {"a": x, "b": x + 1}
    out = []
    try:
        for k in d:
            _broken(x)
            out.append(k)
            if k == "b":
                d["z"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out


def resumed_ordered_dict_adds_after_the_last_item(x):
    """An OrderedDict's iterator does not see a key added after its last item (no next key)."""
    d = collections.OrderedDict(a=x, b=x + 1)
    out = []
    for k in d:
        _broken(x)
        out.append(k)
        if k == "b":
            d["z"] = x
    return out, list(d)


@pytest.mark.parametrize("fn", [resumed_loop_sets_a_later_value, resumed_loop_adds_a_key,
                                resumed_loop_adds_after_the_last_item,
                                resumed_ordered_dict_adds_after_the_last_item])
def test_the_resume_function_changing_the_dict_matches_python(fn):
    _check(fn, _t(3))


# ------------------------------------------------------------------ wrapped and combined

def enumerate_items_at_a_break(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for i, (k, v) in enumerate(d.items()):
        _set_c(d, k, x)
        out.append(v * i)
    return out


def zip_keys_and_list_at_a_break(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for k, y in zip(d, [x, x * 2, x * 3]):
        _set_c(d, k, x)
        out.append(d[k] + y)
    return out


def chain_of_a_dict_at_a_break(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for v in itertools.chain(d.values(), [x]):
        _set_c(d, "a", x)
        out.append(v + 1)
    return out


def iterator_taken_before_the_loop(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    it = iter(d.items())
    first = next(it)
    _set_c(d, "a", x)
    return first[1] * 1, [v for _, v in it], next(it, "done")


@pytest.mark.parametrize("fn", [enumerate_items_at_a_break, zip_keys_and_list_at_a_break,
                                chain_of_a_dict_at_a_break, iterator_taken_before_the_loop])
def test_wrapped_dict_iterators_match_python(fn):
    _check(fn, _t(3))


# ------------------------------------------------------------------ compiled between the breaks

def test_a_loop_breaking_each_step_reuses_one_resume_entry():
    """The resume function models the iterator item by item, guarding only "more than k left":
    one compiled entry serves every iteration that does not look at its key, and the loop's
    arithmetic is in the graphs (not run eagerly)."""
    def f(x, d):
        acc = x
        for v in d.values():
            acc = (acc * v).sin() + v.sum().item()
        return acc
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    x = _t(3)
    for n in (5, 5, 3):
        d = {f"k{i}": _t(3) for i in range(n)}
        _same(cf(x, d), f(x, d))
    ops = [getattr(n.target, "__name__", n.target) for g in be.graphs for n in g.graph.nodes
           if n.op in ("call_function", "call_method")]
    assert "sin" in ops
    assert len(be.graphs) <= 4, len(be.graphs)        # the frame's and the resume function's
    assert not any("keys changed" in r or "non-iterator" in r for _, r in dynamo.fallback_reasons)


def test_the_handed_on_iterator_steps_as_cpython():
    """DictIter itself: CPython's iterator underneath (live values, size checks), its position counted."""
    d = {"a": 1, "b": 2, "c": 3}
    it = DictIter(d, "items", False, 1)
    d["c"] = 30
    assert next(it) == ("b", 2) and it.pos == 2 and it.__length_hint__() == 1
    assert next(it) == ("c", 30)
    d["z"] = 0
    with pytest.raises(RuntimeError, match="changed size"):
        next(it)
    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    it = DictIter(od, "keys", True, 0)
    assert list(it) == ["b", "a"] and it.it is None
    assert list(it) == []


def test_wrapped_loops_compile_with_the_dict_live():
    """enumerate/zip/chain over a dict read it step by step (they took its items at the call, so
    the value a breaking call set was not seen): no frame of these runs eagerly."""
    for fn in (enumerate_items_at_a_break, zip_keys_and_list_at_a_break, chain_of_a_dict_at_a_break):
        reasons = _check(fn, _t(3))
        assert all(r.startswith("graph break: Tensor.item()") for r in reasons), reasons


def test_a_view_of_a_dict_subclass_made_in_the_frame_stays_live():
    """A view returned from the frame is the view of the object (``dict.keys(obj)``), not of a copy
    of its items: a key added afterwards is in it, as in Python."""
    def f(x):
        b = _Bag(a=x)
        return b, b.keys(), b.items()
    dynamo.reset()
    b, ks, its = ember.compile(f, backend=CountingBackend())(_t(2))
    b["z"] = 1
    assert type(b) is _Bag and list(ks) == ["a", "z"] and len(its) == 2


def ordered_dict_last_key_removed_and_added_back(x):
    """The keys are the same and in the same order after the step, but CPython's OrderedDict
    iterator sees a mutation (its state counter moved) and raises at its next step."""
    d = collections.OrderedDict(a=x, b=x + 1, c=x + 2)
    out = []
    try:
        for k in d:
            out.append(k)
            if k == "a":
                v = d.pop("c")
                d["c"] = v * 2
    except RuntimeError as e:
        out.append(str(e))
    return out, list(d)


def plain_dict_last_key_removed_and_added_back(x):
    """A plain dict's iterator only counts: the same keys in the same order go on."""
    d = {"a": x, "b": x + 1, "c": x + 2}
    out = []
    for k in d:
        out.append(k)
        if k == "a":
            del d["c"]
            d["c"] = x
    return out, [v * 1 for v in d.values()]


def test_a_key_removed_and_added_back_matches_python():
    reasons = _check(ordered_dict_last_key_removed_and_added_back, _t(3))
    assert not reasons, reasons
    reasons = _check(plain_dict_last_key_removed_and_added_back, _t(3))
    assert not reasons, reasons


def resumed_ordered_dict_key_removed_and_added_back(x):
    d = collections.OrderedDict(a=x, b=x + 1, c=x + 2)
    out = []
    try:
        for k in d:
            _broken(x)
            out.append(k)
            if k == "a":
                d["c"] = d.pop("c") * 2
    except RuntimeError as e:
        out.append(str(e))
    return out, list(d)


def test_a_resumed_ordered_dict_loop_sees_a_key_removed_and_added_back():
    _check(resumed_ordered_dict_key_removed_and_added_back, _t(3))


def key_replaced_at_the_last_item(x):
    """At the last item, one key removed and another added: CPython's iterator finds the new key
    in its table where it expected none ("dictionary keys changed during iteration"). The trace
    cannot follow the table: the frame runs as in Python (it used to end the loop quietly)."""
    d = {"a": x, "b": x + 1}
    out = []
    try:
        for k in d:
            out.append(k)
            if k == "b":
                del d["a"]
                d["z"] = x
    except RuntimeError as e:
        out.append(str(e))
    return out


def test_a_key_replaced_at_the_last_item_matches_python():
    reasons = _check(key_replaced_at_the_last_item, _t(3))
    assert any("keys changed during a loop" in r for r in reasons), reasons
