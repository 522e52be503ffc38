"""Inference-time graph rewrites (``torch.fx.experimental.optimization``).

Why: in eval mode a BatchNorm after a convolution or linear layer is an affine
map with frozen statistics, so it can be folded into that layer's weight and
bias -- one op instead of two, same result. Dropout is the identity in eval
mode and can be dropped from the graph altogether. Both work on the
symbolically traced graph so the user's module class is untouched.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, List, Tuple

from .. import symbolic_trace
from ..interpreter import Transformer
from ..node import Node

__all__ = ["matches_module_pattern", "replace_node_module", "fuse", "remove_dropout", "extract_subgraph"]


def _parent_name(target: str) -> Tuple[str, str]:
    """``'a.b.c'`` -> ``('a.b', 'c')``."""
    *parent, name = target.rsplit(".", 1)
    return (parent[0] if parent else ""), name


def matches_module_pattern(pattern: Iterable[type], node: Node, modules: Dict[str, Any]) -> bool:
    """Whether ``node`` and its first argument call submodules of exactly the
    types in ``pattern`` (``(first argument's type, node's type)``)."""
    if len(node.args) == 0:
        return False
    for expected_type, current in zip(pattern, (node.args[0], node)):
        if not isinstance(current, Node) or current.op != "call_module":
            return False
        if not isinstance(current.target, str) or current.target not in modules:
            return False
        if type(modules[current.target]) is not expected_type:
            return False
    return True


def replace_node_module(node: Node, modules: Dict[str, Any], new_module: Any) -> None:
    """Install ``new_module`` at ``node.target`` (in ``modules`` and in the module tree)."""
    if not isinstance(node.target, str):
        raise AssertionError(f"Expected str target, got {type(node.target)}")
    parent_name, name = _parent_name(node.target)
    modules[node.target] = new_module
    setattr(modules[parent_name], name, new_module)


def fuse(model: Any, inplace: bool = False, no_trace: bool = False) -> Any:
    """Fold each BatchNorm that directly follows a Conv1d/2d/3d or Linear
    (and is that layer's only user) into the layer, for inference.

    Returns a GraphModule; ``model`` is deep-copied first unless ``inplace``.
    ``no_trace`` skips tracing when ``model`` already is a GraphModule. Both
    layers must be in eval mode (the fusion helpers raise otherwise).
    """
    from ... import nn
    from ...nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval
    from ..graph_module import GraphModule

    patterns = [
        (nn.Conv1d, nn.BatchNorm1d),
        (nn.Conv2d, nn.BatchNorm2d),
        (nn.Conv3d, nn.BatchNorm3d),
        (nn.Linear, nn.BatchNorm1d),
    ]
    if not inplace:
        model = copy.deepcopy(model)
    fx_model = model if (no_trace and isinstance(model, GraphModule)) else symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    new_graph = copy.deepcopy(fx_model.graph)
    for pattern in patterns:
        for node in new_graph.nodes:
            if not matches_module_pattern(pattern, node, modules):
                continue
            if len(node.args[0].users) > 1:  # the layer's raw output is needed elsewhere
                continue
            first = modules[node.args[0].target]
            bn = modules[node.target]
            if not bn.track_running_stats:
                continue
            if pattern[0] is nn.Linear:
                fused = fuse_linear_bn_eval(first, bn)
            else:
                fused = fuse_conv_bn_eval(first, bn)
            replace_node_module(node.args[0], modules, fused)
            node.replace_all_uses_with(node.args[0])
            new_graph.erase_node(node)
    return GraphModule(fx_model, new_graph)


def remove_dropout(model: Any) -> Any:
    """A GraphModule of ``model`` with every ``nn.Dropout`` call replaced by its input."""
    from ...nn import Dropout

    fx_model = symbolic_trace(model)

    class DropoutRemover(Transformer):
        def call_module(self, target, args, kwargs):
            if isinstance(self.submodules[target], Dropout):
                if len(args) != 1:
                    raise AssertionError(f"Expected 1 arg for Dropout, got {len(args)}")
                return args[0]
            return super().call_module(target, args, kwargs)

    return DropoutRemover(fx_model).transform()


def extract_subgraph(orig_module: Any, nodes: List[Node], inputs: List[Node], outputs: List[Node]) -> Any:
    """A GraphModule running ``nodes`` of ``orig_module``'s graph, taking
    ``inputs`` as placeholders and returning the list of ``outputs``."""
    from ..graph import Graph
    from ..graph_module import GraphModule

    new_graph = Graph()
    env: Dict[Node, Node] = {}
    for inp in inputs:
        env[inp] = new_graph.placeholder(inp.name)
    for node in nodes:
        env[node] = new_graph.node_copy(node, lambda x: env[x])
    new_graph.output([env[o] for o in outputs])
    new_graph.lint()
    return GraphModule(orig_module, new_graph)
