"""Recognising operators in the graphs ``prepare_pt2e`` hands to quantizers (exported ember
graphs after ``pt2e._graph.raise_patterns``)."""
from __future__ import annotations

import ember
import ember.nn.functional as F
from ember.fx import Node

__all__ = ["is_op", "module_filter_by_name", "module_filter_by_type", "module_stack_types", "module_stack_names"]

_FUNCTIONAL = {"conv2d": F.conv2d, "linear": F.linear, "max_pool2d": F.max_pool2d, "avg_pool2d": F.avg_pool2d,
               "adaptive_avg_pool2d": F.adaptive_avg_pool2d}


def is_op(n, *names) -> bool:
    """``n`` calls one of the operators ``names`` (``"conv2d"``, ``"linear"``, ``"relu"``, ``"add"``, ...)."""
    if not isinstance(n, Node) or n.op != "call_function":
        return False
    t = n.target
    for name in names:
        f = _FUNCTIONAL.get(name)
        if f is not None:
            if t is f:
                return True
            continue
        if t is getattr(ember, name, None):
            return True
        if getattr(t, "__module__", None) == "ember" and getattr(t, "__name__", None) == name:
            return True
    return False


def _type_str(t):
    return t if isinstance(t, str) else f"{t.__module__}.{t.__qualname__}"


def module_stack_types(n):
    return [_type_str(t) for _, t in (n.meta.get("nn_module_stack") or {}).values()]


def _normalize(path):
    return path[len("L['self']."):] if path.startswith("L['self'].") else path


def module_stack_names(n):
    return [_normalize(p) for p, _ in (n.meta.get("nn_module_stack") or {}).values()]


def module_filter_by_name(name):
    def f(n):
        return name in module_stack_names(n)
    return f


def module_filter_by_type(tp):
    s = _type_str(tp)

    def f(n):
        return s in module_stack_types(n)
    return f
