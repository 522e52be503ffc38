"""``ember.quantization``: the deprecated spelling of ``ember.ao.quantization`` (as torch keeps
``torch.quantization``). The same objects, not copies."""
import sys as _sys

from ember.ao import quantization as _ao_quantization
from ember.ao.quantization import *  # noqa: F401,F403
from ember.ao.quantization import (observer, fake_quantize, qconfig, quantize, stubs, qconfig_mapping,  # noqa: F401
                                   quant_type, quantization_mappings, fuser_method_mappings)

for _name in ("observer", "fake_quantize", "qconfig", "quantize", "stubs", "qconfig_mapping", "quant_type",
              "quantization_mappings", "fuser_method_mappings"):
    _sys.modules[f"{__name__}.{_name}"] = getattr(_ao_quantization, _name)
del _sys, _name


def __getattr__(name):
    return getattr(_ao_quantization, name)
