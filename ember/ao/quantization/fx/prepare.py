"""``prepare_fx``'s pass: match the backend's patterns on the (fused) graph, swap in QAT
modules when training, and insert observers where torch does -- on each quantized pattern's
activation inputs (reusing an observer already on that value), on a functional op's weight,
and on its output; ops that keep their input's qparams (view, relu, max_pool, cat's inputs)
get the *same* observer instance as their input, so one set of qparams covers them all."""
from __future__ import annotations

import builtins
import operator

import ember

from ..backend_config.backend_config import ObservationType
from ..fake_quantize import FakeQuantizeBase, FixedQParamsFakeQuantize
from ..observer import FixedQParamsObserver, ObserverBase
from ._patterns import match_chain, node_key, pattern_configs
from ._state import Match

__all__ = ["is_observer", "insert_observers", "match_patterns", "tensor_valued"]

_NON_TENSOR_METHODS = {"size", "dim", "numel", "tolist", "item", "__len__", "ndimension", "nelement"}
_UNSUPPORTED_MODULES = ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell", "Embedding", "EmbeddingBag",
                        "MultiheadAttention", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Softmax",
                        "PReLU")


def is_observer(mod):
    return isinstance(mod, (ObserverBase, FakeQuantizeBase))


def _is_observer_node(node, modules):
    return node.op == "call_module" and is_observer(modules.get(node.target))


def tensor_valued(graph, example_inputs):
    """The nodes that produce tensors (observers only go on those): placeholders whose example
    input is a tensor (all, without example inputs), and every node but shape queries and the
    arithmetic on them."""
    out = set()
    idx = 0
    for node in graph.nodes:
        if node.op == "placeholder":
            if example_inputs is None or idx >= len(example_inputs) or isinstance(example_inputs[idx], ember.Tensor):
                out.add(node)
            idx += 1
        elif node.op == "get_attr":
            out.add(node)
        elif node.op == "call_function":
            if node.target in (builtins.getattr, builtins.len):
                continue
            inputs = node.all_input_nodes
            if (node.target is operator.getitem or getattr(node.target, "__module__", None) in ("_operator",
                                                                                                "operator")) \
                    and inputs and not any(a in out for a in inputs):
                continue
            out.add(node)
        elif node.op == "call_method":
            if node.target not in _NON_TENSOR_METHODS:
                out.add(node)
        elif node.op == "call_module":
            out.add(node)
    return out


_BINARY = (operator.add, ember.add, operator.mul, ember.mul, operator.iadd, operator.imul)


def _is_cat(target):
    from ..backend_config._common_patterns import cat_functions
    return any(target is f for f in cat_functions())


def _fixed_targets():
    from ember import nn
    from ember.nn import functional as F
    return {nn.Hardsigmoid, nn.Sigmoid, nn.Tanh, nn.Softmax, F.hardsigmoid, ember.sigmoid, ember.tanh,
            getattr(F, "sigmoid", None), getattr(F, "tanh", None), "hardsigmoid", "hardsigmoid_", "sigmoid",
            "sigmoid_", "tanh", "tanh_"} - {None}


def _act_dtype(qconfig):
    act = qconfig.activation()
    return act.dtype, bool(getattr(act, "is_dynamic", False)), act


def _dtype_supported(conf, qconfig, weighted):
    """Whether one of the pattern's dtype configs takes this qconfig's dtypes (else the op
    stays float, as torch leaves it)."""
    dtype, dynamic, _ = _act_dtype(qconfig)
    wdtype = qconfig.weight().dtype if weighted else None
    for dc in conf.dtype_configs:
        if dc.input_dtype != dtype or bool(dc.is_dynamic) != dynamic:
            continue
        if weighted and dc.weight_dtype is not None and dc.weight_dtype != wdtype:
            continue
        return True
    return False


def _fixed_observer_ok(qconfig):
    act = qconfig.activation()
    return isinstance(act, (FixedQParamsObserver, FixedQParamsFakeQuantize))


def _kind(node, conf, modules):
    if node.op == "call_module":
        if conf.root_module is not None:
            return "weighted_module"
        mod_type = type(modules[node.target])
        if mod_type in _fixed_targets():
            return "fixed"
    elif "weight" in conf._input_type_to_index and node.op == "call_function":
        return "weighted_function"
    elif node.target in _BINARY:
        return "binary"
    elif node.op == "call_function" and _is_cat(node.target):
        return "cat"
    elif node.target in _fixed_targets():
        return "fixed"
    if conf.observation_type is ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT:
        return "share"
    if conf.observation_type is ObservationType.INPUT_OUTPUT_NOT_OBSERVED:
        return "info"
    return "module_own" if node.op == "call_module" else "function_own"


def _unsupported_functions():
    """Functions torch's native backend quantizes that ember's flow does not: refused by name
    rather than silently left in float."""
    from ember.nn import functional as F
    names = ("elu", "hardswish", "leaky_relu", "dropout", "instance_norm", "layer_norm", "group_norm", "softmax",
             "prelu", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "embedding", "embedding_bag")
    out = {}
    for n in names:
        for owner in (F, ember):
            f = getattr(owner, n, None)
            if f is not None:
                out[id(f)] = n
    for n in ("matmul",):
        if getattr(ember, n, None) is not None:
            out[id(getattr(ember, n))] = n
    return out


def _refuse_unsupported(node, modules, qconfig, custom_config):
    """Ops torch quantizes with this qconfig that ember's flow cannot: NotImplementedError naming
    them (set their qconfig to None to keep them in float)."""
    if qconfig is None:
        return
    if node.op == "call_function" and id(node.target) in _unsupported_functions():
        name = _unsupported_functions()[id(node.target)]
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: quantizing the function {name} (node "
                                  f"'{node.name}') is not supported; set its qconfig to None "
                                  "(qconfig_mapping.set_object_type(<the function>, None)) to leave it in float")
    if node.op != "call_module":
        return
    mod = modules[node.target]
    name = type(mod).__name__
    if type(mod).__module__.startswith("ember.nn") and name in _UNSUPPORTED_MODULES:
        raise NotImplementedError(f"ember.ao.quantization.quantize_fx: quantizing {name} (module '{node.target}') "
                                  "is not supported; set its qconfig to None (qconfig_mapping.set_module_name("
                                  f"'{node.target}', None)) to leave it in float")


def match_patterns(gm, modules, backend_config, node_qconfig, tensor_nodes, custom_config):
    """root node -> Match, for every node a backend pattern covers and the qconfig allows."""
    configs = pattern_configs(backend_config)
    matches, claimed = {}, set()
    for node in gm.graph.nodes:
        if node in claimed or node.op in ("placeholder", "output", "get_attr"):
            continue
        qconfig = node_qconfig.get(node.name)
        _refuse_unsupported(node, modules, qconfig, custom_config)
        if node_key(node, modules) is None:
            continue
        for chain, conf in configs:
            if conf.fuser_method is not None and len(chain) > 1:
                continue            # (module fusions happened already)
            nodes = match_chain(node, chain, modules, claimed)
            if nodes is None:
                continue
            claimed.update(nodes)
            if qconfig is None:
                break
            kind = _kind(node, conf, modules)
            weighted = kind in ("weighted_module", "weighted_function")
            if not _dtype_supported(conf, qconfig, weighted):
                break
            if kind == "fixed" and not _fixed_observer_ok(qconfig):
                break
            _, dynamic, _ = _act_dtype(qconfig)
            if dynamic and kind == "weighted_function":
                raise NotImplementedError(f"ember.ao.quantization.quantize_fx: dynamic quantization of the functional "
                                          f"{getattr(node.target, '__name__', node.target)} (node '{node.name}') "
                                          "is not supported; use the module (nn.Linear) or a static qconfig")
            if dynamic and kind != "weighted_module":
                break
            m = Match(nodes, kind, qconfig, dynamic=dynamic, relu=len(nodes) > 1)
            if kind == "weighted_function":
                m.weight_index = conf._input_type_to_index.get("weight")
                m.bias_index = conf._input_type_to_index.get("bias")
            if kind == "binary":
                n_tensors = sum(1 for a in node.args[:2] if isinstance(a, ember.fx.Node) and a in tensor_nodes)
                if n_tensors == 0:
                    break
                if n_tensors == 1:
                    m.kind = "binary_scalar"        # (torch: the output shares the tensor input's observer)
            matches[node] = m
            break
    return matches


class _Inserter:
    """Adds observer submodules and their call_module nodes, numbered as torch numbers them."""

    def __init__(self, gm, modules):
        self.gm, self.modules, self.graph = gm, modules, gm.graph
        self.index = 0

    def new_observer(self, after, observer):
        while hasattr(self.gm, f"activation_post_process_{self.index}"):
            self.index += 1
        name = f"activation_post_process_{self.index}"
        self.gm.add_submodule(name, observer)
        self.modules[name] = observer
        with self.graph.inserting_after(after):
            return self.graph.call_module(name, (after,))

    def observe_input(self, arg, make_observer, tensor_nodes):
        """``arg`` observed: itself if it is an observer, else an observer of it already in the
        graph with the same dtype, else a new one."""
        if not isinstance(arg, ember.fx.Node) or arg not in tensor_nodes and not _is_observer_node(arg, self.modules):
            return arg
        if _is_observer_node(arg, self.modules):
            return arg
        observer = make_observer()
        for user in arg.users:
            if _is_observer_node(user, self.modules) and self.modules[user.target].dtype == observer.dtype \
                    and type(self.modules[user.target]) is type(observer):
                return user
        obs = self.new_observer(arg, observer)
        tensor_nodes.add(obs)
        return obs


def _map_args(node, fn, skip=()):
    def go(a, i):
        if i in skip:
            return a
        if isinstance(a, (list, tuple)):
            return type(a)(fn(x) for x in a)
        return fn(a)
    node.args = tuple(go(a, i) for i, a in enumerate(node.args))
    node.kwargs = {k: go(v, k) for k, v in node.kwargs.items()}


def insert_observers(gm, modules, matches, tensor_nodes):
    """Observers for every match; returns the names of the observers that must share their
    input's instance (filled in by ``share_observers``)."""
    ins = _Inserter(gm, modules)
    last_to_match = {m.last: m for m in matches.values()}
    for node in list(gm.graph.nodes):
        m = matches.get(node)
        if m is not None and m.kind != "info":
            act = m.qconfig.activation
            skip = {m.weight_index, m.bias_index} - {None}
            _map_args(node, lambda a: ins.observe_input(a, act, tensor_nodes), skip)
            if m.weight_index is not None and m.weight_index < len(node.args):
                w = node.args[m.weight_index]
                args = list(node.args)
                args[m.weight_index] = ins.observe_input(w, m.qconfig.weight, tensor_nodes)
                node.args = tuple(args)
        m = last_to_match.get(node)
        if m is not None and m.kind != "info" and not m.dynamic:
            obs = ins.new_observer(node, m.qconfig.activation())
            node.replace_all_uses_with(obs)
            obs.args = (node,)
            tensor_nodes.add(obs)


def _first_observer_upstream(arg, modules):
    """The nearest observer at or above ``arg`` along first tensor arguments (torch's walk)."""
    for _ in range(10000):
        if not isinstance(arg, ember.fx.Node) or arg.op == "placeholder":
            return None
        if _is_observer_node(arg, modules):
            return arg
        nxt = next((a for a in arg.args if isinstance(a, ember.fx.Node)), None)
        if nxt is None:
            return None
        arg = nxt
    raise AssertionError("Unable to find observer of previous node")


def share_observers(gm, modules, matches):
    """Ops that keep their input's qparams use their input's observer instance for their output
    (cat: for every input too). Returns {observer name: the name of the instance it shares}."""
    shared = {}
    for root, m in matches.items():
        if m.kind not in ("share", "cat", "binary_scalar"):
            continue
        first = next((a for a in root.args if isinstance(a, (ember.fx.Node, list, tuple))), None)
        if first is None:
            continue
        head = first[0] if isinstance(first, (list, tuple)) else first
        src = _first_observer_upstream(head, modules)
        if src is None:
            continue
        instance = modules[src.target]
        if isinstance(first, (list, tuple)):
            for other in first[1:]:
                obs = _first_observer_upstream(other, modules)
                if obs is None:
                    continue
                setattr(gm, obs.target, instance)
                modules[obs.target] = instance
                shared[obs.target] = src.target
        for user in m.last.users:
            if _is_observer_node(user, modules):
                setattr(gm, user.target, instance)
                modules[user.target] = instance
                shared[user.target] = src.target
    return shared
