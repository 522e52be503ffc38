"""Small helpers shared by the partitioning passes (``torch.fx.passes.tools_common``).

Why a module of its own: operator-support tables, the capability partitioner
and the splitter all need one answer to "what is this node's target called",
and the fuser needs a way back to a topologically ordered graph after it moved
nodes around. Keeping both here lets those passes agree on names.
"""

from __future__ import annotations

import collections
import heapq
import operator
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set

from ..graph import Graph
from ..node import Node

__all__ = [
    "CALLABLE_NODE_OPS",
    "FxNetAccFusionsFinder",
    "NodeList",
    "NodeSet",
    "Names",
    "Tensors",
    "TensorOrTensors",
    "get_acc_ops_name",
    "get_node_target",
    "is_node_output_tensor",
    "legalize_graph",
    "stable_topological_sort",
]

#: node ops that run code (the others only feed or return values)
CALLABLE_NODE_OPS = {"call_module", "call_function", "call_method"}

NodeList = List[Node]
NodeSet = Set[Node]
Names = List[str]
Tensors = Any
TensorOrTensors = Any


def target_qualified_name(target: Any) -> str:
    """The dotted name of a ``call_function`` target as torch.fx spells it:
    ``_operator.getitem`` for operator functions, ``ember.ops.aten.view.default``
    for an ember op overload, else ember's printing name (``ember.relu``)."""
    from .._names import qualified_name

    module = getattr(target, "__module__", None)
    if module == "ember.ops._aten_namespace" and type(target).__name__ == "OpOverload":
        return f"ember.ops.{target}"
    if module == "operator":
        return f"_operator.{target.__name__}"
    return qualified_name(target)


def get_acc_ops_name(k: Any) -> str:
    """``k`` as a dotted name: strings as they are, classes as ``module.Name``."""
    if isinstance(k, str):
        return k
    module = getattr(k, "__module__", "") or ""
    if "acc_ops" in module:
        return f"acc_ops.{k.__name__}"
    return f"{module}.{k.__name__}"


def get_node_target(submodules: Mapping[str, Any], node: Node) -> str:
    """The type name of what ``node`` calls: the submodule's class for
    ``call_module`` (``ember.nn.modules.linear.Linear``), the function's
    qualified name for ``call_function`` (``_operator.add``, ``ember.relu``),
    the method name for ``call_method``."""
    if node.op not in CALLABLE_NODE_OPS:
        raise AssertionError(
            "Expect op types of " + ", ".join(sorted(CALLABLE_NODE_OPS)) + f", but found {node.op}"
        )
    if node.op == "call_module":
        if node.target not in submodules:
            raise KeyError(
                f"get_node_target: submodules has no entry {node.target!r} "
                "(pass dict(gm.named_modules()))"
            )
        submod = submodules[node.target]
        return get_acc_ops_name(getattr(submod, "_base_class_origin", type(submod)))
    if node.op == "call_function":
        module = getattr(node.target, "__module__", None)
        if module is not None and "acc_ops" in module:
            return f"acc_ops.{node.target.__name__}"
        return target_qualified_name(node.target)
    return node.target


def is_node_output_tensor(node: Node) -> bool:
    """Whether ``node`` produces a Tensor, from ``meta['type']`` (run
    :class:`~ember.fx.passes.shape_prop.ShapeProp` first)."""
    from ...tensor import Tensor

    type_ = node.meta.get("type", None)
    return type_ is not None and isinstance(type_, type) and issubclass(type_, Tensor)


class FxNetAccFusionsFinder:
    """Groups of connected acc nodes that hand non-tensor values to each other
    ("fusion groups"): a splitter must keep each group in one submodule, since
    only tensors may cross a submodule boundary. A node counts as producing a
    non-tensor when it has no ``meta['tensor_meta']`` (run ShapeProp first).

    ``finder()`` returns ``{node: its group}`` (every member maps to the same
    set); a group that would need a non-acc node is dropped and its members
    are removed from ``acc_nodes`` (the set passed in is updated)."""

    def __init__(self, module: Any, acc_nodes: NodeSet) -> None:
        self.module = module
        self.nodes = list(module.graph.nodes)
        self.acc_nodes = acc_nodes
        self.node_index = {node: i for i, node in enumerate(self.nodes)}

    @dataclass
    class FusionGroup:
        #: graph position of the group's earliest node
        top_node_idx: int
        nodes: NodeSet
        #: callable nodes outside the group that its members read
        inputs: NodeSet
        #: members whose neighbours are still to be looked at
        nodes_need_process: NodeSet

        def add_node(self, node: Node) -> None:
            if node in self.nodes:
                return
            self.nodes_need_process.add(node)
            self.nodes.add(node)
            self.inputs.discard(node)
            self.inputs.update(n for n in node.all_input_nodes
                               if n.op in CALLABLE_NODE_OPS and n not in self.nodes)

    def recursive_add_node(self, fusion_group: "FxNetAccFusionsFinder.FusionGroup", inputs: Any,
                           visited: Optional[NodeSet] = None) -> bool:
        """Walk upwards from ``inputs``: a path that reaches back into the group
        (between two of its members) joins the group. True if one did."""
        for arg in list(inputs):
            if visited is not None:
                if arg in visited:
                    continue
                visited.add(arg)
            if arg.op not in CALLABLE_NODE_OPS:
                continue
            if self.node_index[arg] < fusion_group.top_node_idx:
                continue  # above the group: cannot lead back into it
            if arg in fusion_group.nodes:
                return True
            if self.recursive_add_node(fusion_group, arg.all_input_nodes, visited):
                fusion_group.add_node(arg)
                return True
        return False

    def __call__(self) -> Dict[Node, NodeSet]:
        result: Dict[Node, NodeSet] = {}
        for start in list(self.acc_nodes):
            if start in result or start.op not in CALLABLE_NODE_OPS:
                continue
            if "tensor_meta" in start.meta or start not in self.acc_nodes:
                continue
            group = self.FusionGroup(self.node_index[start], {start}, set(start.all_input_nodes), {start})
            while group.nodes_need_process:
                node = group.nodes_need_process.pop()
                self.recursive_add_node(group, group.inputs, visited=set())
                if "tensor_meta" not in node.meta:
                    # a non-tensor value: its readers belong with it
                    for user in node.users:
                        if user.op in CALLABLE_NODE_OPS and user not in group.nodes:
                            group.add_node(user)
                            self.recursive_add_node(group, group.inputs, visited=set())
                for arg in node.all_input_nodes:
                    if arg.op not in CALLABLE_NODE_OPS or "tensor_meta" in arg.meta or arg in group.nodes:
                        continue
                    # a non-tensor input: its producer belongs with it
                    group.add_node(arg)
                    group.top_node_idx = min(group.top_node_idx, self.node_index[arg])
                    self.recursive_add_node(group, group.inputs, visited=set())
            if group.nodes <= self.acc_nodes:
                for n in group.nodes:
                    result[n] = group.nodes
            else:
                self.acc_nodes -= group.nodes
        return result


# Scalar/symbolic arithmetic and assertions go first in legalize_graph: they
# compute sizes that later tensor ops read.
_PRIORITIZED_OPS = (
    operator.add, operator.mul, operator.sub, operator.floordiv, operator.truediv,
    operator.mod, operator.le, operator.lt, operator.ge, operator.gt, operator.eq,
    operator.ne,
)


def _rebuild(gm: Any, order: List[Node]) -> Any:
    new_graph = Graph()
    env: Dict[Node, Node] = {}
    for node in order:
        env[node] = new_graph.node_copy(node, lambda x: env[x])
    new_graph._codegen = gm.graph._codegen
    new_graph.impure_targets = set(gm.graph.impure_targets)
    gm.graph = new_graph
    return gm


def _in_degrees(gm: Any) -> Dict[Node, int]:
    indeg = dict.fromkeys(gm.graph.nodes, 0)
    for node in gm.graph.nodes:
        for user in node.users:
            indeg[user] += 1
    return indeg


def legalize_graph(gm: Any) -> Any:
    """Topologically sort ``gm``'s graph in place (Kahn's algorithm, FIFO;
    size arithmetic first). Not stable: see :func:`stable_topological_sort`."""
    indeg = _in_degrees(gm)
    queue = collections.deque(n for n in gm.graph.nodes if indeg[n] == 0)
    order: List[Node] = []
    while queue:
        cur = queue.popleft()
        order.append(cur)
        for user in cur.users:
            indeg[user] -= 1
            if indeg[user] == 0:
                if user.op == "call_function" and user.target in _PRIORITIZED_OPS:
                    queue.appendleft(user)
                else:
                    queue.append(user)
    if len(order) < len(gm.graph.nodes):
        stuck = [n for n in indeg if indeg[n] != 0]
        raise RuntimeError(f"Input graph has cycles, unable to add {stuck}")
    return _rebuild(gm, order)


def stable_topological_sort(gm: Any) -> Any:
    """Topologically sort ``gm``'s graph in place, keeping the original order
    wherever dependencies allow (ready nodes leave in original order)."""
    indeg = _in_degrees(gm)
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    ready = [(position[n], n) for n in gm.graph.nodes if indeg[n] == 0]
    heapq.heapify(ready)
    order: List[Node] = []
    while ready:
        _, cur = heapq.heappop(ready)
        order.append(cur)
        for user in cur.users:
            indeg[user] -= 1
            if indeg[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(gm.graph.nodes):
        stuck = [n for n in indeg if indeg[n] != 0]
        raise AssertionError(f"Input graph has cycles, unable to add {stuck}")
    return _rebuild(gm, order)
