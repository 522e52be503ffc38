"""The quantizer interface of the PT2E flow (``torch.ao.quantization.quantizer.quantizer``).

A :class:`Quantizer` *annotates* an exported graph: it stores a :class:`QuantizationAnnotation`
in ``node.meta["quantization_annotation"]`` saying which input edges ``(producer, node)`` and
which outputs are to be quantized, and how (a quantization spec). ``prepare_pt2e`` turns the
annotations into observers (or fake quantizers), sharing one observer between edges and nodes
whose specs say so (:class:`SharedQuantizationSpec`, or equal specs on the edges around one
value), and ``convert_pt2e`` turns the observers into quantize / dequantize operators.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import ember
from ember.fx import Node

__all__ = ["Quantizer", "QuantizationSpecBase", "QuantizationSpec", "FixedQParamsQuantizationSpec", "EdgeOrNode",
           "SharedQuantizationSpec", "DerivedQuantizationSpec", "QuantizationAnnotation"]


class QuantizationSpecBase(ABC):  # noqa: B024
    """The base of every quantization spec (what an annotation stores for an edge or a node)."""


@dataclass(eq=True, frozen=True)
class QuantizationSpec(QuantizationSpecBase):
    """How to quantize one edge or node: the quantized ``dtype`` and range, the qscheme (per
    tensor / per channel on ``ch_axis``), and ``observer_or_fake_quant_ctr`` (a class or a
    ``with_args`` constructor) that ``prepare`` instantiates with those fields."""

    dtype: Any
    observer_or_fake_quant_ctr: Any
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[Any] = None
    ch_axis: Optional[int] = None
    is_dynamic: bool = False

    def __post_init__(self):
        if self.quant_min is not None and self.quant_max is not None and self.quant_min > self.quant_max:
            raise ValueError(f"quant_min {self.quant_min} must be <= quant_max {self.quant_max}.")
        if self.ch_axis is not None and self.ch_axis < 0:
            raise ValueError("Ch_axis is < 0.")


@dataclass(eq=True, frozen=True)
class FixedQParamsQuantizationSpec(QuantizationSpecBase):
    """A spec whose scale and zero point are fixed in advance (sigmoid's ``1/256, 0``)."""

    dtype: Any
    scale: float
    zero_point: int
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[Any] = None
    is_dynamic: bool = False


EdgeOrNode = Union[Tuple[Node, Node], Node]


@dataclass(eq=True, frozen=True)
class SharedQuantizationSpec(QuantizationSpecBase):
    """Use the same observer (hence the same qparams) as another edge ``(producer, consumer)`` or
    node output."""

    edge_or_node: Any


@dataclass(eq=True, frozen=True)
class DerivedQuantizationSpec(QuantizationSpecBase):
    """Qparams computed by ``derive_qparams_fn(obs_or_fqs)`` from the observers of the edges or
    nodes in ``derived_from`` (a bias scale = input scale * weight scale)."""

    derived_from: List[Any]
    derive_qparams_fn: Callable
    dtype: Any
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[Any] = None
    ch_axis: Optional[int] = None
    is_dynamic: bool = False

    def __hash__(self):
        return hash((tuple(self.derived_from), self.derive_qparams_fn, self.dtype))


@dataclass
class QuantizationAnnotation:
    """What a quantizer records on a node (``node.meta["quantization_annotation"]``):
    ``input_qspec_map`` (input node -> spec of the edge into this node), ``output_qspec`` (spec of
    this node's output), ``allow_implicit_sharing`` (an input edge may share the observer of the
    producer's output and of the producer's other users when their specs are equal) and
    ``_annotated`` (set by quantizers that annotate a pattern once)."""

    input_qspec_map: Dict[Node, Optional[QuantizationSpecBase]] = field(default_factory=dict)
    output_qspec: Optional[QuantizationSpecBase] = None
    allow_implicit_sharing: bool = True
    _annotated: bool = False


class Quantizer(ABC):
    """Base of PT2E quantizers: ``transform_for_annotation`` (optional graph rewrite before
    annotation), ``annotate`` (write annotations, return the model) and ``validate`` (check
    the annotated model)."""

    def transform_for_annotation(self, model):
        return model

    @abstractmethod
    def annotate(self, model):
        pass

    @abstractmethod
    def validate(self, model) -> None:
        pass

    def prepare_obs_or_fq_callback(self, model, edge_or_node_to_obs_or_fq: Dict[Any, Any]) -> None:
        return
