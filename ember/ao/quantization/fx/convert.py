"""``convert_fx`` / ``convert_to_reference_fx``'s pass over an observed graph.

Reference form: every observer of a quantized dtype becomes quantize -> dequantize with the
observer's qparams (stored as buffers named as torch names them), weighted layers become
reference modules (float op on the quantize-dequantized weight): the graph says in float ops
what the quantized model computes. Lowered form (``convert_fx``): the matched patterns run on
quantized tensors -- quantized modules (the eager ``from_float`` of each, so values match the
eager flow), quantized functions for functional linear / conv / add / mul, and the ops that
keep their input's qparams left as they are on quantized inputs; the observers become
``quantize_per_tensor`` where a float value enters, ``dequantize`` goes where a quantized value
meets a float op or the output."""
from __future__ import annotations

import copy

import ember
from ember.fx import GraphModule, Node

from ...nn import intrinsic as nni
from ..quantization_mappings import get_default_dynamic_quant_module_mappings, get_default_static_quant_module_mappings
from . import _lowered_ops as L
from ._state import STATE_KEY, get_state
from .prepare import is_observer

__all__ = ["convert"]

def _per_channel_schemes():
    return (ember.per_channel_affine, ember.per_channel_symmetric, ember.per_channel_affine_float_qparams)


def _quantized_dtype(dtype):
    return dtype in (ember.quint8, ember.qint8, ember.qint32)


def _engine_reduces_range():
    """torch reduces the range of dynamically quantized activations on its fbgemm / x86
    engines; ember's kernels are x86's."""
    return True


def _get(root, target):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _set_module(root, target, module):
    *parents, last = target.split(".")
    owner = root
    for p in parents:
        owner = getattr(owner, p)
    setattr(owner, last, module)


class _Namer:
    """Buffers for qparams, named ``{module path}{_input}_scale_{i}`` as torch names them."""

    def __init__(self, gm, state):
        self.gm, self.state = gm, state

    def prefix(self, obs_node):
        observed = obs_node.args[0]
        qconfigs, scopes = self.state.node_name_to_qconfig, self.state.node_name_to_scope
        input_only = qconfigs.get(observed.name) is None
        if input_only:
            users = list(obs_node.users)
            first = users[0] if users else None
            for u in users:
                if u.op == "call_function" and u.target in (ember.nn.functional.linear, getattr(ember, "linear", None)):
                    first = u
                    break
            suffix = "_input"
        else:
            first, suffix = observed, ""
        path = scopes.get(first.name, ("", None))[0] if first is not None else ""
        return (path + suffix + "_").replace(".", "_")

    def buffer(self, prefix, value, graph):
        i = 0
        while hasattr(self.gm, f"{prefix}{i}"):
            i += 1
        name = f"{prefix}{i}"
        t = value.detach().clone() if isinstance(value, ember.Tensor) else ember.tensor(value)
        self.gm.register_buffer(name, t)
        return graph.get_attr(name)


def _qparams(observer):
    scale, zero_point = observer.calculate_qparams()
    return scale, zero_point


def _is_obs_node(node, gm):
    return node.op == "call_module" and is_observer(_get(gm, node.target))


def _output_observer(node, gm):
    for u in node.users:
        if _is_obs_node(u, gm):
            return u
    return None


# -- weighted modules --------------------------------------------------------------------------

def _weight_qparams(observer):
    """The ``weight_qparams`` dict reference modules are built from (torch's form): the scheme as an
    affine one (quantized tensors have no symmetric schemes), dtype, scale, zero point, the
    channel axis when per channel, and the observer's range."""
    qscheme = getattr(observer, "qscheme", None)
    out = {"qscheme": qscheme, "dtype": observer.dtype}
    if qscheme in _per_channel_schemes():
        out["axis"] = observer.ch_axis
        if qscheme is ember.per_channel_symmetric:
            qscheme = ember.per_channel_affine
    elif qscheme in (ember.per_tensor_affine, ember.per_tensor_symmetric):
        qscheme = ember.per_tensor_affine
    else:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: weight qscheme {qscheme} in "
                                  "convert_to_reference_fx is not supported")
    out["qscheme"] = qscheme
    out["scale"], out["zero_point"] = observer.calculate_qparams()
    for key in ("quant_min", "quant_max"):
        if hasattr(observer, key):
            out[key] = getattr(observer, key)
    return out


def _reference_module(mod, qconfig):
    """The reference form of a weighted (maybe fused, maybe QAT) module: its float layer on a
    reference module; a fused module keeps its container (``LinearReLU(ref Linear, ReLU)``)."""
    if hasattr(mod, "weight_fake_quant"):           # QAT: its trained fake quantizer holds the weight qparams
        wobs = mod.weight_fake_quant
        float_mod = mod.to_float()
    else:
        wobs, float_mod = qconfig.weight(), mod
    inner = float_mod[0] if isinstance(float_mod, nni._FusedModule) else float_mod
    if not _quantized_dtype(getattr(wobs, "dtype", None)):
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: reference {type(inner).__name__} with "
                                  f"{getattr(wobs, 'dtype', None)} weights (e.g. float16 dynamic quantization) in "
                                  "convert_to_reference_fx is not supported; convert_fx supports it")
    wobs(inner.weight.detach())
    qparams = _weight_qparams(wobs)
    from ...nn.quantized import reference as nnqr
    ref_cls = {ember.nn.Linear: nnqr.Linear, ember.nn.Conv1d: nnqr.Conv1d, ember.nn.Conv2d: nnqr.Conv2d,
               ember.nn.Conv3d: nnqr.Conv3d}.get(type(inner))
    if ref_cls is None:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: no reference module for {type(inner).__name__}"
                                  " is supported")
    ref_mod = ref_cls.from_float(inner, qparams)
    if isinstance(float_mod, nni._FusedModule):
        float_mod[0] = ref_mod
        return float_mod
    return ref_mod


def _lowered_module(mod, qconfig, out_obs, dynamic):
    mod.qconfig = qconfig
    if dynamic:
        mapping = dict(get_default_dynamic_quant_module_mappings())
        from ...nn.intrinsic.quantized.dynamic import LinearReLU as DynamicLinearReLU
        mapping[nni.LinearReLU] = DynamicLinearReLU
    else:
        mapping = get_default_static_quant_module_mappings()
        mod.activation_post_process = out_obs
    qcls = mapping.get(type(mod))
    if qcls is None:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: {'dynamic' if dynamic else 'static'} "
                                  f"quantization of {type(mod).__name__} is not supported")
    return qcls.from_float(mod)


# -- the pass ----------------------------------------------------------------------------------

def convert(gm, is_reference, convert_custom_config=None, qconfig_mapping=None, backend_config=None,
            remove_qconfig=True):
    state = get_state(gm)
    if convert_custom_config is not None and getattr(convert_custom_config, "observed_to_quantized_mapping", None):
        raise NotImplementedError("ember.ao.quantization.quantize_fx: custom modules "
                                  "(ConvertCustomConfig.set_observed_to_quantized_mapping) are not supported")
    if qconfig_mapping is not None:
        raise NotImplementedError("ember.ao.quantization.quantize_fx: convert_fx(qconfig_mapping=...) is not "
                                  "supported; pass the mapping to prepare_fx")
    gm = copy.deepcopy(gm)
    graph = gm.graph
    nodes = {n.name: n for n in graph.nodes}
    matches = {}
    for root_name, m in state.matches.items():
        m = copy.copy(m)
        m.nodes = [nodes[n] for n in m.nodes]
        matches[m.nodes[0]] = m
    last_to_match = {m.last: m for m in matches.values()}
    weight_obs = {}
    for m in matches.values():
        if m.weight_index is not None and m.weight_index < len(m.root.args):
            w = m.root.args[m.weight_index]
            if isinstance(w, Node) and _is_obs_node(w, gm):
                weight_obs[w] = m
    namer = _Namer(gm, state)
    if is_reference:
        _to_reference(gm, graph, matches, weight_obs, namer)
    else:
        _lower(gm, graph, matches, last_to_match, weight_obs, namer)
    graph.eliminate_dead_code()
    graph.lint()
    out = GraphModule(gm, graph)
    for attr in getattr(gm, "preserved_attr_names", ()):
        if hasattr(gm, attr):
            setattr(out, attr, getattr(gm, attr))
    if remove_qconfig:
        for m in out.modules():
            if hasattr(m, "qconfig"):
                del m.qconfig
    return out


def _quantize_node(graph, namer, obs_node, src, observer, per_channel_axis=None):
    """quantize_per_tensor / quantize_per_channel of ``src`` with ``observer``'s qparams."""
    scale, zero_point = _qparams(observer)
    prefix = namer.prefix(obs_node)
    with graph.inserting_before(obs_node):
        if observer.qscheme in _per_channel_schemes():
            s = namer.buffer(prefix + "scale_", scale, graph)
            z = namer.buffer(prefix + "zero_point_", zero_point, graph)
            return graph.call_function(ember.quantize_per_channel, (src, s, z, observer.ch_axis, observer.dtype))
        s = namer.buffer(prefix + "scale_", float(scale), graph)
        z = namer.buffer(prefix + "zero_point_", int(zero_point), graph)
        return graph.call_function(ember.quantize_per_tensor, (src, s, z, observer.dtype))


def _observer_role(observer):
    """'static' (quantize), 'dynamic' (quantize at run time) or 'float' (drop)."""
    if not _quantized_dtype(getattr(observer, "dtype", None)):
        return "float"
    return "dynamic" if getattr(observer, "is_dynamic", False) else "static"


def _to_reference(gm, graph, matches, weight_obs, namer):
    done = set()
    for m in matches.values():
        if m.kind == "weighted_module" and m.root.target not in done:      # (a module called twice: once)
            done.add(m.root.target)
            mod = _get(gm, m.root.target)
            _set_module(gm, m.root.target, _reference_module(mod, m.qconfig))
    for node in list(graph.nodes):
        if not _is_obs_node(node, gm):
            continue
        observer = _get(gm, node.target)
        src = node.args[0]
        role = _observer_role(observer)
        if role == "float":
            node.replace_all_uses_with(src)
            graph.erase_node(node)
            continue
        if role == "dynamic":
            with graph.inserting_before(node):
                q = graph.call_function(ember.quantize_per_tensor_dynamic,
                                        (src, observer.dtype, _engine_reduces_range()))
        else:
            q = _quantize_node(graph, namer, node, src, observer)
        with graph.inserting_after(q):
            dq = graph.call_method("dequantize", (q,))
        node.replace_all_uses_with(dq)
        graph.erase_node(node)


# the qparams of a quantized scalar op's output: the kernel's own (torch keeps them: the observer
# after it shares its input's instance and is dropped)
_PASSTHROUGH = object()


def _lower(gm, graph, matches, last_to_match, weight_obs, namer):
    """Rewrite in graph order; ``qp`` maps each node whose value is quantized to its (scale,
    zero point) -- an observer on such a value with the same qparams is dropped, with others
    it requantizes."""
    qp = {}
    dequantized = {}

    def dequant(n):
        if n not in dequantized:
            with graph.inserting_after(n):
                dequantized[n] = graph.call_method("dequantize", (n,))
        return dequantized[n]

    def float_args(node):
        def fix(a):
            if isinstance(a, (list, tuple)):
                return type(a)(fix(x) for x in a)
            return dequant(a) if isinstance(a, Node) and a in qp else a
        node.args = tuple(fix(a) for a in node.args)
        node.kwargs = {k: fix(v) for k, v in node.kwargs.items()}

    done = set()
    for m in matches.values():
        if m.kind in ("weighted_module", "module_own"):
            if m.root.target in done:
                raise NotImplementedError(f"ember.ao.quantization.quantize_fx: module '{m.root.target}' called more "
                                          "than once is not supported by convert_fx (its calls would need "
                                          "different output qparams); convert_to_reference_fx supports it")
            done.add(m.root.target)
        if m.kind == "weighted_module":
            mod = _get(gm, m.root.target)
            out_obs = _output_observer(m.last, gm)
            observer = None if out_obs is None else _get(gm, out_obs.target)
            _set_module(gm, m.root.target, _lowered_module(mod, m.qconfig, observer, m.dynamic))
        elif m.kind == "module_own":
            mod = _get(gm, m.root.target)
            out_obs = _output_observer(m.last, gm)
            _set_module(gm, m.root.target, _lowered_module(mod, m.qconfig, _get(gm, out_obs.target), False))

    for node in list(graph.nodes):
        if node.op == "output":
            float_args(node)
            continue
        if _is_obs_node(node, gm):
            _lower_observer(gm, graph, node, qp, namer, weight_obs, dequant)
            continue
        m = matches.get(node)
        if m is None:
            if node.op == "call_method" and node.target == "dequantize" and node.args and node.args[0] in qp:
                continue
            if node.op == "call_function" and node.target is getattr:
                continue                        # (x.shape of a quantized x: the same shape)
            if node not in last_to_match:
                float_args(node)
            continue
        _lower_match(gm, graph, m, qp, float_args, dequant)


def _lower_observer(gm, graph, node, qp, namer, weight_obs, dequant):
    observer = _get(gm, node.target)
    src = node.args[0]
    role = _observer_role(observer)
    if role != "static":
        node.replace_all_uses_with(src)
        graph.erase_node(node)
        return
    if node in weight_obs:
        scale, zero_point = _qparams(observer)
        w = _get(gm, src.target) if src.op == "get_attr" else None
        if w is None:
            raise NotImplementedError("ember.ao.quantization.quantize_fx: a functional op's weight that is not a "
                                      "module attribute is not supported")
        w = w.detach()
        if observer.qscheme in _per_channel_schemes():
            qw = ember.quantize_per_channel(w, scale, zero_point, observer.ch_axis, observer.dtype)
        else:
            qw = ember.quantize_per_tensor(w, float(scale), int(zero_point), observer.dtype)
        i = 0
        while hasattr(gm, f"_packed_weight_{i}"):
            i += 1
        gm.register_buffer(f"_packed_weight_{i}", qw)
        with graph.inserting_before(node):
            new = graph.get_attr(f"_packed_weight_{i}")
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        return
    scale, zero_point = _qparams(observer)
    key = (float(scale), int(zero_point), observer.dtype)
    if src in qp and (qp[src] == key or qp[src] is _PASSTHROUGH):
        node.replace_all_uses_with(src)
        graph.erase_node(node)
        return
    value = dequant(src) if src in qp else src
    q = _quantize_node(graph, namer, node, value, observer)
    node.replace_all_uses_with(q)
    graph.erase_node(node)
    qp[q] = key


def _out_qparams(gm, m):
    out_obs = _output_observer(m.last, gm)
    if out_obs is None:
        return None
    scale, zero_point = _qparams(_get(gm, out_obs.target))
    return float(scale), int(zero_point), _get(gm, out_obs.target).dtype


def _require_quantized(m, qp, what):
    for a in m.root.args[:1] if m.kind != "binary" else m.root.args[:2]:
        if isinstance(a, Node) and a not in qp:
            raise NotImplementedError(f"ember.ao.quantization.quantize_fx: {what} (node '{m.root.name}') with a "
                                      "float input is not supported")


def _collapse_relu(graph, m):
    """A (op, relu) match becomes the op node alone (its lowered form applies the relu)."""
    for extra in reversed(m.nodes[1:]):
        extra.replace_all_uses_with(m.root)
        graph.erase_node(extra)


def _lower_match(gm, graph, m, qp, float_args, dequant):
    node = m.root
    if m.kind == "info":
        return
    if m.kind == "weighted_module":
        if m.dynamic:
            float_args(node)
            return
        _require_quantized(m, qp, type(_get(gm, node.target)).__name__)
        qp[m.last] = _out_qparams(gm, m)
        return
    if m.kind == "module_own":
        _require_quantized(m, qp, type(_get(gm, node.target)).__name__)
        qp[m.last] = _out_qparams(gm, m)
        return
    if m.kind in ("share", "cat"):
        first = node.args[0] if node.args else None
        head = first[0] if isinstance(first, (list, tuple)) and first else first
        inputs = list(first) if isinstance(first, (list, tuple)) else [first]
        if isinstance(head, Node) and all(isinstance(a, Node) and a in qp for a in inputs):
            if len({qp[a] for a in inputs}) > 1:
                float_args(node)            # (inputs not sharing qparams: run in float)
                return
            qp[m.last] = qp[head]
        else:
            float_args(node)
        return
    if m.kind == "binary_scalar":
        _lower_binary_scalar(graph, m, qp, float_args)
        return
    if m.kind == "fixed":
        _require_quantized(m, qp, str(getattr(node.target, "__name__", node.target)))
        qp[m.last] = _out_qparams(gm, m)
        return
    out = _out_qparams(gm, m)
    if out is None:
        float_args(node)
        return
    if m.kind == "weighted_function":
        _require_quantized(m, qp, getattr(node.target, "__name__", str(node.target)))
        _lower_weighted_function(gm, graph, m, out)
    elif m.kind == "binary":
        _require_quantized(m, qp, getattr(node.target, "__name__", str(node.target)))
        _lower_binary(gm, graph, m, out)
    else:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: lowering {node.target!r} is not supported")
    qp[node] = out


def _scale_zp_nodes(gm, graph, m, out):
    """Buffers holding the output qparams, named by the output observer as torch names them."""
    namer = _Namer(gm, gm.meta[STATE_KEY])
    out_obs = _output_observer(m.last, gm)
    prefix = namer.prefix(out_obs)
    with graph.inserting_before(m.root):
        return namer.buffer(prefix + "scale_", out[0], graph), namer.buffer(prefix + "zero_point_", out[1], graph)


def _lower_weighted_function(gm, graph, m, out):
    node = m.root
    args = list(node.args) + [None] * 7
    kw = dict(node.kwargs)
    x, w = args[0], args[1] if args[1] is not None else kw.get("weight")
    b = args[2] if len(node.args) > 2 else kw.get("bias")
    s, z = _scale_zp_nodes(gm, graph, m, out)
    name = getattr(node.target, "__name__", "")
    if name == "linear":
        fn = L.linear_relu if m.relu else L.linear
        new_args = (x, w, b, s, z)
    elif name in ("conv1d", "conv2d", "conv3d"):
        nd = int(name[4])
        fn = getattr(L, f"conv{nd}d_relu" if m.relu else f"conv{nd}d")
        defaults = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}
        extra = []
        for i, key in enumerate(("stride", "padding", "dilation", "groups")):
            extra.append(node.args[3 + i] if len(node.args) > 3 + i else kw.get(key, defaults[key]))
        if isinstance(extra[1], str):
            raise NotImplementedError(f"ember.ao.quantization.quantize_fx: conv{nd}d with padding={extra[1]!r} "
                                      "is not supported")
        new_args = (x, w, b, *extra, s, z)
    else:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: lowering {name} is not supported")
    node.target, node.args, node.kwargs = fn, new_args, {}
    _collapse_relu(graph, m)


def _lower_binary(gm, graph, m, out):
    import operator
    node = m.root
    is_add = node.target in (operator.add, operator.iadd, ember.add)
    if node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("out") is not None:
        raise NotImplementedError("ember.ao.quantization.quantize_fx: quantized add with alpha / out is not supported")
    s, z = _scale_zp_nodes(gm, graph, m, out)
    fn = (L.add_relu if m.relu else L.add) if is_add else (L.mul_relu if m.relu else L.mul)
    node.target, node.args, node.kwargs = fn, (node.args[0], node.args[1], s, z), {}
    _collapse_relu(graph, m)


def _lower_binary_scalar(graph, m, qp, float_args):
    import operator
    node = m.root
    tensor = next(a for a in node.args[:2] if isinstance(a, Node))
    scalar = next(a for a in node.args[:2] if not isinstance(a, Node))
    if tensor not in qp:
        float_args(node)
        return
    if node.target in (operator.add, operator.iadd, ember.add):
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: quantized add of a tensor and a scalar "
                                  f"(node '{node.name}', quantized::add_scalar) is not supported by convert_fx; "
                                  "convert_to_reference_fx supports it")
    if m.relu:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: mul of a tensor and a scalar followed by relu "
                                  f"(node '{node.name}') is not supported by convert_fx")
    node.target, node.args, node.kwargs = L.mul_scalar, (tensor, scalar), {}
    qp[node] = _PASSTHROUGH
