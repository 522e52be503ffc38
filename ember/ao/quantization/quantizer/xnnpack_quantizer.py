"""``XNNPACKQuantizer``: the PT2E recipe for XNNPACK (torch 2.2-2.5's
``torch.ao.quantization.quantizer.xnnpack_quantizer``; torch 2.13 ships it with executorch).

``get_symmetric_quantization_config``: activations int8 [-128, 127] per tensor affine
(``HistogramObserver``; QAT ``FusedMovingAvgObsFakeQuantize``), weights int8 [-127, 127]
symmetric per tensor (``MinMaxObserver``) or per channel on axis 0 (``PerChannelMinMaxObserver``),
``eps=2**-12``, bias float.

Recipe: ``linear + relu``, ``linear``, ``conv2d + relu``, ``conv2d`` (input, weight, output
quantized), ``adaptive_avg_pool2d`` (output shares its input's observer), ``add + relu``,
``add``, ``mul + relu``, ``mul`` (both inputs and the output), ``cat`` (all inputs and the
output share the first input's observer); then the annotation is propagated through the ops
that only move values (``hardtanh``, ``max_pool2d``, ``mean``, ``permute``, ``squeeze``,
``view``, ``slice``, ``flatten``): their input and output share the producer's output observer.
Scalars added or multiplied become constant tensors first (so they are quantized too).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional

import ember
from ember.fx import Node

from ..fake_quantize import FakeQuantize, FusedMovingAvgObsFakeQuantize
from ..observer import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver,
                        MovingAveragePerChannelMinMaxObserver, PerChannelMinMaxObserver, PlaceholderObserver)
from ._patterns import is_op, module_filter_by_name, module_filter_by_type, module_stack_names, module_stack_types
from .quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer, SharedQuantizationSpec
from .xnnpack_quantizer_utils import (QuantizationConfig, _is_annotated, _mark_nodes_as_annotated, get_bias_qspec,
                                      get_input_act_qspec, get_output_act_qspec, get_weight_qspec)

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]

_KEY = "quantization_annotation"
_HISTC_UPPER_BOUND = 3.4028235e15
_SHARE_OBS_OPS = ("hardtanh", "max_pool2d", "mean", "permute", "squeeze", "adaptive_avg_pool2d", "view", "slice",
                  "flatten")


@functools.lru_cache
def get_symmetric_quantization_config(is_per_channel: bool = False, is_qat: bool = False, is_dynamic: bool = False,
                                      act_qmin: int = -128, act_qmax: int = 127, weight_qmin: int = -127,
                                      weight_qmax: int = 127):
    extra: Dict[str, Any] = {"eps": 2 ** -12}
    if is_qat:
        if is_dynamic:
            act_ctr = FakeQuantize
            extra["observer"] = MovingAverageMinMaxObserver.with_args(averaging_constant=1)
        else:
            act_ctr = FusedMovingAvgObsFakeQuantize
    else:
        act_ctr = PlaceholderObserver if is_dynamic else HistogramObserver
    act = QuantizationSpec(dtype=ember.int8, quant_min=act_qmin, quant_max=act_qmax, qscheme=ember.per_tensor_affine,
                           is_dynamic=is_dynamic, observer_or_fake_quant_ctr=act_ctr.with_args(**extra))
    w_qscheme = ember.per_channel_symmetric if is_per_channel else ember.per_tensor_symmetric
    w_ctr = MinMaxObserver
    if is_qat:
        w_ctr = FusedMovingAvgObsFakeQuantize
    elif is_per_channel:
        w_ctr = PerChannelMinMaxObserver
    wextra: Dict[str, Any] = {"eps": 2 ** -12}
    if is_qat:
        wextra["observer"] = (MovingAverageMinMaxObserver if w_qscheme == ember.per_tensor_symmetric
                              else MovingAveragePerChannelMinMaxObserver)
    weight = QuantizationSpec(dtype=ember.int8, quant_min=weight_qmin, quant_max=weight_qmax, qscheme=w_qscheme,
                              ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=w_ctr.with_args(**wextra))
    if is_dynamic:
        return QuantizationConfig(act, None, weight, None, is_qat)
    return QuantizationConfig(act, act, weight, None, is_qat)


def _passes(nodes, filter_fn):
    return filter_fn is None or all(filter_fn(n) for n in nodes)


def _ann(node) -> QuantizationAnnotation:
    if _KEY not in node.meta:
        node.meta[_KEY] = QuantizationAnnotation()
    return node.meta[_KEY]


def _gemm_inputs(node, config):
    qmap = {node.args[0]: get_input_act_qspec(config), node.args[1]: get_weight_qspec(config)}
    b = node.args[2] if len(node.args) > 2 else None
    if isinstance(b, Node):
        qmap[b] = get_bias_qspec(config)
    return qmap, [a for a in (node.args[1], b) if isinstance(a, Node)]


def _annotate_gemm_relu(gm, config, filter_fn, op):
    for relu in gm.graph.nodes:
        if not is_op(relu, "relu"):
            continue
        gemm = relu.args[0]
        if not is_op(gemm, op) or not isinstance(gemm.args[1], Node) or len(gemm.users) > 1:
            continue
        qmap, params = _gemm_inputs(gemm, config)
        if _is_annotated([relu, gemm, *params]) or not _passes([relu, gemm], filter_fn):
            continue
        gemm.meta[_KEY] = QuantizationAnnotation(input_qspec_map=qmap, _annotated=True)
        relu.meta[_KEY] = QuantizationAnnotation(output_qspec=get_output_act_qspec(config), _annotated=True)
        _mark_nodes_as_annotated(params)


def _annotate_gemm(gm, config, filter_fn, op):
    for node in gm.graph.nodes:
        if not is_op(node, op) or not isinstance(node.args[1], Node) or not _passes([node], filter_fn):
            continue
        if _is_annotated([node]):
            continue
        qmap, params = _gemm_inputs(node, config)
        node.meta[_KEY] = QuantizationAnnotation(input_qspec_map=qmap, output_qspec=get_output_act_qspec(config),
                                                 _annotated=True)
        _mark_nodes_as_annotated(params)


def _skip_input(gm, node) -> bool:
    if node.op == "get_attr":
        obj = gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        if obj.numel() == 1 and abs(obj.item()) > _HISTC_UPPER_BOUND:
            return True
    val = node.meta.get("val")
    return val is None or not hasattr(val, "dtype") or val.dtype != ember.float32


def _binary_qmap(gm, node, config):
    qmap = {}
    for a in node.args[:2]:
        if isinstance(a, Node) and not _skip_input(gm, a):
            qmap[a] = get_input_act_qspec(config)
    return qmap


def _annotate_binary_relu(gm, config, filter_fn, op):
    for relu in gm.graph.nodes:
        if not is_op(relu, "relu"):
            continue
        b = relu.args[0]
        if not is_op(b, op) or len(b.users) > 1 or not _passes([relu, b], filter_fn) or _is_annotated([relu, b]):
            continue
        b.meta[_KEY] = QuantizationAnnotation(input_qspec_map=_binary_qmap(gm, b, config), _annotated=True)
        relu.meta[_KEY] = QuantizationAnnotation(output_qspec=get_output_act_qspec(config), _annotated=True)


def _annotate_binary(gm, config, filter_fn, op):
    for b in gm.graph.nodes:
        if not is_op(b, op) or not _passes([b], filter_fn) or _is_annotated([b]):
            continue
        b.meta[_KEY] = QuantizationAnnotation(input_qspec_map=_binary_qmap(gm, b, config),
                                              output_qspec=get_output_act_qspec(config), _annotated=True)


def _annotate_adaptive_avg_pool2d(gm, config, filter_fn):
    for pool in gm.graph.nodes:
        if not is_op(pool, "adaptive_avg_pool2d") or not _passes([pool], filter_fn) or _is_annotated([pool]):
            continue
        x = pool.args[0]
        ann = x.meta.get(_KEY)
        if ann is None or not ann._annotated or ann.output_qspec is None:
            in_qspec = get_input_act_qspec(config)
        else:
            in_qspec = SharedQuantizationSpec(x)
        pool.meta[_KEY] = QuantizationAnnotation(input_qspec_map={x: in_qspec},
                                                 output_qspec=SharedQuantizationSpec((x, pool)), _annotated=True)


def _annotate_cat(gm, config, filter_fn):
    for cat in gm.graph.nodes:
        if not is_op(cat, "cat") or not _passes([cat], filter_fn) or _is_annotated([cat]):
            continue
        inputs = list(cat.args[0])
        first = inputs[0]
        qmap = {first: get_input_act_qspec(config)}
        shared = SharedQuantizationSpec((first, cat))
        for a in inputs[1:]:
            if a not in qmap:
                qmap[a] = shared
        cat.meta[_KEY] = QuantizationAnnotation(input_qspec_map=qmap, output_qspec=shared, _annotated=True)


_STATIC_OPS: Dict[str, Callable] = {
    "linear_relu": lambda gm, c, f: _annotate_gemm_relu(gm, c, f, "linear"),
    "linear": lambda gm, c, f: _annotate_gemm(gm, c, f, "linear"),
    "conv_relu": lambda gm, c, f: _annotate_gemm_relu(gm, c, f, "conv2d"),
    "conv": lambda gm, c, f: _annotate_gemm(gm, c, f, "conv2d"),
    "adaptive_avg_pool2d": _annotate_adaptive_avg_pool2d,
    "add_relu": lambda gm, c, f: _annotate_binary_relu(gm, c, f, "add"),
    "add": lambda gm, c, f: _annotate_binary(gm, c, f, "add"),
    "mul_relu": lambda gm, c, f: _annotate_binary_relu(gm, c, f, "mul"),
    "mul": lambda gm, c, f: _annotate_binary(gm, c, f, "mul"),
    "cat": _annotate_cat,
}


def _propagate_annotation(gm) -> None:
    for n in gm.graph.nodes:
        if n.op != "call_function" or not is_op(n, *_SHARE_OBS_OPS):
            continue
        prev = n.args[0]
        if not isinstance(prev, Node):
            continue
        ann = prev.meta.get(_KEY)
        if ann is None or ann.output_qspec is None:
            continue
        if _KEY in n.meta and n.meta[_KEY]._annotated:
            continue
        shared = SharedQuantizationSpec(prev)
        n.meta[_KEY] = QuantizationAnnotation(input_qspec_map={prev: shared}, output_qspec=shared, _annotated=True)


def _convert_scalars_to_attrs(gm):
    graph = gm.graph
    for n in list(graph.nodes):
        if not is_op(n, "add", "mul") or n.kwargs:
            continue
        args = list(n.args)
        changed = False
        for i, a in enumerate(args[:2]):
            if isinstance(a, Node) or not isinstance(a, (int, float)) or isinstance(a, bool):
                continue
            k = 0
            while hasattr(gm, f"_tensor_constant_{k}"):
                k += 1
            name = f"_tensor_constant_{k}"
            t = ember.tensor(float(a))
            gm.register_buffer(name, t)
            with graph.inserting_before(n):
                c = graph.get_attr(name)
            c.meta["val"] = t
            args[i] = c
            changed = True
        if changed:
            n.args = tuple(args)
    gm.recompile()
    return gm


class XNNPACKQuantizer(Quantizer):
    STATIC_OPS = list(_STATIC_OPS)

    def __init__(self):
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.operator_type_config: Dict[Any, Optional[QuantizationConfig]] = {}
        self.module_type_config: Dict[Callable, Optional[QuantizationConfig]] = {}
        self.module_name_config: Dict[str, Optional[QuantizationConfig]] = {}

    def set_global(self, quantization_config: QuantizationConfig):
        self.global_config = quantization_config
        return self

    def set_operator_type(self, operator_type, quantization_config):
        raise NotImplementedError("XNNPACKQuantizer.set_operator_type is not supported; use set_module_type / "
                                  "set_module_name / set_global")

    def set_module_type(self, module_type: Callable, quantization_config: Optional[QuantizationConfig]):
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str, quantization_config: Optional[QuantizationConfig]):
        self.module_name_config[module_name] = quantization_config
        return self

    def transform_for_annotation(self, model):
        return _convert_scalars_to_attrs(model)

    def _annotate_all(self, model, config, filter_fn):
        if config is None:
            return
        if config.input_activation is not None and config.input_activation.is_dynamic:
            _STATIC_OPS["linear"](model, config, filter_fn)     # (torch's DYNAMIC_OPS: linear)
            return
        for op in self.STATIC_OPS:
            _STATIC_OPS[op](model, config, filter_fn)

    def annotate(self, model):
        names, types = list(self.module_name_config), list(self.module_type_config)
        for name, config in self.module_name_config.items():
            self._annotate_all(model, config, module_filter_by_name(name))
        for tp, config in self.module_type_config.items():
            self._annotate_all(model, config, module_filter_by_type(tp))
        name_fs = [module_filter_by_name(n) for n in names]
        type_fs = [module_filter_by_type(t) for t in types]
        self._annotate_all(model, self.global_config,
                           lambda n: not any(f(n) for f in name_fs) and not any(f(n) for f in type_fs))
        _propagate_annotation(model)
        self._refuse_unmatched(model)
        return model

    def _covers(self, n) -> bool:
        for name, config in self.module_name_config.items():
            if module_filter_by_name(name)(n):
                return config is not None
        for tp, config in self.module_type_config.items():
            if module_filter_by_type(tp)(n):
                return config is not None
        return self.global_config is not None

    def _refuse_unmatched(self, model):
        for n in model.graph.nodes:
            if n.op != "call_function" or (_KEY in n.meta and n.meta[_KEY]._annotated):
                continue
            if not is_op(n, "bmm", "mm", "addmm", "matmul", "convolution"):
                continue
            types = module_stack_types(n)
            inner = types[-1].rsplit(".", 1)[-1] if types else None
            if inner not in ("Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d") or not self._covers(n):
                continue
            raise NotImplementedError(
                f"XNNPACKQuantizer: the {inner} module {module_stack_names(n)[-1]!r} was exported as "
                f"{getattr(n.target, '__name__', n.target)} (node {n.name}), not as a pattern ember's PT2E flow can "
                f"quantize")

    def validate(self, model) -> None:
        pass


