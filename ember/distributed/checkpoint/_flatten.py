"""Nested state_dicts to flat ``{"a.b.0": leaf}`` maps and back, the way torch's DCP
traverses them: dicts (any Mapping) always descend, with ``str(key)``; a list descends only when
it holds a tensor or a container that does; anything else (ints, strings, tuples, a list of
plain values) is one leaf, stored as an object."""
from __future__ import annotations

from collections.abc import Mapping

from ember.tensor import Tensor


def _is_leaf(value):
    if isinstance(value, Mapping):
        return False
    if not isinstance(value, list):
        return True
    for entry in value:
        if isinstance(entry, Tensor):
            return False
        if isinstance(entry, (Mapping, list)) and not _is_leaf(entry):
            return False
    return True


def flatten(state_dict):
    """(``{fqn: leaf}``, ``{fqn: path}``, ``{fqn: saved_path}``): ``path`` holds the real keys (for
    writing back into this very dict), ``saved_path`` torch's form of it (``str`` of dict keys,
    ``int`` list indices: the metadata's ``planner_data``), ``fqn`` joins them with dots."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"ember.distributed.checkpoint: state_dict must be a dict, got {type(state_dict).__name__}")
    flat, paths, saved = {}, {}, {}

    def visit(path, spath, value):
        if isinstance(value, Mapping):
            for k, v in value.items():
                visit(path + (k,), spath + (str(k),), v)
        elif _is_leaf(value):
            fqn = ".".join(str(p) for p in path)
            if fqn in flat:
                raise ValueError(f"ember.distributed.checkpoint: two entries of the state_dict flatten to the same key "
                                 f"{fqn!r} (paths {paths[fqn]} and {path})")
            flat[fqn] = value
            paths[fqn] = path
            saved[fqn] = spath
        else:
            for i, v in enumerate(value):
                visit(path + (i,), spath + (i,), v)

    for k, v in state_dict.items():
        visit((k,), (str(k),), v)
    return flat, paths, saved


def set_element(root, path, value):
    node = root
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
