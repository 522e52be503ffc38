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
    ``unflatten_fn(children, context) -> obj`` (serialisation arguments are accepted and
    unused: ember has no treespec dumps/loads)."""
    _register(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


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
