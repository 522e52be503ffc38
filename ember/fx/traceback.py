"""``ember.fx.traceback``: carry source locations and metadata onto new nodes.

Why: a graph built by a pass (a Transformer, a re-trace, a decomposition)
loses the connection to the user's source unless something hands the
metadata of the node being rewritten to the nodes created for it. This module
holds that "current" metadata. While :func:`preserve_node_meta` is active,

- every node a tracer creates copies ``current_meta['stack_trace']`` into
  ``node.meta['stack_trace']`` plus the fields in :data:`COPY_META_FIELDS`;
- :class:`~ember.fx.Interpreter` (and so :class:`~ember.fx.Transformer`)
  runs each node inside :func:`set_current_meta`, so whatever it creates
  inherits that node's metadata and a ``from_node`` provenance record;
- :func:`set_stack_trace` sets the stack recorded for nodes created next,
  and :func:`format_stack` returns it (outside preservation: the real Python
  stack).

The state is module-global, as in torch.fx, and restored on exit of each
context manager.
"""

from __future__ import annotations

import copy
import traceback
from contextlib import contextmanager
from enum import Enum
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

__all__ = [
    "annotate",
    "annotate_fn",
    "preserve_node_meta",
    "has_preserved_node_meta",
    "set_stack_trace",
    "set_grad_fn_seq_nr",
    "reset_grad_fn_seq_nr",
    "format_stack",
    "set_current_meta",
    "get_current_meta",
    "NodeSource",
    "NodeSourceAction",
    "get_graph_provenance_json",
    "set_current_replay_node",
    "get_current_replay_node",
]

current_meta: Dict[str, Any] = {}
current_replay_node: Any = None
should_preserve_node_meta = False

#: meta fields (besides ``stack_trace``) a tracer copies from the current
#: meta onto each node it creates while metadata is preserved
COPY_META_FIELDS = [
    "nn_module_stack",
    "torch_fn",
    "source_fn_stack",
    "original_aten",
    "recompute",
    "ac_graph_id",
    "has_backward_hook",
    "from_node",
    "quantization_tag",
    "_numeric_debug_handle",
    "custom",
    "partitioner_tag",
]


class NodeSourceAction(Enum):
    """How a node came from another: created for it, or replacing it."""

    CREATE = "create"
    REPLACE = "replace"


class NodeSource:
    """Provenance of a node: ``node.meta['from_node']`` holds a list of these,
    each naming the node (name, target, graph id) it was made from, the pass
    that made it, and -- recursively -- that node's own provenance."""

    class NodeInfo:
        def __init__(self, name: str, target: str, graph_id: int) -> None:
            self.name = name
            self.target = target
            self.graph_id = graph_id

    def __init__(
        self,
        node: Any,
        pass_name: str = "",
        action: Union[NodeSourceAction, List[NodeSourceAction], None] = None,
    ) -> None:
        self.pass_name = pass_name
        actions = [] if action is None else (list(action) if isinstance(action, list) else [action])
        for a in actions:
            if not isinstance(a, NodeSourceAction):
                raise AssertionError(f"Expected NodeSourceAction, got {type(a)}")
        self.action = actions
        if node is not None:
            self.node_info: Optional[NodeSource.NodeInfo] = self.NodeInfo(
                node.name, str(node.target), id(node.graph)
            )
            self.from_node: List[NodeSource] = copy.deepcopy(node.meta.get("from_node", []))
        else:
            self.node_info = None
            self.from_node = []

    @property
    def name(self) -> str:
        return self.node_info.name if self.node_info else ""

    @property
    def target(self) -> str:
        return self.node_info.target if self.node_info else ""

    @property
    def graph_id(self) -> int:
        return self.node_info.graph_id if self.node_info else -1

    def _action_string(self) -> str:
        return "+".join(a.name.lower() for a in self.action)

    def print_readable(self, indent: int = 0) -> str:
        if indent > 9:
            return ""
        out = (
            " " * indent * 4
            + f"(name={self.name}, pass_name={self.pass_name}, action={self._action_string()}, "
            f"graph_id={self.graph_id})\n"
        )
        return out + "".join(s.print_readable(indent + 1) for s in self.from_node)

    __repr__ = print_readable  # type: ignore[assignment]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "graph_id": self.graph_id,
            "pass_name": self.pass_name,
            "action": self._action_string(),
            "from_node": [s.to_dict() for s in self.from_node],
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeSource) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        def freeze(o: Any) -> Any:
            if isinstance(o, dict):
                return tuple(sorted((k, freeze(v)) for k, v in o.items()))
            if isinstance(o, list):
                return tuple(freeze(v) for v in o)
            return o

        return hash(freeze(self.to_dict()))


@contextmanager
def preserve_node_meta(enable: bool = True) -> Iterator[None]:
    """Within the block, new nodes inherit the current metadata (see the
    module docstring); on exit both the flag and the metadata are restored."""
    global should_preserve_node_meta, current_meta
    saved_flag, saved_meta = should_preserve_node_meta, current_meta.copy()
    try:
        should_preserve_node_meta = enable
        yield
    finally:
        should_preserve_node_meta = saved_flag
        current_meta = saved_meta


def has_preserved_node_meta() -> bool:
    """Whether :func:`preserve_node_meta` is active."""
    return should_preserve_node_meta


def set_stack_trace(stack: List[str]) -> None:
    """Record ``"".join(stack)`` as the stack trace of nodes created next
    (an empty list clears it). A no-op unless metadata is preserved."""
    if should_preserve_node_meta:
        if stack:
            current_meta["stack_trace"] = "".join(stack)
        else:
            current_meta.pop("stack_trace", None)


def format_stack() -> List[str]:
    """The stack to attribute new work to: the preserved stack trace (one
    string) while metadata is preserved, else the caller's Python stack."""
    if should_preserve_node_meta:
        return [current_meta.get("stack_trace", "")]
    return traceback.format_list(traceback.extract_stack()[:-1])


@contextmanager
def set_current_meta(node: Any, pass_name: str = "") -> Iterator[None]:
    """While metadata is preserved and ``node`` has metadata, make a copy of
    it the current metadata, with ``from_node`` naming ``node``."""
    global current_meta
    if should_preserve_node_meta and node.meta:
        saved = current_meta
        try:
            current_meta = node.meta.copy()
            current_meta["from_node"] = [NodeSource(node, pass_name, NodeSourceAction.CREATE)]
            yield
        finally:
            current_meta = saved
    else:
        yield


def get_current_meta() -> Dict[str, Any]:
    """The metadata new nodes inherit (the live dict)."""
    return current_meta


@contextmanager
def annotate(annotation_dict: Dict[str, Any]) -> Iterator[None]:
    """Merge ``annotation_dict`` into ``current_meta['custom']`` for the block;
    nodes created meanwhile (with metadata preserved) carry it in
    ``node.meta['custom']``."""
    had = "custom" in current_meta
    old = copy.copy(current_meta.get("custom", {}))
    try:
        if not had:
            current_meta["custom"] = {}
        current_meta["custom"].update(annotation_dict)
        yield
    finally:
        if had:
            current_meta["custom"] = old
        else:
            current_meta.pop("custom", None)


def annotate_fn(annotation_dict: Dict[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator form of :func:`annotate` for a whole function."""
    import functools

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with annotate(annotation_dict):
                return fn(*args, **kwargs)

        return wrapper

    return decorator


def set_grad_fn_seq_nr(seq_nr: int) -> None:
    """Push the sequence number of the autograd node being traced."""
    if should_preserve_node_meta:
        current_meta["grad_fn_seq_nr"] = current_meta.get("grad_fn_seq_nr", []) + [seq_nr]
        current_meta["in_grad_fn"] = current_meta.get("in_grad_fn", 0) + 1


def reset_grad_fn_seq_nr() -> None:
    """Pop what :func:`set_grad_fn_seq_nr` pushed."""
    if should_preserve_node_meta:
        level = current_meta.get("in_grad_fn", 0)
        if level <= 0:
            raise AssertionError(f"Expected current_level > 0, got {level}")
        if level == 1:
            del current_meta["in_grad_fn"]
            del current_meta["grad_fn_seq_nr"]
        else:
            current_meta["in_grad_fn"] = level - 1
            current_meta["grad_fn_seq_nr"] = current_meta["grad_fn_seq_nr"][:-1]


@contextmanager
def set_current_replay_node(node: Any) -> Iterator[None]:
    """Mark ``node`` as the one being regenerated for the block."""
    global current_replay_node
    saved = current_replay_node
    try:
        current_replay_node = node
        yield
    finally:
        current_replay_node = saved


def get_current_replay_node() -> Any:
    """The node set by :func:`set_current_replay_node`, or None."""
    return current_replay_node


def get_graph_provenance_json(graph: Any) -> Dict[str, Any]:
    """``{node name: [provenance dicts]}`` for each call_function node."""
    return {
        n.name: [s.to_dict() for s in n.meta.get("from_node", [])]
        for n in graph.nodes
        if n.op == "call_function"
    }
