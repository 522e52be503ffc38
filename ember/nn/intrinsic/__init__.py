"""``ember.nn.intrinsic``: torch's older spelling of ``ember.ao.nn.intrinsic`` (the same classes;
``.qat`` and ``.quantized`` likewise)."""
import sys as _sys

from ember.ao.nn.intrinsic import (_FusedModule, BNReLU2d, BNReLU3d, ConvBn1d, ConvBn2d, ConvBn3d,  # noqa: F401
                                   ConvBnReLU1d, ConvBnReLU2d, ConvBnReLU3d, ConvReLU1d, ConvReLU2d, ConvReLU3d,
                                   LinearBn1d, LinearReLU)
from ember.ao.nn.intrinsic import qat, quantized  # noqa: F401
from ember.ao.nn.intrinsic.quantized import dynamic as _quantized_dynamic  # noqa: F401

_sys.modules[f"{__name__}.qat"] = qat
_sys.modules[f"{__name__}.quantized"] = quantized
_sys.modules[f"{__name__}.quantized.dynamic"] = _quantized_dynamic
del _sys
