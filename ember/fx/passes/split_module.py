"""Split a GraphModule into submodules by a per-node partition id
(``torch.fx.passes.split_module``).

Why the structure: pipeline parallelism, graph breaks for a backend, or
debugging want the same program as a chain of smaller modules. Each partition
becomes ``submod_<id>``: its inputs are the values it reads from outside
(placeholders named after them), its outputs the values read by later
partitions or the graph's result (a tuple when more than one). Partitions are
emitted in a dependency order computed exactly as torch does (a LIFO walk from
the partitions depending on nothing), so submodule order, names and the
printed code match torch.fx's for the same callback.

Graph nodes that switch global state (ember dynamo's ``_set_grad_enabled`` and
``_set_autocast``) are re-emitted at the start of every later partition while
their setting is in force, so each submodule runs under the right mode on its
own; partition ids must then not decrease along the graph.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Dict, List, Optional

from ..graph import Graph
from ..node import Node, map_arg

__all__ = ["Partition", "split_module"]


class Partition:
    """One partition under construction: its nodes, cross-partition inputs
    and outputs (insertion-ordered dicts of node names), the partitions it
    depends on / that depend on it, and its new graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.submod_name = f"submod_{name}"
        self.node_names: List[str] = []
        self.inputs: Dict[str, None] = {}
        self.outputs: Dict[str, None] = {}
        self.dependencies: Dict[str, None] = {}
        self.dependents: Dict[str, None] = {}
        self.graph = Graph()
        self.environment: Dict[Node, Node] = {}
        self.targets: Dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"name: {self.name},\n nodes: {self.node_names},\n inputs: {self.inputs},\n"
            f" outputs: {self.outputs},\n partitions depended on: {self.dependencies},\n"
            f" partition dependents: {self.dependents}"
        )


def _get_attr_from_qualname(mod: Any, qualname: str) -> Any:
    attr_val = mod
    for atom in qualname.split("."):
        if not hasattr(attr_val, atom):
            raise AttributeError(f"Node target {qualname} not found!")
        attr_val = getattr(attr_val, atom)
    return attr_val


def _is_state_setter(target: Any) -> bool:
    return getattr(target, "__module__", None) == "ember.dynamo.variables.ctx" and getattr(
        target, "__name__", None
    ) in ("_set_grad_enabled", "_set_autocast")


def _graph_module(root: Dict[str, Any], graph: Graph):
    from ..graph_module import GraphModule

    return GraphModule(root, graph)


def split_module(
    m: Any,
    root_m: Any,
    split_callback: Callable[[Node], int],
    qualname_map: Optional[Dict[str, str]] = None,
    keep_original_order: Optional[bool] = False,
    keep_original_node_name: Optional[bool] = False,
    keep_original_input_name: bool = True,
    *,
    partition_affix: Optional[str] = None,
    tuple_return: bool = False,
):
    """Split ``m`` (a GraphModule) into ``submod_<split_callback(node)>``
    submodules called in sequence by a new top-level GraphModule.

    ``root_m`` is unused (kept for torch's signature). ``qualname_map``, if
    given, is filled with ``{"submod_i.<new target>": "<old target>"}``.
    ``keep_original_order`` emits the submodule calls in the order partitions
    first appear instead of dependency order; ``keep_original_node_name``
    keeps node names inside submodules; ``keep_original_input_name=False``
    names submodule inputs ``arg_0, arg_1, ...``; ``partition_affix`` names
    submodules ``submod_<affix>_<id>``; ``tuple_return`` makes every submodule
    return a tuple. Returns the new GraphModule.
    """
    from ...nn import Module

    if not hasattr(m, "graph"):
        raise TypeError(f"split_module: m must be a GraphModule, got {type(m).__name__}")
    if not callable(split_callback):
        raise TypeError(f"split_module: split_callback must be callable, got {type(split_callback).__name__}")

    partitions: Dict[str, Partition] = {}
    orig_nodes: Dict[str, Node] = {}
    node_partition: Dict[Node, str] = {}

    def partition_name(node: Node) -> str:
        name = str(split_callback(node))
        return f"{partition_affix}_{name}" if partition_affix is not None else name

    def record_use(def_node: Node, use_node: Optional[Node]) -> None:
        defined = node_partition.get(def_node)
        used = node_partition.get(use_node) if use_node is not None else None
        if defined == used:
            return
        if defined is not None:
            partitions[defined].outputs.setdefault(def_node.name)
            if used is not None:
                partitions[defined].dependents.setdefault(used)
        if used is not None:
            partitions[used].inputs.setdefault(def_node.name)
            if defined is not None:
                partitions[used].dependencies.setdefault(defined)

    # 1. assign nodes to partitions; note which partitions each state setter covers
    setter_regions: Dict[Node, List[str]] = {}
    active: Dict[str, Node] = {}
    for node in m.graph.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        pname = partition_name(node)
        p = partitions.get(pname)
        if p is None:
            p = partitions[pname] = Partition(pname)
        p.node_names.append(node.name)
        node_partition[node] = pname
        if node.op == "call_function" and _is_state_setter(node.target):
            if any(isinstance(a, Node) for a in node.args):
                raise NotImplementedError(
                    f"split_module: state-setting node {node.name!r} takes graph values as arguments; "
                    "only constant settings can be replayed in later partitions"
                )
            active[node.target.__name__] = node
            setter_regions[node] = []
        for setter in active.values():
            if pname not in setter_regions[setter]:
                setter_regions[setter].append(pname)

    if setter_regions:
        highest = None
        for node in m.graph.nodes:
            if node in node_partition:
                pid = split_callback(node)
                if highest is not None and highest > pid:
                    raise AssertionError(
                        "autocast or set_grad_enabled require monotonically increasing partitions: "
                        f"highest: {highest}, this node's: {pid}"
                    )
                highest = pid

    # 2. cross-partition uses
    for node in m.graph.nodes:
        orig_nodes[node.name] = node
        if node.op in ("placeholder", "get_attr"):
            continue
        if node.op == "output":
            map_arg(node.args[0], lambda n: record_use(n, None))
            continue
        if node.op == "call_function" and _is_state_setter(node.target):
            continue
        map_arg(node.args, lambda d, node=node: record_use(d, node))
        map_arg(node.kwargs, lambda d, node=node: record_use(d, node))

    # 3. dependency order (LIFO over ready partitions, like torch)
    original_order = list(partitions)
    pending = {name: dict(p.dependencies) for name, p in partitions.items()}
    ready = [name for name in partitions if not pending[name]]
    sorted_partitions: List[str] = []
    while ready:
        name = ready.pop()
        sorted_partitions.append(name)
        for dep in partitions[name].dependents:
            pending[dep].pop(name)
            if not pending[dep]:
                ready.append(dep)
    if len(sorted_partitions) != len(partitions):
        raise RuntimeError("cycle exists between partitions!")

    # 4. replay state setters at the start of the later partitions they cover
    for setter, regions in setter_regions.items():
        for r in regions[1:]:  # regions[0] holds the setter itself (copied in step 6)
            p = partitions[r]
            copy = p.graph.create_node(setter.op, setter.target, tuple(setter.args), {}, type_expr=setter.type)
            copy.meta = dict(setter.meta)
            p.environment[setter] = copy

    # 5. inputs become placeholders (module-valued get_attr stay get_attr)
    for pname in sorted_partitions:
        p = partitions[pname]
        is_module_attr = {
            inp: orig_nodes[inp].op == "get_attr"
            and isinstance(_get_attr_from_qualname(m, orig_nodes[inp].target), Module)
            for inp in p.inputs
        }
        ordered = [i for i in p.inputs if not is_module_attr[i]] + [i for i in p.inputs if is_module_attr[i]]
        new_inputs: Dict[str, None] = {}
        counter = 0
        for inp in ordered:
            orig = orig_nodes[inp]
            if is_module_attr[inp]:
                value = p.graph.get_attr(orig.target)
                p.targets[orig.target] = _get_attr_from_qualname(m, orig.target)
            else:
                if keep_original_input_name:
                    name = inp
                else:
                    name = f"arg_{counter}"
                    counter += 1
                value = p.graph.placeholder(name, type_expr=orig.type)
                new_inputs[inp] = None
            value.meta = dict(orig.meta)
            p.environment[orig] = value
        p.inputs = new_inputs

    # 6. copy each node into its partition
    for node in m.graph.nodes:
        pname = node_partition.get(node)
        if pname is None:
            continue
        p = partitions[pname]
        env = p.environment
        args = map_arg(node.args, lambda n: env[n])
        kwargs = map_arg(node.kwargs, lambda n: env[n])
        if node.op in ("call_module", "get_attr"):
            target = node.target.replace(".", "_")
            p.targets[target] = _get_attr_from_qualname(m, node.target)
            if qualname_map is not None:
                qualname_map[f"{p.submod_name}.{target}"] = node.target
        else:
            target = node.target
        new = p.graph.create_node(
            node.op, target, args, kwargs,
            name=node.name if keep_original_node_name else None, type_expr=node.type,
        )
        new.meta = dict(node.meta)
        env[node] = new

    # 7. the top-level graph
    base_graph = Graph()
    base_env: Dict[str, Node] = {}
    base_attrs: Dict[str, Any] = {}

    def copy_to_base(node: Node) -> None:
        if node.op == "placeholder":
            default = node.args[0] if node.args else inspect.Signature.empty
            if keep_original_node_name:
                args = () if default is inspect.Signature.empty else (default,)
                new = base_graph.create_node("placeholder", node.name, args=args, type_expr=node.type)
            else:
                new = base_graph.placeholder(node.target, type_expr=node.type, default_value=default)
            new.meta = dict(node.meta)
            base_env[node.name] = new
        elif node.op == "get_attr":
            new = base_graph.get_attr(node.target)
            new.meta = dict(node.meta)
            base_env[node.name] = new
            base_attrs[node.target] = _get_attr_from_qualname(m, node.target)

    if not keep_original_order:
        for node in m.graph.nodes:
            copy_to_base(node)
    placeholders = [n for n in m.graph.nodes if n.op == "placeholder"]
    done = set()
    for pname in (original_order if keep_original_order else sorted_partitions):
        p = partitions[pname]
        outs = tuple(p.environment[orig_nodes[name]] for name in p.outputs)
        p.graph.output(outs[0] if len(outs) == 1 and not tuple_return else outs)
        if keep_original_order:
            needed = placeholders + [orig_nodes[k] for k in p.inputs if orig_nodes[k] not in placeholders]
            for node in needed:
                if node not in done:
                    copy_to_base(node)
                    done.add(node)
        base_attrs[p.submod_name] = _graph_module(p.targets, p.graph)
        call = base_graph.call_module(p.submod_name, tuple(base_env[name] for name in p.inputs))
        if len(p.outputs) > 1 or (len(p.outputs) == 1 and tuple_return):
            for i, name in enumerate(p.outputs):
                base_env[name] = base_graph.call_function(operator.getitem, (call, i))
        elif len(p.outputs) == 1:
            base_env[next(iter(p.outputs))] = call
    if keep_original_order and not base_env:
        for node in m.graph.nodes:
            copy_to_base(node)

    for node in m.graph.nodes:
        if node.op == "output":
            base_graph.output(map_arg(node.args[0], lambda n: base_env[n.name]))
    ret = _graph_module(base_attrs, base_graph)
    ret.meta["partition_names"] = {p.submod_name for p in partitions.values()}
    return ret
