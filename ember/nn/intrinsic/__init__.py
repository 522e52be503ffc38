"""``ember.nn.intrinsic``: torch's older spelling of ``ember.ao.nn.intrinsic`` (the same classes;
``.qat`` and ``.quantized`` likewise)."""
import sys as _sys

from ember.ao.nn.intrinsic import _FusedModule, ConvReLU2d, LinearReLU, ConvBn2d, ConvBnReLU2d  # noqa: F401
from ember.ao.nn.intrinsic import qat, quantized  # noqa: F401

_sys.modules[f"{__name__}.qat"] = qat
_sys.modules[f"{__name__}.quantized"] = quantized
del _sys
