"""``SubgraphMatcher``: find a pattern graph inside a larger graph.

Why match on use-def edges and not on names or order: two programs that
compute the same thing name their values differently and may interleave
unrelated work, but each value has exactly one producer. So the matcher
starts from the pattern's *sinks* (the values its output returns) and walks
backwards through producers in both graphs at once, comparing each pair of
nodes (same op, same target) and each pair of literal arguments. Pattern
placeholders are wildcards: they bind to whatever node or literal feeds the
matched subgraph.

A pattern with several returned values has several anchors; a match must
satisfy all of them with one consistent node mapping, which is found by
backtracking over the candidates of each anchor in turn. Matches whose
inner nodes are read from outside the match (so removing them would break
the graph), matches that would create a cycle if collapsed into one node,
and (optionally) matches overlapping an earlier one are dropped -- the same
rules, in the same order, as ``torch.fx.passes.utils.matcher_utils``.
"""

from __future__ import annotations

import copy
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

from ...graph import Graph
from ...node import Node

__all__ = ["SubgraphMatcher", "InternalMatch"]


def _init_logger() -> logging.Logger:
    # EMBER_MATCHER_LOGLEVEL=INFO shows every pairing the matcher tries.
    log = logging.getLogger(__name__)
    level = os.environ.get("EMBER_MATCHER_LOGLEVEL")
    if level:
        log.setLevel(level.upper())
    return log


logger = _init_logger()


@dataclass
class InternalMatch:
    """One match of a pattern in a graph.

    ``anchors``: the pattern nodes the search started from;
    ``nodes_map``: pattern node -> graph node (a pattern placeholder may map
    to a literal when the graph passes a constant there);
    ``placeholder_nodes``: what each pattern placeholder bound to, in the
    pattern's placeholder order; ``returning_nodes``: the graph nodes playing
    the pattern's returned values; ``name_node_map``: kept for API parity
    with torch (filled only by name-aware matchers).
    """

    anchors: List[Node]
    nodes_map: Dict[Node, Any] = field(default_factory=dict)
    placeholder_nodes: List[Any] = field(default_factory=list)
    returning_nodes: List[Node] = field(default_factory=list)
    name_node_map: Dict[str, Node] = field(default_factory=dict)

    def __copy__(self) -> "InternalMatch":
        # The anchors list is shared (it never changes); the mappings are
        # per-attempt state and must be copied for backtracking.
        return InternalMatch(
            anchors=self.anchors,
            nodes_map=self.nodes_map.copy(),
            placeholder_nodes=self.placeholder_nodes.copy(),
            returning_nodes=self.returning_nodes.copy(),
        )


def _get_attr_value(mod: Any, target: str) -> Any:
    obj = mod
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _tensor_class():
    from ..._symbolic_trace import _tensor_classes

    return _tensor_classes()[0]


def _forms_cycle(partition: Sequence[Node]) -> bool:
    """True if collapsing ``partition`` into one node would create a cycle:
    some path leaves the partition and comes back into it."""
    inside = set(partition)
    frontier = [u for n in inside for u in n.users if u not in inside]
    seen = set()
    while frontier:
        cur = frontier.pop()
        if cur in inside:
            return True
        if cur in seen:
            continue
        seen.add(cur)
        frontier.extend(u for u in cur.users if u not in seen)
    return False


class SubgraphMatcher:
    """Match ``pattern`` (a :class:`~ember.fx.Graph`) against other graphs.

    Args:
        pattern: the graph to look for.
        match_output: also require the pattern's output node to match the
            graph's output (the pattern then must end the graph).
        match_placeholder: placeholders must match placeholders instead of
            being wildcards.
        remove_overlapping_matches: keep only the first of overlapping matches.
        ignore_literals: literal arguments always match (wildcards) instead of
            having to be equal.
    """

    def __init__(
        self,
        pattern: Graph,
        match_output: bool = False,
        match_placeholder: bool = False,
        remove_overlapping_matches: bool = True,
        ignore_literals: bool = False,
    ) -> None:
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        self.ignore_literals = ignore_literals

        if len(pattern.nodes) == 0:
            raise ValueError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in pattern.nodes:
            if node.op != "output" and not node.is_impure() and len(node.users) == 0:
                raise AssertionError(
                    "SubgraphMatcher cannot be initialized with an pattern with dead code"
                )

        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        output_node = next(iter(reversed(pattern.nodes)))
        #: the pattern nodes whose values the pattern returns
        self.pattern_returning_nodes: List[Node] = output_node.all_input_nodes
        if match_output:
            self.pattern_anchors: List[Node] = [output_node]
        else:
            # a node read only by the output is a sink of the pattern
            self.pattern_anchors = [n for n in output_node.all_input_nodes if len(n.users) == 1]

    # -- node comparison -----------------------------------------------------
    def _match_attributes(self, pn: Node, gn: Node) -> bool:
        """Two ``get_attr`` nodes match when both fetch tensors (values are
        not compared: a pattern's constants stand for any tensor)."""
        if not isinstance(pn.target, str) or not isinstance(gn.target, str):
            raise AssertionError(f"get_attr targets must be strings, got {pn.target!r} and {gn.target!r}")
        pmod, gmod = pn.graph.owning_module, gn.graph.owning_module
        if pmod is None or gmod is None:
            raise AssertionError(
                "matching get_attr nodes needs both graphs to belong to a GraphModule "
                "(graph.owning_module is None)"
            )
        pv = _get_attr_value(pmod, pn.target)
        gv = _get_attr_value(gmod, gn.target)
        if type(pv) is not type(gv):
            return False
        Tensor = _tensor_class()
        if Tensor is not None and isinstance(pv, Tensor):
            return isinstance(gv, Tensor)
        raise RuntimeError(f"Unsupported type {pv} when matching attributes")

    def _nodes_are_equal(self, pn: Node, gn: Node, node_name_match: str = "") -> bool:
        if not self.match_placeholder and pn.op == "placeholder":
            return True  # a wildcard
        if node_name_match and node_name_match in gn.name:
            return True
        if pn.op != gn.op:
            return False
        if pn.op in ("placeholder", "output"):
            return True
        if pn.op == "get_attr":
            return self._match_attributes(pn, gn)
        return pn.target == gn.target

    def _is_contained(self, nodes_map: Dict[Node, Any]) -> bool:
        """Only placeholders and returned nodes may be read from outside."""
        inner = {gn: pn for pn, gn in nodes_map.items() if pn.op != "placeholder"}
        for gn, pn in inner.items():
            if pn in self.pattern_returning_nodes:
                continue
            for user in gn.users:
                if user not in inner:
                    return False
        return True

    def _remove_overlapping_matches(self, matches: List[InternalMatch]) -> List[InternalMatch]:
        kept: List[InternalMatch] = []
        taken = set()
        for m in matches:
            inner = [gn for pn, gn in m.nodes_map.items() if pn.op not in ("placeholder", "output")]
            if any(gn in taken for gn in inner):
                continue
            kept.append(m)
            taken.update(inner)
        return kept

    def _match_literals(self, pn: Any, gn: Any, match: InternalMatch) -> bool:
        p_node, g_node = isinstance(pn, Node), isinstance(gn, Node)
        if p_node and g_node:
            raise AssertionError("pn and gn cannot both be Node")
        if p_node:
            # a placeholder may stand for a literal; it must be the same
            # literal everywhere the placeholder is used
            if pn.op != "placeholder":
                return False
            if pn in match.nodes_map:
                return match.nodes_map[pn] == gn
            match.nodes_map[pn] = gn
            return True
        if g_node:
            return False
        return type(gn) is type(pn) and gn == pn

    def _match_args(self, pargs: Sequence[Any], gargs: Sequence[Any], match: InternalMatch) -> bool:
        if len(pargs) != len(gargs):
            return False
        for a1, a2 in zip(pargs, gargs):
            if isinstance(a1, Node) and isinstance(a2, Node):
                ok = self._match_nodes(a1, a2, match)
            elif isinstance(a1, (list, tuple)) and isinstance(a2, (list, tuple)):
                ok = self._match_args(a1, a2, match)
            else:
                ok = self._match_literals(a1, a2, match) or self.ignore_literals
            if not ok:
                return False
        return True

    def _match_nodes(self, pn: Node, gn: Node, match: InternalMatch, node_name_match: str = "") -> bool:
        """Does the pattern rooted (upwards) at ``pn`` match at ``gn``?
        Extends ``match.nodes_map`` as it goes; on failure the caller
        discards ``match``."""
        logger.info("  matching %s to %s", pn, gn)
        if not (isinstance(pn, Node) and isinstance(gn, Node)):
            raise AssertionError(f"pn and gn must be Node, pn: {pn}, gn: {gn}")
        if pn in match.nodes_map:
            return match.nodes_map[pn] == gn
        # one graph node plays at most one pattern node
        if any(v is gn for v in match.nodes_map.values()):
            return False
        if not self._nodes_are_equal(pn, gn, node_name_match):
            return False
        match.nodes_map[pn] = gn
        if pn.op == "placeholder":
            return True
        # compare arguments positionally (kwargs by their key order)
        if len(pn.args) != len(gn.args) or list(pn.kwargs) != list(gn.kwargs):
            return False
        pargs = list(pn.args) + list(pn.kwargs.values())
        gargs = list(gn.args) + list(gn.kwargs.values())
        return self._match_args(pargs, gargs, match)

    # -- the search -----------------------------------------------------------
    def match(self, graph: Graph, node_name_match: str = "") -> List[InternalMatch]:
        """All matches of the pattern in ``graph``.

        Every returned match is self-contained: apart from the nodes bound to
        placeholders and the returned nodes, no matched node is read from
        outside the match. Candidates for each anchor are tried in graph
        order, so with ``remove_overlapping_matches`` the earliest match wins.
        The backtracking over anchors is exponential in the worst case, which
        small patterns never approach.
        """
        candidates: Dict[Node, List[Node]] = defaultdict(list)
        for anchor in self.pattern_anchors:
            for node in graph.nodes:
                if self._nodes_are_equal(anchor, node, node_name_match):
                    candidates[anchor].append(node)
        candidate_list = list(candidates.items())
        logger.info("Initial match_candidates_list: %s\n", candidate_list)

        matches: List[InternalMatch] = []

        def backtrack(i: int, match: InternalMatch) -> None:
            if i == len(candidate_list):
                match.placeholder_nodes = [match.nodes_map[pn] for pn in self.pattern_placeholder_nodes]
                match.returning_nodes = [match.nodes_map[pn] for pn in self.pattern_returning_nodes]
                matches.append(match)
                logger.info("Found a match: %s\n", match)
                return
            anchor, nodes = candidate_list[i]
            saved = copy.copy(match)
            for node in nodes:
                logger.info("Trying to match anchor %s to %s", anchor, node)
                if self._match_nodes(anchor, node, match, node_name_match):
                    backtrack(i + 1, match)
                else:
                    logger.info("Failed to match anchor %s to %s\n", anchor, node)
                match = copy.copy(saved)

        if candidate_list:
            backtrack(0, InternalMatch(anchors=self.pattern_anchors))

        matches = [m for m in matches if self._is_contained(m.nodes_map)]
        matches = [
            m
            for m in matches
            if not _forms_cycle([gn for pn, gn in m.nodes_map.items() if pn.op not in ("placeholder", "output")])
        ]
        if self.remove_overlapping_matches:
            matches = self._remove_overlapping_matches(matches)
        logger.info("Matches returned: %s", matches)
        return matches
