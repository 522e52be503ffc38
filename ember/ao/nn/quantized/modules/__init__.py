"""Quantized module building blocks shared by the static and dynamic quantized modules."""
from .linear import LinearPackedParams  # noqa: F401
