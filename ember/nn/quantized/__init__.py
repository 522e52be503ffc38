"""``ember.nn.quantized``: torch's older spelling of ``ember.ao.nn.quantized`` (same classes)."""
from ember.ao.nn.quantized import *  # noqa: F401,F403
from ember.ao.nn.quantized import LinearPackedParams, Quantize, DeQuantize, Linear, Conv2d, ReLU  # noqa: F401
from . import dynamic  # noqa: F401
from . import functional  # noqa: F401
