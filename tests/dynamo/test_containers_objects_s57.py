"""Containers and user objects in compiled frames (session 57).

Each of these broke the graph, and several gave silent wrong answers; each is compared with
plain Python (results, raised errors and messages, mutated arguments):

* ``collections.deque`` (made in the frame, or a rolling buffer kept on a module);
* named tuples' ``_replace``/``_asdict``/``_fields``; ``copy.copy``; ``complex``/``bytes`` of
  constants; ``ember.distributed.is_available()``/``is_initialized()``;
* a ``functools.partial`` made in the frame was rebuilt once per reference at a break (``p is q``
  False, a change through one lost: wrong);
* objects of user classes: a Python ``__getattr__`` (an object answering every name was taken
  for an ember marker), property setters, loops over ``__iter__``/``__next__`` or
  ``__getitem__`` objects and ``len()`` of them, ``setattr()``; a ``cached_property`` or another
  descriptor read on an object made in the frame gave the descriptor object itself (wrong)."""
import abc
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


# ------------------------------------------------------------------ objects answering any attribute

class _Anything:
    """A proxy whose ``__getattr__`` answers every name (a mock, a config wrapper)."""

    def __getattr__(self, name):
        return 1

    def __call__(self, x):
        return x * 3


def call_an_anything(x, a):
    return a(x) + a.width


def test_an_object_answering_every_attribute_is_not_taken_for_an_ember_marker():
    """dynamo reads ``_ember_*`` marker attributes of what it wraps; through ``__getattr__`` this
    object claimed every marker, became ``ember.compiler.is_compiling`` and broke the graph
    ("cannot return/reconstruct IsCompilingVariable")."""
    _no_breaks(call_an_anything, _t(3), _Anything())


class _Config:
    """Attributes read from a dict through ``__getattr__`` (a common config wrapper)."""

    def __init__(self, d):
        self._d = d

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name)


def read_a_config(x, c):
    return x * c.scale + getattr(c, "missing", 3) + hasattr(c, "bias")


def test_a_python_getattr_is_inlined_and_what_it_read_is_guarded():
    dynamo.reset()
    cf = ember.compile(read_a_config, backend="eager")
    x, c = _t(3), _Config({"scale": 2.0})
    for change in (None, lambda: c._d.__setitem__("scale", 5.0), lambda: c._d.__setitem__("bias", 1),
                   lambda: setattr(c, "missing", 10)):
        if change:
            change()
        assert ember.allclose(cf(x, c), read_a_config(x, c))
    assert dynamo.fallback_reasons == []
    assert dynamo.counters["recompiles"] == 3        # (each change is seen by a guard)


# ------------------------------------------------------------------ property setters

class _WithProperty:
    def __init__(self):
        self._x = 1

    @property
    def x(self):
        return self._x

    @x.setter
    def x(self, v):
        self._x = v * 2

    @property
    def read_only(self):
        return 5


def property_set_on_a_new_object(x):
    p = _WithProperty()
    p.x = 3
    return x * p.x, p._x


def property_set_on_an_argument(x, p):
    p.x = x.shape[0]
    return x * p.x


def property_without_a_setter(x, p):
    try:
        p.read_only = 1
    except AttributeError as e:
        return x, str(e)


def test_a_property_setter_is_inlined():
    """``obj.x = v`` with ``x`` a property broke the graph ("assignment to descriptor"); the
    setter runs in the trace now, and on an argument its writes are replayed after the graph."""
    _no_breaks(property_set_on_a_new_object, _t(3))
    _no_breaks(property_set_on_an_argument, _t(3), _WithProperty())
    dynamo.reset()
    p = _WithProperty()
    ember.compile(property_set_on_an_argument, backend="eager")(_t(4), p)
    assert p._x == 8
    _no_breaks(property_without_a_setter, _t(3), _WithProperty())


# ------------------------------------------------------------------ user iterators and containers

class _Countdown:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


class _Pair:
    """Iterable through ``__iter__`` returning another iterator, sized by ``__len__``."""

    def __init__(self, a, b):
        self.items = [a, b]

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


class _Seq:
    """Only ``__getitem__``: iterated by the old sequence protocol (until IndexError)."""

    def __init__(self, xs):
        self.xs = xs

    def __getitem__(self, i):
        return self.xs[i]


class _BadLen:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def iterate_user_objects(x, outside):
    s = x
    for k in _Countdown(3):
        s = s + k
    for t in _Pair(x, x * 2):
        s = s * t
    s = s + sum(_Seq([1, 2, 3])) + len(_Pair(1, 2))
    for k in outside:               # (an argument: its count is replayed onto it)
        s = s - k
    return s, list(_Countdown(2))


def bad_lengths(x, n):
    try:
        return len(_BadLen(n))
    except (TypeError, ValueError) as e:
        return x, type(e).__name__, str(e)


def test_user_iterators_and_len():
    """Loops over objects of user classes (``__iter__``/``__next__``, or ``__getitem__`` alone)
    and ``len()`` of them broke the graph ("iterating over NewObjectVariable")."""
    dynamo.reset()
    cf = ember.compile(iterate_user_objects, backend="eager")
    x = _t(3)
    a, b = _Countdown(2), _Countdown(2)
    got, want = cf(x, a), iterate_user_objects(x, b)
    assert ember.allclose(got[0], want[0]) and got[1] == want[1]
    assert a.n == b.n == 0
    assert dynamo.fallback_reasons == []
    for n in (2, -1, 1.5):
        _check(bad_lengths, _t(3), n)


# ------------------------------------------------------------------ descriptors on objects made in the frame

class _Cached:
    calls = 0

    def __init__(self, k):
        self.k = k

    @functools.cached_property
    def val(self):
        return self.k * 3


class _Scaled:
    """A descriptor whose value depends on the instance it is read from."""

    def __get__(self, obj, typ=None):
        return self if obj is None else obj.k * 10


class _HasScaled:
    d = _Scaled()

    def __init__(self):
        self.k = 4


def cached_property_of_a_new_object(x):
    c = _Cached(2)
    a = c.val
    c.k = 5                      # (cached: the second read gives the first value)
    return x * a, c.val


def descriptor_of_a_new_object(x):
    return x + 1, _HasScaled().d


def test_descriptors_of_objects_made_in_the_frame():
    """Read through the class, these gave the descriptor object itself: a cached_property's
    value was the ``cached_property``, ``_HasScaled().d`` the ``_Scaled`` (silent wrong answers).
    A cached_property is computed and kept now; another descriptor breaks the graph, and
    Python's value comes out."""
    _no_breaks(cached_property_of_a_new_object, _t(3))
    reasons = _check(descriptor_of_a_new_object, _t(3))
    assert reasons and all("descriptor attribute _HasScaled.d" in r for r in reasons), reasons


# ------------------------------------------------------------------ setattr()

class _Box:
    def __init__(self, v):
        self.v = v


def set_attributes(x, o, m):
    b = _Box(1)
    setattr(b, "q", 5)
    setattr(o, "w", x * 2)
    setattr(m, "flag", 3)
    return x * getattr(b, "q") + b.v + o.w + m.flag


def setattr_with_a_bad_name(x):
    try:
        setattr(_Box(1), 1, 2)
    except TypeError as e:
        return x, str(e)


def test_setattr_is_attribute_assignment():
    """``setattr(obj, "name", v)`` broke the graph ("unsupported builtin setattr"): it is
    ``obj.name = v`` now, replayed on outside objects after the graph."""
    dynamo.reset()
    cf = ember.compile(set_attributes, backend="eager")
    x = _t(3)
    o1, o2, m1, m2 = _Box(0), _Box(0), nn.Linear(2, 2), nn.Linear(2, 2)
    assert ember.allclose(cf(x, o1, m1), set_attributes(x, o2, m2))
    assert ember.allclose(o1.w, o2.w) and m1.flag == m2.flag == 3
    assert dynamo.fallback_reasons == []
    _no_breaks(setattr_with_a_bad_name, _t(3))


# ------------------------------------------------------------------ abc.ABC and typing.Generic subclasses

class _Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...


class _Square(_Shape):
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s * self.s


_T = typing.TypeVar("_T")


class _Holder(typing.Generic[_T]):
    def __init__(self, v):
        self.v = v


def make_abc_and_generic_objects(x):
    sq = _Square(x)
    return sq.area() + _Holder(2).v, isinstance(sq, _Shape)


def make_an_abstract_object(x):
    try:
        _Shape()
    except TypeError:
        return x - 1
    return x


def test_objects_of_abc_and_generic_subclasses_are_made_in_the_frame():
    """``abc.ABC`` and ``typing.Generic`` declare an empty ``__slots__``; that made every subclass
    count as a slots class, whose construction broke the graph."""
    _no_breaks(make_abc_and_generic_objects, _t(3))
    _check(make_an_abstract_object, _t(3))


# ------------------------------------------------------------------ operators of user classes

class _Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        return _Vec(self.t + o.t) if isinstance(o, _Vec) else NotImplemented

    def __mul__(self, k):
        return _Vec(self.t * k)

    __rmul__ = __mul__

    def __iadd__(self, o):
        self.t = self.t + o.t
        return self

    def __neg__(self):
        return _Vec(-self.t)

    def __abs__(self):
        return _Vec(self.t.abs())

    def __eq__(self, o):
        return isinstance(o, _Vec) and o.t is self.t

    __hash__ = None


class _SubVec(_Vec):
    def __rmul__(self, k):
        return "the subclass's"


@functools.total_ordering
class _Version:
    def __init__(self, v):
        self.v = v

    def __eq__(self, o):
        return self.v == o.v

    def __lt__(self, o):
        return self.v < o.v


def vector_arithmetic(x):
    a = _Vec(x) + _Vec(x) * 2
    b = 3 * _Vec(x)
    keep = a
    a += b                              # (__iadd__: the same object)
    c = -abs(_Vec(x - 1))
    return a.t, c.t, keep is a, _Vec(x) == _Vec(x), _Vec(x) != 1, 2 * _SubVec(x)


def comparisons(x):
    return x, _Version(1) < _Version(2), _Version(3) >= _Version(2), _Version(1) == _Version(1), \
        sorted([_Version(3), _Version(1)])[0].v, max(_Version(2), _Version(5)).v


def operator_errors(x, which):
    try:
        if which == 0:
            return _Vec(x) + 1
        if which == 1:
            return ~_Vec(x)
        if which == 2:
            return _Vec(x) < _Vec(x)
        v = _Vec(x)
        v -= 1
    except TypeError as e:
        return x, str(e)


def test_operators_of_user_classes():
    """``Vec(a) + Vec(b)``, ``3 * v``, ``v += w``, ``-v``, ``abs(v)``, comparisons (through
    ``functools.total_ordering`` too): the user's dunders, dispatched as CPython dispatches them,
    are inlined. They broke the graph ("operator add on NewObjectVariable")."""
    _no_breaks(vector_arithmetic, _t(3))
    _no_breaks(comparisons, _t(3))
    for which in range(4):
        _no_breaks(operator_errors, _t(3), which)


class _Loud:
    def __init__(self, v):
        self.v = v

    def __lt__(self, o):
        print("lt", self.v, o.v)          # (the calls, in Python's order, are part of the output)
        return self.v < o.v


def sorting_user_objects(x):
    xs = [_Loud(v) for v in (3, 1, 2, 5, 4)]
    s = sorted(xs)
    r = sorted(xs, key=lambda o: o, reverse=True)
    return x * s[0].v, [o.v for o in r], max(xs).v, min(xs, key=lambda o: o).v


def test_sorting_user_objects_makes_pythons_comparisons():
    _no_breaks(sorting_user_objects, _t(3))


class _Lenient:
    """Made in the frame; unknown names come from ``__getattr__``."""

    def __init__(self):
        self.known = 2

    def __getattr__(self, name):
        if name.startswith("x_"):
            return len(name)
        raise AttributeError(name)


def lenient_object_made_in_the_frame(x):
    o = _Lenient()
    return x * o.known + o.x_abc, getattr(o, "other", -1), hasattr(o, "x_q")


def test_a_getattr_of_an_object_made_in_the_frame():
    _no_breaks(lenient_object_made_in_the_frame, _t(3))


class _Flag:
    def __init__(self, n):
        self.n = n

    def __bool__(self):
        return self.n > 0


class _Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class _BadBool:
    def __bool__(self):
        return 1


def truth_of_user_objects(x, o):
    r = x * (1 if _Flag(0) else 2) + (3 if _Sized(2) else 4) + (5 if _Box(0) else 6) + (7 if o else 8)
    try:
        bool(_BadBool())
    except TypeError as e:
        msg = str(e)
    return r + (not _Sized(0)), msg


def test_truth_of_user_objects():
    """``if obj:`` with a user ``__bool__``/``__len__`` broke the graph; now as CPython decides it."""
    _no_breaks(truth_of_user_objects, _t(3), _Flag(1))
    _no_breaks(truth_of_user_objects, _t(3), _Sized(0))


# ------------------------------------------------------------------ modules as dict keys

class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x):
        outs = {m: m(x) for m in self.children()}
        scale = {self.a: 2.0}
        total = sum(v.sum() for v in outs.values())
        for m, y in outs.items():
            total = total + y.mean() * scale.get(m, 1.0) + (m in scale)
        return total, outs, len(outs)


def test_modules_as_dict_keys():
    """A dict keyed by modules (identity-hashed, as tensors are) broke the graph ("dict with a
    non-constant key"); the returned dict holds the very modules."""
    ember.manual_seed(0)
    net = _TwoHeads()
    dynamo.reset()
    cnet = ember.compile(net, backend="eager")
    x = _t(2, 3)
    got, want = cnet(x), net(x)
    assert ember.allclose(got[0], want[0], atol=1e-6) and got[2] == want[2]
    assert list(got[1]) == [net.a, net.b] and all(ember.allclose(got[1][m], want[1][m]) for m in want[1])
    assert dynamo.fallback_reasons == []


# ------------------------------------------------------------------ identity of outside objects

def same_object(x, a, b):
    return x + 1 if a is b else x - 1


def equal_objects(x, a, b):
    return x + 1 if a == b else x - 1        # (no __eq__: identity)


@pytest.mark.parametrize("fn", [same_object, equal_objects])
def test_identity_of_two_outside_objects_is_guarded(fn):
    """Objects of user classes are guarded by type only: ``a is b`` was decided once and the
    graph reused when another call passed two objects (a silent wrong answer)."""
    dynamo.reset()
    cf = ember.compile(fn, backend="eager")
    x, o1, o2 = _t(3), _Box(1), _Box(1)
    for a, b in ((o1, o1), (o1, o2), (o2, o2), (o2, o1)):
        assert ember.allclose(cf(x, a, b), fn(x, a, b))
    assert dynamo.fallback_reasons == []
