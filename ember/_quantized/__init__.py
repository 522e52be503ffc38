"""Quantized tensors: ``ember.qint8`` / ``quint8`` / ``qint32`` tensors, ``quantize_per_tensor``,
``quantize_per_channel``, ``dequantize`` and the ``qscheme`` objects (torch 2.13, CPU/fbgemm).

Layout of this package: ``qscheme`` (the scheme singletons), ``kernels`` (numpy rounding,
bit for bit torch's), ``storage`` (the refusing ``_data``), ``tensor`` (``QuantizedTensor``),
``functions`` (the public constructors), ``printing``, ``install`` (hooks into ember).
"""
from .schemes import (qscheme, per_tensor_affine, per_channel_affine, per_tensor_symmetric,  # noqa: F401
                      per_channel_symmetric, per_channel_affine_float_qparams)
from .tensor import QuantizedTensor, QParams, make_qtensor  # noqa: F401
from .functions import (quantize_per_tensor, quantize_per_channel, quantize_per_tensor_dynamic,  # noqa: F401
                        dequantize)
