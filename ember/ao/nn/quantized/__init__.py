"""``ember.ao.nn.quantized``: modules that compute on quantized tensors (``dynamic``: float in,
float out, int8 weights)."""
from . import dynamic  # noqa: F401
from .modules import LinearPackedParams  # noqa: F401
