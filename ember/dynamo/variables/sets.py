"""Sets of Python constants: ``{a, b}``, ``set(...)``, set comprehensions and the set methods.

A ``SetVariable`` holds a *real* Python set of the element values, built by the same sequence of
insertions, deletions and set operations the program performs, so iterating it yields the order
the program itself would see (set order depends on the hashes and on the insertion history, both
of which are replayed; string hashes are per process, and a trace is made in the process that
runs it). Only hashable constants are elements (numbers, strings, None, tuples of those, enum
members, dtypes): a set of tensors would iterate in the order of their ids, which differs between
calls, so it is unsupported (the frame breaks there and runs that code eagerly).

A set read from outside the frame is guarded on its type and on its items *in iteration order*;
it is read-only here (mutating it would be a side effect to replay: unsupported)."""
from __future__ import annotations

import operator

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import IteratorVariable

# binary operators on sets: the result is a new set; the in-place forms mutate the left operand
_SET_BINARY = {operator.or_: "union", operator.and_: "intersection", operator.sub: "difference",
               operator.xor: "symmetric_difference"}
_SET_INPLACE = {operator.ior: operator.or_, operator.iand: operator.and_, operator.isub: operator.sub,
                operator.ixor: operator.xor}
_SET_COMPARE = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)

_MUTATING = {"add", "discard", "remove", "pop", "clear", "update", "intersection_update",
             "difference_update", "symmetric_difference_update"}
_NEW_SET = {"union", "intersection", "difference", "symmetric_difference", "copy"}
_PREDICATES = {"issubset", "issuperset", "isdisjoint", "__contains__", "__len__"}


def element_value(tx, v):
    """The hashable Python value of a set element tracker (a size symbol is specialised)."""
    from .tensor import TensorVariable
    if isinstance(v, TensorVariable):
        raise Unsupported("a set of tensors (iteration order follows tensor ids, which change between calls)")
    if not v.is_python_constant():
        raise Unsupported(f"a set element that is not a constant: {v}")
    val = v.as_python_constant()
    from ...fx.experimental.symbolic_shapes import SymBool, SymInt
    if isinstance(val, SymInt):
        val = int(val)          # hashing needs the value (int() records the guard)
    elif isinstance(val, SymBool):
        val = bool(val)
    if isinstance(val, (set, list, dict)):
        raise Unsupported(f"unhashable set element of type {type(val).__name__} (the program raises TypeError)")
    try:
        hash(val)
    except TypeError:
        raise Unsupported(f"unhashable set element of type {type(val).__name__} (the program raises TypeError)")
    return val


def real_iterable(tx, v):
    """The Python values of an iterable tracker, for building or combining sets."""
    if isinstance(v, SetVariable):
        return v.real
    if isinstance(v, ConstantVariable) and isinstance(v.value, (frozenset, set)):
        return v.value
    return [element_value(tx, i) for i in v.unpack(tx)]


class SetVariable(VariableTracker):
    def __init__(self, real=None, source=None):
        self.real = set() if real is None else real
        self.source = source

    @classmethod
    def build(cls, tx, items):
        s = cls()
        for i in items:
            s.real.add(element_value(tx, i))
        return s

    def python_type(self):
        return set

    def as_python_constant(self):
        return self.real

    def truthy(self, tx):
        return len(self.real) > 0

    def length(self, tx):
        return len(self.real)

    def unpack(self, tx):
        return [ConstantVariable(v) for v in self.real]

    def var_getattr(self, tx, name):
        from .lists import ContainerMethodVariable
        if name in _MUTATING or name in _NEW_SET or name in _PREDICATES:
            return ContainerMethodVariable(self, name)
        raise Unsupported(f"set has no modelled attribute {name!r}")

    def _check_mutable(self, tx=None):
        if self.source is not None:
            raise Unsupported("mutating a set that came from outside the compiled frame (side effect)")

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"set.{name}() takes no keyword arguments")
        real = self.real
        if name in _MUTATING:
            self._check_mutable(tx)
            if name in ("add", "discard", "remove"):
                (v,) = args
                val = element_value(tx, v)
                if name == "remove" and val not in real:
                    raise Unsupported(f"set.remove({val!r}): KeyError (the program raises)")
                getattr(real, name)(val)
                return ConstantVariable(None)
            if name == "pop":
                if not real:
                    raise Unsupported("pop from an empty set (the program raises KeyError)")
                return ConstantVariable(real.pop())
            if name == "clear":
                real.clear()
                return ConstantVariable(None)
            getattr(real, name)(*[real_iterable(tx, a) for a in args])
            return ConstantVariable(None)
        if name in _NEW_SET:
            return SetVariable(getattr(real, name)(*[real_iterable(tx, a) for a in args]))
        if name == "__contains__":
            return ConstantVariable(element_value(tx, args[0]) in real)
        if name == "__len__":
            return ConstantVariable(len(real))
        if name in ("issubset", "issuperset", "isdisjoint"):
            (other,) = args
            return ConstantVariable(getattr(real, name)(real_iterable(tx, other)))
        raise Unsupported(f"set.{name}")

    def reconstruct(self, out):
        if self.source is not None:
            return self.source.expr()
        # a copy of the traced set: the same elements (Python promises no iteration order, and a
        # copy's may differ from the original's when that one grew and shrank)
        return f"set({out.ref(frozenset(self.real))})" if self.real else "set()"

    def __repr__(self):
        return f"SetVariable({self.real!r})"


def set_binary_op(tx, op, a, b):
    """``a op b`` where one side is a set tracker; None when the operator is not a set operator."""
    if op in _SET_INPLACE:
        base = _SET_INPLACE[op]
        if isinstance(a, SetVariable):
            a._check_mutable(tx)
            getattr(a.real, _SET_BINARY[base] + "_update" if base is not operator.or_ else "update")(
                _operand(tx, b, base))
            return a
        op = base
    if op in _SET_BINARY:
        lhs = a.real if isinstance(a, SetVariable) else _operand(tx, a, op)
        rhs = _operand(tx, b, op)
        try:
            res = op(lhs, rhs)
        except TypeError as e:
            raise Unsupported(f"set {op.__name__} raised TypeError: {e}")
        return SetVariable(res) if isinstance(res, set) else ConstantVariable(res)
    if op in _SET_COMPARE:
        if not (a.is_python_constant() and b.is_python_constant()):
            if op in (operator.eq, operator.ne):      # a set never equals a container of tensors
                return ConstantVariable(op is operator.ne)
            raise Unsupported(f"set {op.__name__} with {a} and {b} (the program raises TypeError)")
        try:
            return ConstantVariable(op(a.as_python_constant(), b.as_python_constant()))
        except TypeError as e:
            raise Unsupported(f"set comparison raised TypeError: {e}")
    return None


def _operand(tx, v, op):
    """The right operand of a set operator: a set, or a frozenset constant (Python refuses lists)."""
    if isinstance(v, SetVariable):
        return v.real
    if isinstance(v, ConstantVariable) and isinstance(v.value, (set, frozenset)):
        return v.value
    raise Unsupported(f"set {op.__name__} with {v} (the program raises TypeError)")


def wrap_set(tx, value, source, guard=True):
    """The tracker of an outside ``set``/``frozenset`` of constants: guarded on its type and its
    items in iteration order (the order code inside the frame would see)."""
    for v in value:
        if not _guardable(v):
            raise Unsupported(f"a set holding a {type(v).__name__} (only constants are modelled)")
    g = tx.output.guards if (guard and source is not None) else None
    items = list(value)
    if g:
        g.type_match(source, value)
        g.add(f"list({source.expr()}) == {g.ref(items)}", f"{source.expr()} holds {items!r} in this order")
    if type(value) is frozenset:
        return ConstantVariable(value, source)
    return SetVariable(value, source)


def _guardable(v):
    import enum
    if type(v) in (str, int, float, bool, bytes, type(None)) or isinstance(v, enum.Enum):
        return not (type(v) is float and v != v)       # nan != nan: an equality guard always fails
    if isinstance(v, type):
        return True          # compared by identity (dataclasses' frozenset ``_ATOMIC_TYPES``, 3.12+)
    return type(v) is tuple and all(_guardable(x) for x in v)



class SetIteratorVariable(IteratorVariable):
    """``iter()`` of a set tracker: its items in the set's order when the loop began, and, as
    CPython's set iterator does, ``RuntimeError: Set changed size during iteration`` at the next
    step after the loop added or removed an element (the compiled loop used to go on over the
    old items), and at every step after that. An element removed and another added (the same
    size) follows CPython's table and cannot be modelled: that refuses to trace (the frame runs
    eagerly). ``size``: the set's size when the loop began (a resumed loop's: ``SetIter.size``)."""

    def __init__(self, s, rest=None, size=None):
        elems = list(s.real) if rest is None else list(rest)
        super().__init__([ConstantVariable(e) for e in elems], type(iter(set())))
        self.set, self.start, self.done = s, list(s.real), False
        self.size = len(self.start) if size is None else size

    def next(self, tx):
        if self.done:
            return None
        if len(self.set.real) != self.size:
            from .exceptions import raise_observed
            self.size = -1          # (CPython's iterator raises again at every later step)
            raise_observed(tx, RuntimeError, "Set changed size during iteration")
        if list(self.set.real) != self.start:
            raise Unsupported("a set's elements changed during a loop over it (one removed, another added)")
        item = super().next(tx)
        self.done = item is None
        return item

    def unpack(self, tx):
        return self.unpack_by_steps(tx)

    def remaining_expr(self, out):
        """At a graph break: a ``resumable_iters.SetIter`` over the set itself and the items left,
        so that a breaking call that adds or removes an element makes the next step raise, as
        CPython's iterator does (a tuple of the items left went on over them)."""
        from .resumable_iters import SetIter
        if self.done:
            return "()"
        if list(self.set.real) != self.start:
            raise Unsupported("a set changed during a loop over it, alive across a graph break")
        rest = tuple(i.as_python_constant() for i in self.items[self.pos:])
        return f"{out.obj_ref(SetIter)}({out.materialize(self.set)}, {self.size}, {out.obj_ref(rest)})"
