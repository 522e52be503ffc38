"""``ObservedGraphModule``: the GraphModule ``prepare_fx`` returns -- the traced model with
observers in, carrying what ``convert_fx`` needs in ``meta``."""
from __future__ import annotations

import copy

from ember.fx import GraphModule
from ember.nn import Module

from ._state import STATE_KEY

__all__ = ["ObservedGraphModule", "ObservedStandaloneGraphModule"]


class ObservedGraphModule(GraphModule):
    """A GraphModule with observers (or fake quantizers) in its graph, made by ``prepare_fx`` /
    ``prepare_qat_fx``; its ``preserved_attr_names`` came along from the float model."""

    def __init__(self, root, graph, preserved_attr_names=()):
        super().__init__(root, graph, "GraphModule")
        self.preserved_attr_names = set(preserved_attr_names)
        for attr in self.preserved_attr_names:
            if hasattr(root, attr):
                setattr(self, attr, getattr(root, attr))

    def __deepcopy__(self, memo):
        state = copy.deepcopy(self.__dict__, memo)
        holder = Module.__new__(Module)
        holder.__dict__.update(state)
        cls = type(self)
        while cls.__dict__.get("_fx_per_instance_class", False):     # (the per-instance subclass's base)
            cls = cls.__bases__[0]
        new = cls(holder, state["_graph"], state.get("preserved_attr_names", ()))
        object.__setattr__(new, "meta", state.get("meta", {}))
        memo[id(self)] = new
        return new


class ObservedStandaloneGraphModule(ObservedGraphModule):
    """(Standalone modules are not supported by ember's flow; the class exists for isinstance checks.)"""


def is_observed_module(module):
    return STATE_KEY in getattr(module, "meta", {})
