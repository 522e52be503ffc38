"""``ComposableQuantizer``: run several quantizers in order, each annotating what the earlier ones
left alone (``torch.ao.quantization.quantizer.composable_quantizer``)."""
from __future__ import annotations

from typing import Dict, List

from .quantizer import Quantizer

__all__ = ["ComposableQuantizer"]


class ComposableQuantizer(Quantizer):
    """Annotate with ``quantizers`` one after the other. A quantizer may add annotations but must
    not change or remove one an earlier quantizer made: that raises a RuntimeError naming it."""

    def __init__(self, quantizers: List[Quantizer]):
        super().__init__()
        self.quantizers = quantizers
        self._graph_annotations: Dict = {}

    def _record_and_validate_annotations(self, gm, quantizer: Quantizer) -> None:
        for n in gm.graph.nodes:
            if "quantization_annotation" in n.meta:
                ann = n.meta["quantization_annotation"]
                if n in self._graph_annotations and id(self._graph_annotations[n]) != id(ann):
                    raise RuntimeError(f"Quantizer {quantizer.__class__.__name__} has changed annotations on node {n}")
                self._graph_annotations[n] = ann
            elif n in self._graph_annotations:
                raise RuntimeError(f"Quantizer {quantizer.__class__.__name__} has removed annotations on node {n}")

    def annotate(self, model):
        for quantizer in self.quantizers:
            quantizer.annotate(model)
            self._record_and_validate_annotations(model, quantizer)
        return model

    def transform_for_annotation(self, model):
        for quantizer in self.quantizers:
            model = quantizer.transform_for_annotation(model)
        return model

    def validate(self, model) -> None:
        pass


