"""``ember.ao.quantization``: observers, fake quantization, qconfigs, and the eager-mode
quantization flows (``quantize_dynamic``; ``prepare`` / ``convert`` for static quantization),
matching torch 2.13's ``torch.ao.quantization`` on the CPU (x86 / fbgemm) backend."""
from .observer import *  # noqa: F401,F403
from .observer import ObserverBase, UniformQuantizationObserverBase, _PartialWrapper  # noqa: F401
from .fake_quantize import *  # noqa: F401,F403
from .qconfig import *  # noqa: F401,F403
from .quantize import *  # noqa: F401,F403
from .stubs import QuantStub, DeQuantStub, QuantWrapper  # noqa: F401
from .fuse_modules import fuse_modules, fuse_modules_qat, fuse_conv_bn_eval  # noqa: F401
