"""Instances of ``dict`` subclasses made inside the frame (HuggingFace's ``ModelOutput``: a
``@dataclass`` subclass of ``OrderedDict`` whose ``__post_init__``, ``__setitem__`` and
``__setattr__`` keep the mapping and the attributes in step, and whose ``__getitem__`` takes
a key or an index).

The object is two stores, as in CPython: its items (a ``DictVariable``, the C-level
storage) and its instance attributes (``NewObjectVariable.attrs``). Python methods of the
user's classes (dunders included) are inlined; a method that resolves to the builtin mapping
(``dict``, ``OrderedDict``, ``defaultdict``) -- directly or through ``super()`` -- acts on
the storage with the builtin's semantics (``dict.__init__``/``update`` do not call an
overridden ``__setitem__``; ``OrderedDict``'s do). Where it leaves the frame it is rebuilt as
a real instance of its class: the builtin's ``__new__``, its items set with the builtin's
``__setitem__``, its ``__dict__`` filled (no user code runs again)."""
from __future__ import annotations

import abc
import collections
import inspect
import types

from ..exc import Unsupported
from ..source import Source
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable
from .lists import DictKeyIteratorVariable, DictVariable, DictViewVariable, TupleVariable
from .objects import NewObjectVariable

_BASES = (collections.OrderedDict, collections.defaultdict, dict)
# what the builtin mapping answers for an instance of a subclass
_DICT_METHODS = {"__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__", "keys",
                 "values", "items", "get", "pop", "setdefault", "clear", "update", "copy", "__init__"}
# user overrides that the OrderedDict C methods call back into (PyObject_SetItem/GetItem)
_ITEM_DUNDERS = ("__getitem__", "__setitem__", "__delitem__")


# attribute hooks an "attribute dict" (``AttrDict``/``EasyDict``) defines: a Python function, or
# the builtin mapping's own item method (``__getattr__ = dict.__getitem__``)
_ATTR_HOOKS = {"__getattr__": (dict.__getitem__, dict.get), "__setattr__": (dict.__setitem__,),
               "__delattr__": (dict.__delitem__,)}


def _attr_hook_ok(name, attr) -> bool:
    return isinstance(attr, types.FunctionType) or any(attr is m for m in _ATTR_HOOKS[name]) or \
        (name == "__setattr__" and attr is object.__setattr__) or (name == "__delattr__" and attr is object.__delattr__)


def storage_base(cls):
    """The builtin mapping class ``cls`` stores its items in, or None."""
    for k in cls.__mro__:
        if k in _BASES:
            return k
    return None


class DictObjectVariable(NewObjectVariable):
    """An instance of a ``dict``/``OrderedDict``/``defaultdict`` subclass created in the frame."""

    def __init__(self, cls, class_var):
        super().__init__(cls, class_var)
        self.base = storage_base(cls)
        self.storage = DictVariable({}, cls=dict)
        if self.base is collections.defaultdict:
            self.storage.cls = collections.defaultdict

    @staticmethod
    def can_model(cls) -> bool:
        if not isinstance(cls, type) or not issubclass(cls, dict) or type(cls) not in (type, abc.ABCMeta):
            return False
        base = storage_base(cls)
        if base is None:
            return False
        from .builder import _is_ember_module_name, is_inlined_ember_module
        mod = cls.__module__ or ""
        if _is_ember_module_name(mod) and not is_inlined_ember_module(mod):
            return False
        for k in cls.__mro__:
            if k is base:
                break
            if k.__module__ == "builtins" or "__slots__" in k.__dict__:
                return False
            if any(n in k.__dict__ for n in ("__new__", "__getattribute__", "__del__")):
                return False
            if not all(_attr_hook_ok(n, k.__dict__[n]) for n in _ATTR_HOOKS if n in k.__dict__):
                return False
        if any(k not in _BASES and k is not object for k in cls.__mro__[cls.__mro__.index(base):]):
            return False
        if getattr(cls, "__abstractmethods__", None):
            return False
        return True

    # ------------------------------------------------------------------ method resolution
    def _owner(self, name):
        """(class defining ``name`` first in the MRO, its attribute) or (None, None)."""
        for k in self.cls.__mro__:
            if name in k.__dict__:
                return k, k.__dict__[name]
        return None, None

    def _is_builtin_owner(self, klass):
        mro = self.cls.__mro__
        return klass is not None and mro.index(klass) >= mro.index(self.base)

    def user_method(self, tx, name):
        """A bound tracker for ``name`` if a user class defines it as a Python function (guarded
        unchanged on the class when the class has a source), else None."""
        klass, attr = self._owner(name)
        if klass is None or self._is_builtin_owner(klass) or not isinstance(attr, types.FunctionType):
            if klass is not None and not self._is_builtin_owner(klass):
                raise Unsupported(f"{self.cls.__name__}.{name} is a {type(attr).__name__}")
            return None
        src = self.class_var.source
        if src is not None:
            g = tx.output.guards
            g.add(f"{g.ref(inspect.getattr_static)}({src.expr()}, {name!r}, None) is {g.ref(attr)}",
                  f"{self.cls.__name__}.{name} unchanged")
        from .functions import UserMethodVariable
        return UserMethodVariable(UserFunctionVariable(attr), self)

    def _call_user(self, tx, name, args):
        if name in _ATTR_HOOKS:
            klass, attr = self._owner(name)
            if klass is not None and not self._is_builtin_owner(klass) and not isinstance(attr, types.FunctionType):
                # ``__setattr__ = dict.__setitem__`` (checked by can_model): the builtin item method
                # on the storage, which no user ``__setitem__`` overrides (as in eager)
                if attr is object.__setattr__ or attr is object.__delattr__:
                    return None
                self._guard_class_attr(tx, name, attr)
                return self.dict_call(tx, attr.__name__, list(args), {})
        m = self.user_method(tx, name)
        return None if m is None else m.call_function(tx, list(args), {})

    def _guard_class_attr(self, tx, name, attr):
        src = self.class_var.source
        if src is not None:
            g = tx.output.guards
            g.add(f"{g.ref(inspect.getattr_static)}({src.expr()}, {name!r}, None) is {g.ref(attr)}",
                  f"{self.cls.__name__}.{name} unchanged")

    def _getattr_hook(self, tx, name):
        """``obj.name`` missed the instance and the class: the class's ``__getattr__`` answers
        (None when there is none). The miss on the class is guarded."""
        klass, _ = self._owner("__getattr__")
        if klass is None or self._is_builtin_owner(klass) or name in ("__class__", "__dict__"):
            return None
        if self._owner(name)[0] is not None:
            return None
        src = self.class_var.source
        if src is not None:
            from .objects import _static_missing
            g = tx.output.guards
            g.add(f"{g.ref(_static_missing)}({src.expr()}, {name!r})", f"{self.cls.__name__} has no attribute {name}")
        return self._call_user(tx, "__getattr__", [ConstantVariable(name)])

    def has_attr(self, name):
        found = super().has_attr(name)
        if not found and self._owner("__getattr__")[0] is not None \
                and not self._is_builtin_owner(self._owner("__getattr__")[0]):
            return None       # the class's __getattr__ decides: read it (builtin._hasattr does)
        return found

    # ------------------------------------------------------------------ construction
    @classmethod
    def construct(cls, tx, class_var, args, kwargs):
        obj = cls(class_var.cls, class_var)
        klass, init = obj._owner("__init__")
        if not obj._is_builtin_owner(klass):
            if not isinstance(init, types.FunctionType):
                raise Unsupported(f"{class_var.cls.__name__}.__init__ is a {type(init).__name__}")
            src = AttrSource_or_none(class_var.source, "__init__")
            res = UserFunctionVariable(init, src).call_function(tx, [obj] + list(args), kwargs)
            if not (res.is_python_constant() and res.as_python_constant() is None):
                raise Unsupported(f"{class_var.cls.__name__}.__init__ returned a value (the program raises)")
            return obj
        obj.builtin_init(tx, list(args), dict(kwargs))
        return obj

    def builtin_init(self, tx, args, kwargs):
        """``dict.__init__`` / ``OrderedDict.__init__`` / ``defaultdict.__init__`` on the object."""
        if self.base is collections.defaultdict:
            if args:
                f = args[0]
                if not f.is_python_constant():
                    raise Unsupported("defaultdict subclass with a default_factory that is not a constant")
                self.storage.default_factory = f.as_python_constant()
                args = args[1:]
        from .builtin import BuiltinVariable
        if len(args) == 1 and isinstance(args[0], DictObjectVariable) and args[0].user_method(tx, "keys") is None:
            src = DictVariable(dict(args[0].storage.items))
            src.key_vars = dict(args[0].storage.key_vars)
        else:
            src = BuiltinVariable(dict).call_function(tx, args, {})
        new = [(src.key_var(tx, k), v) for k, v in src.items.items()] + \
            [(ConstantVariable(k), v) for k, v in kwargs.items()]
        if self.base is collections.OrderedDict:
            for k, v in new:              # (OrderedDict.__init__ sets items with self[k] = v)
                self.setitem(tx, k, v)
        else:
            new = list(src.items.items()) + list(kwargs.items())
            self.storage.key_vars.update(src.key_vars)
            for k, v in new:
                self.storage.items[k] = v

    # ------------------------------------------------------------------ the builtin mapping
    def dict_call(self, tx, name, args, kwargs):
        """The builtin mapping's method ``name`` on this object (what ``dict.name(self, ...)`` does)."""
        st = self.storage
        if name == "__init__":
            self.builtin_init(tx, list(args), dict(kwargs))
            return ConstantVariable(None)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            k = st._key(args[0], tx)
            if k not in st.items:
                missing = self._call_user(tx, "__missing__", args)
                if missing is not None:
                    return missing
            return st.call_method(tx, "__getitem__", args, {})
        if name == "__iter__":
            return DictKeyIteratorVariable(st, tx, ordered=issubclass(self.base, collections.OrderedDict), owner=self)
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewVariable(tx, st, name, self.base, owner=self)
        if name == "copy":
            if self.base is not dict:
                raise Unsupported(f"{self.base.__name__}.copy of a subclass (it calls the subclass)")
            return st.call_method(tx, "copy", [], {})
        if self.base is collections.OrderedDict and any(self.user_method(tx, d) is not None for d in _ITEM_DUNDERS):
            if name == "update":
                from .builtin import BuiltinVariable
                src = BuiltinVariable(dict).call_function(tx, list(args), dict(kwargs))
                for k, v in src.items.items():
                    self.setitem(tx, src.key_var(tx, k), v)
                return ConstantVariable(None)
            if name in ("pop", "setdefault", "popitem"):
                raise Unsupported(f"OrderedDict.{name} on a subclass overriding item access")
        if name in _DICT_METHODS:
            return st.call_method(tx, name, list(args), dict(kwargs))
        raise Unsupported(f"{self.base.__name__}.{name} of a {self.cls.__name__} object")

    def builtin_super_method(self, tx, klass, name):
        """``super().name`` reaching the builtin mapping."""
        if klass in _BASES and name in _DICT_METHODS:
            return _DictMethod(self, name)
        return None

    # ------------------------------------------------------------------ protocol used by the translator
    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "default_factory" and self.base is collections.defaultdict:
            from .builder import wrap
            return wrap(tx, self.storage.default_factory, None, guard=False)
        klass, _ = self._owner(name)
        if self._is_builtin_owner(klass) and name in _DICT_METHODS:
            return _DictMethod(self, name)
        hooked = self._getattr_hook(tx, name)
        if hooked is not None:
            return hooked
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name, value):
        """``self.name = value``: a user ``__setattr__`` is inlined."""
        if self._call_user(tx, "__setattr__", [ConstantVariable(name), value]) is None:
            self.set_attr(name, value)

    def getitem(self, tx, key):
        res = self._call_user(tx, "__getitem__", [key])
        return res if res is not None else self.dict_call(tx, "__getitem__", [key], {})

    def setitem(self, tx, key, value):
        if self._call_user(tx, "__setitem__", [key, value]) is None:
            self.dict_call(tx, "__setitem__", [key, value], {})

    def delitem(self, tx, key):
        if self._call_user(tx, "__delitem__", [key]) is None:
            self.dict_call(tx, "__delitem__", [key], {})

    def contains(self, tx, item):
        res = self._call_user(tx, "__contains__", [item])
        if res is not None:
            return res.truthy(tx)
        return self.storage.call_method(tx, "__contains__", [item], {}).value

    def length(self, tx):
        res = self._call_user(tx, "__len__", [])
        if res is not None:
            if not res.is_python_constant():
                raise Unsupported(f"{self.cls.__name__}.__len__ returned {res}")
            return res.as_python_constant()
        return len(self.storage.items)

    def truthy(self, tx):
        res = self._call_user(tx, "__bool__", [])
        if res is not None:
            return res.truthy(tx)
        return self.length(tx) > 0

    def unpack(self, tx):
        res = self._call_user(tx, "__iter__", [])
        if res is not None:
            return res.unpack(tx)
        return self.storage.unpack(tx)

    def mapping_items(self, tx):
        """``(key tracker, value)`` pairs as ``dict(obj)``/``**obj`` copy them: the storage when
        ``keys``/``__iter__`` are the builtin's (CPython's fast path), else keys() and obj[k]."""
        if self.user_method(tx, "__iter__") is None and self.user_method(tx, "keys") is None:
            return [(self.storage.key_var(tx, k), v) for k, v in self.storage.items.items()]
        keys = self.var_getattr(tx, "keys").call_function(tx, [], {}).unpack(tx)
        return [(k, self.getitem(tx, k)) for k in keys]

    def as_dict_variable(self, tx):
        d = DictVariable({})
        for k, v in self.mapping_items(tx):
            d.call_method(tx, "__setitem__", [k, v], {})
        return d

    def reconstruct(self, out):
        items = "[" + ", ".join(f"({self.storage.key_expr(out, k)}, {out.materialize(v)})"
                                for k, v in self.storage.items.items()) + "]"
        attrs = "{" + ", ".join(f"{k!r}: {out.materialize(v)}" for k, v in self.attrs.items()) + "}"
        factory = out.ref(self.storage.default_factory) if self.storage.default_factory is not None else "None"
        return f"{out.ref(rebuild_dict_object)}({out.ref(self.cls)}, {out.ref(self.base)}, {items}, {attrs}, {factory})"

    def __repr__(self):
        return f"DictObjectVariable({self.cls.__name__})"


def AttrSource_or_none(source, name):
    from ..source import AttrSource
    return AttrSource(source, name) if source is not None else None


class _DictMethod(VariableTracker):
    """A builtin mapping method bound to a ``DictObjectVariable`` (``obj.keys``, ``super().__setitem__``)."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        return self.obj.dict_call(tx, self.name, list(args), dict(kwargs))

    def __repr__(self):
        return f"_DictMethod({self.obj.cls.__name__}.{self.name})"


def rebuild_dict_object(cls, base, items, attrs, factory):
    """An instance of a dict subclass made inside a compiled frame, rebuilt after the graph ran:
    the builtin's ``__new__`` and ``__setitem__`` (the user's ``__init__``/``__setitem__`` ran
    symbolically already), then its attributes."""
    obj = base.__new__(cls)
    if base is collections.defaultdict:
        collections.defaultdict.__init__(obj, factory)
    for k, v in items:
        base.__setitem__(obj, k, v)
    obj.__dict__.update(attrs)
    return obj


rebuild_dict_object.__module__ = "ember.dynamo.variables.dict_objects"


class _StorageItemSource(Source):
    """``dict.__getitem__(base, key)``: an item of a dict-subclass object read from its storage,
    past any ``__getitem__`` the subclass defines (guards and the compiled code must not run
    user code to read it)."""

    def __init__(self, base, key, getitem_ref):
        self.base, self.key, self.getitem_ref = base, key, getitem_ref

    def expr(self):
        return f"{self.getitem_ref}({self.base.expr()}, {self.key!r})"

    def name(self):
        import re
        return f"{self.base.name()}_{re.sub(r'[^0-9a-zA-Z_]', '_', str(self.key))}"


_MUTATING = {"__setitem__", "__delitem__", "pop", "popitem", "setdefault", "clear", "update", "__init__",
             "move_to_end"}


class OutsideDictObjectVariable(DictObjectVariable):
    """An instance of a ``dict``/``OrderedDict``/``defaultdict`` subclass that comes from outside
    the frame (a HuggingFace ``ModelOutput`` returned by an uncompiled model, a config mapping):
    read-only. Its items are read once from the C-level storage (``dict.__getitem__``, no user
    ``__getitem__`` runs in guards), each through its own source, guarded as any value; the
    object's type and its keys in storage order are guarded, as for plain dicts, so another
    class or another key set recompiles. Instance attributes (dataclass fields) are read
    through the object when first used, guarded present/absent in its ``__dict__``. The user's
    Python methods (``__getitem__`` by index, ``to_tuple``, ``keys`` ...) are inlined as for
    objects made in the frame. Anything that would change the object (item or attribute
    writes, ``pop``/``update``/...) stops the trace: replaying such writes on an outside
    object is not modelled. Where it leaves the frame it is the same object (its source)."""

    def __init__(self, value, source):
        from ..source import AttrSource
        from .objects import ClassVariable
        cls = type(value)
        super().__init__(cls, ClassVariable(cls, AttrSource(source, "__class__")))
        self.obj = value
        self.source = source

    def _read_only(self, what):
        raise Unsupported(f"{what} on a {self.cls.__name__} (dict subclass) from outside the compiled frame "
                          f"(writes to outside dict-subclass objects are not replayed)")

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        from ..source import AttrSource
        from .builder import wrap
        from .objects import _is_data_descriptor
        d = self.obj.__dict__
        src = self.source.expr()
        if name in d and not _is_data_descriptor(self.cls, name):
            tx.output.guards.add(f"{name!r} in {src}.__dict__", f"{src} has attribute {name}")
            v = self.attrs[name] = wrap(tx, d[name], AttrSource(self.source, name))
            return v
        if name not in ("__class__", "__dict__"):
            tx.output.guards.add(f"{name!r} not in {src}.__dict__", f"{name} is not an instance attribute of {src}")
        return super().var_getattr(tx, name)

    def has_attr(self, name):
        return name in self.obj.__dict__ or super().has_attr(name)

    def set_attr(self, name, value, raw=False):
        self._read_only(f"setting attribute {name!r}")

    def store_attr(self, tx, name, value):
        self._read_only(f"setting attribute {name!r}")

    def dict_call(self, tx, name, args, kwargs):
        if name in _MUTATING:
            self._read_only(f"{self.base.__name__}.{name}")
        if name == "__getitem__" and self.base is collections.defaultdict and len(args) == 1:
            if self.storage._key(args[0], tx) not in self.storage.items:
                self._read_only("reading a missing key (defaultdict inserts it)")
        return super().dict_call(tx, name, args, kwargs)

    def __repr__(self):
        return f"OutsideDictObjectVariable({self.cls.__name__})"


def wrap_outside_dict_object(tx, value, source, guard=True):
    """The tracker of a dict-subclass object found at ``source`` (see OutsideDictObjectVariable),
    or None when the class is not modelled (custom ``__new__``/``__getattribute__``, slots, C
    bases ...) or a key is not a plain constant."""
    from .builder import wrap
    from .lists import _is_plain_key, _repr_roundtrips
    cls = type(value)
    if not DictObjectVariable.can_model(cls):
        return None
    base = storage_base(cls)
    keys = list(base.keys(value))
    if not all(_is_plain_key(k) and _repr_roundtrips(k) and not (type(k) is float and k != k) for k in keys):
        raise Unsupported(f"a {cls.__name__} (dict subclass) from outside the frame with keys that are not "
                          f"plain constants")
    out = tx.output
    hit = out.containers.get(id(value))
    if isinstance(hit, OutsideDictObjectVariable) and hit.obj is value:
        # the same object reached another way (``f(o, o)``): one tracker, so ``is`` holds
        out.guards.add(f"{source.expr()} is {hit.source.expr()}", "same object")
        return hit
    src = source.expr()
    for other in out.containers.values():
        if isinstance(other, OutsideDictObjectVariable):
            # distinct now: a call passing one object twice must not reuse this entry
            out.guards.add(f"{src} is not {other.source.expr()}", f"{src} is not {other.source.expr()}")
    v = OutsideDictObjectVariable(value, source)
    out.containers[id(value)] = v
    g = out.guards if guard else None
    if g is not None:
        g.type_match(source, value)
        g.add(f"list({g.ref(base.keys)}({src})) == {g.ref(keys)}", f"{src} has keys {keys!r}")
        if base is collections.defaultdict:
            g.add(f"{g.ref(collections.defaultdict.default_factory.__get__)}({src}) is "
                  f"{g.ref(value.default_factory)}", f"{src}.default_factory unchanged")
    if base is collections.defaultdict:
        v.storage.default_factory = value.default_factory
    getitem = out.obj_ref(dict.__getitem__)
    for k in keys:
        v.storage.items[k] = wrap(tx, dict.__getitem__(value, k), _StorageItemSource(source, k, getitem), guard)
    return v
