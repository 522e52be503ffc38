"""``collections.deque``, named tuples' ``_replace``/``_asdict``, ``copy.copy``, ``complex``/``bytes``
of constants, and a partial's identity across a graph break (session 57).

A deque broke the graph ("constructing a deque object"); one kept on a module as a rolling
buffer (``self.history.append(x)``) too. ``NT._replace`` broke it. A ``functools.partial`` made
in the frame was rebuilt once per reference at a break, so ``p is q`` became False and a change
through one was lost (a silent wrong answer, now that ``keywords`` is readable). Each is
compared with plain Python: results, raised errors and messages, mutated arguments."""
import collections
import copy
import functools
import typing

import pytest

import ember
import ember.nn as nn
from ember import dynamo

from .test_lazy_itertools_s56 import _compiles_between_breaks
from .test_views_and_reversed_s54 import _check, _t


def _no_breaks(fn, *args, copies=None):
    reasons = _check(fn, *args, copies=copies)
    assert reasons == [], reasons
    assert dynamo.counters["eager_fallback"] == 0


# ------------------------------------------------------------------ deque

def deque_ends_and_maxlen(x):
    d = collections.deque([1, 2, 3], maxlen=3)
    d.append(4)
    d.appendleft(0)
    d.extend([7, 8])
    d.extendleft([5])
    d.rotate(1)
    return x * d[0] + d.pop() + d.popleft() + len(d), d, d.maxlen


def deque_of_tensors_walked(x):
    d = collections.deque()
    d.append(x)
    d.append(x * 2)
    d.appendleft(x - 1)
    s = x
    for t in d:
        s = s + t
    return s, list(d), d[-1]


def deque_edits(x):
    d = collections.deque([3, 1, 2, 1])
    d.remove(1)
    d.insert(0, 9)
    d[1] = 5
    del d[0]
    d.rotate(-2)
    d.reverse()
    return x * d.index(2) + d.count(1), d.copy(), 5 in d, bool(d), repr(d)


def deque_extends_with_itself(x):
    d = collections.deque([x, x * 2], maxlen=3)
    d.extend(d)
    return list(d), len(d), d.maxlen


def deque_of_maxlen_zero(x):
    d = collections.deque(maxlen=0)
    d.append(x)
    return len(d), x + 1


@pytest.mark.parametrize("fn", [deque_ends_and_maxlen, deque_of_tensors_walked, deque_edits,
                                deque_extends_with_itself, deque_of_maxlen_zero])
def test_deque_compiles_without_a_break(fn):
    _no_breaks(fn, _t(3))


def deque_mutated_while_walked(x):
    d = collections.deque([1, 2])
    try:
        for v in d:
            d.append(v)
    except RuntimeError as e:
        return x, str(e), list(d)


def deque_item_set_while_walked(x):
    d = collections.deque([1, 2])
    out = []
    for v in d:
        d[1] = 7              # (not a change of the deque's state: CPython's iterator goes on)
        out.append(x * v)
    return out


def deque_errors(x, which):
    d = collections.deque([1, 2], maxlen=2)
    if which == 0:
        return collections.deque().pop()
    if which == 1:
        return d[5]
    if which == 2:
        return d[0:1]
    if which == 3:
        return d.insert(0, 3)
    if which == 4:
        return d.remove(9)
    return collections.deque(maxlen=-1)


def test_deque_iteration_rules():
    _no_breaks(deque_mutated_while_walked, _t(3))
    _no_breaks(deque_item_set_while_walked, _t(3))


@pytest.mark.parametrize("which", range(6))
def test_deque_errors_are_pythons(which):
    _check(deque_errors, _t(3), which)


class History(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.history = collections.deque(maxlen=2)

    def forward(self, x):
        y = self.lin(x)
        self.history.append(y)
        return sum(self.history) / len(self.history)


def test_a_modules_rolling_buffer():
    """The deque on the module is the same object after each call, holding what eager's holds."""
    ember.manual_seed(0)
    m = History()
    ref = History()
    ref.load_state_dict(m.state_dict())
    dynamo.reset()
    cm = ember.compile(m, backend="eager")
    buf = m.history
    for _ in range(4):
        x = _t(2, 3)
        got, want = cm(x), ref(x)
        assert m.history is buf and len(m.history) == len(ref.history)
        assert ember.allclose(got, want, atol=1e-6)
        for a, b in zip(m.history, ref.history):
            assert ember.allclose(a, b, atol=1e-6)
    assert dynamo.fallback_reasons == []


def deque_at_a_graph_break(x, ys):
    d = collections.deque(maxlen=3)
    e = d                      # (two references: one object after the break)
    for y in ys:
        d.append(y.sin())
        x = x + sum(d)
        x.sum().item()
    e.append(x)
    return x, d is e, len(d)


def test_deque_across_graph_breaks():
    _compiles_between_breaks(deque_at_a_graph_break, [lambda: (_t(3), [_t(3) for _ in range(4)])], 4)


# ------------------------------------------------------------------ named tuples

class NT(typing.NamedTuple):
    a: object
    b: int = 5


P = collections.namedtuple("P", "x y")


def namedtuple_methods(x, p):
    t = NT(x)
    r = t._replace(b=3)
    d = r._asdict()
    q = p._replace(y=x * 2)
    return r.a * r.b + d["b"], d, q, t._fields, NT._field_defaults, q._asdict(), r._field_defaults


def namedtuple_replace_unknown_field(x):
    try:
        NT(x)._replace(c=1)
    except ValueError as e:
        return x, str(e)


class Overriding(collections.namedtuple("Overriding", "a")):
    def _replace(self, **kw):
        return "mine"


def namedtuple_with_its_own_replace(x):
    return x, Overriding(1)._replace(a=2)


def test_namedtuple_methods():
    _no_breaks(namedtuple_methods, _t(3), P(1, 2))
    _no_breaks(namedtuple_replace_unknown_field, _t(3))
    _check(namedtuple_with_its_own_replace, _t(3))


# ------------------------------------------------------------------ a partial's identity

def partial_aliased_across_a_break(x):
    p = functools.partial(ember.add, alpha=1)
    q = p
    x.sum().item()
    q.keywords["alpha"] = 3
    return p(x, x), p is q


def test_a_partial_is_one_object_after_a_graph_break():
    _check(partial_aliased_across_a_break, _t(3))


# ------------------------------------------------------------------ copy.copy

class _Plain:
    pass


def copies(x, d):
    e = copy.copy(d)
    e["k"] = 1
    lst = copy.copy([x])
    lst.append(2)
    t = (1, [2])
    return x * len(e) + len(d), lst, copy.copy(t) is t, list(copy.copy(collections.deque([x], 3))), copy.copy({1})


def copy_of_an_object(x):
    return x + 1, type(copy.copy(_Plain())).__name__


def test_copy_copy():
    _no_breaks(copies, _t(3), {"a": 1}, copies=lambda a: (a[0], dict(a[1])))
    # an object copy.copy cannot copy in the trace: a break names it, the real copy.copy runs
    reasons = _check(copy_of_an_object, _t(3))
    assert len(reasons) == 1 and "graph_break() called: copy.copy of a _Plain" in reasons[0], reasons


# ------------------------------------------------------------------ complex and bytes of constants

def complex_and_bytes(x):
    return x * abs(complex(3, 4)) + len(bytes([1, 2])) + complex("1+2j").imag, bytes(3), complex(1.5), b"ab" + bytes(1)


def complex_of_a_tensor(x):
    return complex(x.sum())


def test_complex_and_bytes_of_constants_fold():
    _no_breaks(complex_and_bytes, _t(3))
    _check(complex_of_a_tensor, _t(3))       # (reads tensor data: a break, then Python's value)


# ------------------------------------------------------------------ ember.distributed checks

def distributed_checks(x):
    import ember.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return x * 2
    return x + 1


def test_distributed_availability_checks_fold_and_is_initialized_is_guarded(monkeypatch):
    """``dist.is_available()``/``is_initialized()`` (model code asks before any collective) were
    recorded as graph operators and broke the graph; they fold now, the second under a guard:
    a process group set up between two calls recompiles instead of reusing the old answer."""
    from ember.distributed import distributed_c10d as c10d
    dynamo.reset()
    cf = ember.compile(distributed_checks, backend="eager")
    x = _t(3)
    assert ember.allclose(cf(x), x + 1)
    monkeypatch.setattr(c10d, "_WORLD", object())        # (what init_process_group leaves set)
    assert ember.allclose(cf(x), x * 2)
    assert dynamo.fallback_reasons == []
    assert dynamo.counters["recompiles"] == 1
