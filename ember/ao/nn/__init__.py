"""``ember.ao.nn``: quantized modules (``ember.ao.nn.quantized``, ``.quantized.dynamic``)."""
from . import quantized  # noqa: F401
from . import intrinsic  # noqa: F401
from .intrinsic import quantized as _intrinsic_quantized  # noqa: F401
