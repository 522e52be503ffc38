"""What ``prepare_fx`` hands ``convert_fx``: the matched quantizable patterns (their nodes,
kind and qconfig), each node's qconfig and scope, and the options prepare was called with,
kept in the observed GraphModule's ``meta`` (copied with it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATE_KEY = "_observed_graph_module_attrs"


@dataclass
class Match:
    """One quantizable pattern instance: ``nodes`` in execution order (the root first), its
    ``kind`` (weighted_module, weighted_function, binary, cat, share, fixed, module_own,
    info), the qconfig, and whether the activation is quantized dynamically."""
    nodes: list
    kind: str
    qconfig: Any
    dynamic: bool = False
    weight_index: int | None = None
    bias_index: int | None = None
    relu: bool = False

    @property
    def root(self):
        return self.nodes[0]

    @property
    def last(self):
        return self.nodes[-1]


@dataclass
class ObservedState:
    node_name_to_qconfig: dict
    node_name_to_scope: dict
    matches: dict                   # root node name -> Match (Match.nodes: node names)
    qconfig_mapping: Any
    backend_config: Any
    prepare_custom_config: Any
    is_qat: bool
    observed_node_names: set = field(default_factory=set)
    shared_observer_names: dict = field(default_factory=dict)


def get_state(gm):
    state = getattr(gm, "meta", {}).get(STATE_KEY)
    if state is None:
        raise ValueError("ember.ao.quantization.quantize_fx: convert_fx expects the GraphModule prepare_fx / "
                         f"prepare_qat_fx returned (an ObservedGraphModule), got {type(gm).__name__} without "
                         "observed-model state")
    return state
