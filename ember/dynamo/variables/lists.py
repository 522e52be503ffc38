"""Lists, tuples (including ember.Size and named tuples), dicts and iterators of trackers.

Containers created inside the frame are modelled exactly (mutation included).
Containers that came from outside (they have a source) are read-only here:
mutating them would be a side effect to replay after the graph, which this
version does not do, so it is unsupported (the frame runs eagerly)."""
from __future__ import annotations

from ..exc import Unsupported
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
        k = key.as_python_constant() if key.is_python_constant() else None
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise Unsupported(f"{self.python_type().__name__} index {key}")
        try:
            if isinstance(k, slice):
                return self.clone_with(self.items[k])
            return self.items[k]
        except IndexError:
            raise Unsupported("list index out of range (the program raises IndexError)")

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
            consts = [i.as_python_constant() if i.is_python_constant() else object() for i in self.items]
            try:
                return ConstantVariable(consts.index(args[0].as_python_constant()))
            except ValueError:
                raise Unsupported("list.index: not found")
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
        return super().var_getattr(tx, name)

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
                raise Unsupported("pop from empty list (the program raises)")
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
        if name == "copy":
            return ListVariable(self.items)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, out):
        return "[" + ", ".join(out.materialize(i) for i in self.items) + "]"

    def __repr__(self):
        return f"ListVariable({self.items})"


class ContainerMethodVariable(VariableTracker):
    """``obj.method`` for a container tracker, called later."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)


class DictVariable(VariableTracker):
    """A dict with constant (hashable) keys; values are trackers. Insertion order kept."""

    def __init__(self, items: dict, source=None, cls=dict):
        self.items = dict(items)
        self.source = source
        self.cls = cls

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        return len(self.items) > 0

    def unpack(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def as_python_constant(self):
        return {k: _const(v) for k, v in self.items.items()}

    def var_getattr(self, tx, name):
        return ContainerMethodVariable(self, name)

    def _key(self, k):
        if not k.is_python_constant():
            raise Unsupported("dict key that is not a constant")
        key = k.as_python_constant()
        from ...fx.experimental.symbolic_shapes import SymInt
        if isinstance(key, SymInt):
            key = int(key)   # a symbolic size as a dict key: hashing needs its value (guarded)
        try:
            hash(key)
        except TypeError:
            raise Unsupported("unhashable dict key")
        return key

    def _check_mutable(self, tx=None):
        if self.source is not None:
            if tx is None:
                raise Unsupported("mutating a dict that came from outside the compiled frame (side effect)")
            tx.output.record_container_mutation(self)

    def call_method(self, tx, name, args, kwargs):
        from .lists import TupleVariable as _T  # noqa: F401 (self-import for clarity)
        if name == "__getitem__" and len(args) == 1:
            k = self._key(args[0])
            if k not in self.items:
                raise Unsupported(f"KeyError {k!r} (the program raises)")
            return self.items[k]
        if name == "get" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            return self.items.get(k, args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(self._key(args[0]) in self.items)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "keys":
            return TupleVariable([ConstantVariable(k) for k in self.items])
        if name == "values":
            return TupleVariable(list(self.items.values()))
        if name == "items":
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])
        if name == "copy":
            return DictVariable(self.items)
        if name in ("__setitem__", "update", "pop", "setdefault", "clear", "__delitem__", "popitem"):
            self._check_mutable(tx)
        if name == "__setitem__" and len(args) == 2:
            self.items[self._key(args[0])] = args[1]
            return ConstantVariable(None)
        if name == "__delitem__" and len(args) == 1:
            k = self._key(args[0])
            if k not in self.items:
                raise Unsupported("KeyError in del")
            del self.items[k]
            return ConstantVariable(None)
        if name == "update" and len(args) <= 1:
            if args:
                other = args[0]
                if not isinstance(other, DictVariable):
                    raise Unsupported("dict.update with a non-dict")
                self.items.update(other.items)
            for k, v in kwargs.items():
                self.items[k] = v
            return ConstantVariable(None)
        if name == "pop" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            if k in self.items:
                return self.items.pop(k)
            if len(args) == 2:
                return args[1]
            raise Unsupported("KeyError in pop")
        if name == "setdefault" and 1 <= len(args) <= 2:
            k = self._key(args[0])
            if k not in self.items:
                self.items[k] = args[1] if len(args) == 2 else ConstantVariable(None)
            return self.items[k]
        if name == "clear":
            self.items.clear()
            return ConstantVariable(None)
        raise Unsupported(f"dict.{name}")

    def reconstruct(self, out):
        body = "{" + ", ".join(f"{out.ref(k) if not isinstance(k, (str, int)) else repr(k)}: "
                               f"{out.materialize(v)}" for k, v in self.items.items()) + "}"
        if self.cls is dict:
            return body
        return f"{out.ref(self.cls)}({body})"

    def __repr__(self):
        return f"DictVariable({self.items})"


class IteratorVariable(VariableTracker):
    """An iterator over a materialised list of trackers (GET_ITER/iter()/zip/enumerate/map)."""

    def __init__(self, items):
        self.items = list(items)
        self.pos = 0

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

    def __repr__(self):
        return f"IteratorVariable({self.pos}/{len(self.items)})"
