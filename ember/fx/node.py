"""``Node``: one operation in an :class:`~ember.fx.Graph`.

Why it looks like this: a node must answer, cheaply and always correctly,
"who do I read?" (``all_input_nodes``) and "who reads me?" (``users``). Both
are derived from ``args``/``kwargs``, so every path that changes arguments
goes through one setter that re-registers uses. Argument containers are
immutable (``immutable_list``/``immutable_dict``) so that nobody can mutate a
list in place behind the use tracking's back.

Nodes are kept in an intrusive doubly linked list (``_prev``/``_next``) with a
sentinel root owned by the graph, so insertion and erasure are O(1) and
iterating while erasing the current node is safe.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ._names import pretty_target, type_repr
from .immutable_collections import immutable_dict, immutable_list

__all__ = [
    "Node",
    "Argument",
    "Target",
    "map_arg",
    "map_aggregate",
    "has_side_effect",
    "immutable_list",
    "immutable_dict",
    "OPCODES",
]

OPCODES = (
    "placeholder",
    "get_attr",
    "call_function",
    "call_method",
    "call_module",
    "output",
)

Argument = Any
Target = Any


#: call_function targets that dead-code elimination keeps although unused
#: (see :func:`has_side_effect`)
_side_effectful_functions: set = set()


def has_side_effect(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``fn`` as having side effects: ``call_function`` nodes
    calling it are never removed by dead-code elimination, even when their
    result is unused (a print, a logging hook, an assert). Usable as a
    decorator; returns ``fn`` unchanged."""
    _side_effectful_functions.add(fn)
    return fn


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Apply ``fn`` to every leaf of a nested tuple/list/dict/slice structure.

    Containers are rebuilt (namedtuples keep their type; lists and dicts come
    back as their immutable variants) and leaves are replaced by ``fn(leaf)``.
    """
    if isinstance(a, tuple):
        t = tuple(map_aggregate(elem, fn) for elem in a)
        return t if not hasattr(a, "_fields") else type(a)(*t)
    if isinstance(a, list):
        return immutable_list(map_aggregate(elem, fn) for elem in a)
    if isinstance(a, dict):
        return immutable_dict((k, map_aggregate(v, fn)) for k, v in a.items())
    if isinstance(a, slice):
        return slice(
            map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn)
        )
    return fn(a)


def map_arg(a: Argument, fn: Callable[["Node"], Argument]) -> Argument:
    """Apply ``fn`` to every :class:`Node` inside ``a``; other leaves are kept."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _format_arg(arg: Any) -> str:
    """Render one argument the way torch.fx prints node arguments."""
    if isinstance(arg, list):
        return "[" + ", ".join(_format_arg(a) for a in arg) + "]"
    if isinstance(arg, tuple):
        inner = ", ".join(_format_arg(a) for a in arg)
        return "(" + inner + ("," if len(arg) == 1 else "") + ")"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    return str(arg)


class Node:
    """One operation of a graph; see :data:`OPCODES` for what ``op`` means.

    - ``placeholder``: a function input; ``target`` is the argument name,
      ``args`` is empty or ``(default,)``.
    - ``get_attr``: fetch ``target`` (a dotted path) from the owning module.
    - ``call_function``: ``target(*args, **kwargs)`` for a Python callable.
    - ``call_method``: ``args[0].<target>(*args[1:], **kwargs)``.
    - ``call_module``: the submodule at path ``target`` called on args.
    - ``output``: ``args[0]`` is the value returned by the graph.
    """

    def __init__(
        self,
        graph: Any,
        name: str,
        op: str,
        target: Target,
        args: Tuple[Argument, ...],
        kwargs: Dict[str, Argument],
        return_type: Optional[Any] = None,
    ) -> None:
        if op not in OPCODES and op != "root":
            raise ValueError(f"fx: unknown node op {op!r}; expected one of {OPCODES}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"fx: call_function target must be callable, got {target!r}")
        if op in ("placeholder", "get_attr", "call_method", "call_module") and not isinstance(
            target, str
        ):
            raise ValueError(f"fx: {op} target must be a string, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: Dict[Node, None] = {}
        self.users: Dict[Node, None] = {}
        self.type = return_type
        self._prev: Node = self
        self._next: Node = self
        self._erased = False
        self._args: Tuple[Argument, ...] = ()
        self._kwargs: Dict[str, Argument] = immutable_dict()
        self.meta: Dict[str, Any] = {}
        self._set_args_kwargs(args, kwargs)

    # -- linked list -----------------------------------------------------
    @property
    def next(self) -> "Node":
        """The following node in the graph (the graph's root sentinel at the end)."""
        return self._next

    @property
    def prev(self) -> "Node":
        """The preceding node in the graph (the root sentinel at the start)."""
        return self._prev

    def prepend(self, x: "Node") -> None:
        """Move/insert ``x`` immediately before ``self``."""
        if x is self:
            raise ValueError("fx: cannot prepend a node to itself")
        if x.graph is not self.graph:
            raise ValueError("fx: prepend: nodes belong to different graphs")
        if x._erased or self._erased:
            raise ValueError("fx: prepend: cannot move an erased node or insert next to one")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: "Node") -> None:
        """Move/insert ``x`` immediately after ``self``."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # -- arguments and use tracking ---------------------------------------
    @property
    def args(self) -> Tuple[Argument, ...]:
        """Positional arguments; assigning re-registers uses."""
        return self._args

    @args.setter
    def args(self, a: Tuple[Argument, ...]) -> None:
        self._set_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> Dict[str, Argument]:
        """Keyword arguments; assigning re-registers uses."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: Dict[str, Argument]) -> None:
        self._set_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> List["Node"]:
        """Every distinct node read by this one, in first-use order."""
        return list(self._input_nodes)

    def _set_args_kwargs(self, new_args: Tuple[Argument, ...], new_kwargs: Dict[str, Argument]) -> None:
        if not isinstance(new_args, tuple):
            raise TypeError(f"fx: node args must be a tuple, got {type(new_args).__name__}")
        if not isinstance(new_kwargs, dict):
            raise TypeError(f"fx: node kwargs must be a dict, got {type(new_kwargs).__name__}")
        seen: Dict[Node, None] = {}

        def collect(n: Node) -> Node:
            if not isinstance(n, Node):
                return n
            seen.setdefault(n, None)
            return n

        self._args = map_aggregate(new_args, lambda x: collect(x) if isinstance(x, Node) else x)
        self._kwargs = map_aggregate(new_kwargs, lambda x: collect(x) if isinstance(x, Node) else x)
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._input_nodes = seen
        for n in seen:
            n.users.setdefault(self, None)

    def update_arg(self, idx: int, arg: Argument) -> None:
        """Replace positional argument ``idx`` with ``arg``."""
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        """Insert a positional argument at ``idx``."""
        args = list(self._args)
        args.insert(idx, arg)
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        """Set keyword argument ``key`` to ``arg``."""
        kw = dict(self._kwargs)
        kw[key] = arg
        self.kwargs = kw

    def replace_input_with(self, old_input: "Node", new_input: "Node") -> None:
        """Make this node read ``new_input`` wherever it read ``old_input``."""
        owner = getattr(self.graph, "_owning_module", None)
        if owner is not None:
            hooks = getattr(owner, "__dict__", {}).get("_replace_hooks")
            if hooks:
                for hook in list(hooks):
                    hook(old=old_input, new=new_input.name, user=self)
        fn = lambda n: new_input if n is old_input else n  # noqa: E731
        self._set_args_kwargs(map_arg(self._args, fn), map_arg(self._kwargs, fn))

    def replace_all_uses_with(
        self,
        replace_with: "Node",
        delete_user_cb: Optional[Callable[["Node"], bool]] = None,
        *,
        propagate_meta: bool = False,
    ) -> List["Node"]:
        """Point every user of ``self`` at ``replace_with`` instead.

        ``delete_user_cb(user)`` may return False to keep a particular user on
        ``self``. With ``propagate_meta`` the replacement inherits missing
        ``meta`` entries. Returns the users that were rewritten.
        """
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        changed = []
        for user in list(self.users):
            if user is replace_with:
                continue
            if delete_user_cb is not None and not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    # -- misc ---------------------------------------------------------------
    @property
    def stack_trace(self) -> Optional[str]:
        """The user source location this node was traced from, if recorded."""
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace: Optional[str]) -> None:
        self.meta["stack_trace"] = trace

    def is_impure(self) -> bool:
        """Whether dead-code elimination must keep this node although unused.

        Placeholders and outputs are always impure; call_function/call_method
        targets are impure when registered with :func:`has_side_effect`, when
        flagged ``_ember_is_impure`` (in-place or
        random ops), when ``meta['is_impure']`` is set, or when the graph's
        ``impure_targets`` set contains them; submodules may flag themselves
        with ``_is_impure = True``.
        """
        if self.op in ("placeholder", "output"):
            return True
        if self.meta.get("is_impure", False):
            return True
        impure = getattr(self.graph, "impure_targets", ()) or ()
        if self.op == "call_function":
            try:
                if self.target in _side_effectful_functions:
                    return True
            except TypeError:  # an unhashable callable
                pass
            if getattr(self.target, "_ember_is_impure", False):
                return True
            op = getattr(self.target, "_ember_op", None)
            if op is not None and {"inplace", "random"} & set(getattr(op, "tags", ())):
                return True
            try:
                return self.target in impure
            except TypeError:
                return False
        if self.op == "call_method":
            if self.target in impure:
                return True
            # Tensor.add_ and friends mutate their receiver.
            return self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_module":
            owner = getattr(self.graph, "owning_module", None)
            if owner is None:
                return False
            try:
                mod = owner.get_submodule(self.target)
            except Exception:
                return False
            return bool(getattr(mod, "_is_impure", False))
        return False

    def normalized_arguments(
        self,
        root: Any,
        arg_types: Optional[Tuple[Any, ...]] = None,
        kwarg_types: Optional[Dict[str, Any]] = None,
        normalize_to_only_use_kwargs: bool = False,
    ) -> Any:
        """This call's arguments bound to the target's signature, defaults
        filled in (an :class:`~ember.fx.operator_schemas.ArgsKwargsPair`), or
        None when that cannot be done (see
        :func:`~ember.fx.operator_schemas.normalize_function`;
        ``call_module`` nodes are looked up in ``root``)."""
        from .operator_schemas import normalize_function, normalize_module

        if self.op == "call_function":
            return normalize_function(
                self.target, self.args, self.kwargs, arg_types, kwarg_types,
                normalize_to_only_use_kwargs=normalize_to_only_use_kwargs,
            )
        if self.op == "call_module":
            return normalize_module(
                root, self.target, self.args, self.kwargs,
                normalize_to_only_use_kwargs=normalize_to_only_use_kwargs,
            )
        return None

    def format_node(self, placeholder_names: Optional[List[str]] = None) -> Optional[str]:
        """One line describing this node, in torch.fx's printing format."""
        users = f"[num_users={len(self.users)}]"
        tname = f"{type_repr(self.type)} " if self.type is not None else ""
        if self.op == "placeholder":
            if placeholder_names is not None:
                placeholder_names.append(self.target)
            default = f"(default={self.args[0]})" if self.args else ""
            return f"%{self.name} : {tname}{users} = placeholder[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"%{self.name} : {tname}{users} = get_attr[target={self.target}]"
        if self.op == "output":
            return f"return {self.args[0]}"
        return (
            f"%{self.name} : {tname}{users} = {self.op}[target={pretty_target(self.target)}]"
            f"(args = {_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})"
        )

    def __repr__(self) -> str:
        return self.name

    # Nodes are identity-hashed (they are mutable graph vertices).
    __hash__ = object.__hash__
