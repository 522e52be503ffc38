"""Quantized fused modules: quantized conv / linear with the ReLU folded into the output clamp."""
from ember.ao.nn.quantized.modules.static import ConvReLU2d, LinearReLU  # noqa: F401
