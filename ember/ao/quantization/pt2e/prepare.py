"""Observer insertion for the PT2E flow (``torch.ao.quantization.pt2e.prepare``).

Every annotated input edge ``(arg, node)`` and annotated output ``node`` gets a quantization
spec. Edges and nodes are grouped (union-find) so that each group shares one observer:

* a :class:`SharedQuantizationSpec` joins its edge/node to the one it names;
* with ``allow_implicit_sharing`` (the default), an input edge ``(arg, node)`` joins the
  other annotated edges out of ``arg`` and ``arg``'s own output when their (unwrapped) specs are
  equal -- the order (other users first, then the producer's output) is torch's.

Groups get their observer from the first spec seen (in annotation order); observers are
inserted as ``activation_post_process_<i>`` submodules right after the value they observe, an
observer already inserted for the same value being reused.
"""
from __future__ import annotations

from typing import Any, Dict

from ember.fx import GraphModule, Node

from ..fake_quantize import FakeQuantizeBase, FixedQParamsFakeQuantize
from ..observer import FixedQParamsObserver, ObserverBase, _PartialWrapper
from ..quantizer.quantizer import (DerivedQuantizationSpec, FixedQParamsQuantizationSpec, QuantizationSpec,
                                   SharedQuantizationSpec)

__all__ = ["prepare"]

_KEY = "quantization_annotation"


def _edge_or_node_to_qspec(model) -> Dict[Any, Any]:
    out: Dict[Any, Any] = {}
    for n in model.graph.nodes:
        ann = n.meta.get(_KEY)
        if ann is None:
            continue
        for inp, qspec in ann.input_qspec_map.items():
            out[(inp, n)] = qspec
        if ann.output_qspec is not None:
            out[n] = ann.output_qspec
    return out


def _find_root(x, shared):
    parent = shared[x]
    if parent == x:
        return x
    root = _find_root(parent, shared)
    shared[x] = root
    return root


def _union(parent, child, shared):
    shared[_find_root(child, shared)] = _find_root(parent, shared)


def _update_shared_with(child, qspec, shared):
    if isinstance(qspec, SharedQuantizationSpec):
        if qspec.edge_or_node not in shared:
            raise ValueError(f"SharedQuantizationSpec refers to {qspec.edge_or_node}, which has no annotation")
        _union(qspec.edge_or_node, child, shared)


def _unwrap(qspec, to_qspec, seen=None):
    seen = set() if seen is None else seen
    while isinstance(qspec, SharedQuantizationSpec):
        key = qspec.edge_or_node
        if key in seen or key not in to_qspec:
            return qspec
        seen.add(key)
        qspec = to_qspec[key]
    return qspec


def _union_if_equal(a, b, to_qspec, shared):
    qa = _unwrap(to_qspec.get(a), to_qspec)
    qb = _unwrap(to_qspec.get(b), to_qspec)
    if qa is not None and qa == qb:
        _union(a, b, shared)


def _group_ids(to_qspec):
    shared = {k: k for k in to_qspec}
    for key, qspec in to_qspec.items():
        if isinstance(key, Node):
            _update_shared_with(key, qspec, shared)
            continue
        arg, n = key
        if n.meta[_KEY].allow_implicit_sharing:
            for user in arg.users:
                if user is n:
                    continue
                if (arg, user) in to_qspec:
                    _union_if_equal((arg, user), key, to_qspec, shared)
            if arg in to_qspec:
                _union_if_equal(arg, key, to_qspec, shared)
        _update_shared_with(key, qspec, shared)
    ids: Dict[Any, int] = {}
    out: Dict[Any, int] = {}
    for key in shared:
        root = _find_root(key, shared)
        if root not in ids:
            ids[root] = len(ids)
        out[key] = ids[root]
    return out


def _observer_kwargs(qspec):
    return {"dtype": qspec.dtype, "quant_min": qspec.quant_min, "quant_max": qspec.quant_max,
            "qscheme": qspec.qscheme, "ch_axis": getattr(qspec, "ch_axis", None), "is_dynamic": qspec.is_dynamic}


def _create(qspec, obs_map, is_qat):
    if qspec is None:
        return None
    if isinstance(qspec, SharedQuantizationSpec):
        if qspec.edge_or_node not in obs_map:
            raise ValueError(f"please make sure only refer to edge or node that has observer/fake_quant inserted: "
                             f"'{qspec.edge_or_node}' not in\n{obs_map.keys()}")
        return obs_map[qspec.edge_or_node]
    if isinstance(qspec, DerivedQuantizationSpec):
        from ._derived import DerivedObserverOrFakeQuantize
        return DerivedObserverOrFakeQuantize(
            obs_or_fqs=[obs_map[k] for k in qspec.derived_from], derive_qparams_fn=qspec.derive_qparams_fn,
            dtype=qspec.dtype, quant_min=qspec.quant_min, quant_max=qspec.quant_max, qscheme=qspec.qscheme,
            ch_axis=qspec.ch_axis)
    if isinstance(qspec, FixedQParamsQuantizationSpec):
        kw = _observer_kwargs(qspec)
        kw.pop("ch_axis")
        ctr = FixedQParamsObserver.with_args(scale=qspec.scale, zero_point=qspec.zero_point, **kw)
        return FixedQParamsFakeQuantize.with_args(observer=ctr)() if is_qat else ctr()
    if not isinstance(qspec, QuantizationSpec):
        raise TypeError(f"unsupported quantization spec type {type(qspec).__name__}")
    ctr = qspec.observer_or_fake_quant_ctr
    kw = _observer_kwargs(qspec)
    cls = ctr.p.func if isinstance(ctr, _PartialWrapper) else ctr
    while isinstance(cls, _PartialWrapper):
        cls = cls.p.func
    if "PerChannel" not in getattr(cls, "__name__", ""):
        kw.pop("ch_axis")
    return ctr.with_args(**kw)()


def _obs_map(group_ids, to_qspec, is_qat):
    obs_map: Dict[Any, Any] = {}
    by_group: Dict[int, Any] = {}
    for key, qspec in to_qspec.items():
        gid = group_ids[key]
        if gid not in by_group:
            by_group[gid] = _create(qspec, obs_map, is_qat)
        obs_map[key] = by_group[gid]
    return obs_map


def _is_obs_node(n, modules):
    return (isinstance(n, Node) and n.op == "call_module"
            and isinstance(modules.get(n.target), (ObserverBase, FakeQuantizeBase)))


def _insert(node, obs, model, modules):
    i = 0
    while hasattr(model, f"activation_post_process_{i}"):
        i += 1
    name = f"activation_post_process_{i}"
    model.add_module(name, obs)
    modules[name] = obs
    with model.graph.inserting_after(node):
        new = model.graph.create_node("call_module", name, (node,), {})
    if "val" in node.meta:
        new.meta["val"] = node.meta["val"]
    return new


def _input_observer(node, arg, model, modules, obs_map):
    if isinstance(arg, (list, tuple)):
        return type(arg)(_input_observer(node, a, model, modules, obs_map) for a in arg)
    if not isinstance(arg, Node):
        return arg
    original = arg
    while _is_obs_node(original, modules):
        original = original.args[0]
    edge = (original, node)
    obs = obs_map.get(edge)
    if obs is None:
        return arg
    out_obs = obs_map.get(original)
    if out_obs is not None and out_obs is obs:
        return arg
    for maybe in arg.users:
        if _is_obs_node(maybe, modules) and modules[maybe.target] is obs:
            return maybe
    return _insert(arg, obs, model, modules)


def _observe_node(node, model, modules, obs_map):
    if node.meta.get(_KEY) is None:
        return
    node.args = tuple(_input_observer(node, a, model, modules, obs_map) for a in node.args)
    node.kwargs = {k: _input_observer(node, v, model, modules, obs_map) for k, v in node.kwargs.items()}
    val = node.meta.get("val")
    from ember.tensor import Tensor
    if not isinstance(val, Tensor) or node not in obs_map or obs_map[node] is None:
        return
    obs_node = _insert(node, obs_map[node], model, modules)
    for user in list(node.users):
        if user is not obs_node:
            user.replace_input_with(node, obs_node)


def prepare(model: GraphModule, is_qat: bool, obs_or_fq_callback=None) -> GraphModule:
    nodes = list(model.graph.nodes)
    to_qspec = _edge_or_node_to_qspec(model)
    group_ids = _group_ids(to_qspec)
    obs_map = _obs_map(group_ids, to_qspec, is_qat)
    if obs_or_fq_callback is not None:
        obs_or_fq_callback(model, obs_map)
    modules = dict(model.named_modules(remove_duplicate=False))
    for node in nodes:
        _observe_node(node, model, modules, obs_map)
    model.graph.lint()
    model.recompile()
    return model
