"""PT2E quantizers (``torch.ao.quantization.quantizer``): the :class:`Quantizer` interface, the
quantization specs and annotations, :class:`ComposableQuantizer`, and the stock quantizers in
``x86_inductor_quantizer`` and ``xnnpack_quantizer``."""
from .composable_quantizer import ComposableQuantizer
from .quantizer import (DerivedQuantizationSpec, EdgeOrNode, FixedQParamsQuantizationSpec, QuantizationAnnotation,
                        QuantizationSpec, QuantizationSpecBase, Quantizer, SharedQuantizationSpec)

__all__ = ["EdgeOrNode", "Quantizer", "QuantizationSpecBase", "QuantizationSpec", "FixedQParamsQuantizationSpec",
           "SharedQuantizationSpec", "DerivedQuantizationSpec", "QuantizationAnnotation", "ComposableQuantizer"]
