"""Lists, tuples (including ember.Size and named tuples), dicts and iterators of trackers.

Containers created inside the frame are modelled exactly (mutation included).
Containers that came from outside (they have a source) are modelled too; their
mutations are side effects replayed after the graph (OutputGraph.record_container_mutation).
An outside list is read lazily (``OutsideListVariable``): appends to it need no
guard on what it holds."""
from __future__ import annotations

import collections
import types

from ..exc import Unsupported
from ..source import Source
from .base import VariableTracker
from .constant import ConstantVariable


def _const(v):
    return v.as_python_constant()


class BaseListVariable(VariableTracker):
    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source

    def truthy(self, tx):
        return len(self.items) > 0

    def unpack(self, tx):
        return list(self.items)

    def as_python_constant(self):
        return self.python_type()(_const(i) for i in self.items)

    def getitem(self, tx, key):
        from .objects import _specialize_index
        k = _specialize_index(key.as_python_constant()) if key.is_python_constant() else None
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise Unsupported(f"{self.python_type().__name__} index {key}")
        try:
            if isinstance(k, slice):
                return self.clone_with(self.items[k])
            return self.items[k]
        except IndexError:
            from .exceptions import raise_observed
            raise_observed(tx, IndexError, f"{self.python_type().__name__} index out of range")

    def _find(self, tx, value, missing):
        """The index of the first item equal to ``value`` (the same tracker, or equal constants:
        CPython compares by identity, then ``==``); ``missing`` is the ValueError's message. An
        item that is neither (a tensor: ``==`` would be read as a bool) refuses to trace (``index``
        used to skip such items, and refused when nothing matched)."""
        from .tensor import TensorVariable
        for i, item in enumerate(self.items):
            if item is value:
                return i
            if not (item.is_python_constant() and value.is_python_constant()) or \
                    isinstance(item, TensorVariable) or isinstance(value, TensorVariable):
                raise Unsupported(f"index/remove comparing {value} with {item}")
            if item.as_python_constant() == value.as_python_constant():
                return i
        from .exceptions import raise_observed
        raise_observed(tx, ValueError, missing)

    def clone_with(self, items):
        return type(self)(items)

    def var_getattr(self, tx, name):
        return ContainerMethodVariable(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "index" and len(args) == 1 and args[0].is_python_constant():
            missing = ("tuple.index(x): x not in tuple" if issubclass(self.python_type(), tuple)
                       else f"{args[0].as_python_constant()!r} is not in list")
            return ConstantVariable(self._find(tx, args[0], missing))
        if name == "count" and len(args) == 1 and args[0].is_python_constant():
            v = args[0].as_python_constant()
            return ConstantVariable(sum(1 for i in self.items if i.is_python_constant()
                                        and i.as_python_constant() == v))
        raise Unsupported(f"{self.python_type().__name__}.{name}")


class TupleVariable(BaseListVariable):
    def __init__(self, items, source=None, cls=tuple):
        super().__init__(items, source)
        self.cls = cls

    def python_type(self):
        return self.cls

    def clone_with(self, items):
        return TupleVariable(items, cls=tuple if _is_namedtuple(self.cls) else self.cls)

    def as_python_constant(self):
        vals = [_const(i) for i in self.items]
        if _is_namedtuple(self.cls):
            return self.cls(*vals)
        return self.cls(vals)

    def var_getattr(self, tx, name):
        if _is_namedtuple(self.cls) and name in self.cls._fields:
            return self.items[self.cls._fields.index(name)]
        if _is_namedtuple(self.cls) and name in ("_fields", "_field_defaults"):
            return ConstantVariable(getattr(self.cls, name))
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name in ("_replace", "_asdict") and _stock_namedtuple_method(self.cls, name):
            fields = self.cls._fields
            if name == "_asdict" and not args and not kwargs:
                return DictVariable(dict(zip(fields, self.items)))
            if name == "_replace" and not args:
                unknown = [k for k in kwargs if k not in fields]
                if unknown:
                    from .exceptions import raise_observed
                    raise_observed(tx, ValueError, f"Got unexpected field names: {unknown!r}")
                return TupleVariable([kwargs.get(f, v) for f, v in zip(fields, self.items)], cls=self.cls)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, out):
        parts = [out.materialize(i) for i in self.items]
        if _is_namedtuple(self.cls):
            return f"{out.ref(self.cls)}({', '.join(parts)})"
        body = "(" + "".join(p + ", " for p in parts) + ")"
        if self.cls is tuple:
            return body
        return f"{out.ref(self.cls)}({body})"

    def __repr__(self):
        return f"TupleVariable({self.items})"


def _is_namedtuple(cls):
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


_STOCK_NAMEDTUPLE = collections.namedtuple("_STOCK_NAMEDTUPLE", "a")


def _stock_namedtuple_method(cls, name):
    """Whether ``cls.<name>`` is the method ``collections.namedtuple`` wrote (not overridden)."""
    fn = getattr(cls, name, None)
    return getattr(fn, "__code__", None) is getattr(_STOCK_NAMEDTUPLE, name).__code__


class ListVariable(BaseListVariable):
    def python_type(self):
        return list

    def _check_mutable(self, tx=None):
        if self.source is not None:
            if tx is None:
                raise Unsupported("mutating a list that came from outside the compiled frame (side effect)")
            tx.output.record_container_mutation(self)

    def call_method(self, tx, name, args, kwargs):
        if name in ("append", "extend", "insert", "pop", "clear", "reverse", "__setitem__", "__delitem__",
                    "remove", "sort"):
            self._check_mutable(tx)
        if name == "append" and len(args) == 1:
            self.items.append(args[0])
            return ConstantVariable(None)
        if name == "extend" and len(args) == 1:
            self.items.extend(args[0].unpack(tx))
            return ConstantVariable(None)
        if name == "insert" and len(args) == 2:
            self.items.insert(_const(args[0]), args[1])
            return ConstantVariable(None)
        if name == "pop":
            idx = _const(args[0]) if args else -1
            try:
                return self.items.pop(idx)
            except IndexError:
                from .exceptions import raise_observed
                raise_observed(tx, IndexError, "pop from empty list" if not self.items else "pop index out of range")
        if name == "clear":
            self.items.clear()
            return ConstantVariable(None)
        if name == "reverse":
            self.items.reverse()
            return ConstantVariable(None)
        if name == "__setitem__" and len(args) == 2:
            k = _const(args[0])
            if isinstance(k, slice):
                self.items[k] = args[1].unpack(tx)
            else:
                try:
                    self.items[k] = args[1]
                except IndexError:
                    raise Unsupported("list assignment index out of range")
            return ConstantVariable(None)
        if name == "__delitem__" and len(args) == 1:
            del self.items[_const(args[0])]
            return ConstantVariable(None)
        if name == "remove" and len(args) == 1 and not kwargs:
            del self.items[self._find(tx, args[0], "list.remove(x): x not in list")]
            return ConstantVariable(None)
        if name == "copy":
            return ListVariable(self.items)
        if name == "sort" and not args:
            self.items[:] = sort_items(tx, self.items, kwargs)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, out):
        return "[" + ", ".join(out.materialize(i) for i in self.items) + "]"

    def __repr__(self):
        return f"ListVariable({self.items})"


class OutsideListVariable(ListVariable):
    """A list that came from outside the frame (an argument, an attribute, a resume function's
    ``outs``), whose items are read -- wrapped, with a guard on its length and on each item --
    only when the trace first needs them (``items``). Until then ``append``/``extend`` only
    collect the new items, replayed after the graph as ``list.extend``.

    Why: a decoding loop that breaks in every step (``outs.append(nxt); if (nxt == eos).all():
    break``) resumes with ``outs`` as an argument; guarding its length (and every tensor in it)
    made each step a recompile until the recompile limit. A list that is only appended to needs
    no assumption about what it already holds. Any other use (``len``, indexing, iteration, a
    call that receives it) reads it as before, guards included."""

    def __init__(self, tx, value, source, guard):
        self.source = source
        self._tx, self._guard = tx, guard
        self._snapshot = list(value)     # (what its guards and items describe: the value at entry)
        self._items = None               # None: not read yet
        self.appended = []               # items appended before it was read

    @property
    def items(self):
        if self._items is None:
            self._realize()
        return self._items

    @items.setter
    def items(self, value):
        self._items = list(value)
        self.appended = None

    @property
    def realized(self) -> bool:
        return self._items is not None

    def _realize(self):
        from ..source import GetItemSource
        from .builder import wrap
        tx, src = self._tx, self.source
        if self._guard:
            tx.output.guards.len_match(src, len(self._snapshot))
        read = [wrap(tx, v, GetItemSource(src, i), self._guard) for i, v in enumerate(self._snapshot)]
        self._items = read + self.appended
        self.appended = None

    def call_method(self, tx, name, args, kwargs):
        if not self.realized and name in ("append", "extend") and len(args) == 1 and not kwargs:
            self._check_mutable(tx)
            self.appended.extend([args[0]] if name == "append" else args[0].unpack(tx))
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def clone_with(self, items):
        return ListVariable(items)

    def __repr__(self):
        if not self.realized:     # (a log line must not read the list: that would add guards)
            return f"OutsideListVariable(<unread>, appended={self.appended})"
        return f"OutsideListVariable({self._items})"


def sort_items(tx, items, kwargs):
    """``sorted(items, key=..., reverse=...)`` over trackers: the sort keys (the items, or what
    ``key`` returns for each, inlined) must be Python constants -- comparing tensors reads their
    data. Stable, like Python's sort, and ``reverse`` keeps equal items in order as Python does."""
    unknown = set(kwargs) - {"key", "reverse"}
    if unknown:
        raise Unsupported(f"sort() got unexpected keyword arguments {sorted(unknown)}")
    key = kwargs.get("key")
    if key is not None and key.is_python_constant() and key.as_python_constant() is None:
        key = None
    reverse = kwargs.get("reverse", ConstantVariable(False))
    if not reverse.is_python_constant():
        raise Unsupported("sort(reverse=...) with a non-constant flag")
    keys = [key.call_function(tx, [i], {}) if key is not None else i for i in items]
    from .tensor import TensorVariable
    if traced_comparisons(keys):
        order = sorted(range(len(items)), key=lambda i: traced_key(tx, keys[i]),
                       reverse=bool(reverse.as_python_constant()))
        return [items[i] for i in order]
    if any(isinstance(k, TensorVariable) or not k.is_python_constant() for k in keys):
        raise Unsupported("sorting by tensors or other non-constants (comparing them reads data)")
    vals = [k.as_python_constant() for k in keys]
    from ...fx.experimental.symbolic_shapes import SymInt
    vals = [int(v) if isinstance(v, SymInt) else v for v in vals]
    try:
        order = sorted(range(len(items)), key=vals.__getitem__, reverse=bool(reverse.as_python_constant()))
    except TypeError as e:
        raise Unsupported(f"sort raised TypeError: {e} (the program raises)")
    return [items[i] for i in order]


def traced_comparisons(keys):
    """Whether ``keys`` (trackers) include instances of user classes and otherwise constants:
    then Python's own sort/min/max orders them, each comparison it makes traced
    (``traced_key``), so the user's ``__lt__`` runs as often and in the order it does eagerly."""
    from .objects import NewObjectVariable, UserObjectVariable
    from .tensor import TensorVariable
    user = [isinstance(k, (NewObjectVariable, UserObjectVariable)) for k in keys]
    return any(user) and all(u or (k.is_python_constant() and not isinstance(k, TensorVariable))
                             for u, k in zip(user, keys))


def traced_key(tx, v):
    """A stand-in for tracker ``v`` in a real sort/min/max: its comparisons are traced."""
    import operator

    from .builtin import binary_op

    class _Key:
        __slots__ = ("v",)

        def __init__(self, v):
            self.v = v

        def __lt__(self, o):
            return binary_op(tx, operator.lt, self.v, o.v).truthy(tx)

        def __gt__(self, o):
            return binary_op(tx, operator.gt, self.v, o.v).truthy(tx)
    return _Key(v)


class ContainerMethodVariable(VariableTracker):
    """``obj.method`` for a container tracker, called later."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)


class DictVariable(VariableTracker):
    """A dict (``dict``, ``OrderedDict`` or ``defaultdict``) whose values are trackers.

    Keys are Python constants (hashable) or tensors. A tensor key is stored as the real tensor
    object (tensors hash by identity), so only tensors that exist outside the frame can be keys
    -- the case of an optimizer's ``state[param]``; ``key_vars`` keeps the tracker of each such
    key, so iterating the dict yields the same trackers that were used to index it.
    Insertion order is kept."""

    def __init__(self, items: dict, source=None, cls=dict, default_factory=None):
        self.items = dict(items)
        self.source = source
        self.cls = cls
        self.default_factory = default_factory
        self.key_vars = {}      # id(real key object) -> tracker (tensor and module keys)
        # keys removed so far: an OrderedDict whose key was removed and added back has the same
        # keys in the same order but is "mutated" to its iterators (DictKeyIteratorVariable)
        self.removals = 0

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        return len(self.items) > 0

    def key_var(self, tx, k):
        """The tracker of key ``k`` (a real key of ``self.items``)."""
        if _is_plain_key(k):
            return ConstantVariable(k)
        hit = self.key_vars.get(id(k))
        if hit is not None:
            return hit
        from ...tensor import Tensor
        if isinstance(k, Tensor):
            prev = tx.output._by_id.get(id(k))
            if prev is not None:
                self.key_vars[id(k)] = prev[0]
                return prev[0]
            if self.source is None:
                raise Unsupported("a tensor dict key with no source")
            from .builder import wrap
            idx = list(self.items).index(k)
            v = wrap(tx, k, DictKeySource(self.source, idx))
            self.key_vars[id(k)] = v
            return v
        return ConstantVariable(k)

    def unpack(self, tx):
        return [self.key_var(tx, k) for k in self.items]

    def as_python_constant(self):
        return {k: _const(v) for k, v in self.items.items()}

    def var_getattr(self, tx, name):
        if name == "default_factory" and self.cls is _defaultdict():
            from .builder import wrap
            return wrap(tx, self.default_factory, None, guard=False)
        return ContainerMethodVariable(self, name)

    def _key(self, k, tx=None):
        from .tensor import TensorVariable
        if isinstance(k, TensorVariable):
            real = _real_tensor(tx, k)
            self.key_vars.setdefault(id(real), k)
            return real
        from .objects import NNModuleVariable
        if isinstance(k, NNModuleVariable) and type(k.module).__hash__ is object.__hash__ \
                and type(k.module).__eq__ is object.__eq__:
            # a module (hashed by identity, as a tensor): the real object is the key, its tracker
            # kept for reads of the keys (``{m: ... for m in self.children()}``)
            self.key_vars.setdefault(id(k.module), k)
            return k.module
        if not k.is_python_constant():
            raise Unsupported("dict key that is not a constant or a tensor from outside the frame")
        key = k.as_python_constant()
        from ...fx.experimental.symbolic_shapes import SymInt
        if isinstance(key, SymInt):
            key = int(key)   # a symbolic size as a dict key: hashing needs its value (guarded)
        try:
            hash(key)
        except TypeError:
            raise Unsupported("unhashable dict key")
        return key

    def key_expr(self, out, k):
        """Python expression for key ``k`` in reconstructed code."""
        return repr(k) if _is_plain_key(k) else out.ref(k)

    def _check_mutable(self, tx=None):
        if self.source is not None:
            if tx is None:
                raise Unsupported("mutating a dict that came from outside the compiled frame (side effect)")
            tx.output.record_container_mutation(self)

    def _missing(self, tx, k):
        """``d[k]`` for a key not in the dict: a defaultdict inserts ``default_factory()``."""
        f = self.default_factory
        if self.cls is not _defaultdict() or f is None:
            if not _is_plain_key(k):
                raise Unsupported(f"KeyError {k!r} (the program raises)")
            from .exceptions import raise_observed
            raise_observed(tx, KeyError, k)
        if f is dict:
            v = DictVariable({})
        elif f is list:
            v = ListVariable([])
        elif f in (int, float, bool, str, tuple):
            v = ConstantVariable(f()) if f is not tuple else TupleVariable([])
        else:
            raise Unsupported(f"defaultdict with default_factory {getattr(f, '__name__', f)}")
        self._check_mutable(tx)
        self.items[k] = v
        return v

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            k = self._key(args[0], tx)
            if k not in self.items:
                return self._missing(tx, k)
            return self.items[k]
        if name == "get" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            return self.items.get(k, args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(self._key(args[0], tx) in self.items)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewVariable(tx, self, name)
        if name == "copy" and not args and not kwargs:
            return self.copy()
        if name in ("__setitem__", "update", "pop", "setdefault", "clear", "__delitem__", "popitem", "move_to_end"):
            self._check_mutable(tx)
        if name == "__setitem__" and len(args) == 2:
            self.items[self._key(args[0], tx)] = args[1]
            return ConstantVariable(None)
        if name == "__delitem__" and len(args) == 1:
            k = self._key(args[0], tx)
            if k not in self.items:
                from .exceptions import raise_observed
                raise_observed(tx, KeyError, k)
            del self.items[k]
            self.removals += 1
            return ConstantVariable(None)
        if name == "update" and len(args) <= 1:
            if args:
                self.update_from(tx, args[0])
            for k, v in kwargs.items():
                self.items[k] = v
            return ConstantVariable(None)
        if name == "pop" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            if k in self.items:
                self.removals += 1
                return self.items.pop(k)
            if len(args) == 2:
                return args[1]
            from .exceptions import raise_observed
            raise_observed(tx, KeyError, k)
        if name == "setdefault" and 1 <= len(args) <= 2:
            k = self._key(args[0], tx)
            if k not in self.items:
                self.items[k] = args[1] if len(args) == 2 else ConstantVariable(None)
            return self.items[k]
        if name == "clear":
            self.removals += len(self.items)
            self.items.clear()
            return ConstantVariable(None)
        if name in ("popitem", "move_to_end"):
            return self._ordered_op(tx, name, args, kwargs)
        raise Unsupported(f"dict.{name}")

    def _ordered_op(self, tx, name, args, kwargs):
        """``popitem()`` (an OrderedDict's takes ``last``) and an OrderedDict's ``move_to_end(key,
        last=True)``. Each counts as a removal (an OrderedDict's iterators see it as a mutation,
        as CPython's do: the key's node is unlinked and linked again)."""
        import collections
        from .exceptions import raise_observed
        ordered = issubclass(self.cls, collections.OrderedDict)
        if name == "move_to_end" and not ordered:
            raise Unsupported(f"'{self.cls.__name__}' object has no attribute 'move_to_end' (the program raises)")
        names = ("key", "last") if name == "move_to_end" else ("last",) if ordered else ()
        if len(args) > len(names) or set(kwargs) - set(names[len(args):]):
            raise Unsupported(f"{self.cls.__name__}.{name} with these arguments (the program raises TypeError)")
        got = dict(zip(names, args), **kwargs)
        if name == "move_to_end" and "key" not in got:
            raise Unsupported("move_to_end without a key (the program raises TypeError)")
        last = got.get("last", ConstantVariable(True))
        if not last.is_python_constant():
            raise Unsupported(f"{name}(last=...) that is not a constant")
        last = bool(last.as_python_constant())
        if name == "popitem":
            if not self.items:
                raise_observed(tx, KeyError, "dictionary is empty" if ordered else "popitem(): dictionary is empty")
            k = next(reversed(self.items)) if last else next(iter(self.items))
            self.removals += 1
            return TupleVariable([self.key_var(tx, k), self.items.pop(k)])
        k = self._key(got["key"], tx)
        if k not in self.items:
            raise_observed(tx, KeyError, k)
        v = self.items.pop(k)
        if last:
            self.items[k] = v
        else:
            rest = list(self.items.items())
            self.items.clear()
            self.items[k] = v
            self.items.update(rest)
        self.removals += 1
        return ConstantVariable(None)

    def copy(self):
        """``d.copy()`` (and the left side of ``d | e``): a plain dict, but an ``OrderedDict`` or a
        ``defaultdict`` (or a subclass of one) copies its class -- and a defaultdict its factory
        -- as CPython's do (``copy`` there is ``type(self)(...)``; ``dict.copy`` makes a dict)."""
        import collections
        keep = issubclass(self.cls, (collections.OrderedDict, collections.defaultdict))
        d = DictVariable(self.items, cls=self.cls if keep else dict,
                         default_factory=self.default_factory if keep else None)
        d.key_vars = dict(self.key_vars)
        return d

    def update_from(self, tx, other):
        """``d.update(other)`` / ``d |= other``: another dict's items, or an iterable of pairs (each
        unpacked; one of another length raises ValueError, as CPython's message says)."""
        from .dict_objects import DictObjectVariable
        if isinstance(other, DictObjectVariable):
            other = other.as_dict_variable(tx)
        if isinstance(other, DictVariable):
            self.items.update(other.items)
            self.key_vars.update(other.key_vars)
            return
        from .tensor import TensorVariable
        if isinstance(other, TensorVariable):
            raise Unsupported("dict.update with a tensor")
        it = iterator_of(tx, other)
        n = 0
        while True:
            pair = it.next(tx)
            if pair is None:
                return
            if isinstance(pair, BaseListVariable):
                kv = pair.unpack(tx)
            elif pair.is_python_constant() and isinstance(pair.as_python_constant(), (tuple, list, str)):
                kv = [ConstantVariable(c) for c in pair.as_python_constant()]
            else:
                raise Unsupported(f"dict.update with an element that is not a pair: {pair}")
            if len(kv) != 2:
                from .exceptions import raise_observed
                raise_observed(tx, ValueError, f"dictionary update sequence element #{n} has length "
                                               f"{len(kv)}; 2 is required")
            self.items[self._key(kv[0], tx)] = kv[1]
            n += 1

    def reconstruct(self, out):
        body = "{" + ", ".join(f"{self.key_expr(out, k)}: {out.materialize(v)}"
                               for k, v in self.items.items()) + "}"
        if self.cls is dict:
            return body
        if self.cls is _defaultdict():
            return f"{out.ref(self.cls)}({out.ref(self.default_factory)}, {body})"
        return f"{out.ref(self.cls)}({body})"

    def __repr__(self):
        return f"DictVariable({self.items})"


def dict_entry(tx, d, k, kind):
    """What a view of kind ``kind`` (keys, values, items) of dict tracker ``d`` holds for key ``k``."""
    if kind == "keys":
        return d.key_var(tx, k)
    if kind == "values":
        return d.items[k]
    return TupleVariable([d.key_var(tx, k), d.items[k]])


class DictViewVariable(TupleVariable):
    """``d.keys()``, ``d.values()`` or ``d.items()`` of a dict tracker: a live view, as in Python.
    Its items are read from the dict whenever they are asked for, so a view taken before the
    dict changes sees the change (``ks = d.keys(); d["c"] = x; len(ks)`` is 3); a loop over it
    raises when the dict changes size, as CPython's does. (It was a tuple of the items at the
    call: such code counted 2, and ``print(ks)`` printed a tuple.) A tuple tracker otherwise,
    for the many helpers that take a tuple's items (``list``, ``sorted``, ``zip``, ``sum``...)."""

    def __init__(self, tx, d, kind, base=None, owner=None):
        import collections
        base = d.cls if base is None else base      # (a dict subclass's storage is a plain dict)
        self.tx, self.d, self.kind, self.source = tx, d, kind, None
        self.owner = d if owner is None else owner  # (a dict subclass's object, whose storage d is)
        self.base = base
        self.cls = type(getattr(base(), kind)())
        self.ordered = issubclass(base, collections.OrderedDict)

    @property
    def items(self):
        return [dict_entry(self.tx, self.d, k, self.kind) for k in self.d.items]

    def clone_with(self, items):
        return TupleVariable(items)

    def as_python_constant(self):
        vals = [_const(i) for i in self.items]
        if self.kind == "keys":
            made = dict.fromkeys(vals)
        elif self.kind == "values":
            made = dict(enumerate(vals))
        else:
            made = dict(vals)
        return getattr(made, self.kind)()

    def getitem(self, tx, key):
        from .exceptions import raise_observed
        raise_observed(tx, TypeError, f"'{self.cls.__name__}' object is not subscriptable")

    def call_method(self, tx, name, args, kwargs):
        if name == "__contains__" and self.kind == "keys" and len(args) == 1:
            return self.d.call_method(tx, "__contains__", args, kwargs)
        if name in ("index", "count"):
            raise Unsupported(f"{self.cls.__name__}.{name} (no such method: the program raises)")
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, out):
        if self.owner is not self.d:     # the base mapping's view of the object (not of a copy of its storage)
            return f"{out.ref(self.base)}.{self.kind}({out.materialize(self.owner)})"
        return f"{out.materialize(self.d)}.{self.kind}()"

    def __repr__(self):
        return f"DictViewVariable({self.kind})"


def _defaultdict():
    import collections
    return collections.defaultdict


def _is_plain_key(k):
    return type(k) in (str, int, float, bool, bytes, type(None)) or (
        type(k) is tuple and all(_is_plain_key(x) for x in k))


def _real_tensor(tx, tv):
    """The outside tensor a graph-input tracker stands for (dict keys hash real objects)."""
    if tv.source is None or tx is None:
        raise Unsupported("a tensor computed in the graph used as a dict key")
    out = tx.output
    for src, t in zip(out.input_sources, out.input_values):
        if src == tv.source:
            return t
    raise Unsupported("a tensor dict key that is not a graph input")


def _same_keys(d, keys):
    """Guard helper: ``d``'s keys are exactly ``keys``, in order, by identity (tensor keys compare
    elementwise under ``==``)."""
    if len(d) != len(keys):
        return False
    for a, b in zip(d, keys):
        if a is not b and not (type(a) is type(b) and _is_plain_key(b) and a == b):
            return False
    return True


def _is_guardable_key(k):
    """A dict key an equality (or, for enum members, identity) guard can pin down."""
    import enum
    if isinstance(k, enum.Enum):
        return True
    return _is_plain_key(k) and not (type(k) is float and k != k)


def _repr_roundtrips(k):
    """``repr(k)`` is a Python expression for ``k`` (not so for inf)."""
    try:
        return eval(repr(k), {}) == k       # noqa: S307 -- repr of a number/str/bytes/None/tuple
    except Exception:
        return False


class DictKeySource(Source):
    """The ``i``-th key of a dict (a tensor key read back for iteration)."""

    def __init__(self, base, index):
        self.base, self.index = base, index

    def expr(self):
        return f"list({self.base.expr()})[{self.index}]"

    def name(self):
        return f"{self.base.name()}_key{self.index}"



class RefKeySource(Source):
    """``base[obj]`` for a key object (a tensor) bound under a global name of the generated code."""

    def __init__(self, base, ref, label):
        self.base, self.ref, self.label = base, ref, label

    def expr(self):
        return f"{self.base.expr()}[{self.ref}]"

    def name(self):
        return f"{self.base.name()}_{self.label}"



def wrap_dict(tx, value, source, guard=True):
    """The tracker of an outside ``dict``/``OrderedDict``/``defaultdict``: guards its type, its keys
    (by equality for constant keys, by identity for enum members and tensor keys) and a defaultdict's factory; values
    are wrapped through ``source[key]``."""
    import collections
    from ...tensor import Tensor
    from ..source import GetItemSource
    from .builder import wrap
    keys = list(value)
    plain = all(type(k) in (str, int) for k in keys)
    if not plain and not all(_is_guardable_key(k) or isinstance(k, Tensor) for k in keys):
        raise Unsupported("dict with keys that are not constants (numbers, strings, None, tuples of those, "
                          "enum members) or tensors")
    g = tx.output.guards if (guard and source is not None) else None
    factory = value.default_factory if type(value) is collections.defaultdict else None
    if g:
        g.type_match(source, value)
        if plain:
            g.dict_keys_match(source, keys)
        else:
            g.add(f"{g.ref(_same_keys)}({source.expr()}, {g.ref(tuple(keys))})",
                  f"{source.expr()} has the same {len(keys)} keys (tensors by identity)")
        if factory is not None or type(value) is collections.defaultdict:
            g.add(f"{source.expr()}.default_factory is {g.ref(factory)}",
                  f"{source.expr()}.default_factory is {getattr(factory, '__name__', factory)}")
    items = {}
    for i, (k, v) in enumerate(value.items()):
        if source is None:
            vs = None
        elif _is_plain_key(k) and _repr_roundtrips(k):
            vs = GetItemSource(source, k)
        else:
            vs = RefKeySource(source, tx.output.obj_ref(k), f"k{i}")
        items[k] = wrap(tx, v, vs, guard)
    return DictVariable(items, source, cls=type(value), default_factory=factory)


class IteratorVariable(VariableTracker):
    """An iterator over a materialised list of trackers (GET_ITER/iter()/zip/enumerate/map)."""

    def __init__(self, items, py_type=type(iter([]))):
        self.items = list(items)
        self.pos = 0
        self.py_type = py_type      # what isinstance() sees (a generator for m.parameters())

    def python_type(self):
        return self.py_type

    def next(self, tx):
        if self.pos >= len(self.items):
            return None
        v = self.items[self.pos]
        self.pos += 1
        return v

    def unpack(self, tx):
        rest = self.items[self.pos:]
        self.pos = len(self.items)
        return rest

    endless = False     # itertools.count/repeat/cycle (builtin._endless): never runs out
    MAX_UNPACKED = 100_000

    def unpack_by_steps(self, tx):
        """Every item left, one ``next`` at a time (for iterators whose steps check or compute).
        Refused for an endless iterator (``list(itertools.count())``) and past ``MAX_UNPACKED``
        items (one built on an endless one, a ``while True`` generator): the frame falls back
        to Python, where the program runs as it would have without the compiler."""
        if self.endless:
            raise Unsupported(f"taking every item of an endless {self.py_type.__name__} iterator")
        out = []
        while (v := self.next(tx)) is not None:
            out.append(v)
            if len(out) > self.MAX_UNPACKED:
                raise Unsupported(f"taking every item of an iterator that gave more than {self.MAX_UNPACKED}")
        return out

    def __repr__(self):
        return f"IteratorVariable({self.pos}/{len(self.items)})"


def _list_iter_from(lst, pos):
    """A list iterator over ``lst`` that has taken ``pos`` items: a loop's iterator at a graph
    break, over the very list the code after the break sees."""
    it = iter(lst)
    if pos:
        it.__setstate__(pos)
    return it


_list_iter_from.__module__ = __name__


class ListIteratorVariable(IteratorVariable):
    """``iter()`` of a list tracker (a ``for`` loop over a list, a comprehension's GET_ITER).
    Reads the list as it is at each step, as CPython's list iterator does: a loop that appends
    to the list it walks sees the new items (``for y in ys: ... ys.append(...)``). It used to
    take a copy of the items at GET_ITER, so such a loop ran over the old items only: a silent
    wrong answer. Once exhausted it stays so (CPython drops the list then), whatever is
    appended later. At a graph break it is rebuilt over the list itself (``remaining_expr``)."""

    def __init__(self, lst):
        self.lst = lst
        self.pos = 0
        self.done = False
        self.py_type = type(iter([]))

    @property
    def items(self):
        return [] if self.done else self.lst.items

    def next(self, tx):
        if self.done:
            return None
        items = self.lst.items
        if self.pos >= len(items):
            self.done, self.pos = True, 0
            return None
        v = items[self.pos]
        self.pos += 1
        return v

    def unpack(self, tx):
        rest = [] if self.done else list(self.lst.items[self.pos:])
        self.done, self.pos = True, 0
        return rest

    def remaining_expr(self, out):
        if self.done:
            return "()"
        return f"{out.obj_ref(_list_iter_from)}({out.materialize(self.lst)}, {self.pos})"

    def __repr__(self):
        return f"ListIteratorVariable({'done' if self.done else f'{self.pos}/{len(self.lst.items)}'})"


def _list_rev_iter_from(lst, index):
    """A reverse list iterator over ``lst`` whose next item is ``lst[index]``: a loop's
    ``reversed(ys)`` at a graph break. Exhausted when ``index`` is past the list's end now (CPython's
    iterator finds that at its next step; its ``__setstate__`` would clamp the index instead)."""
    if not 0 <= index < len(lst):
        return iter(())
    it = reversed(lst)
    it.__setstate__(index)
    return it


_list_rev_iter_from.__module__ = __name__


class ReversedListIteratorVariable(ListIteratorVariable):
    """``reversed()`` of a list tracker: reads ``lst[index]`` at each step, index counting down
    from the length at the call, as CPython's reverse list iterator does. Items appended meanwhile
    are not reached; a list shrunk below the index ends the loop. (It took a copy of the items,
    so a loop that shrank or rewrote the list it walked backwards saw the old items.)"""

    def __init__(self, lst):
        super().__init__(lst)
        self.index = len(lst.items) - 1     # of the next item (``pos`` stays 0: ``items`` is what is left)
        self.py_type = type(reversed([]))

    @property
    def items(self):
        """What it has left, in the order it gives them."""
        if self.done:
            return []
        return list(reversed(self.lst.items[:self.index + 1]))

    def next(self, tx):
        if self.done:
            return None
        items = self.lst.items
        if not 0 <= self.index < len(items):
            self.done = True
            return None
        v = items[self.index]
        self.index -= 1
        return v

    def unpack(self, tx):
        rest = self.items
        self.done = True
        return rest

    def remaining_expr(self, out):
        if self.done:
            return "()"
        return f"{out.obj_ref(_list_rev_iter_from)}({out.materialize(self.lst)}, {self.index})"

    def __repr__(self):
        return f"ReversedListIteratorVariable({'done' if self.done else self.index})"


class DictKeyIteratorVariable(IteratorVariable):
    """``iter()`` of a dict tracker or of one of its views (``kind``: its keys, values or
    items). The keys are those of the dict when the loop began; a value is read when its step
    is taken (a loop that sets ``d[later_key]`` sees the new value, as in CPython). As CPython's
    dict iterator does, it raises ``RuntimeError: dictionary changed size during iteration`` at
    the next step after the loop added or removed a key (the compiled loop used to go on over
    the old keys). A key removed and another added (the same size) cannot be followed without
    CPython's table layout: that refuses to trace (the frame runs eagerly).

    An ``OrderedDict``'s iterator (``ordered``) differs: any change to its keys raises
    ``OrderedDict mutated during iteration`` at the next step, but only while it has a next
    key (it holds the next key from the step before, so a key added after the last item is
    not seen and the loop ends)."""

    def __init__(self, d, tx, kind="keys", ordered=None, owner=None):
        import collections
        self.d, self.tx, self.kind = d, tx, kind
        self.owner = d if owner is None else owner   # (what a break hands on: a subclass's object, not its storage)
        self.ordered = issubclass(d.cls, collections.OrderedDict) if ordered is None else ordered
        self.keys = list(d.items)
        self.size = len(self.keys)
        self.removals = d.removals
        self.pos = 0
        self.done = False
        base = collections.OrderedDict() if self.ordered else {}
        self.py_type = type(iter(getattr(base, kind)()))

    def _item(self, k):
        return dict_entry(self.tx, self.d, k, self.kind)

    def _changed(self):
        return len(self.d.items) != self.size or list(self.d.items) != self.keys or \
            (self.ordered and self.d.removals != self.removals)

    @property
    def items(self):
        """What the loop has taken and has left (the code that reads these does not step)."""
        if self._changed():
            raise Unsupported("a dict changed during a loop over it, read whole")
        return [self._item(k) for k in self.keys]

    def next(self, tx):
        if self.done:
            return None
        if self.ordered:
            if self.pos < len(self.keys) and self._changed():
                from .exceptions import raise_observed
                self.done = True
                raise_observed(tx, RuntimeError, "OrderedDict mutated during iteration")
        elif len(self.d.items) != self.size:      # (checked before the end, as CPython does)
            from .exceptions import raise_observed
            self.done = True
            raise_observed(tx, RuntimeError, "dictionary changed size during iteration")
        if not self.ordered and list(self.d.items) != self.keys:
            # (after the last item too: CPython's table decides whether a new key follows, or
            # "dictionary keys changed during iteration" is raised)
            raise Unsupported("a dict's keys changed during a loop over it (one removed, another added)")
        if self.pos >= len(self.keys):
            self.done = True
            return None
        v = self._item(self.keys[self.pos])
        self.pos += 1
        return v

    def remaining_expr(self, out):
        """At a graph break: CPython's iterator over the dict itself, moved on to where the loop
        stands (``resumable_iters.DictIter``). It used to be a tuple of the items left, read at
        the break: a breaking call that set a later key's value was not seen, and one that added
        a key did not raise."""
        if self.done:
            return "()"
        if self._changed():
            raise Unsupported("a dict changed during a loop over it, alive across a graph break")
        from .resumable_iters import DictIter
        return f"{out.obj_ref(DictIter)}({out.materialize(self.owner)}, {self.kind!r}, {self.ordered!r}, {self.pos})"

    def unpack(self, tx):
        return self.unpack_by_steps(tx)

    def __repr__(self):
        return f"DictKeyIteratorVariable({self.kind} {self.pos}/{len(self.keys)})"


def iterator_of(tx, v):
    """What ``iter(v)`` (GET_ITER, ``iter()``) makes of a tracker: itself if an iterator, a live
    iterator over a list, else an iterator over its items as they are now."""
    if isinstance(v, IteratorVariable):
        return v
    if type(v) in (ListVariable, OutsideListVariable):
        return ListIteratorVariable(v)
    if type(v) is DictVariable:
        return DictKeyIteratorVariable(v, tx)
    if type(v) is DictViewVariable:
        return DictKeyIteratorVariable(v.d, tx, v.kind, v.ordered, v.owner)
    from .dict_objects import DictObjectVariable
    if isinstance(v, DictObjectVariable):
        res = v._call_user(tx, "__iter__", [])
        if res is not None:
            return iterator_of(tx, res)
        import collections
        return DictKeyIteratorVariable(v.storage, tx, ordered=issubclass(v.base, collections.OrderedDict), owner=v)
    from .sets import SetIteratorVariable, SetVariable
    if type(v) is SetVariable:
        return SetIteratorVariable(v)
    from .deques import DequeVariable, deque_iterator
    if type(v) is DequeVariable:
        return deque_iterator(v)
    it = _user_iterator(tx, v)
    if it is not None:
        return it
    return IteratorVariable(v.unpack(tx))


def _user_iterator(tx, v):
    """``iter()`` of an instance of a user class (made in the frame, or from outside), as CPython
    does it: a Python ``__iter__`` is called -- an object returning itself is stepped by its
    ``__next__`` (inlined at each step; StopIteration ends it), anything else is iterated in
    turn -- and without one, a Python ``__getitem__`` is called with 0, 1, 2 ... until IndexError
    (the old sequence protocol). None: not such an object. The iterator cannot be rebuilt at a
    graph break (the frame then runs eagerly), like a generator's."""
    import inspect
    from .functions import UserFunctionVariable
    from .user_operators import _user_class
    cls = _user_class(v)
    if cls is None or cls.__getattribute__ is not object.__getattribute__:
        return None
    it_fn = inspect.getattr_static(cls, "__iter__", None)
    gi = inspect.getattr_static(cls, "__getitem__", None)
    if not (isinstance(it_fn, types.FunctionType) or (it_fn is None and isinstance(gi, types.FunctionType))):
        return None
    if v.source is not None:
        g = tx.output.guards
        for name in ("__iter__", "__next__", "__getitem__"):
            e = f"{g.ref(inspect.getattr_static)}(type({v.source.expr()}), {name!r}, None)"
            g.add(f"{e} is {g.ref(inspect.getattr_static(cls, name, None))}", f"{cls.__name__}.{name} unchanged")
    from .exceptions import ObservedException

    def stepping(call, ends):
        def step(tx):
            try:
                return call(tx)
            except ObservedException as e:
                if issubclass(e.exc.exc_type, ends):
                    return None
                raise
        return LazyIteratorVariable(step, cls)
    if isinstance(it_fn, types.FunctionType):
        res = UserFunctionVariable(it_fn).call_function(tx, [v], {})
        if res is not v:
            return iterator_of(tx, res)
        nx = inspect.getattr_static(cls, "__next__", None)
        if not isinstance(nx, types.FunctionType):
            raise Unsupported(f"iter() returned a {cls.__name__} whose __next__ is not a Python function")
        return stepping(lambda tx: UserFunctionVariable(nx).call_function(tx, [v], {}), StopIteration)
    if it_fn is None and isinstance(gi, types.FunctionType):
        k = [0]

        def item(tx):
            r = UserFunctionVariable(gi).call_function(tx, [v, ConstantVariable(k[0])], {})
            k[0] += 1
            return r
        return stepping(item, (IndexError, StopIteration))
    return None


class LazyIteratorVariable(IteratorVariable):
    """An iterator whose items are made when asked for: ``step(tx)`` gives the next item's
    tracker, or None when it is exhausted. What ``enumerate``/``zip``/``map``/``filter`` of a
    generator make (a generator is lazy, so what is built on it must be too). ``lazy`` marks it
    for the code that would read ``items`` (there are none to read): it cannot be rebuilt at a
    graph break, nor folded to a constant without being consumed."""

    lazy = True

    def __init__(self, step, py_type):
        super().__init__([], py_type)
        self.step = step
        self.finished = False

    def next(self, tx):
        if self.finished:
            return None
        try:
            v = self.step(tx)
        except BaseException:
            self.finished = True
            raise
        if v is None:
            self.finished = True
        return v

    def unpack(self, tx):
        return self.unpack_by_steps(tx)

    def __repr__(self):
        return f"{type(self).__name__}({'done' if self.finished else 'live'})"


class RebuildableLazyIteratorVariable(LazyIteratorVariable):
    """A lazy iterator that a graph break can rebuild: ``enumerate``/``zip`` over live list
    iterators (and over other rebuildable iterators), which must read their lists step by step
    like the loops over them (``ListIteratorVariable``). ``rebuild(out)`` is the expression for
    what is left of it at the break (``enumerate(<the list iterator there>, <count>)``)."""

    def __init__(self, step, py_type, rebuild):
        super().__init__(step, py_type)
        self._rebuild = rebuild

    def remaining_expr(self, out):
        return "()" if self.finished else self._rebuild(out)


def rebuildable(it):
    """Whether a graph break can rebuild iterator ``it`` (a plain or list iterator, or a
    rebuildable lazy one; not a generator or something built on one)."""
    return not getattr(it, "lazy", False) or isinstance(it, RebuildableLazyIteratorVariable)


class GeneratorVariable(LazyIteratorVariable):
    """A user generator -- a generator function's call, a generator expression -- run lazily:
    each ``next`` resumes its frame's translator (``gen``, made with ``pause_at_yield``) up to
    its next ``yield``. Its body and its consumer's then interleave as in eager: a loop body
    that writes in place what the generator reads for its next item sees the same values
    (run to completion up front, the generator computed every item from the old ones)."""

    def __init__(self, gen):
        super().__init__(self._resume, types.GeneratorType)
        self.gen = gen
        gen.pause_at_yield = gen.lazy_generator = True

    def _resume(self, tx):
        g = self.gen
        g.paused = False
        self.started = True
        value = g.run()
        return value if g.paused else None

    started = False     # resumed once: the frame is paused at a yield (send may give it a value)

    def var_getattr(self, tx, name):
        if name in ("send", "close", "__next__"):
            return ContainerMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        """``send(v)``: the paused ``yield`` evaluates to ``v`` (``YIELD_VALUE`` left the None of a
        plain ``next`` on the frame's stack), then the generator runs to its next yield, as
        CPython's. ``close()``: the generator is done (a yield inside try/with, whose cleanup
        close would run, is refused where it is traced: ``YIELD_VALUE``)."""
        from .exceptions import raise_observed
        if kwargs:
            raise_observed(tx, TypeError, f"generator.{name}() takes no keyword arguments")
        if name == "__next__" and not args:
            v = self.next(tx)
            if v is None:
                raise_observed(tx, StopIteration)
            return v
        if name == "close" and not args:
            self.finished = True
            return ConstantVariable(None)
        if name == "send" and len(args) == 1:
            value = args[0]
            if not self.started and not (value.is_python_constant() and value.as_python_constant() is None):
                raise_observed(tx, TypeError, "can't send non-None value to a just-started generator")
            if self.started and not self.finished:
                self.gen.stack[-1] = value
            v = self.next(tx)
            if v is None:
                raise_observed(tx, StopIteration)
            return v
        raise_observed(tx, TypeError, f"generator.{name}() with {len(args)} arguments")
