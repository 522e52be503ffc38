"""``ember.utils._pytree``: nested containers of leaves, flattened and rebuilt (PyTorch's API).

A pytree is a tree of registered container nodes -- tuple, list, dict, OrderedDict,
defaultdict, deque, namedtuple, plus whatever ``register_pytree_node`` /
``register_dataclass`` add -- whose non-container values are leaves. ``tree_flatten`` turns
a tree into its leaves and a ``TreeSpec`` (the shape without the leaves); ``tree_unflatten``
goes back. ``ember.func`` (vmap, grad, jacrev...) and user code built on
``torch.utils._pytree`` use it; ``ember.compile`` traces these functions like user code.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, NamedTuple

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "register_dataclass", "tree_flatten",
           "tree_flatten_with_path", "tree_unflatten", "tree_iter", "tree_leaves", "tree_leaves_with_path",
           "tree_structure", "tree_map", "tree_map_", "tree_map_with_path", "tree_map_only", "tree_map_only_",
           "tree_all", "tree_any", "tree_all_only", "tree_any_only", "tree_is_leaf", "treespec_pprint",
           "keystr", "key_get", "MappingKey", "SequenceKey", "GetAttrKey", "is_namedtuple",
           "is_namedtuple_class", "is_namedtuple_instance", "SUPPORTED_NODES"]


# ---- key paths ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


def keystr(kp) -> str:
    """``(MappingKey('a'), SequenceKey(1))`` -> ``"['a'][1]"``."""
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    for k in kp:
        obj = k.get(obj)
    return obj


# ---- the node registry -------------------------------------------------------------------
class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable     # node -> (children, context)
    unflatten_fn: Callable   # (children, context) -> node
    flatten_with_keys_fn: Callable = None   # node -> ([(key, child)], context)


_BUILTIN_KINDS = (tuple, list, dict, collections.OrderedDict, collections.defaultdict, collections.deque)
SUPPORTED_NODES: dict = {}
_CUSTOM_KINDS: tuple = ()      # the registered classes beyond the built-in containers


def _register(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn=None):
    global _CUSTOM_KINDS
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    if cls not in _BUILTIN_KINDS and cls is not collections.namedtuple:
        _CUSTOM_KINDS = _CUSTOM_KINDS + (cls,)


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Make ``cls`` a container: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj``; ``serialized_type_name`` (and a
    ``to_dumpable_context`` / ``from_dumpable_context`` pair for contexts JSON cannot hold)
    let ``treespec_dumps`` / ``treespec_loads`` write and read specs holding it."""
    _register(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    _register_serialization(cls, serialized_type_name, to_dumpable_context, from_dumpable_context)


def register_dataclass(cls, *, field_names=None, drop_field_names=None, serialized_type_name=None):
    """A dataclass whose fields (all, or ``field_names``) are children; ``drop_field_names``
    are left at their defaults when rebuilding."""
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"Class {cls} must be a dataclass or field_names must be given")
    dropped = set(drop_field_names or ())
    names = list(field_names) if field_names is not None else \
        [f.name for f in dataclasses.fields(cls) if f.init and f.name not in dropped]

    def flatten(obj):
        return [getattr(obj, n) for n in names], [names, []]

    def unflatten(values, context):
        return cls(**dict(zip(context[0], values)))

    def flatten_with_keys(obj):
        return [(GetAttrKey(n), getattr(obj, n)) for n in names], [names, []]
    _register(cls, flatten, unflatten, flatten_with_keys)
    _register_serialization(cls, serialized_type_name)


def _seq_keys(node):
    return [(SequenceKey(i), v) for i, v in enumerate(node)]


_register(tuple, lambda t: (list(t), None), lambda v, c: tuple(v), lambda t: (_seq_keys(t), None))
_register(list, lambda t: (list(t), None), lambda v, c: list(v), lambda t: (_seq_keys(t), None))
_register(dict, lambda d: (list(d.values()), list(d.keys())), lambda v, c: dict(zip(c, v)),
          lambda d: ([(MappingKey(k), x) for k, x in d.items()], list(d.keys())))
_register(collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
          lambda v, c: collections.OrderedDict(zip(c, v)),
          lambda d: ([(MappingKey(k), x) for k, x in d.items()], list(d.keys())))
_register(collections.defaultdict, lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
          lambda v, c: collections.defaultdict(c[0], zip(c[1], v)),
          lambda d: ([(MappingKey(k), x) for k, x in d.items()], [d.default_factory, list(d.keys())]))
_register(collections.deque, lambda d: (list(d), d.maxlen), lambda v, c: collections.deque(v, maxlen=c),
          lambda d: (_seq_keys(d), d.maxlen))
_register(collections.namedtuple, lambda t: (list(t), type(t)), lambda v, c: c(*v),
          lambda t: ([(GetAttrKey(f), x) for f, x in zip(type(t)._fields, t)], type(t)))


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple) \
        and all(isinstance(f, str) for f in cls._fields)


def is_namedtuple_instance(obj) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def _node_kind(x):
    """The registry key of ``x``'s node type, or None for a leaf (a namedtuple is filed
    under ``collections.namedtuple`` unless its class is registered itself). The built-in
    kinds are tested by identity before the registry is consulted: under ``ember.compile``
    that folds to a constant, where a lookup in a dict keyed by classes would not trace."""
    t = type(x)
    for kind in _BUILTIN_KINDS:
        if t is kind:
            return kind
    if is_namedtuple_class(t) and not _registered(t):
        return collections.namedtuple
    return t if _registered(t) else None


def _registered(t):
    # a scan of a tuple, not a dict lookup keyed by classes: traceable (see _node_kind)
    for kind in _CUSTOM_KINDS:
        if t is kind:
            return True
    return False


def _flatten_node(kind, node):
    """``(children, context)`` of a node; built-ins spelled out (see ``_node_kind``)."""
    if kind is tuple or kind is list or kind is collections.deque:
        return list(node), (node.maxlen if kind is collections.deque else None)
    if kind is dict or kind is collections.OrderedDict:
        return list(node.values()), list(node.keys())
    if kind is collections.defaultdict:
        return list(node.values()), [node.default_factory, list(node.keys())]
    if kind is collections.namedtuple:
        return list(node), type(node)
    return SUPPORTED_NODES[kind].flatten_fn(node)


def _unflatten_node(kind, children, context):
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return list(children)
    if kind is dict:
        return dict(zip(context, children))
    if kind is collections.OrderedDict:
        return collections.OrderedDict(zip(context, children))
    if kind is collections.namedtuple:
        return context(*children)
    return SUPPORTED_NODES[kind].unflatten_fn(children, context)


def tree_is_leaf(tree, is_leaf=None) -> bool:
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_kind(tree) is None


# ---- TreeSpec ----------------------------------------------------------------------------
class TreeSpec:
    """The structure of a pytree: node type, its context (dict keys, namedtuple class...) and
    one spec per child; a leaf is ``TreeSpec(None, None, [])`` (printed ``*``)."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self._children = list(children_specs)
        self.num_leaves = 1 if type is None else sum(c.num_leaves for c in self._children)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)

    # ember.func (written before this module) names the children ``children``
    @property
    def children(self):
        return self._children

    @property
    def children_specs(self):
        return self._children

    @property
    def num_children(self):
        return len(self._children)

    def child(self, index):
        return self._children[index]

    def is_leaf(self) -> bool:
        return self.type is None

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and self.type is other.type and self.context == other.context \
            and self._children == other._children

    def __hash__(self):
        return hash((self.type, self.num_leaves))

    def _type_name(self):
        return "namedtuple" if self.type is collections.namedtuple else self.type.__name__

    def __repr__(self, indent=0):
        if self.type is None:
            return "*"
        s = f"TreeSpec({self._type_name()}, {self.context}, ["
        if self._children:
            indent += 2
            s += self._children[0].__repr__(indent)
            s += "," if len(self._children) > 1 else ""
            s += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self._children[1:])
        return s + "])"

    def pprint(self):
        return treespec_pprint(self)

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                             f"to a pytree that holds {self.num_leaves} items ({self}).")
        it = iter(leaves)

        def build(spec):
            if spec.type is None:
                return next(it)
            return _unflatten_node(spec.type, [build(c) for c in spec._children], spec.context)
        return build(self)

    def flatten_up_to(self, tree):
        """The subtrees of ``tree`` standing where this spec has leaves (``tree`` must have this
        spec's structure down to them)."""
        out = []

        def walk(spec, node):
            if spec.type is None:
                out.append(node)
                return
            kind = _node_kind(node)
            if kind is not spec.type:
                expected = "namedtuple" if spec.type is collections.namedtuple else spec.type
                raise ValueError(f"Node type mismatch; expected {expected}, but got {type(node)}.")
            kids, ctx = _flatten_node(kind, node)
            if spec.type in (dict, collections.OrderedDict, collections.defaultdict):
                want = spec.context[1] if spec.type is collections.defaultdict else spec.context
                have = ctx[1] if spec.type is collections.defaultdict else ctx
                if set(want) != set(have):
                    missing, extra = set(want) - set(have), set(have) - set(want)
                    raise ValueError(f"Node keys mismatch; missing key(s): {missing}; extra key(s): {extra}.")
                kids = [node[k] for k in want]
            elif len(kids) != len(spec._children):
                raise ValueError(f"Node arity mismatch; expected {len(spec._children)}, but got {len(kids)}.")
            elif ctx != spec.context and spec.type not in (tuple, list, collections.deque):
                raise ValueError(f"Node context mismatch for custom node type {spec.type}.")
            for c, k in zip(spec._children, kids):
                walk(c, k)
        walk(self, tree)
        return out


class LeafSpec(TreeSpec):
    """The spec of a single leaf (equal to every leaf spec)."""

    def __init__(self):
        super().__init__(None, None, [])


_LEAF = LeafSpec()


class _Star:
    def __repr__(self):
        return "*"


def treespec_pprint(spec) -> str:
    """The tree rebuilt with ``*`` for every leaf, as Python prints it: ``{'a': [*, (*, *)]}``."""
    return repr(spec.unflatten([_Star()] * spec.num_leaves))


# ---- flatten / unflatten / map -----------------------------------------------------------
def tree_flatten(tree, is_leaf=None):
    """``(leaves, spec)``: the leaves in order and the structure around them."""
    leaves = []

    def walk(node):
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            return _LEAF
        kind = _node_kind(node)
        if kind is None:
            leaves.append(node)
            return _LEAF
        kids, ctx = _flatten_node(kind, node)
        return TreeSpec(kind, ctx, [walk(k) for k in kids])
    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec "
                        f"but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    yield from tree_flatten(tree, is_leaf)[0]


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """``func`` applied leaf-wise; ``rests`` are trees with ``tree``'s structure (or deeper:
    their subtrees at ``tree``'s leaves are passed whole)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, leaves, *others))


def tree_map_(func, tree, *rests, is_leaf=None):
    """``func`` called leaf-wise for its effect; returns ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    collections.deque(map(func, leaves, *others), maxlen=0)
    return tree


def _only(types_or_pred, func):
    if isinstance(types_or_pred, (type, tuple)):
        def pred(x):
            return isinstance(x, types_or_pred)
    elif callable(types_or_pred):
        pred = types_or_pred
    else:
        raise TypeError(f"Expected a type, a tuple of types or a predicate, got {types_or_pred!r}")
    return lambda x: func(x) if pred(x) else x


def tree_map_only(type_or_types_or_pred, func, tree, is_leaf=None):
    """``func`` applied to the leaves of the given type(s) (or passing the predicate); other
    leaves pass through."""
    return tree_map(_only(type_or_types_or_pred, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, func, tree, is_leaf=None):
    return tree_map_(_only(type_or_types_or_pred, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def _keyed_children(kind, node):
    node_def = SUPPORTED_NODES[kind]
    if node_def.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {kind}. Please pass a "
                         f"flatten_with_keys_fn argument to register_pytree_node.")
    return node_def.flatten_with_keys_fn(node)


def tree_flatten_with_path(tree, is_leaf=None):
    """``([(key_path, leaf)], spec)``: each leaf with the keys leading to it."""
    out = []

    def walk(node, path):
        kind = None if (is_leaf is not None and is_leaf(node)) else _node_kind(node)
        if kind is None:
            out.append((path, node))
            return
        for key, child in _keyed_children(kind, node)[0]:
            walk(child, path + (key,))
    walk(tree, ())
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    """``func(key_path, leaf, *rest_leaves)`` applied leaf-wise."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(p, x, *o) for (p, x), *o in zip(pairs, *others))


def _broadcast_to_and_flatten(tree, spec):
    """``tree`` is a prefix of ``spec``'s structure: each of its leaves stands for a whole
    subtree. Returns one value per leaf of ``spec``, or None when the structures disagree."""
    kind = _node_kind(tree)
    if kind is None:
        return [tree] * spec.num_leaves
    if spec.is_leaf() or kind is not spec.type:
        return None
    kids, ctx = _flatten_node(kind, tree)
    if len(kids) != len(spec.children) or ctx != spec.context:
        return None
    out = []
    for k, s in zip(kids, spec.children):
        flat = _broadcast_to_and_flatten(k, s)
        if flat is None:
            return None
        out += flat
    return out


# ---- constants, structseqs, spec builders (the rest of torch.utils._pytree's public names) ----
import enum as _enum
import importlib as _importlib
import json as _json
import warnings as _warnings
from typing import Any as _Any, Protocol as _Protocol

PyTree = _Any
Context = _Any
DumpableContext = _Any
FlattenFunc = Callable
UnflattenFunc = Callable
FlattenWithKeysFunc = Callable
ToDumpableContextFn = Callable
FromDumpableContextFn = Callable
ToStrFunc = Callable
MaybeFromStrFunc = Callable


class KeyEntry(_Protocol):
    """What a key path is made of (SequenceKey, MappingKey, GetAttrKey...): hashable,
    printable, and able to ``get`` its child from a parent."""

    def __hash__(self) -> int: ...

    def __eq__(self, other: object) -> bool: ...

    def __str__(self) -> str: ...

    def get(self, parent: _Any) -> _Any: ...


KeyPath = tuple[KeyEntry, ...]

BUILTIN_TYPES = frozenset({tuple, list, dict, collections.namedtuple, collections.OrderedDict,
                           collections.defaultdict, collections.deque})
STANDARD_DICT_TYPES = frozenset({dict, collections.OrderedDict, collections.defaultdict})
Py_TPFLAGS_BASETYPE = 1 << 10
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"
DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
_SERIALIZATION_PROTOCOLS = (1,)


class _SerializeNodeDef(NamedTuple):
    typ: type
    serialized_type_name: str
    to_dumpable_context: Callable = None
    from_dumpable_context: Callable = None


SUPPORTED_SERIALIZED_TYPES: dict = {}       # node type -> _SerializeNodeDef
SERIALIZED_TYPE_TO_PYTHON_TYPE: dict = {}   # serialized name -> node type
_NAMEDTUPLE_NAMES: dict = {}                # namedtuple class <-> its serialized name (both ways)


def _register_serialization(cls, serialized_type_name, to_dumpable_context=None, from_dumpable_context=None):
    if (to_dumpable_context is None) != (from_dumpable_context is None):
        raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be None or "
                         f"registered.")
    name = NO_SERIALIZED_TYPE_NAME_FOUND if serialized_type_name is None else serialized_type_name
    SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, name, to_dumpable_context, from_dumpable_context)
    SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls


def _defaultdict_to_dumpable(context):
    factory, keys = context
    return {"default_factory_module": factory.__module__, "default_factory_name": factory.__qualname__,
            "dict_context": keys}


def _defaultdict_from_dumpable(dumpable):
    factory = getattr(_importlib.import_module(dumpable["default_factory_module"]), dumpable["default_factory_name"])
    return [factory, dumpable["dict_context"]]


def _namedtuple_to_dumpable(cls):
    name = _NAMEDTUPLE_NAMES.get(cls)
    if name is None:
        raise NotImplementedError(f"Can't serialize TreeSpec of namedtuple class {cls} because we didn't register "
                                  f"a serializated_type_name. Please register using `_register_namedtuple`.")
    return name


def _namedtuple_from_dumpable(name):
    if name not in _NAMEDTUPLE_NAMES:
        raise NotImplementedError(f"Can't deserialize TreeSpec of namedtuple class {name} because we couldn't find "
                                  f"a serializated name.")
    return _NAMEDTUPLE_NAMES[name]


for _cls, _name in ((tuple, "builtins.tuple"), (list, "builtins.list"), (dict, "builtins.dict"),
                    (collections.OrderedDict, "collections.OrderedDict"), (collections.deque, "collections.deque")):
    _register_serialization(_cls, _name)
_register_serialization(collections.namedtuple, "collections.namedtuple", _namedtuple_to_dumpable,
                        _namedtuple_from_dumpable)
_register_serialization(collections.defaultdict, "collections.defaultdict", _defaultdict_to_dumpable,
                        _defaultdict_from_dumpable)


def _register_namedtuple(cls, *, serialized_type_name):
    """Give the namedtuple class ``cls`` a name for ``treespec_dumps`` (PyTorch's private helper
    of the same name)."""
    if not is_namedtuple_class(cls):
        raise TypeError(f"_register_namedtuple(cls): expected a namedtuple class, got {cls!r}")
    _NAMEDTUPLE_NAMES[cls] = serialized_type_name
    _NAMEDTUPLE_NAMES[serialized_type_name] = cls


class EnumEncoder(_json.JSONEncoder):
    """JSON for contexts holding Enum members (dict keys...): ``{"__enum__": true, "fqn":
    "module:Qual.Name", "name": member}``, read back by ``enum_object_hook``."""

    def default(self, obj):
        if isinstance(obj, _enum.Enum):
            return {"__enum__": True, "fqn": f"{type(obj).__module__}:{type(obj).__qualname__}", "name": obj.name}
        return super().default(obj)


def enum_object_hook(obj):
    if "__enum__" not in obj:
        return obj
    module, _, qualname = obj["fqn"].partition(":")
    found = _importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found[obj["name"]]


def _spec_to_json(spec):
    if spec.is_leaf():
        return {"type": None, "context": None, "children_spec": []}
    node = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if node is None or node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  f"_register_pytree_node call with a `serialized_type_name` kwarg.")
    if node.to_dumpable_context is None:
        try:
            context = _json.dumps(spec.context, cls=EnumEncoder)
        except TypeError as e:
            raise TypeError("Unable to serialize context. Please make the context json dump-able, or register a "
                            "custom serializer using _register_pytree_node.") from e
    else:
        context = node.to_dumpable_context(spec.context)
    return {"type": node.serialized_type_name, "context": context,
            "children_spec": [_spec_to_json(c) for c in spec.children_specs]}


def _json_to_spec(obj):
    if obj["type"] is None and obj["context"] is None and not obj["children_spec"]:
        return LeafSpec()
    if obj["type"] not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {obj['type']} in pytree is not registered.")
    cls = SERIALIZED_TYPE_TO_PYTHON_TYPE[obj["type"]]
    node = SUPPORTED_SERIALIZED_TYPES[cls]
    if node.from_dumpable_context is None:
        try:
            context = _json.loads(obj["context"], object_hook=enum_object_hook)
        except TypeError as e:
            raise TypeError("Unable to deserialize context. Please make the context json load-able, or register a "
                            "custom serializer using _register_pytree_node.") from e
    else:
        context = node.from_dumpable_context(obj["context"])
    return TreeSpec(cls, context, [_json_to_spec(c) for c in obj["children_spec"]])


def treespec_dumps(treespec, protocol=None) -> str:
    """``treespec`` as a JSON string (``[protocol, node]``, each node ``{"type": serialized
    name, "context": ..., "children_spec": [...]}``), PyTorch's format: a spec dumped by either
    loads in the other. Custom node types need a ``serialized_type_name``."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type "
                        f"{type(treespec)}.")
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol not in _SERIALIZATION_PROTOCOLS:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: {list(_SERIALIZATION_PROTOCOLS)}")
    return _json.dumps((protocol, _spec_to_json(treespec)), cls=EnumEncoder)


def treespec_loads(serialized: str):
    """The TreeSpec ``treespec_dumps`` wrote."""
    protocol, obj = _json.loads(serialized)
    if protocol not in _SERIALIZATION_PROTOCOLS:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: {list(_SERIALIZATION_PROTOCOLS)}")
    return _json_to_spec(obj)


def pytree_to_str(treespec) -> str:
    _warnings.warn("`pytree_to_str` is deprecated. Please use `treespec_dumps` instead.", FutureWarning,
                   stacklevel=2)
    return treespec_dumps(treespec)


def str_to_pytree(json: str):
    _warnings.warn("`str_to_pytree` is deprecated. Please use `treespec_loads` instead.", FutureWarning,
                   stacklevel=2)
    return treespec_loads(json)


def treespec_leaf():
    """The spec of one leaf."""
    return LeafSpec()


def treespec_tuple(iterable=(), /):
    """The spec of a tuple whose children have the given specs."""
    children = list(iterable)
    if not all(isinstance(c, TreeSpec) for c in children):
        raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
    return TreeSpec(tuple, None, children)


def treespec_dict(mapping=(), /, **kwargs):
    """The spec of a dict whose values have the given specs."""
    d = dict(mapping, **kwargs)
    if not all(isinstance(c, TreeSpec) for c in d.values()):
        raise ValueError(f"Expected a dictionary of TreeSpec values, got: {d!r}.")
    return TreeSpec(dict, list(d.keys()), list(d.values()))


@dataclasses.dataclass(frozen=True)
class ConstantNode:
    """The context of a ``register_constant`` node: the constant itself (the node has no
    children, so the value travels in the spec, compared by the class's ``__eq__``)."""
    value: _Any


CONSTANT_NODES: set = set()


def register_constant(cls) -> None:
    """Make instances of ``cls`` part of the tree's structure rather than leaves: they are kept
    in the spec (``ConstantNode``) and come back on unflatten. ``cls`` must define ``__eq__``
    and ``__hash__`` (specs are compared and hashed)."""
    if not isinstance(cls, type):
        raise TypeError(f"register_constant(cls) expects `cls` to be a class, got {cls!r}")
    if cls.__eq__ is object.__eq__:
        raise TypeError("register_constant(cls) expects `cls` to have a non-default `__eq__` implementation.")
    if cls.__hash__ is None or cls.__hash__ is object.__hash__:
        raise TypeError("register_constant(cls) expects `cls` to have a non-default `__hash__` implementation.")
    if cls in SUPPORTED_NODES:
        _warnings.warn(f"{cls} is already registered as pytree node. Overwriting the previous registration.",
                       stacklevel=2)
        del SUPPORTED_NODES[cls]
    _register(cls, lambda x: ([], ConstantNode(x)), lambda children, ctx: ctx.value,
              lambda x: ([], ConstantNode(x)))
    CONSTANT_NODES.add(cls)


def is_constant_class(cls) -> bool:
    """Whether ``cls`` was registered with ``register_constant``."""
    return isinstance(cls, type) and cls in CONSTANT_NODES


def is_structseq_class(cls) -> bool:
    """Whether ``cls`` is a CPython struct sequence (``os.stat_result``, ``time.struct_time``...):
    a final tuple subclass with ``n_fields`` / ``n_sequence_fields`` / ``n_unnamed_fields``."""
    return (isinstance(cls, type) and cls.__bases__ == (tuple,)
            and all(isinstance(getattr(cls, a, None), int)
                    for a in ("n_fields", "n_sequence_fields", "n_unnamed_fields"))
            and not bool(cls.__flags__ & Py_TPFLAGS_BASETYPE))


def is_structseq_instance(obj) -> bool:
    return is_structseq_class(type(obj))


def is_structseq(obj) -> bool:
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


class structseq(tuple):  # noqa: N801 - PyTorch's name
    """A typing stand-in for CPython's struct sequences (``is_structseq`` recognises the real
    ones); it cannot be instantiated or subclassed, as PyTorch's."""
    __slots__ = ()

    def __init_subclass__(cls):
        raise TypeError("type 'structseq' is not an acceptable base type")

    def __new__(cls, sequence, dict=None):  # noqa: A002
        raise NotImplementedError


def map_only(type_or_types_or_pred, /):
    """Decorator: ``map_only(int)(f)`` applies ``f`` to ints and passes anything else through."""
    if not (isinstance(type_or_types_or_pred, (type, tuple)) or callable(type_or_types_or_pred)):
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")
    if isinstance(type_or_types_or_pred, tuple) and not all(isinstance(t, type) for t in type_or_types_or_pred):
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrap(func):
        import functools
        return functools.wraps(func)(_only(type_or_types_or_pred, func))
    return wrap


def arg_tree_leaves(*args, **kwargs):
    """The leaves of ``args`` then of ``kwargs``' values (a call's inputs, flattened)."""
    leaves = []
    for a in args:
        leaves += tree_leaves(a)
    for v in kwargs.values():
        leaves += tree_leaves(v)
    return leaves


__all__ += ["PyTree", "Context", "KeyEntry", "KeyPath", "BUILTIN_TYPES", "STANDARD_DICT_TYPES",
            "SUPPORTED_SERIALIZED_TYPES", "SERIALIZED_TYPE_TO_PYTHON_TYPE", "NO_SERIALIZED_TYPE_NAME_FOUND",
            "DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL", "EnumEncoder", "enum_object_hook", "treespec_dumps",
            "treespec_loads", "pytree_to_str", "str_to_pytree", "treespec_leaf", "treespec_tuple",
            "treespec_dict", "ConstantNode", "CONSTANT_NODES", "register_constant", "is_constant_class",
            "is_structseq", "is_structseq_class", "is_structseq_instance", "structseq", "map_only",
            "arg_tree_leaves"]

PyTreeSpec = TreeSpec       # PyTorch's other name for the class
__all__ += ["PyTreeSpec"]
