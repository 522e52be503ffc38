"""``ember.ao.nn``: quantized modules (``ember.ao.nn.quantized``, ``.quantized.dynamic``), fused
modules (``.intrinsic``), quantization-aware training modules (``.qat``, ``.intrinsic.qat``)."""
from . import quantized  # noqa: F401
from . import intrinsic  # noqa: F401
from .intrinsic import quantized as _intrinsic_quantized  # noqa: F401
from . import qat  # noqa: F401
from . import quantizable  # noqa: F401
from .intrinsic import qat as _intrinsic_qat  # noqa: F401
