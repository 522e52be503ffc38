"""Turn functional ops into their in-place variants where nobody can tell
(``torch.fx.passes.reinplace``).

Why: a functionalized graph (``make_fx``, aot) allocates a fresh tensor for
every op. When the op's first input is a temporary that nothing reads
afterwards -- not a graph input, not an alias of one, not returned, not read
by any later node through any view of its memory -- writing the result into it
(``add`` -> ``add_``) computes the same values without the allocation. The
rules follow torch's: same element count and dtype as the result, no internal
overlap (an expanded tensor), the input passed only once, no later use of its
memory. Later readers of the op's result are pointed at the input it now
writes.

Difference from torch: torch also turns ``*_scatter`` ops back into a view plus
``copy_``; ember's graphs hold no scatter inverses of views, so those nodes are
left as they are.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Set

from ..interpreter import Interpreter
from ..node import Node, map_arg

__all__ = ["reinplace"]


def _is_tensor(x: Any) -> bool:
    from ...tensor import Tensor

    return isinstance(x, Tensor)


def _storage_key(t: Any) -> Any:
    """One key per underlying memory block (fake tensors: their FakeStorage)."""
    data = t._data
    storage = getattr(data, "storage", None)
    if storage is not None:
        return ("fake", id(storage))
    root = data
    while getattr(root, "base", None) is not None and hasattr(root.base, "shape"):
        root = root.base
    return ("np", id(root))


def _has_internal_overlap(t: Any) -> bool:
    stride = t.stride()
    return any(s == 0 and n > 1 for s, n in zip(stride, t.shape))


def _inplace_binding(target: Any) -> Optional[Any]:
    from ...ops._aten_namespace import OpOverload, aten
    if isinstance(target, OpOverload):
        # a user's make_fx graph: ``aten.add.Tensor`` -> ``aten.add_.Tensor`` (same arguments)
        if target.op is None or getattr(target.op, "inplace_variant", None) is None:
            return None
        try:
            ip = getattr(getattr(aten, target._opname + "_"), target._overloadname)
        except AttributeError:
            return None
        return ip if ip._run is not None else None
    op = getattr(target, "_ember_op", None)
    if op is None:
        return None
    ip = getattr(op, "inplace_variant", None)
    if ip is None:
        return None
    binding = getattr(ip, "binding", None)
    return binding if callable(binding) else None


class _ValueRecorder(Interpreter):
    """Runs the graph and remembers every node's value."""

    def __init__(self, gm: Any) -> None:
        super().__init__(gm)
        self.values: Dict[Node, Any] = {}

    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        self.values[n] = out
        return out


def _leaves(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in _leaves(item)]
    if isinstance(x, dict):
        return [leaf for item in x.values() for leaf in _leaves(item)]
    return [x]


def reinplace(gm: Any, *sample_args: Any) -> Any:
    """Rewrite ``gm`` (in place, and return it) so that functional ops whose
    first input is a dead temporary run in place. ``sample_args`` are example
    inputs: the graph is run once on them to learn which values share memory."""
    if not hasattr(gm, "graph"):
        raise TypeError(f"reinplace: gm must be a GraphModule, got {type(gm).__name__}")
    rec = _ValueRecorder(gm)
    rec.run(*sample_args)
    values = rec.values
    order = {n: i for i, n in enumerate(gm.graph.nodes)}

    input_storages = {
        _storage_key(values[n]) for n in gm.graph.nodes if n.op == "placeholder" and _is_tensor(values.get(n))
    }
    storage_to_nodes: Dict[Any, Set[Node]] = {}
    for n in gm.graph.nodes:
        for leaf in _leaves(values.get(n)):
            if _is_tensor(leaf):
                storage_to_nodes.setdefault(_storage_key(leaf), set()).add(n)

    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], Node):
            continue
        inplace = _inplace_binding(node.target)
        if inplace is None:
            continue
        self_arg = node.args[0]
        self_val, out_val = values.get(self_arg), values.get(node)
        if not (_is_tensor(self_val) and _is_tensor(out_val)):
            continue
        if self_val.numel() != out_val.numel() or tuple(self_val.shape) != tuple(out_val.shape):
            continue
        if self_val.dtype != out_val.dtype or _has_internal_overlap(self_val):
            continue
        key = _storage_key(self_val)
        if key in input_storages:
            continue
        if sum(1 for a in node.args if a is self_arg) > 1 or any(v is self_arg for v in node.kwargs.values()):
            continue
        aliases = storage_to_nodes.get(key, set())
        later = {u for a in aliases for u in a.users if order[u] > order[node]}
        if later:
            continue
        node.target = inplace
        merged = aliases | storage_to_nodes.get(_storage_key(out_val), set())
        storage_to_nodes[key] = merged
        storage_to_nodes[_storage_key(out_val)] = merged
        for user in [u for u in node.users if order[u] > order[node]]:
            user.args = map_arg(user.args, lambda a: self_arg if a is node else a)
            user.kwargs = map_arg(user.kwargs, lambda a: self_arg if a is node else a)
    gm.recompile()
    return gm
