"""``X86InductorQuantizer``: the PT2E recipe for x86 CPUs (torch's
``torch.ao.quantization.quantizer.x86_inductor_quantizer``).

Default config (``get_default_x86_inductor_quantization_config``): activations uint8 [0, 255]
per tensor affine with ``HistogramObserver`` (QAT: ``FusedMovingAvgObsFakeQuantize``), weights
int8 [-128, 127] per channel symmetric on axis 0 with ``PerChannelMinMaxObserver`` (QAT: the
fused fake quantizer over ``MovingAveragePerChannelMinMaxObserver``), ``eps=2**-12``, bias
float.

Recipe (torch's):

1. fusion patterns, the longest first: ``conv2d + add + relu``, ``conv2d + add``,
   ``conv2d + relu/hardtanh/hardswish`` (ReLU6 is hardtanh), ``conv2d``, ``linear +
   relu/leaky_relu/tanh/gelu``, ``linear``: the conv/linear input and weight are quantized
   (and the add's other input); the pattern's last node is marked as the output of a quantized
   pattern, its output itself not observed;
2. propagation: ``max_pool2d``, ``cat``, ``avg_pool2d``, ``adaptive_avg_pool2d``, ``flatten``
   whose inputs all come from quantized patterns get their inputs quantized (``cat``'s other
   inputs share the first one's observer);
3. those int8-in-int8-out ops then share their input's observer for their output.

``set_module_name_qconfig`` / ``set_module_type_qconfig`` apply a config (``None``: leave
float) to the nodes of those submodules (by ``nn_module_stack``), before the global config.
Dynamic quantization (``is_dynamic=True``) annotates linears only; their input's qparams are
chosen at run time (``choose_qparams_tensor``). Conv-bn QAT is refused with ``NotImplementedError``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import ember
from ember.fx import Node

from ..fake_quantize import FakeQuantize, FusedMovingAvgObsFakeQuantize
from ..observer import (HistogramObserver, MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver,
                        PerChannelMinMaxObserver, PlaceholderObserver)
from ._patterns import (is_op, module_filter_by_name, module_filter_by_type, module_stack_names,
                        module_stack_types)
from .quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer, SharedQuantizationSpec
from .xnnpack_quantizer_utils import (QuantizationConfig, _is_annotated, get_bias_qspec, get_input_act_qspec,
                                      get_weight_qspec)

__all__ = ["X86InductorQuantizer", "get_default_x86_inductor_quantization_config"]

_KEY = "quantization_annotation"


@dataclass
class _X86InductorQuantizationAnnotation(QuantizationAnnotation):
    # the node is the output of a fusion pattern that runs in int8 with observed inputs
    _is_output_of_quantized_pattern: bool = False


_INT8_IN_INT8_OUT = ("max_pool2d", "cat", "avg_pool2d", "adaptive_avg_pool2d", "flatten")
_CONV_UNARY = ("relu", "hardtanh", "hardswish")
_LINEAR_UNARY = ("relu", "leaky_relu", "tanh", "gelu")


@functools.lru_cache
def get_default_x86_inductor_quantization_config(is_qat: bool = False, is_dynamic: bool = False):
    extra: Dict[str, Any] = {"eps": 2 ** -12}
    if is_qat:
        if is_dynamic:
            act_ctr = FakeQuantize
            extra["observer"] = MovingAverageMinMaxObserver.with_args(averaging_constant=1)
        else:
            act_ctr = FusedMovingAvgObsFakeQuantize
    else:
        act_ctr = PlaceholderObserver if is_dynamic else HistogramObserver
    act = QuantizationSpec(dtype=ember.uint8, quant_min=0, quant_max=255, qscheme=ember.per_tensor_affine,
                           is_dynamic=is_dynamic, observer_or_fake_quant_ctr=act_ctr.with_args(**extra))
    w_ctr = FusedMovingAvgObsFakeQuantize if is_qat else PerChannelMinMaxObserver
    if is_qat:
        extra["observer"] = MovingAveragePerChannelMinMaxObserver
    weight = QuantizationSpec(dtype=ember.int8, quant_min=-128, quant_max=127, qscheme=ember.per_channel_symmetric,
                              ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=w_ctr.with_args(**extra))
    return QuantizationConfig(act, act, weight, None, is_qat)


def _is_node_annotated(n) -> bool:
    return _KEY in n.meta and n.meta[_KEY]._annotated


def _is_quantized_output(n) -> bool:
    ann = n.meta.get(_KEY)
    return bool(ann is not None and ann._annotated and getattr(ann, "_is_output_of_quantized_pattern", False))


def _mark(nodes):
    for n in nodes:
        if _KEY not in n.meta:
            n.meta[_KEY] = _X86InductorQuantizationAnnotation()
        n.meta[_KEY]._annotated = True


def _skip(nodes, filter_fn) -> bool:
    if _is_annotated(nodes):
        return True
    return filter_fn is not None and not all(filter_fn(n) for n in nodes)


def _sole_user(n) -> Optional[Node]:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _first_unary_user(node, names) -> Optional[Node]:
    """The first user of ``node`` that is one of the unary ops ``names`` applied to it (a conv or
    linear read by other nodes too still forms the pattern, as torch's sequential partitions)."""
    for u in node.users:
        if is_op(u, *names) and u.args and u.args[0] is node:
            return u
    return None


def _binary_other(conv, add) -> Optional[Node]:
    """The other input of ``add(conv, other)`` / ``add(other, conv)`` (no alpha), else None."""
    if not is_op(add, "add") or len(add.args) != 2 or add.kwargs.get("alpha", 1) != 1:
        return None
    a, b = add.args
    if a is conv and isinstance(b, Node):
        return b
    if b is conv and isinstance(a, Node):
        return a
    return None


class X86InductorQuantizer(Quantizer):
    def __init__(self):
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.operator_type_qconfig: Dict[Any, Optional[QuantizationConfig]] = {}
        self.module_type_qconfig: Dict[Callable, Optional[QuantizationConfig]] = {}
        self.module_name_qconfig: Dict[str, Optional[QuantizationConfig]] = {}

    # ---------------------------------------------------------------------- configuration
    def _check_mix(self, config):
        configs = [c for c in [self.global_config, *self.module_type_qconfig.values(),
                               *self.module_name_qconfig.values()] if c is not None]
        if config is not None and any(c.is_qat != config.is_qat for c in configs):
            raise ValueError("Mixed QAT and Non-QAT quantization config is not supported.")
        if config is not None and any(
                (c.input_activation is not None and c.input_activation.is_dynamic)
                != (config.input_activation is not None and config.input_activation.is_dynamic) for c in configs):
            raise ValueError("Mixed dynamic and static quantization config is not supported.")

    def set_global(self, quantization_config: QuantizationConfig):
        if self.global_config is not None:
            import warnings
            warnings.warn(f"Skip the quantization config for global. The quantization config is already set to "
                          f"{self.global_config}.")
            return self
        self._check_mix(quantization_config)
        self.global_config = quantization_config
        return self

    def get_global_quantization_config(self):
        return self.global_config

    def set_module_type_qconfig(self, module_type: Callable, quantization_config: Optional[QuantizationConfig]):
        self._check_mix(quantization_config)
        self.module_type_qconfig[module_type] = quantization_config
        return self

    def set_module_name_qconfig(self, module_name: str, quantization_config: Optional[QuantizationConfig]):
        self._check_mix(quantization_config)
        self.module_name_qconfig[module_name] = quantization_config
        return self

    def set_function_type_qconfig(self, function_type, quantization_config):
        raise NotImplementedError("X86InductorQuantizer.set_function_type_qconfig is not supported; use "
                                  "set_module_type_qconfig / set_module_name_qconfig / set_global")

    # ---------------------------------------------------------------------- annotation
    def annotate(self, model):
        names = list(self.module_name_qconfig)
        types = list(self.module_type_qconfig)
        for name, config in self.module_name_qconfig.items():
            self._annotate_with_config(model, config, module_filter_by_name(name))
        for tp, config in self.module_type_qconfig.items():
            self._annotate_with_config(model, config, module_filter_by_type(tp))
        if self.global_config is not None:
            name_fs = [module_filter_by_name(n) for n in names]
            type_fs = [module_filter_by_type(t) for t in types]

            def not_configured(n):
                return not any(f(n) for f in name_fs) and not any(f(n) for f in type_fs)
            self._annotate_with_config(model, self.global_config, not_configured)
        for node in model.graph.nodes:
            self._annotate_output_for_int8_in_int8_out(node)
        self._refuse_unmatched(model)
        return model

    def _annotate_with_config(self, model, config, filter_fn):
        graph = model.graph
        if config is None:
            for n in graph.nodes:
                if is_op(n, "conv2d", "linear", *_INT8_IN_INT8_OUT) and not _skip([n], filter_fn):
                    _mark([n])
            return
        if config.input_activation is not None and config.input_activation.is_dynamic:
            # dynamic quantization: linears only (their inputs' qparams chosen at run time)
            self._annotate_linear(graph, config, filter_fn)
            return
        self._annotate_conv2d_binary_unary(graph, config, filter_fn)
        self._annotate_conv2d_binary(graph, config, filter_fn)
        self._annotate_conv2d_unary(graph, config, filter_fn)
        self._annotate_conv2d(graph, config, filter_fn)
        self._annotate_linear_unary(graph, config, filter_fn)
        self._annotate_linear(graph, config, filter_fn)
        for n in graph.nodes:
            self._annotate_propagation(n, config, filter_fn)

    def _gemm_helper(self, node, is_output, config):
        qmap = {}
        x, w = node.args[0], node.args[1]
        qmap[x] = get_input_act_qspec(config)
        qmap[w] = get_weight_qspec(config)
        b = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if isinstance(b, Node):
            qmap[b] = get_bias_qspec(config)
        node.meta[_KEY] = _X86InductorQuantizationAnnotation(input_qspec_map=qmap, _annotated=True,
                                                             _is_output_of_quantized_pattern=is_output)

    def _conv_nodes(self, graph):
        return [n for n in graph.nodes if is_op(n, "conv2d") and isinstance(n.args[1], Node)]

    def _annotate_conv2d_binary_unary(self, graph, config, filter_fn):
        for conv in self._conv_nodes(graph):
            add = _sole_user(conv)
            if add is None:
                continue
            other = _binary_other(conv, add)
            unary = _sole_user(add) if other is not None else None
            if unary is None or not is_op(unary, "relu") or _skip([conv, add, unary], filter_fn):
                continue
            self._gemm_helper(conv, False, config)
            add.meta[_KEY] = _X86InductorQuantizationAnnotation(
                input_qspec_map={other: get_input_act_qspec(config)}, _annotated=True)
            unary.meta[_KEY] = _X86InductorQuantizationAnnotation(_annotated=True,
                                                                  _is_output_of_quantized_pattern=True)

    def _annotate_conv2d_binary(self, graph, config, filter_fn):
        for conv in self._conv_nodes(graph):
            add = _sole_user(conv)
            if add is None:
                continue
            other = _binary_other(conv, add)
            if other is None or _skip([conv, add], filter_fn):
                continue
            self._gemm_helper(conv, False, config)
            add.meta[_KEY] = _X86InductorQuantizationAnnotation(
                input_qspec_map={other: get_input_act_qspec(config)}, _annotated=True,
                _is_output_of_quantized_pattern=True)

    def _annotate_conv2d_unary(self, graph, config, filter_fn):
        for conv in self._conv_nodes(graph):
            unary = _first_unary_user(conv, _CONV_UNARY)
            if unary is None:
                continue
            if _skip([conv, unary], filter_fn):
                continue
            self._gemm_helper(conv, False, config)
            unary.meta[_KEY] = _X86InductorQuantizationAnnotation(_annotated=True,
                                                                  _is_output_of_quantized_pattern=True)

    def _annotate_conv2d(self, graph, config, filter_fn):
        for conv in self._conv_nodes(graph):
            if _skip([conv], filter_fn):
                continue
            self._gemm_helper(conv, True, config)

    def _linear_nodes(self, graph):
        return [n for n in graph.nodes if is_op(n, "linear") and isinstance(n.args[1], Node)]

    def _annotate_linear_unary(self, graph, config, filter_fn):
        for lin in self._linear_nodes(graph):
            unary = _first_unary_user(lin, _LINEAR_UNARY)
            if unary is None:
                continue
            if _skip([lin, unary], filter_fn):
                continue
            self._gemm_helper(lin, False, config)
            unary.meta[_KEY] = _X86InductorQuantizationAnnotation(_annotated=True,
                                                                  _is_output_of_quantized_pattern=True)

    def _annotate_linear(self, graph, config, filter_fn):
        for lin in self._linear_nodes(graph):
            if _skip([lin], filter_fn):
                continue
            self._gemm_helper(lin, True, config)

    def _annotate_propagation(self, node, config, filter_fn):
        if not is_op(node, *_INT8_IN_INT8_OUT) or _is_node_annotated(node) or _skip([node], filter_fn):
            return
        if is_op(node, "cat"):
            inputs = list(node.args[0])
            if not inputs or not all(isinstance(i, Node) and _is_quantized_output(i) for i in inputs):
                return
            first = inputs[0]
            qmap = {first: get_input_act_qspec(config)}
            shared = SharedQuantizationSpec((first, node))
            for i in inputs[1:]:
                if i not in qmap:
                    qmap[i] = shared
        else:
            inp = node.all_input_nodes[0]
            if not _is_quantized_output(inp):
                return
            qmap = {inp: get_input_act_qspec(config)}
        node.meta[_KEY] = _X86InductorQuantizationAnnotation(input_qspec_map=qmap, _annotated=True,
                                                            _is_output_of_quantized_pattern=True)

    def _annotate_output_for_int8_in_int8_out(self, node):
        if not is_op(node, *_INT8_IN_INT8_OUT) or not _is_node_annotated(node):
            return
        ann = node.meta[_KEY]
        if not getattr(ann, "_is_output_of_quantized_pattern", False) or not ann.input_qspec_map:
            return
        inp = node.args[0][0] if is_op(node, "cat") else node.all_input_nodes[0]
        ann.output_qspec = SharedQuantizationSpec((inp, node))

    def _refuse_unmatched(self, model):
        """A Linear / Conv2d module the configs cover whose graph is not a pattern of the recipe
        (e.g. a bias-free Linear on a 3-d input, exported as expand + bmm) would stay float: refuse."""
        for n in model.graph.nodes:
            if n.op != "call_function" or _is_node_annotated(n):
                continue
            if not is_op(n, "bmm", "mm", "addmm", "matmul", "convolution"):
                continue
            types = module_stack_types(n)
            if not types:
                continue
            inner = types[-1]
            kind = ("Linear" if inner.endswith(".Linear") else
                    "Conv2d" if inner.endswith(".Conv2d") else None)
            if kind is None or not self._config_covers(n):
                continue
            fqn = module_stack_names(n)[-1]
            raise NotImplementedError(
                f"X86InductorQuantizer: the {kind} module {fqn!r} was exported as "
                f"{getattr(n.target, '__name__', n.target)} (node {n.name}), not as a {kind.lower()} pattern ember's "
                f"PT2E flow can quantize")

    def _config_covers(self, n) -> bool:
        for name, config in self.module_name_qconfig.items():
            if module_filter_by_name(name)(n):
                return config is not None
        for tp, config in self.module_type_qconfig.items():
            if module_filter_by_type(tp)(n):
                return config is not None
        return self.global_config is not None

    def validate(self, model) -> None:
        pass


