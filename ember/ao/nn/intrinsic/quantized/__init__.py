"""Quantized fused modules: quantized conv / linear with the ReLU folded into the output clamp
(``ConvReLUNd`` / ``LinearReLU``), batch norm + ReLU, and the oneDNN fusions of ``fused.py``
(``LinearLeakyReLU`` / ``LinearTanh`` / ``ConvAdd2d`` / ``ConvAddReLU2d``). ``.dynamic``: the
dynamically quantized ``LinearReLU``."""
from ember.ao.nn.quantized.modules.static import ConvReLU1d, ConvReLU2d, ConvReLU3d, LinearReLU  # noqa: F401
from ember.ao.nn.quantized.modules.activation import BNReLU2d, BNReLU3d  # noqa: F401,E402
from .fused import LinearLeakyReLU, LinearTanh, ConvAdd2d, ConvAddReLU2d  # noqa: F401,E402


def __getattr__(name):
    if name == "dynamic":
        import importlib
        mod = importlib.import_module(f"{__name__}.dynamic")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'ember.ao.nn.intrinsic.quantized' has no attribute '{name}'")
