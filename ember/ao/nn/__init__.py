"""``ember.ao.nn``: quantized modules (``ember.ao.nn.quantized``, ``.quantized.dynamic``)."""
from . import quantized  # noqa: F401
