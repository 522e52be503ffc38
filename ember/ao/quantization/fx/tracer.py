"""``QuantizationTracer``: ember.fx's tracer with the leaves quantization needs -- ember's own
layers, the fused / QAT / observed modules (called whole, never traced into), and the
modules the user marks non-traceable -- and a record of which submodule each node was
traced inside (its *scope*), which the qconfig of a function call and the names of the
quantization parameters ``convert_fx`` stores depend on."""
from __future__ import annotations

from ember.fx import Tracer

__all__ = ["QuantizationTracer", "Scope"]


class Scope:
    """The (qualified name, type) of the module a node was traced inside."""

    def __init__(self, module_path, module_type):
        self.module_path = module_path
        self.module_type = module_type


def _is_quantization_leaf(m):
    """ember.ao modules (fused, QAT, quantized, observers) are single units to quantization."""
    mod = type(m).__module__ or ""
    return mod.startswith("ember.ao.") or mod.startswith("ember.quantization")


class QuantizationTracer(Tracer):
    """Traces with ``skipped_module_names`` / ``skipped_module_classes`` (the non-traceable
    modules of a ``PrepareCustomConfig``) and the quantization modules as leaves."""

    def __init__(self, skipped_module_names, skipped_module_classes):
        super().__init__()
        self.skipped_module_names = list(skipped_module_names)
        self.skipped_module_classes = list(skipped_module_classes)
        self.scope = Scope("", None)
        self.node_name_to_scope = {}

    def is_leaf_module(self, m, module_qualified_name):
        return ((super().is_leaf_module(m, module_qualified_name) or _is_quantization_leaf(m))
                or module_qualified_name in self.skipped_module_names
                or type(m) in self.skipped_module_classes)

    def call_module(self, m, forward, args, kwargs):
        outer = self.scope
        self.scope = Scope(self.path_of_module(m), type(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.scope = outer

    def trace(self, root, concrete_args=None):
        self.scope = Scope("", type(root))
        return super().trace(root, concrete_args)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        self.node_name_to_scope[node.name] = (self.scope.module_path, self.scope.module_type)
        return node
