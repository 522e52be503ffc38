"""Observers to quantize / dequantize operators (torch's ``convert_pt2e`` with the decomposed
reference representation).

Each observer (or fake quantizer) node becomes ``quantize -> dequantize`` with the qparams its
``calculate_qparams()`` returns: ``quantized_decomposed.quantize_per_tensor / dequantize_per_tensor``
with the scale and zero point as Python numbers, or ``quantize_per_channel /
dequantize_per_channel`` reading ``_scale_<i>`` / ``_zero_point_<i>`` buffers. A dequantize read
by several nodes is duplicated per user (torch's ``DuplicateDQPass``), and with
``fold_quantize`` a quantize of a constant (a weight) is evaluated once and stored as an integer
``_frozen_param<i>`` buffer.
"""
from __future__ import annotations

import ember
from ember.fx import GraphModule, Node

from ..fake_quantize import FakeQuantizeBase
from ..observer import ObserverBase
from ._decomposed import ops as _qops

__all__ = ["convert"]


def _attr_name(gm, prefix):
    i = 0
    while hasattr(gm, f"{prefix}{i}"):
        i += 1
    return f"{prefix}{i}"


def _per_channel(qscheme):
    return qscheme in (ember.per_channel_affine, ember.per_channel_symmetric, ember.per_channel_affine_float_qparams)


def _replace_observer(gm: GraphModule, node: Node, obs) -> None:
    graph = gm.graph
    x = node.args[0]
    dtype = obs.dtype
    if dtype in (ember.float32, ember.float16, ember.bfloat16, ember.float64) or \
            dtype not in (ember.uint8, ember.int8, ember.int16, ember.int32, ember.quint8, ember.qint8, ember.qint32):
        if dtype in (ember.float32, ember.float16, ember.bfloat16, ember.float64):
            node.replace_all_uses_with(x)
            graph.erase_node(node)
            return
        raise NotImplementedError(f"convert_pt2e: observers of dtype {dtype} are not supported")
    int_dtype = {ember.quint8: ember.uint8, ember.qint8: ember.int8, ember.qint32: ember.int32}.get(dtype, dtype)
    if getattr(obs, "is_dynamic", False):
        _replace_dynamic_observer(gm, node, obs, int_dtype)
        return
    scale, zero_point = obs.calculate_qparams()
    qmin, qmax = int(obs.quant_min), int(obs.quant_max)
    q = _qops()
    qscheme = obs.qscheme
    with graph.inserting_before(node):
        if _per_channel(qscheme):
            axis = int(obs.ch_axis)
            sname = _attr_name(gm, "_scale_")
            gm.register_buffer(sname, scale.detach().clone())
            zname = _attr_name(gm, "_zero_point_")
            gm.register_buffer(zname, zero_point.detach().clone())
            s_node = graph.get_attr(sname)
            z_node = graph.get_attr(zname)
            s_node.meta["val"] = getattr(gm, sname)
            z_node.meta["val"] = getattr(gm, zname)
            qn = graph.call_function(q.quantize_per_channel.default, (x, s_node, z_node, axis, qmin, qmax, int_dtype))
            dq = graph.call_function(q.dequantize_per_channel.default,
                                     (qn, s_node, z_node, axis, qmin, qmax, int_dtype))
        else:
            s, z = float(scale), int(zero_point)
            qn = graph.call_function(q.quantize_per_tensor.default, (x, s, z, qmin, qmax, int_dtype))
            dq = graph.call_function(q.dequantize_per_tensor.default, (qn, s, z, qmin, qmax, int_dtype))
    val = x.meta.get("val") if isinstance(x, Node) else None
    if val is not None:
        pass
        dq.meta["val"] = val
    for k in ("nn_module_stack", "stack_trace"):
        if isinstance(x, Node) and k in x.meta:
            qn.meta[k] = dq.meta[k] = x.meta[k]
    node.replace_all_uses_with(dq)
    graph.erase_node(node)


def _replace_dynamic_observer(gm, node, obs, int_dtype):
    """A dynamic observer: the qparams are chosen from each input at run time
    (``choose_qparams_tensor``, then the tensor-qparams quantize / dequantize)."""
    import operator
    if obs.qscheme not in (ember.per_tensor_affine,):
        raise NotImplementedError(f"convert_pt2e: dynamic quantization with qscheme {obs.qscheme} is not supported")
    if int_dtype not in (ember.uint8, ember.int8):
        raise AssertionError(f"Unsupported dtype in dynamic quantization: {int_dtype}")
    graph = gm.graph
    x = node.args[0]
    q = _qops()
    qmin, qmax = int(obs.quant_min), int(obs.quant_max)
    eps = float(getattr(obs, "eps", 2 ** -23))
    with graph.inserting_before(node):
        ch = graph.call_function(q.choose_qparams_tensor.default, (x, qmin, qmax, eps, int_dtype))
        s = graph.call_function(operator.getitem, (ch, 0))
        z = graph.call_function(operator.getitem, (ch, 1))
        qn = graph.call_function(q.quantize_per_tensor_tensor.default, (x, s, z, qmin, qmax, int_dtype))
        dq = graph.call_function(q.dequantize_per_tensor_tensor.default, (qn, s, z, qmin, qmax, int_dtype))
    if isinstance(x, Node) and "val" in x.meta:
        dq.meta["val"] = x.meta["val"]
    node.replace_all_uses_with(dq)
    graph.erase_node(node)


def _is_dq(n):
    q = _qops()
    return isinstance(n, Node) and n.op == "call_function" and n.target in (
        q.dequantize_per_tensor.default, q.dequantize_per_channel.default, q.dequantize_per_tensor_tensor.default)


def _is_q(n):
    q = _qops()
    return isinstance(n, Node) and n.op == "call_function" and n.target in (
        q.quantize_per_tensor.default, q.quantize_per_channel.default)


def _duplicate_dq(gm: GraphModule) -> None:
    graph = gm.graph
    for node in list(graph.nodes):
        if not _is_dq(node) or len(node.users) <= 1:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_after(node):
                new = graph.node_copy(node)
            user.replace_input_with(node, new)


def _is_constant(n, memo):
    if not isinstance(n, Node):
        return True
    if n in memo:
        return memo[n]
    if n.op == "get_attr":
        r = True
    elif n.op == "call_function" and not _is_q(n):
        r = all(_is_constant(a, memo) for a in n.all_input_nodes) and bool(n.all_input_nodes) and \
            n.target not in (ember.rand, ember.randn, ember.empty)
    else:
        r = False
    memo[n] = r
    return r


def _fold_quantize(gm: GraphModule) -> None:
    """Evaluate every quantize node whose inputs are constants and store its result."""
    from ember.fx import Interpreter  # noqa: F401
    graph = gm.graph
    memo: dict = {}
    for node in list(graph.nodes):
        if not _is_q(node):
            continue
        if not all(_is_constant(a, memo) for a in node.all_input_nodes):
            continue
        value = _evaluate(gm, node, {})
        name = _attr_name(gm, "_frozen_param")
        gm.register_buffer(name, value)
        with graph.inserting_before(node):
            c = graph.get_attr(name)
        c.meta["val"] = value
        node.replace_all_uses_with(c)
        graph.erase_node(node)
    graph.eliminate_dead_code()


def _evaluate(gm, node, cache):
    if node in cache:
        return cache[node]
    if node.op == "get_attr":
        obj = gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        v = obj.detach() if hasattr(obj, "detach") else obj

    else:
        def m(a):
            if isinstance(a, Node):
                return _evaluate(gm, a, cache)
            if isinstance(a, (list, tuple)):
                return type(a)(m(x) for x in a)
            return a
        with ember.no_grad():
            v = node.target(*m(node.args), **{k: m(x) for k, x in node.kwargs.items()})
    cache[node] = v
    return v


def convert(model: GraphModule, fold_quantize: bool = True) -> GraphModule:
    modules = dict(model.named_modules(remove_duplicate=False))
    for node in list(model.graph.nodes):
        if node.op == "call_module" and isinstance(modules.get(node.target), (ObserverBase, FakeQuantizeBase)):
            _replace_observer(model, node, modules[node.target])
    for name, mod in list(model.named_children()):
        if isinstance(mod, (ObserverBase, FakeQuantizeBase)) and name.startswith("activation_post_process_"):
            delattr(model, name)
    _duplicate_dq(model)
    if fold_quantize:
        _fold_quantize(model)
    model.graph.lint()
    model.recompile()
    return model
