"""``ember.ao.quantization``: observers, fake quantization, qconfigs and ``QConfigMapping``, module
fusion (``fuse_modules`` and the fuser methods), the module mappings, and the eager-mode
quantization flows (``quantize_dynamic``; ``prepare`` / ``convert`` for static quantization;
``prepare_qat``), matching torch 2.13's ``torch.ao.quantization`` on the CPU (x86 / fbgemm) backend."""
from .observer import *  # noqa: F401,F403
from .observer import ObserverBase, UniformQuantizationObserverBase, _PartialWrapper  # noqa: F401
from .fake_quantize import *  # noqa: F401,F403
from .qconfig import *  # noqa: F401,F403
from .qconfig_mapping import *  # noqa: F401,F403
from .quant_type import QuantType  # noqa: F401
from .quantization_mappings import (  # noqa: F401  (the DEFAULT_* dicts: __getattr__ below)
    no_observer_set, get_default_static_quant_module_mappings, get_default_static_quant_reference_module_mappings,
    get_embedding_static_quant_module_mappings, get_default_static_sparse_quant_module_mappings,
    get_static_quant_module_class, get_dynamic_quant_module_class, get_default_qat_module_mappings,
    get_embedding_qat_module_mappings, get_default_dynamic_quant_module_mappings,
    get_default_dynamic_sparse_quant_module_mappings, get_default_qconfig_propagation_list,
    get_default_compare_output_module_list, get_default_float_to_quantized_operator_mappings, get_quantized_operator)
from .quantize import *  # noqa: F401,F403
from .stubs import QuantStub, DeQuantStub, QuantWrapper  # noqa: F401
from .fuse_modules import fuse_modules, fuse_modules_qat, fuse_conv_bn_eval  # noqa: F401
from .fuser_method_mappings import *  # noqa: F401,F403
from .granularity import *  # noqa: F401,F403
from . import qconfig_mapping, quant_type, quantization_mappings, fuser_method_mappings  # noqa: F401

_LAZY_MAPPINGS = ("DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS", "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS",
                  "DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS",
                  "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS", "DEFAULT_MODULE_TO_ACT_POST_PROCESS",
                  "DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS")


def __getattr__(name):
    # the DEFAULT_* mapping dicts name ember.ao.nn classes: built on first access (the same objects
    # as quantization_mappings'), so importing ember.ao.quantization does not load every module class
    if name in _LAZY_MAPPINGS:
        return getattr(quantization_mappings, name)
    if name in ("quantize_pt2e", "quantizer", "pt2e"):   # (the PT2E flow: loaded on first use)
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    if name == "quantize_fx":             # (FX graph mode quantization: loaded on first use)
        import importlib
        return importlib.import_module(f"{__name__}.quantize_fx")
    if name in ("quantize_jit", "prepare_jit", "convert_jit", "quantize_dynamic_jit", "prepare_dynamic_jit",
                "convert_dynamic_jit", "fuse_conv_bn_jit", "script_qconfig", "script_qconfig_dict"):
        raise NotImplementedError(f"ember.quantization: TorchScript quantization ({name}) is not supported")
    raise AttributeError(f"module 'ember.ao.quantization' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_MAPPINGS))
