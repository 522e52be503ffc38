"""Watch what a graph pass creates, erases and replaces
(``torch.fx.passes.graph_transform_observer``).

Why: when a pass rewrites a graph, later debugging needs "where did this node
come from". While a :class:`GraphTransformObserver` is active around a pass,
every node the pass creates gets a :class:`~ember.fx.traceback.NodeSource`
(``CREATE``) in ``node.meta["from_node"]``, and a node that takes over the
users of another records that node (``REPLACE``). With ``log_url`` (a
folder) it also writes the graph before and after the pass as DOT files
(``pass_<n>_<name>_input_graph.dot`` / ``..._output_graph.dot``; needs
pydot) with the erased/created nodes highlighted.

The observer is active when ``log_url`` is given (or set in
``ember.inductor.config.trace.log_url_for_graph_xform``) or when
``ember.inductor.config.trace.provenance_tracking_level == 1`` (without that
setting: the environment variable ``INDUCTOR_PROVENANCE=1``, torch's default
for it); otherwise it just runs the pass.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Set, TypeVar

from ..graph import Graph
from ..node import Node
from ..traceback import NodeSource, NodeSourceAction

__all__ = ["GraphTransformObserver"]

T = TypeVar("T")


def _inductor_trace_setting(name: str, default: Any) -> Any:
    try:
        from ...inductor import config as inductor_config
    except ImportError:
        inductor_config = None
    trace = getattr(inductor_config, "trace", None)
    if trace is not None and hasattr(trace, name):
        return getattr(trace, name)
    if name == "provenance_tracking_level":
        # torch's default for the setting: $INDUCTOR_PROVENANCE, else $TORCH_COMPILE_DEBUG
        return int(os.environ.get("INDUCTOR_PROVENANCE", os.environ.get("TORCH_COMPILE_DEBUG", "0")) or 0)
    return default


def _disabled_passes() -> str:
    try:
        from ...inductor import config as inductor_config
    except ImportError:
        return ""
    return getattr(inductor_config, "disabled_passes", "") or ""


class GraphTransformObserver:
    """``with GraphTransformObserver(gm, "my_pass"): my_pass(gm)`` or
    ``GraphTransformObserver(gm, "my_pass").apply_gm_pass(my_pass)``.

    A pass whose name is in ``ember.inductor.config.disabled_passes`` (a
    string, compared case-insensitively) is skipped by ``apply_*_pass``."""

    __pass_count = 0

    def __init__(self, gm: Any, passname: str, subsystem: Optional[str] = None, log_url: Optional[str] = None) -> None:
        self.gm = gm
        self.passname = passname
        self.subsystem = subsystem
        if log_url is None:
            log_url = _inductor_trace_setting("log_url_for_graph_xform", None)
        self.log_url = log_url
        self.active = self.log_url is not None or _inductor_trace_setting("provenance_tracking_level", 0) == 1
        if self.active:
            self.erased_nodes: Set[str] = set()
            self.created_nodes: Set[str] = set()
            self.name_to_node: Dict[str, Node] = {}
            #: deep copies of gm made inside the block (their hooks are removed on exit)
            self.copied_gms: List[Any] = []
            self._node_creation_hook = self.get_node_creation_hook()
            self._node_erase_hook = self.get_node_erase_hook()
            self._node_replace_hook = self.get_node_replace_hook()
            self._deepcopy_hook = self.get_deepcopy_hook()
        if self.log_url is None:
            return
        GraphTransformObserver.__pass_count += 1
        from .graph_drawer import FxGraphDrawer

        self.input_dot_graph = FxGraphDrawer(self.gm, self.passname, ignore_getattr=True,
                                             ignore_parameters_and_buffers=True).get_dot_graph()

    @classmethod
    def get_current_pass_count(cls) -> int:
        """How many observers with a ``log_url`` were made so far."""
        return cls.__pass_count

    def apply_gm_pass(self, pass_fn: Callable[[Any], T]) -> Optional[T]:
        """``pass_fn(gm)`` under the observer (None if the pass is disabled)."""
        with self:
            if self._check_disable_pass():
                return None
            return pass_fn(self.gm)

    def apply_graph_pass(self, pass_fn: Callable[[Graph], T]) -> Optional[T]:
        """``pass_fn(gm.graph)`` under the observer (None if the pass is disabled)."""
        with self:
            if self._check_disable_pass():
                return None
            return pass_fn(self.gm.graph)

    def _check_disable_pass(self) -> bool:
        return self.passname.upper() in _disabled_passes().upper()

    def __enter__(self) -> "GraphTransformObserver":
        if not self.active:
            return self
        self.gm._register_create_node_hook(self._node_creation_hook)
        self.gm._register_erase_node_hook(self._node_erase_hook)
        self.gm._register_replace_node_hook(self._node_replace_hook)
        self.gm._register_deepcopy_hook(self._deepcopy_hook)
        self.erased_nodes.clear()
        self.created_nodes.clear()
        self.name_to_node.clear()
        self.copied_gms.clear()
        for node in self.gm.graph.nodes:
            self.name_to_node[node.name] = node
        return self

    def __exit__(self, type: Optional[type], value: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if not self.active:
            return
        for gm in self.copied_gms + [self.gm]:
            gm._unregister_create_node_hook(self._node_creation_hook)
            gm._unregister_erase_node_hook(self._node_erase_hook)
            gm._unregister_replace_node_hook(self._node_replace_hook)
            gm._unregister_deepcopy_hook(self._deepcopy_hook)
        if self.log_url is None or not (self.created_nodes or self.erased_nodes):
            return
        from .graph_drawer import FxGraphDrawer

        count = GraphTransformObserver.__pass_count
        for e in self.input_dot_graph.get_node_list():
            e.obj_dict["attributes"]["fillcolor"] = "yellow" if e.get_name() in self.erased_nodes else "grey"
        self.input_dot_graph.write(os.path.join(self.log_url, f"pass_{count}_{self.passname}_input_graph.dot"))
        output_dot_graph = FxGraphDrawer(self.gm, self.passname, ignore_getattr=True,
                                         ignore_parameters_and_buffers=True).get_dot_graph()
        for e in output_dot_graph.get_node_list():
            e.obj_dict["attributes"]["fillcolor"] = "yellow" if e.get_name() in self.created_nodes else "grey"
        output_dot_graph.write(os.path.join(self.log_url, f"pass_{count}_{self.passname}_output_graph.dot"))

    # the hooks are closures, not bound methods: a deep copy of gm made inside the block copies
    # its hook lists, and copying a bound method would copy the observer (and gm) with it
    def get_node_creation_hook(self) -> Callable[[Node], None]:
        def on_node_creation(node: Node) -> None:
            self.created_nodes.add(node.name)
            self.name_to_node[node.name] = node
            source = NodeSource(None, self.passname, NodeSourceAction.CREATE)
            node.meta.setdefault("from_node", []).append(source)

        return on_node_creation

    def get_node_erase_hook(self) -> Callable[[Node], None]:
        def on_node_erase(node: Node) -> None:
            self.erased_nodes.add(node.name)
            self.name_to_node.pop(node.name, None)

        return on_node_erase

    def get_node_replace_hook(self) -> Callable[..., None]:
        def on_node_replace(old: Node, new: str, user: Node) -> None:
            new_node = self.name_to_node.get(new, None)
            if not new_node:
                return
            if not isinstance(new_node, Node):
                raise AssertionError(f"Expected Node, got {type(new_node)}")
            # called once per user of old: record old only once
            if old.name in {s.name for s in new_node.meta.get("from_node", [])}:
                return
            action = [NodeSourceAction.REPLACE]
            if new_node.name in self.created_nodes:
                action.append(NodeSourceAction.CREATE)
            # the CREATE entry of this pass is folded into the REPLACE one
            sources = [s for s in new_node.meta.get("from_node", [])
                       if not (s.pass_name == self.passname and s.action == [NodeSourceAction.CREATE])]
            sources.append(NodeSource(old, self.passname, action))
            new_node.meta["from_node"] = sources

        return on_node_replace

    def get_deepcopy_hook(self) -> Callable[[Any], None]:
        def on_deepcopy(gm: Any) -> None:
            self.copied_gms.append(gm)

        return on_deepcopy
