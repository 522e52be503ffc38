"""Quantized fused modules: quantized conv / linear with the ReLU folded into the output clamp."""
from ember.ao.nn.quantized.modules.static import ConvReLU1d, ConvReLU2d, ConvReLU3d, LinearReLU  # noqa: F401
from ember.ao.nn.quantized.modules.activation import BNReLU2d, BNReLU3d  # noqa: F401,E402
