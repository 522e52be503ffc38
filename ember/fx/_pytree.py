"""Flattening a value to the leaves of a given pytree structure (torch.fx._pytree's name).

Why separate from :func:`ember.utils._pytree.tree_flatten`: code generated for a
graph traced with ``PH`` in ``concrete_args`` must split each call's arguments
exactly as the trace did -- by the *recorded* spec (dict entries by the spec's
keys), not by whatever structure the new value has -- and fail loudly when the
value does not have that structure.
"""

from __future__ import annotations

import collections
from typing import Any, List

__all__ = ["tree_flatten_spec"]


def tree_flatten_spec(pytree: Any, spec: Any, exact_structural_match: bool = False) -> List[Any]:
    """The leaves of ``pytree`` at the positions of ``spec``'s leaves.

    As in torch.fx, a tuple position accepts any sequence (the generated code
    passes its arguments as a list) and a dict position reads the spec's keys
    (extra keys are ignored). With ``exact_structural_match`` the node types
    and sizes must be exactly the spec's. Raises ``ValueError`` when the
    value lacks the structure (wrong type, too short, a missing key)."""
    from ember.utils import _pytree as pt

    if spec.is_leaf():
        return [pytree]
    kind = spec.type
    if exact_structural_match:
        have = pt._node_kind(pytree)
        if have is not kind:
            raise ValueError(f"Node type mismatch; expected {kind}, but got {type(pytree)}.")
    if kind in (tuple, list, collections.deque) or kind is collections.namedtuple:
        if not isinstance(pytree, (list, tuple, collections.deque)) or len(pytree) < spec.num_children:
            raise ValueError(f"expected a sequence of {spec.num_children} items for {spec}, got {pytree!r}")
        if exact_structural_match and len(pytree) != spec.num_children:
            raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got {len(pytree)}.")
        children = [pytree[i] for i in range(spec.num_children)]
    elif kind in (dict, collections.OrderedDict, collections.defaultdict):
        keys = spec.context[1] if kind is collections.defaultdict else spec.context
        missing = [k for k in keys if k not in pytree]
        if missing:
            raise ValueError(f"Node keys mismatch; missing key(s): {set(missing)}.")
        if exact_structural_match and len(pytree) != len(keys):
            raise ValueError(f"Node keys mismatch; extra key(s): {set(pytree) - set(keys)}.")
        children = [pytree[k] for k in keys]
    else:
        have = pt._node_kind(pytree)
        if have is not kind:
            raise ValueError(f"Node type mismatch; expected {kind}, but got {type(pytree)}.")
        children, _ = pt._flatten_node(kind, pytree)
    out: List[Any] = []
    for child_spec, child in zip(spec.children_specs, children):
        out.extend(tree_flatten_spec(child, child_spec, exact_structural_match))
    return out
