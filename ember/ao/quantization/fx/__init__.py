"""``ember.ao.quantization.fx``: the passes of FX graph mode quantization (tracing, fusion,
observer insertion, conversion) behind ``ember.ao.quantization.quantize_fx``, and its custom
configs."""
from .custom_config import ConvertCustomConfig, FuseCustomConfig, PrepareCustomConfig  # noqa: F401
from .graph_module import ObservedGraphModule  # noqa: F401
from .tracer import QuantizationTracer  # noqa: F401
