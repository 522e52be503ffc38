"""What a graph break hands on for an ``itertools`` iterator that reads lists step by step.

A loop over ``itertools.chain(ys, zs)`` (or ``pairwise``, ``zip_longest``, ``islice``,
``takewhile``, ``dropwhile``, ``accumulate``, ``compress``, ``starmap``, ``cycle``, or ``map``/``filter``) of lists
(or over the endless ``count`` and ``repeat``)
is traced item by item (``builtin._chain_lazy`` ...): the loop may grow the list it walks. At a
graph break inside it, the iterator must go on as CPython's would, over the lists themselves.
An ``itertools`` object cannot be taken apart again by the resume function (its state is not
readable: ``__reduce__`` is gone from ``pairwise`` and deprecated for the rest since 3.12), so
the break hands on one of these instead: the same iteration in plain Python, its state in
attributes the resume function reads to model it item by item (``symbolic_convert.
_wrap_iterator_arg``), as it does a list iterator, ``enumerate`` or ``zip``.

Each follows its C original step for step (what it takes from its iterators, and when).
``type()`` of the object differs from the original's after a break; nothing else does."""
from __future__ import annotations


class _Iterator:
    """An iterator: ``iter()`` of it is itself."""

    __slots__ = ()

    def __iter__(self):
        return self


class Chain(_Iterator):
    """``itertools.chain``: ``cur``, the iterator it is in (None between iterables), and
    ``rest``, the iterables not reached yet (``iter()`` is called on each when reached)."""

    __slots__ = ("cur", "rest")

    def __init__(self, cur, rest):
        self.cur, self.rest = cur, list(rest)


    def __next__(self):
        while True:
            if self.cur is None:
                if not self.rest:
                    raise StopIteration
                self.cur = iter(self.rest.pop(0))
            try:
                return next(self.cur)
            except StopIteration:
                self.cur = None


class _OverOne(_Iterator):
    """An iteration over one underlying iterator ``it``, dropped (None) once it runs out: an
    exhausted one stays so, as the C originals do."""

    __slots__ = ()


    def _take(self):
        if self.it is None:
            raise StopIteration
        try:
            return next(self.it)
        except StopIteration:
            self.it = None
            raise


class Pairwise(_OverOne):
    """``itertools.pairwise`` that has given at least one pair: ``old``, the last item taken, and
    ``it``, the iterator it takes the next from (None once exhausted)."""

    __slots__ = ("it", "old")

    def __init__(self, it, old):
        self.it, self.old = it, old

    def __next__(self):
        try:
            new = self._take()
        except StopIteration:
            self.old = None
            raise
        pair, self.old = (self.old, new), new
        return pair


class ZipLongest(_Iterator):
    """``itertools.zip_longest``: ``its`` (None for an exhausted one: it gives ``fill`` from then
    on), stopping in the round where the last one runs out."""

    __slots__ = ("its", "fill")

    def __init__(self, its, fill):
        self.its, self.fill = list(its), fill


    def __next__(self):
        if all(it is None for it in self.its):
            raise StopIteration
        got = []
        for k, it in enumerate(self.its):
            if it is None:
                got.append(self.fill)
                continue
            try:
                got.append(next(it))
            except StopIteration:
                self.its[k] = None
                if all(i is None for i in self.its):
                    raise
                got.append(self.fill)
        return tuple(got)


class ISlice(_OverOne):
    """``itertools.islice``: ``cnt`` items taken from ``it``, the next one given is item ``next``,
    ``stop`` (or None) and ``step`` as given; ``it`` None once done."""

    __slots__ = ("it", "cnt", "next", "stop", "step")

    def __init__(self, it, cnt, next_, stop, step):
        self.it, self.cnt, self.next, self.stop, self.step = it, cnt, next_, stop, step

    def __next__(self):
        while self.cnt < self.next:
            self._take()
            self.cnt += 1
        if self.stop is not None and self.cnt >= self.stop:
            self.it = None
            raise StopIteration
        v = self._take()
        self.cnt += 1
        self.next += self.step
        if self.stop is not None and self.next > self.stop:
            self.next = self.stop
        return v


class DictIter(_OverOne):
    """A loop over a dict, or its keys, values or items (``kind``), at a graph break: CPython's own
    iterator over ``d`` (``it``, made at the break and moved past the ``pos`` items the loop had
    taken), so the code after the break steps it as CPython would -- a value read when reached, a
    key added or removed raising at the next step. ``keys`` are the dict's keys at the break (those
    of the loop's start: a loop whose dict changed before the break is not compiled), from which the
    resume function's trace models the loop (``symbolic_convert.ResumedDictIteratorVariable``).
    The base mapping's methods are used, so a subclass's overrides are not called (as CPython's
    loop over the dict did not call them), and an ``OrderedDict`` keeps its own order."""

    __slots__ = ("d", "kind", "ordered", "keys", "pos", "it")

    def __init__(self, d, kind, ordered, pos):
        import collections
        base = collections.OrderedDict if ordered else dict
        self.d, self.kind, self.ordered, self.pos = d, kind, ordered, pos
        self.keys = list(base.keys(d))
        it = iter(getattr(base, kind)(d))
        for _ in range(pos):
            next(it)
        self.it = it

    def __next__(self):
        v = self._take()
        self.pos += 1
        return v

    def __length_hint__(self):
        import operator
        return 0 if self.it is None else operator.length_hint(self.it)


class ChainFrom(_OverOne):
    """``itertools.chain.from_iterable``: ``cur``, the iterator it is in (None between
    iterables), and ``it``, the iterator over the iterables (None once exhausted): the next
    iterable is taken from it when ``cur`` runs out, as CPython's chain takes it."""

    __slots__ = ("cur", "it")

    def __init__(self, cur, it):
        self.cur, self.it = cur, it

    def __next__(self):
        while True:
            if self.cur is None:
                self.cur = iter(self._take())
            try:
                return next(self.cur)
            except StopIteration:
                self.cur = None


class StarMap(_Iterator):
    """``map`` (``is_map``: over a ``zip`` of its iterables, which CPython's map steps alike) or
    ``itertools.starmap``: ``fn(*item)`` for each item of ``it``."""

    __slots__ = ("fn", "it", "is_map")

    def __init__(self, fn, it, is_map):
        self.fn, self.it, self.is_map = fn, it, is_map


    def __next__(self):
        return self.fn(*next(self.it))


class Filter(_Iterator):
    """``filter``: the items of ``it`` for which ``fn`` (None: the item itself) is true."""

    __slots__ = ("fn", "it")

    def __init__(self, fn, it):
        self.fn, self.it = fn, it


    def __next__(self):
        while True:
            v = next(self.it)
            if (v if self.fn is None else self.fn(v)):
                return v


class TakeWhile(_Iterator):
    """``itertools.takewhile``: ``pred`` called on each item of ``it`` as it is taken; ``done``
    once it was false (nothing more is taken then)."""

    __slots__ = ("pred", "it", "done")

    def __init__(self, pred, it, done):
        self.pred, self.it, self.done = pred, it, done


    def __next__(self):
        if self.done:
            raise StopIteration
        v = next(self.it)
        if self.pred(v):
            return v
        self.done = True
        raise StopIteration


class DropWhile(_Iterator):
    """``itertools.dropwhile``: items of ``it`` skipped while ``pred`` holds; ``done`` once it did
    not (every item is given from then on, ``pred`` no longer called)."""

    __slots__ = ("pred", "it", "done")

    def __init__(self, pred, it, done):
        self.pred, self.it, self.done = pred, it, done


    def __next__(self):
        while True:
            v = next(self.it)
            if self.done or not self.pred(v):
                self.done = True
                return v


class Accumulate(_Iterator):
    """``itertools.accumulate``: ``total`` the running total when ``has_total`` (else the next
    item becomes it), ``pending``: the total (an ``initial``) is given before any item is taken;
    ``func`` None adds, as CPython's does."""

    __slots__ = ("it", "func", "total", "has_total", "pending")

    def __init__(self, it, func, total, has_total, pending):
        self.it, self.func, self.total, self.has_total, self.pending = it, func, total, has_total, pending


    def __next__(self):
        if self.pending:
            self.pending = False
            return self.total
        v = next(self.it)
        if not self.has_total:
            self.total, self.has_total = v, True
        else:
            import operator
            self.total = (self.func or operator.add)(self.total, v)
        return self.total


class Compress(_Iterator):
    """``itertools.compress``: a datum from ``data``, then its selector from ``sel``, until one
    runs out; the data whose selector is true."""

    __slots__ = ("data", "sel")

    def __init__(self, data, sel):
        self.data, self.sel = data, sel


    def __next__(self):
        while True:
            d = next(self.data)
            if next(self.sel):
                return d


class SetIter(_Iterator):
    """A loop over a set at a graph break: the set ``s``, its ``size`` when the loop began (-1 once
    a change was seen) and the elements not reached yet (``rest``, in the set's order). Each step
    first compares the size, as CPython's set iterator does: once it changed, every step raises
    ``RuntimeError: Set changed size during iteration``. (An element swapped for another by the
    breaking call, the size unchanged, is not seen: CPython's iterator would go on over its table.)"""

    __slots__ = ("s", "size", "rest", "pos")

    def __init__(self, s, size, rest):
        self.s, self.size, self.rest, self.pos = s, size, tuple(rest), 0


    def __next__(self):
        if self.pos > len(self.rest):
            raise StopIteration
        if len(self.s) != self.size:
            self.size = -1
            raise RuntimeError("Set changed size during iteration")
        if self.pos == len(self.rest):
            self.pos += 1
            raise StopIteration
        self.pos += 1
        return self.rest[self.pos - 1]

    def __length_hint__(self):
        return max(len(self.rest) - self.pos, 0)


class Count(_Iterator):
    """``itertools.count``: ``cur``, the number it gives next, and ``step``. It adds ``step`` to
    what it gave, as CPython's does (a float count drifts the same way)."""

    __slots__ = ("cur", "step")

    def __init__(self, cur, step):
        self.cur, self.step = cur, step

    def __next__(self):
        v = self.cur
        self.cur = v + self.step
        return v


class Repeat(_Iterator):
    """``itertools.repeat(obj)`` without a count: ``obj`` for ever."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __next__(self):
        return self.obj


class Cycle(_Iterator):
    """``itertools.cycle``: ``it``, the iterator of its first pass (None once exhausted), the
    items it gave so far (``saved``), and once ``it`` ran out, the index of the next of them
    (``pos``). Ends only when the first pass gave nothing."""

    __slots__ = ("it", "saved", "pos")

    def __init__(self, it, saved, pos):
        self.it, self.saved, self.pos = it, list(saved), pos

    def __next__(self):
        if self.it is not None:
            try:
                v = next(self.it)
            except StopIteration:
                self.it = None
            else:
                self.saved.append(v)
                return v
        if not self.saved:
            raise StopIteration
        v = self.saved[self.pos]
        self.pos = (self.pos + 1) % len(self.saved)
        return v


class CallIter(_Iterator):
    """``iter(fn, sentinel)``: calls ``fn()`` until it gives ``sentinel`` (dropped then: None)."""

    __slots__ = ("fn", "sentinel")

    def __init__(self, fn, sentinel):
        self.fn, self.sentinel = fn, sentinel

    def __next__(self):
        if self.fn is None:
            raise StopIteration
        try:
            v = self.fn()
        except StopIteration:
            self.fn = None
            raise
        if v is self.sentinel or v == self.sentinel:
            self.fn = None
            raise StopIteration
        return v


RESUMABLE = (CallIter, Count, Repeat, Cycle, Chain, ChainFrom, StarMap, Filter, Pairwise, ZipLongest, ISlice, DictIter, TakeWhile, DropWhile, Accumulate, Compress, SetIter)
