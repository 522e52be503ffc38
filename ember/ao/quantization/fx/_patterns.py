"""Matching backend patterns against graph nodes: the key a node is looked up by (its module's
type, its function, or its method name) and the chains of single-use nodes a fused pattern
(``(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)``, ``(F.linear, F.relu)``) spans."""
from __future__ import annotations

import builtins

from ..backend_config.backend_config import BackendPatternConfig


def node_key(node, modules):
    """What a node is matched by: its module's class, its function, or its method name
    (``x.shape``: the attribute name, as a tensor-info op); None for the rest."""
    if node.op == "call_module":
        mod = modules.get(node.target)
        return type(mod) if mod is not None else None
    if node.op == "call_function":
        if node.target is builtins.getattr and len(node.args) > 1 and node.args[1] == "shape":
            return "shape"
        return node.target
    if node.op == "call_method":
        return node.target
    return None


def _key_matches(element, key):
    if isinstance(element, str) or isinstance(key, str):
        return element == key
    return element is key


def pattern_configs(backend_config):
    """Each config's pattern as an execution-order chain, longest chains first (so a fused
    pattern wins over its parts)."""
    out = []
    for conf in backend_config.configs:
        if not isinstance(conf, BackendPatternConfig):
            continue
        if conf._root_node_getter is not None or conf._extra_inputs_getter is not None:
            raise NotImplementedError(f"ember.ao.quantization.quantize_fx: backend pattern {conf.pattern!r} with a "
                                      "root_node_getter / extra_inputs_getter is not supported")
        chain = conf._chain()
        if chain:
            out.append((chain, conf))
    out.sort(key=lambda pc: -len(pc[0]))
    return out


def match_chain(node, chain, modules, claimed):
    """The nodes ``node`` -> its only user -> ... matching ``chain`` (each later node taking the
    earlier one as its first argument), or None."""
    nodes = [node]
    if not _key_matches(chain[0], node_key(node, modules)):
        return None
    for element in chain[1:]:
        prev = nodes[-1]
        users = list(prev.users)
        if len(users) != 1:
            return None
        nxt = users[0]
        if nxt in claimed or not nxt.args or nxt.args[0] is not prev:
            return None
        if not _key_matches(element, node_key(nxt, modules)):
            return None
        nodes.append(nxt)
    return nodes
