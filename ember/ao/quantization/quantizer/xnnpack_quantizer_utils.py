"""Quantization configs shared by the stock quantizers (``QuantizationConfig``: the input /
output activation, weight and bias specs of a pattern) and annotation helpers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Optional

from .quantizer import QuantizationAnnotation, QuantizationSpec

__all__ = ["QuantizationConfig", "OperatorConfig", "OperatorPatternType", "get_input_act_qspec",
           "get_output_act_qspec", "get_weight_qspec", "get_bias_qspec", "_is_annotated",
           "_mark_nodes_as_annotated"]

OperatorPatternType = List[Callable]


@dataclass(eq=True, frozen=True)
class QuantizationConfig:
    input_activation: Optional[QuantizationSpec]
    output_activation: Optional[QuantizationSpec]
    weight: Optional[QuantizationSpec]
    bias: Optional[QuantizationSpec]
    # QAT: fake quantizers instead of observers
    is_qat: bool = False


class OperatorConfig(NamedTuple):
    config: QuantizationConfig
    operators: List[OperatorPatternType]


def get_input_act_qspec(config: Optional[QuantizationConfig]):
    if config is None or config.input_activation is None:
        return None
    qs = config.input_activation
    if qs.qscheme not in (None, *_per_tensor()):
        raise AssertionError(f"Unsupported activation qscheme {qs.qscheme}")
    return qs


def get_output_act_qspec(config: Optional[QuantizationConfig]):
    if config is None or config.output_activation is None:
        return None
    qs = config.output_activation
    if qs.qscheme not in (None, *_per_tensor()):
        raise AssertionError(f"Unsupported activation qscheme {qs.qscheme}")
    return qs


def get_weight_qspec(config: Optional[QuantizationConfig]):
    if config is None or config.weight is None:
        return None
    import ember
    qs = config.weight
    if qs.qscheme not in (ember.per_tensor_symmetric, ember.per_channel_symmetric, None):
        raise ValueError(f"Unsupported quantization_spec {qs} for weight")
    return qs


def get_bias_qspec(config: Optional[QuantizationConfig]):
    if config is None or config.bias is None:
        return None
    import ember
    if config.bias.dtype != ember.float32:
        raise AssertionError("Only float dtype for bias is supported for bias right now")
    return config.bias


def _per_tensor():
    import ember
    return (ember.per_tensor_affine, ember.per_tensor_symmetric)


def _is_annotated(nodes) -> bool:
    return any(n is not None and "quantization_annotation" in n.meta and n.meta["quantization_annotation"]._annotated
               for n in nodes)


def _mark_nodes_as_annotated(nodes) -> None:
    for n in nodes:
        if n is not None:
            if "quantization_annotation" not in n.meta:
                n.meta["quantization_annotation"] = QuantizationAnnotation()
            n.meta["quantization_annotation"]._annotated = True
