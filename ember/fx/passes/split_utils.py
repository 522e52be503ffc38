"""Split a GraphModule by node tags (``torch.fx.passes.split_utils``).

Why tags rather than a callback: splitters decide placement once (``node.tag
= "acc"``), and the components must run in the order of the ``tags`` list,
which :func:`split_by_tags` checks (a node's component may not come before
the components it reads from).
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..graph import Graph
from ..node import Node, map_arg
from .tools_common import NodeList
from .utils.common import HolderModule, lift_subgraph_as_module

__all__ = ["getattr_recursive", "setattr_recursive", "Component", "split_by_tags", "move_non_tensor_nodes_on_boundary"]


def getattr_recursive(obj: Any, name: str) -> Any:
    """The attribute at dotted path ``name`` of ``obj``, or None if absent."""
    from ...nn import ModuleList

    for layer in name.split("."):
        if isinstance(obj, ModuleList):
            if layer in getattr(obj, "_modules", {}):
                obj = obj._modules[layer]
            else:
                return None
        elif hasattr(obj, layer):
            obj = getattr(obj, layer)
        else:
            return None
    return obj


def setattr_recursive(obj: Any, attr: str, value: Any) -> None:
    """Set the attribute at dotted path ``attr`` of ``obj``."""
    head, _, rest = attr.partition(".")
    if not rest:
        setattr(obj, attr, value)
    else:
        setattr_recursive(getattr(obj, head), rest, value)


@dataclass
class Component:
    """The subgraph of one tag while it is being built."""

    graph: Graph
    order: int
    name: str
    input_placeholders: List[Node] = field(default_factory=list)
    orig_inputs: List[Node] = field(default_factory=list)
    orig_outputs: List[Node] = field(default_factory=list)
    getattr_maps: Dict[Node, Node] = field(default_factory=dict)
    constructor_args: List[str] = field(default_factory=list)
    gm: Optional[Any] = None


def _flatten(x: Any) -> NodeList:
    out: NodeList = []
    map_arg(x, out.append)
    return out


def split_by_tags(gm: Any, tags: List[str], return_fqn_mapping: bool = False, return_tuple: bool = False,
                  GraphModuleCls: Optional[type] = None):
    """One submodule per tag (named after it, in ``tags`` order) holding the
    nodes with ``node.tag == tag``; a top-level GraphModule calls them in turn.

    Every call node needs a ``tag``; placeholders become inputs where used,
    get_attr nodes are copied into each component reading them. Returns the
    split module, plus ``{original fqn: "<tag>.<fqn>"}`` with
    ``return_fqn_mapping``.
    """
    if GraphModuleCls is None:
        from ..graph_module import GraphModule as GraphModuleCls
    remap: Dict[Node, Node] = {}
    node_to_component: Dict[Node, Component] = {}
    tag_to_component: Dict[str, Component] = {}
    components: List[Component] = []
    used_in_main: Dict[Node, None] = {}
    main_g = Graph()
    main_remap: Dict[Node, Node] = {}
    output_node: Optional[Node] = None

    for tag in tags:
        comp = Component(Graph(), len(components), f"{tag}")
        components.append(comp)
        tag_to_component[tag] = comp

    for node in gm.graph.nodes:
        if node.op == "output":
            if output_node is not None:
                raise RuntimeError("Multiple output nodes in graph!")
            output_node = node
            continue
        if node.op == "placeholder":
            main_remap[node] = main_g.placeholder(node.name, type_expr=node.type)
            main_remap[node].meta = copy.copy(node.meta)
            continue
        if node.op == "get_attr":
            continue
        if not hasattr(node, "tag"):
            raise AssertionError(f"Node does not have tag: {node.format_node()}")
        if node.tag not in tag_to_component:
            raise ValueError(f"split_by_tags: node {node.name!r} has tag {node.tag!r}, which is not in tags {tags}")
        upstream = [node_to_component[x] for x in _flatten((node.args, node.kwargs)) if x.op not in ("placeholder", "get_attr")]
        comp = tag_to_component[node.tag]
        node_to_component[node] = comp
        mx = max((c.order for c in upstream), default=0)
        if comp.order < mx:
            raise AssertionError(
                f"Component {comp.name} order must be >= max of its upstream components, order={comp.order} and max={mx}"
            )

        def remap_input(x: Node, comp: Component = comp) -> Node:
            if x.op == "get_attr":
                if x not in comp.getattr_maps:
                    comp.getattr_maps[x] = comp.graph.get_attr(x.target, type_expr=x.type)
                    comp.getattr_maps[x].meta = copy.copy(x.meta)
                return comp.getattr_maps[x]
            if x.op != "placeholder" and node_to_component[x] is comp:
                return remap[x]
            if x not in comp.orig_inputs:
                comp.orig_inputs.append(x)
                ph = comp.graph.placeholder(x.name, type_expr=x.type)
                ph.meta = copy.copy(x.meta)
                comp.input_placeholders.append(ph)
                used_in_main[x] = None
            return comp.input_placeholders[comp.orig_inputs.index(x)]

        n = comp.graph.node_copy(node, remap_input)
        n.tag = node.tag
        remap[node] = n
        node_to_component[n] = comp

    if output_node is None:
        raise RuntimeError("Graph had no output node!")
    for x in _flatten(output_node.args[0]):
        if x.op == "get_attr":
            main_remap[x] = main_g.get_attr(x.name, type_expr=x.type)
        else:
            used_in_main[x] = None
    for n in used_in_main:
        if n.op != "placeholder":
            node_to_component[n].orig_outputs.append(n)

    fqn_map: Dict[str, str] = {}
    for comp in components:
        outs = tuple(remap[o] for o in comp.orig_outputs)
        comp.graph.output(outs if return_tuple or len(outs) != 1 else outs[0])
        comp.gm, mapping = lift_subgraph_as_module(gm, subgraph=comp.graph, comp_name=comp.name)
        fqn_map.update(mapping)
        call = main_g.call_module(comp.name, args=tuple(main_remap[i] for i in comp.orig_inputs))
        if len(outs) == 1 and not return_tuple:
            main_remap[comp.orig_outputs[0]] = call
        else:
            for i, o in enumerate(comp.orig_outputs):
                main_remap[o] = main_g.call_function(operator.getitem, (call, i))

    main_g.output(map_arg(output_node.args[0], main_remap.__getitem__))
    main_root = HolderModule({comp.name: comp.gm for comp in components})
    main_g._codegen = gm.graph._codegen
    for x in _flatten(output_node.args[0]):
        if x.op == "get_attr":
            setattr(main_root, x.name, getattr_recursive(gm, x.target))
    result = GraphModuleCls(main_root, main_g)
    if return_fqn_mapping:
        return result, fqn_map
    return result


def move_non_tensor_nodes_on_boundary(subgraphs: List[Any]) -> None:
    """Move acc nodes producing non-tensor values that a later subgraph reads
    into that subgraph (with their descendants still in the acc subgraph), so
    no non-tensor value crosses a boundary out of an acc subgraph.

    ``subgraphs`` (``splitter_base.Subgraph`` objects: ``is_acc``, ``nodes``)
    are edited in place. A node whose readers sit in more than one other
    subgraph, or whose descendants reach a third subgraph, stays (a message
    says so)."""
    from .tools_common import CALLABLE_NODE_OPS, is_node_output_tensor

    where: Dict[Node, int] = {n: i for i, sg in enumerate(subgraphs) for n in sg.nodes}

    def children(node: Node) -> NodeList:
        return [u for u in node.users if u.op in CALLABLE_NODE_OPS and u in where]

    def crosses(node: Node, idx: int) -> bool:
        return any(where[c] != idx for c in children(node))

    def closure(node: Node, src: int, dst: int):
        # node and its descendants inside src; any descendant elsewhere than
        # src/dst makes the move impossible
        todo, seen, moving = [node], set(), set()
        while todo:
            cur = todo.pop()
            if cur in seen or cur not in where:
                continue
            seen.add(cur)
            if where[cur] == dst:
                continue
            if where[cur] != src:
                return False, set()
            moving.add(cur)
            todo.extend(children(cur))
        return True, moving

    for idx, sg in enumerate(subgraphs):
        if not sg.is_acc:
            continue
        queue = [n for n in sg.nodes if not is_node_output_tensor(n) and crosses(n, idx)]
        done: set = set()
        while queue:
            cur = queue.pop(0)
            if cur in done or where.get(cur) != idx:
                continue
            done.add(cur)
            targets = {where[c] for c in children(cur) if where[c] != idx}
            if len(targets) != 1:
                print(f"Cannot move non-tensor node {cur.name} on boundary because it has children in multiple subgraphs")
                continue
            dst = targets.pop()
            ok, moving = closure(cur, idx, dst)
            if not ok:
                continue
            for n in moving:
                sg.nodes.remove(n)
                subgraphs[dst].nodes.append(n)
                where[n] = dst
                print(f"In order move the non-tensor node {cur.name} on boundary, moved node {n.name} from "
                      f"{'acc' if sg.is_acc else 'gpu'}_{idx} to {'acc' if subgraphs[dst].is_acc else 'gpu'}_{dst}")
            for parent in cur.all_input_nodes:
                if (parent.op in CALLABLE_NODE_OPS and where.get(parent) == idx and parent not in done
                        and not is_node_output_tensor(parent)):
                    queue.append(parent)
