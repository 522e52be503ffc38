"""Which qconfig each node of a traced model gets from a ``QConfigMapping``, by torch's rules:
a module call by its type, then its name (regex, exact -- a parent's name counts), then its
position among same-type siblings; a function call by its function, then the names of the
module it was called in, then its position; a method call by its name, then its module's
names. Also: the qconfig a fused module inherits from its parts' types."""
from __future__ import annotations

import re
from collections import defaultdict

from ..qconfig import qconfig_equals

__all__ = ["generate_node_name_to_qconfig", "update_qconfig_for_fusion"]


def _parent_name(target):
    head, _, tail = target.rpartition(".")
    return head, tail


def _same_function(key, target):
    """Whether a mapping key names the function ember's tracer recorded: the same object, or the
    same ember op under another spelling (``F.relu`` / ``ember.relu``; ``ember.cat``, whose entry
    wrapper the tracer records as the op itself)."""
    if key is target:
        return True
    if not (callable(key) and callable(target)) or isinstance(key, type) or isinstance(target, type):
        return False
    from ..backend_config._common_patterns import cat_functions
    cats = cat_functions()
    if any(key is c for c in cats) and any(target is c for c in cats):
        return True
    mods = (getattr(key, "__module__", None) or "", getattr(target, "__module__", None) or "")
    return (all(m == "ember" or m.startswith("ember.") for m in mods)
            and getattr(key, "__name__", None) == getattr(target, "__name__", None))


def _lookup(table, key, fallback):
    """``table[key]``, a function key also matching its other ember spellings."""
    try:
        if key in table:
            return table[key]
    except TypeError:
        pass
    if callable(key) and not isinstance(key, type):
        for k, v in table.items():
            if _same_function(k, key):
                return v
    return fallback


def _object_type_qconfig(mapping, object_type, fallback):
    return _lookup(mapping.object_type_qconfigs, object_type, fallback)


def _module_name_regex_qconfig(mapping, module_name, fallback):
    for regex, qconfig in mapping.module_name_regex_qconfigs.items():
        if re.match(regex, module_name):
            return qconfig
    return fallback


def _module_name_qconfig(mapping, module_name, fallback):
    """The qconfig set for ``module_name`` or its nearest named ancestor."""
    while module_name != "":
        if module_name in mapping.module_name_qconfigs:
            return mapping.module_name_qconfigs[module_name]
        module_name, _ = _parent_name(module_name)
    return fallback


def _type_or_name_qconfig(mapping, module_type, module_name, fallback):
    qconfig = _object_type_qconfig(mapping, module_type, fallback)
    qconfig = _module_name_regex_qconfig(mapping, module_name, qconfig)
    return _module_name_qconfig(mapping, module_name, qconfig)


def _order_qconfig(mapping, module_path, object_type, index, fallback):
    for (path, kind, i), qconfig in mapping.module_name_object_type_order_qconfigs.items():
        if path == module_path and i == index and (kind == object_type if isinstance(kind, (str, type))
                                                   else _same_function(kind, object_type)):
            return qconfig
    return fallback


def _check_qconfig(qconfig, where):
    from ..qconfig import QConfig
    if qconfig is not None and not isinstance(qconfig, QConfig):
        raise TypeError(f"ember.ao.quantization.quantize_fx: the qconfig for {where} must be a QConfig or None, "
                        f"got {type(qconfig).__name__}")
    return qconfig


def generate_node_name_to_qconfig(modules, graph, mapping, node_name_to_scope, is_observer):
    """node name -> qconfig (None: left in float)."""
    out = {}
    counters = defaultdict(lambda: defaultdict(int))
    global_qconfig = mapping.global_qconfig
    for node in graph.nodes:
        qconfig = None
        if node.op == "get_attr":
            parent, _ = _parent_name(node.target)
            qconfig = _type_or_name_qconfig(mapping, type(modules.get(parent)), parent, global_qconfig)
        elif node.op == "call_function":
            module_path, module_type = node_name_to_scope.get(node.name, ("", None))
            qconfig = _object_type_qconfig(mapping, node.target, global_qconfig)
            qconfig = _type_or_name_qconfig(mapping, module_type, module_path, qconfig)
            index = counters[module_path][node.target]
            counters[module_path][node.target] += 1
            qconfig = _order_qconfig(mapping, module_path, node.target, index, qconfig)
        elif node.op == "call_method":
            module_path, module_type = node_name_to_scope.get(node.name, ("", None))
            qconfig = _object_type_qconfig(mapping, node.target, global_qconfig)
            qconfig = _type_or_name_qconfig(mapping, module_type, module_path, qconfig)
        elif node.op == "call_module":
            mod = modules[node.target]
            if is_observer(mod):
                continue
            qconfig = _type_or_name_qconfig(mapping, type(mod), node.target, global_qconfig)
            parent, _ = _parent_name(node.target)
            index = counters[parent][type(mod)]
            counters[parent][type(mod)] += 1
            qconfig = _order_qconfig(mapping, parent, type(mod), index, qconfig)
        out[node.name] = _check_qconfig(qconfig, f"node {node.name}")
    return out


def update_qconfig_for_fusion(gm, mapping):
    """A fused module takes the qconfig its first part's type was given; the parts must agree
    (torch's LookupError otherwise). Edits ``mapping`` (a copy the caller owns)."""
    from ...nn.intrinsic import _FusedModule
    by_type = mapping.object_type_qconfigs
    if not by_type:
        return mapping
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op != "call_module" or node.target not in modules:
            continue
        fused = modules[node.target]
        if not isinstance(fused, _FusedModule):
            continue
        parts = list(fused._modules.values())
        fused_qconfig = by_type.get(type(parts[0]), None)
        for part in parts[1:]:
            if not qconfig_equals(by_type.get(type(part), None), fused_qconfig):
                raise LookupError("During fusion, we need to specify the same qconfigs for all module types in "
                                  f"{type(fused)} offending type: {type(part)}")
        if fused_qconfig is not None:
            by_type[type(fused)] = fused_qconfig
    return mapping
