"""Pattern-based graph rewriting: find a subgraph, splice in another.

Why: most graph optimisations are local ("``cat`` followed by ``sum``
becomes ...", "this conv/bn pair becomes one op"). Writing each as a hand
made walk over nodes is error-prone; writing the *before* and *after* as two
small Python functions and letting the rewriter trace, match and splice them
is not. :func:`replace_pattern` does exactly what ``torch.fx``'s does, on
ember graphs:

1. trace ``pattern`` and ``replacement`` (callables, or GraphModules/Graphs
   given as is);
2. find every non-overlapping, self-contained occurrence of the pattern with
   :class:`~ember.fx.passes.utils.matcher_utils.SubgraphMatcher` (earliest
   first);
3. for each, copy the replacement graph in (its placeholders bound to what
   the pattern's placeholders matched), inserted before the first user of
   the matched values, redirect those users, erase the matched nodes;
4. recompile the GraphModule and, when ``replacement`` is a Module, copy the
   submodules/attributes the new nodes refer to.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

from ._symbolic_trace import symbolic_trace
from .graph import Graph
from .node import Node

__all__ = ["Match", "replace_pattern", "replace_pattern_with_filters", "ReplacedPatterns"]


class Match(NamedTuple):
    """Where :func:`replace_pattern` matched: ``anchor`` is the pattern node
    the search started from, ``nodes_map`` maps pattern nodes to the
    (now erased) graph nodes they matched."""

    anchor: Node
    nodes_map: Dict[Node, Node]


@dataclass
class ReplacedPatterns:
    """A match plus ``replacements``: the nodes that were inserted for it."""

    anchor: Node
    nodes_map: Dict[Node, Node]
    replacements: List[Node]


def _module_class():
    from ember.nn.modules.module import Module

    return Module


def _graph_module_class():
    from .graph_module import GraphModule

    return GraphModule


def _replace_attributes(gm: Any, replacement: Any) -> None:
    """After splicing in nodes traced from the Module ``replacement``, make
    every ``get_attr``/``call_module`` target exist on ``gm`` (what ``gm``
    already has wins; the rest is deep-copied from ``replacement``)."""
    Module = _module_class()
    gm.delete_all_unused_submodules()
    if isinstance(replacement, _graph_module_class()):
        replacement.graph.lint()

    def lookup(mod: Any, target: str) -> Any:
        path, _, name = target.rpartition(".")
        try:
            owner = mod.get_submodule(path)
        except AttributeError:
            return None
        return getattr(owner, name, None)

    for node in gm.graph.nodes:
        if node.op not in ("call_module", "get_attr"):
            continue
        if lookup(gm, node.target) is not None:
            continue
        value = lookup(replacement, node.target)
        if value is None:
            raise RuntimeError(
                f'Attempted to create a "{node.op}" node during subgraph rewriting with target '
                f"{node.target}, but the referenced attribute does not exist in the replacement GraphModule"
            )
        value = copy.deepcopy(value)
        if isinstance(value, Module):
            gm.add_submodule(node.target, value)
        else:
            path, _, name = node.target.rpartition(".")
            owner = gm
            for atom in path.split(".") if path else ():
                nxt = getattr(owner, atom, None)
                if nxt is None:
                    nxt = Module()
                    setattr(owner, atom, nxt)
                owner = nxt
            setattr(owner, name, value)
    gm.graph.lint()


def replace_pattern(
    gm: Any,
    pattern: Union[Callable[..., Any], Any],
    replacement: Union[Callable[..., Any], Any],
) -> List[Match]:
    """Replace every non-overlapping occurrence of ``pattern`` in
    ``gm.graph`` with ``replacement``; return the matches (empty if none).

    Matching follows use-def edges, not names: ``p = ember.cat([a, b])`` in
    the pattern matches ``m = ember.cat([w1, w2])`` in ``gm``. The pattern's
    ``return`` is matched by value only, so the pattern need not reach the end
    of the graph. Every pattern parameter must be used in the pattern, and
    ``replacement`` must take the same number of parameters (unused ones are
    fine). Where matches overlap, the first in graph order is replaced.

    Example::

        class M(ember.nn.Module):
            def forward(self, x, w1, w2):
                m1 = ember.cat([w1, w2]).sum()
                m2 = ember.cat([w1, w2]).sum()
                return x + ember.max(m1) + ember.max(m2)

        def pattern(w1, w2):
            return ember.cat([w1, w2])

        def replacement(w1, w2):
            return ember.stack([w1, w2])

        traced = ember.fx.symbolic_trace(M())
        ember.fx.replace_pattern(traced, pattern, replacement)
        # forward now computes stack_1 = ember.stack([w1, w2]) ... twice
    """
    done = _replace_pattern(gm, pattern, replacement)
    return [Match(anchor=m.anchor, nodes_map=m.nodes_map) for m in done]


def replace_pattern_with_filters(
    gm: Any,
    pattern: Union[Callable[..., Any], Graph, Any],
    replacement: Union[Callable[..., Any], Graph, Any, None] = None,
    match_filters: Optional[List[Callable[[Any, Graph, Graph], bool]]] = None,
    ignore_literals: bool = False,
    replacement_callback: Optional[Callable[[Any, Graph, Graph], Graph]] = None,
    node_name_match: str = "",
) -> List[ReplacedPatterns]:
    """:func:`replace_pattern` with extra control.

    ``match_filters``: callables ``(match, original_graph, pattern_graph) ->
    bool`` (``match`` is an :class:`~ember.fx.passes.utils.matcher_utils.InternalMatch`);
    a match is replaced only if all return True.
    ``ignore_literals``: literal arguments match any literal.
    ``replacement_callback``: ``(match, original_graph, pattern_graph) ->
    Graph`` builds the replacement per match (then ``replacement`` may be None).
    ``node_name_match``: a graph node whose name contains this string matches
    any pattern node.
    Returns one :class:`ReplacedPatterns` per replaced match.
    """
    return _replace_pattern(
        gm, pattern, replacement, match_filters, ignore_literals, replacement_callback, node_name_match
    )


def _as_graph(obj: Any) -> Graph:
    if isinstance(obj, _graph_module_class()):
        return obj.graph
    if isinstance(obj, Graph):
        return obj
    return symbolic_trace(obj).graph


def _replace_pattern(
    gm: Any,
    pattern: Any,
    replacement: Any = None,
    match_filters: Optional[List[Callable[[Any, Graph, Graph], bool]]] = None,
    ignore_literals: bool = False,
    replacement_callback: Optional[Callable[[Any, Graph, Graph], Graph]] = None,
    node_name_match: str = "",
) -> List[ReplacedPatterns]:
    from .passes.utils.matcher_utils import SubgraphMatcher

    original_graph: Graph = gm.graph
    pattern_graph = _as_graph(pattern)
    matcher = SubgraphMatcher(
        pattern_graph,
        match_output=False,
        match_placeholder=False,
        remove_overlapping_matches=True,
        ignore_literals=ignore_literals,
    )
    matches = matcher.match(original_graph, node_name_match=node_name_match)
    filters = list(match_filters or [])
    matches = [m for m in matches if all(f(m, original_graph, pattern_graph) for f in filters)]

    common_replacement: Optional[Graph] = None
    if isinstance(replacement, (Graph, _graph_module_class())) or callable(replacement):
        common_replacement = _as_graph(replacement)
    elif replacement_callback is None:
        raise AssertionError("Must provide either a replacement GraphModule or a replacement callback")

    # A value returned by one match may be an input of a later one; once
    # replaced, later matches must read the replacement instead.
    changed: Dict[Node, Node] = {}
    results: List[ReplacedPatterns] = []
    for match in matches:
        if replacement_callback is not None:
            replacement_graph = replacement_callback(match, original_graph, pattern_graph)
        else:
            assert common_replacement is not None
            replacement_graph = common_replacement
        r_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
        if len(match.placeholder_nodes) != len(r_placeholders):
            raise AssertionError(
                f"Placeholder count mismatch: {len(match.placeholder_nodes)} vs {len(r_placeholders)}"
            )

        val_map: Dict[Node, Any] = {}
        for rn, gn in zip(r_placeholders, match.placeholder_nodes):
            if isinstance(gn, Node):
                new = changed.get(gn, gn)
                val_map[rn] = new
                if new is not gn:
                    match.placeholder_nodes[match.placeholder_nodes.index(gn)] = new
                    for pn, mapped in match.nodes_map.items():
                        if mapped is gn:
                            match.nodes_map[pn] = new
                            break
            else:
                val_map[rn] = gn  # a literal bound to a placeholder

        # insert before the first (in program order) reader of the matched
        # values; with no reader, right after the last returned node
        readers = set()
        for n in match.returning_nodes:
            readers.update(n.users)
        insert_point: Optional[Node] = None
        if len(readers) == 1:
            insert_point = next(iter(readers))
        elif readers:
            insert_point = next(n for n in original_graph.nodes if n in readers)
        else:
            following = None
            returning = set(match.returning_nodes)
            for n in reversed(original_graph.nodes):
                if n in returning:
                    insert_point = following
                    break
                following = n
        if insert_point is None:
            raise AssertionError("The insert point can't be None")
        with original_graph.inserting_before(insert_point):
            copied = original_graph.graph_copy(replacement_graph, val_map)
        if isinstance(copied, Node):
            copied = (copied,)

        placeholders = match.placeholder_nodes
        new_nodes = [v for v in val_map.values() if not any(v is p for p in placeholders)]

        if len(match.returning_nodes) != len(copied):
            raise AssertionError(
                f"Returning nodes count mismatch: {len(match.returning_nodes)} vs {len(copied)}"
            )
        for gn, cn in zip(match.returning_nodes, copied):
            gn.replace_all_uses_with(cn)
            changed[gn] = cn
        for pn in reversed(pattern_graph.nodes):
            if pn.op not in ("placeholder", "output"):
                original_graph.erase_node(match.nodes_map[pn])

        results.append(ReplacedPatterns(anchor=match.anchors[0], nodes_map=match.nodes_map, replacements=new_nodes))

    gm.recompile()
    if isinstance(replacement, _module_class()):
        _replace_attributes(gm, replacement)
    return results
