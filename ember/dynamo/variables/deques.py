"""``collections.deque`` in compiled frames: made in the frame, or read from outside (a rolling
buffer kept on a module, ``self.history.append(x)``).

A deque is a list of trackers with CPython's deque rules: ``maxlen`` drops items from the
other end as items are added, ``pop``/``popleft`` of an empty one raise IndexError with its
message, indexing takes ints only, and an iterator over it raises ``RuntimeError: deque
mutated during iteration`` at its next step once the deque was added to or removed from (CPython
counts such changes in the deque's ``state``; setting an item is not one). A deque from outside
the frame (it has a source) is read item by item (each guarded as any input) and its mutations
are side effects replayed after the graph as ``d.clear(); d.extend([...])``."""
from __future__ import annotations

import collections

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import BaseListVariable, ContainerMethodVariable, LazyIteratorVariable, _const

_MUTATING = {"append", "appendleft", "extend", "extendleft", "pop", "popleft", "clear", "rotate", "remove",
             "insert", "reverse", "__setitem__", "__delitem__"}
_READING = {"count", "index", "copy", "__len__", "__getitem__", "__contains__"}


class DequeVariable(BaseListVariable):
    def __init__(self, items, maxlen=None, source=None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self.state = 0          # bumped by every change of length or order (CPython's deque->state)

    def python_type(self):
        return collections.deque

    def as_python_constant(self):
        return collections.deque((_const(i) for i in self.items), self.maxlen)

    def clone_with(self, items):
        return DequeVariable(items, self.maxlen)

    def getitem(self, tx, key):
        from .exceptions import raise_observed
        if key.is_python_constant() and isinstance(key.as_python_constant(), slice):
            raise_observed(tx, TypeError, "sequence index must be integer, not 'slice'")
        k = key.as_python_constant() if key.is_python_constant() else None
        if isinstance(k, bool) or not isinstance(k, int):
            raise Unsupported(f"deque index {key}")
        if not -len(self.items) <= k < len(self.items):
            raise_observed(tx, IndexError, "deque index out of range")
        return self.items[k]

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        if name in _MUTATING or name in _READING:
            return ContainerMethodVariable(self, name)
        raise Unsupported(f"deque has no modelled attribute {name!r}")

    def _changed(self, tx):
        self.state += 1
        if self.source is not None:
            tx.output.record_container_mutation(self)

    def _add(self, v, left):
        """One append (``left``: appendleft), dropping from the other end at ``maxlen``."""
        if self.maxlen == 0:
            return
        if left:
            self.items.insert(0, v)
            if self.maxlen is not None and len(self.items) > self.maxlen:
                self.items.pop()
        else:
            self.items.append(v)
            if self.maxlen is not None and len(self.items) > self.maxlen:
                self.items.pop(0)

    def call_method(self, tx, name, args, kwargs):
        from .exceptions import raise_observed
        if kwargs:
            raise_observed(tx, TypeError, f"deque.{name}() takes no keyword arguments")
        n = len(args)
        if name in ("append", "appendleft") and n == 1:
            self._add(args[0], name == "appendleft")
        elif name in ("extend", "extendleft") and n == 1:
            from .builtin import _iter_items
            for v in _iter_items(tx, args[0]):       # (its items first: d.extend(d) doubles d)
                self._add(v, name == "extendleft")
        elif name in ("pop", "popleft") and n == 0:
            if not self.items:
                raise_observed(tx, IndexError, "pop from an empty deque")
            v = self.items.pop(-1 if name == "pop" else 0)
            self._changed(tx)
            return v
        elif name == "clear" and n == 0:
            self.items.clear()
        elif name == "rotate" and n <= 1:
            k = _const(args[0]) if args else 1
            if type(k) is not int:
                raise Unsupported("deque.rotate() of a non-int")
            if self.items:
                k %= len(self.items)
                self.items[:] = self.items[-k:] + self.items[:-k] if k else self.items
        elif name == "reverse" and n == 0:
            self.items.reverse()
        elif name == "insert" and n == 2:
            if self.maxlen is not None and len(self.items) >= self.maxlen:
                raise_observed(tx, IndexError, "deque already at its maximum size")
            i = _const(args[0])
            if type(i) is not int:
                raise Unsupported("deque.insert() at a non-int index")
            self.items.insert(i, args[1])
        elif name == "remove" and n == 1:
            i = self._find(tx, args[0], f"{_const(args[0])!r} is not in deque")
            del self.items[i]
        elif name == "__setitem__" and n == 2:
            self.getitem(tx, args[0])          # (the index checks)
            self.items[_const(args[0])] = args[1]
            if self.source is not None:
                tx.output.record_container_mutation(self)
            return ConstantVariable(None)       # (not a change of CPython's deque->state)
        elif name == "__delitem__" and n == 1:
            self.getitem(tx, args[0])
            del self.items[_const(args[0])]
        elif name == "__len__" and n == 0:
            return ConstantVariable(len(self.items))
        elif name == "__getitem__" and n == 1:
            return self.getitem(tx, args[0])
        elif name == "count" and n == 1:
            if not args[0].is_python_constant() or not all(i.is_python_constant() for i in self.items):
                raise Unsupported("deque.count() comparing items that are not constants")
            return ConstantVariable([_const(i) for i in self.items].count(_const(args[0])))
        elif name == "index" and n == 1:
            return ConstantVariable(self._find(tx, args[0], f"{_const(args[0])!r} is not in deque"))
        elif name == "copy" and n == 0:
            return DequeVariable(self.items, self.maxlen)
        else:
            raise Unsupported(f"deque.{name}() with {n} arguments")
        self._changed(tx)
        return ConstantVariable(None)

    def reconstruct(self, out):
        if self.source is not None:
            return self.source.expr()
        items = "".join(out.materialize(i) + ", " for i in self.items)
        return f"{out.ref(collections.deque)}([{items}], {self.maxlen!r})"

    def __repr__(self):
        return f"DequeVariable({len(self.items)} items, maxlen={self.maxlen})"


def deque_iterator(d):
    """``iter(d)``: the items from the front, read at each step; a change of ``d`` since the
    iterator was made raises at its next step, as CPython's does (and it stays failed)."""
    state = {"i": 0, "seen": d.state}

    def step(tx):
        if d.state != state["seen"]:
            from .exceptions import raise_observed
            raise_observed(tx, RuntimeError, "deque mutated during iteration")
        if state["i"] >= len(d.items):
            return None
        state["i"] += 1
        return d.items[state["i"] - 1]
    return LazyIteratorVariable(step, type(iter(collections.deque())))


def make_deque(tx, args, kwargs):
    """``collections.deque(iterable=(), maxlen=None)`` in the frame."""
    names = ("iterable", "maxlen")
    if len(args) > 2 or set(kwargs) - set(names[len(args):]):
        raise Unsupported("collections.deque() with these arguments (the program raises TypeError)")
    given = dict(zip(names, args), **kwargs)
    maxlen = given.get("maxlen", ConstantVariable(None))
    if not maxlen.is_python_constant():
        raise Unsupported("collections.deque with a maxlen that is not a constant")
    maxlen = _const(maxlen)
    if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
        from .exceptions import raise_observed
        raise_observed(tx, ValueError if type(maxlen) is int else TypeError,
                       "maxlen must be non-negative" if type(maxlen) is int else "an integer is required")
    d = DequeVariable([], maxlen)
    if "iterable" in given:
        from .builtin import _iter_items
        for v in _iter_items(tx, given["iterable"]):
            d._add(v, False)
    return d


def wrap_outside_deque(tx, value, source, wrap):
    """A deque from outside the frame: its items read through ``source[i]`` (each guarded as
    any input), its length and ``maxlen`` guarded."""
    from ..source import GetItemSource
    g = tx.output.guards
    g.type_match(source, value)
    g.len_match(source, len(value))
    e = f"{source.expr()}.maxlen == {value.maxlen!r}"
    g.add(e, e)
    res = DequeVariable([wrap(tx, v, GetItemSource(source, i)) for i, v in enumerate(value)], value.maxlen, source)
    tx.output.containers[id(value)] = res       # (one tracker per outside container: builder.wrap)
    return res
