"""``dict.update`` with pairs, ``d | e``, ``d |= e``, ``dict.fromkeys``, ``popitem``, an OrderedDict's
``move_to_end``, ``list.remove`` and ``copy()`` of a defaultdict or OrderedDict (session 56).

``defaultdict.copy()`` made a plain dict: a missing key read through the copy raised KeyError in
the compiled frame where Python inserts the default. The others broke the graph ("dict.update
with a non-dict", "operator ior on DictVariable", "attribute 'fromkeys' of builtin dict",
"dict.move_to_end", "list.remove"); they compile now. Each compared with plain Python (results,
raised errors, printed text, argument mutation)."""
import collections
import enum

import pytest

from ember import dynamo

from .test_views_and_reversed_s54 import _check, _t


def defaultdict_copy_keeps_its_factory(x):
    d = collections.defaultdict(list)
    d["a"].append(x)
    e = d.copy()
    e["b"].append(x * 2)
    o = collections.OrderedDict(a=1, b=2).copy()
    o.move_to_end("a")
    return type(e).__name__, e["b"][0], dict(e)["a"][0], type(o).__name__, list(o), type({"k": 1}.copy()).__name__


def update_with_pairs_and_keywords(x):
    d = {"a": x}
    d.update([("b", x * 2), ["c", 3]], e=x + 1)
    d.update((k, v) for k, v in [("f", 4)])
    d.update({"g": 5}.items())
    d.update(["hi"])                       # (a two-character string is a pair)
    return d


def or_and_ior(x):
    d = {"a": x, "b": 1}
    e = d | {"b": 2, "c": x * 3}
    d |= [("z", 9)]
    d |= {"a": 0}
    dd = collections.defaultdict(int, {"k": 1}) | {"j": 2}
    od = collections.OrderedDict(p=1) | {"q": x}
    return d, e, type(dd).__name__, dd["missing"], list(dd), type(od).__name__, list(od)


def fromkeys_shares_one_value(x):
    d = dict.fromkeys(["a", "b", "c"], [])
    d["a"].append(x)
    z = dict.fromkeys("xy")
    return len(d["c"]), d["b"][0] * 2, z


def popitem_and_move_to_end(x):
    d = {"a": x, "b": x * 2, "c": 3}
    k, v = d.popitem()
    od = collections.OrderedDict(a=1, b=2, c=3, d=4)
    f = od.popitem(last=False)
    od.move_to_end("b")
    od.move_to_end("d", last=False)
    return k, v, list(d), f, list(od)


def errors_as_python(x):
    out = []
    for fn in (lambda: {}.popitem(), lambda: collections.OrderedDict().popitem(),
               lambda: collections.OrderedDict(a=1).move_to_end("q"), lambda: {}.update([(1, 2, 3)]),
               lambda: [1, 2].remove(5), lambda: [1, 2].index(5), lambda: (1, 2).index(3)):
        try:
            fn()
        except (KeyError, ValueError) as e:
            out.append((type(e).__name__, str(e)))
    return x + 1, out


def ordered_dict_loop_with_move_to_end(x):
    od = collections.OrderedDict(a=x, b=x, c=x)
    out = []
    try:
        for k in od:
            out.append(k)
            od.move_to_end("a")
    except RuntimeError as e:
        out.append(str(e))
    return out


def list_remove(x):
    ys = [1, "a", 2.0, 2, "a"]
    ys.remove("a")
    ys.remove(2)           # (2 == 2.0: the first equal item goes)
    zs = [x, x * 2]
    zs.remove(zs[0])       # (the same tracker: identity, before any == )
    return ys, zs, ys.index(2.0), (1, "a", None).index(None)


@pytest.mark.parametrize("fn", [defaultdict_copy_keeps_its_factory, update_with_pairs_and_keywords, or_and_ior,
                                fromkeys_shares_one_value, popitem_and_move_to_end, errors_as_python,
                                ordered_dict_loop_with_move_to_end, list_remove], ids=lambda f: f.__name__)
def test_dict_and_list_methods_as_python(fn):
    reasons = _check(fn, _t(3))
    assert not reasons, reasons        # (each compiles whole: none breaks the graph)


def outside_dicts_changed(x, d, od):
    d |= {"n": x}
    d.update([("m", 1)])
    k = od.popitem(last=False)
    od.move_to_end("c", last=False)
    return k, list(d), list(od)


def test_outside_dicts_changed_as_python():
    _check(outside_dicts_changed, _t(3), {"a": 1}, collections.OrderedDict(a=1, b=2, c=3),
           copies=lambda a: (a[0], dict(a[1]), collections.OrderedDict(a[2])))


def test_list_remove_of_a_tensor_among_others_refuses():
    def f(x, y):
        ys = [x, y]
        ys.remove(y)         # (x == y would be an elementwise tensor: Python raises for 3 elements)
        return ys
    x, y = _t(3), _t(3)
    dynamo.reset()
    reasons = _check(f, x, y)
    assert any("index/remove" in r for r in reasons), reasons


# ------------------------------------------------------------------ Enum classes
# A loop over an Enum class (``for c in Color``) broke the graph ("iterating over
# ClassVariable(Color)"); its members are read as ``list(Color)`` gives them (aliases and a Flag's
# combined values left out), and ``v in Color`` is Python's own test (True/False for a value on
# 3.12+, TypeError on 3.11).

class _Color(enum.Enum):
    R = 1
    G = 2
    B = 2          # an alias of G: not iterated


class _Perm(enum.Flag):
    X = 1
    W = 2
    XW = 3         # a combination: not iterated (3.11+)


def enum_members(x):
    acc = x
    for c in _Color:
        acc = acc * c.value
    return acc, [c.name for c in _Color], len(_Color), list(_Perm), sorted(m.value for m in _Perm)


def enum_membership(x):
    out = []
    for v in (1, _Color.G, "R", 5, _Perm.X):
        try:
            out.append(v in _Color)
        except TypeError as e:
            out.append(type(e).__name__)
    return x + 1, out, _Perm.X in _Perm


def test_enum_class_iteration_compiles():
    assert not _check(enum_members, _t(3))


def test_enum_membership_as_python():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)       # (3.11's "in 3.12 __contains__ will ...")
        _check(enum_membership, _t(3))
