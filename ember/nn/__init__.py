"""ember.nn: modules, parameters, init and the functional API (PyTorch's ``torch.nn``)."""
from ..tensor import Parameter
from .parameter import Buffer, UninitializedParameter, UninitializedBuffer
from .modules import *  # noqa: F401,F403
from .modules import Module
from . import modules


def __getattr__(name):
    import importlib
    if name in ("functional", "init", "utils", "parameter", "attention", "parallel", "quantized",
                "qat", "intrinsic", "quantizable", "grad", "common_types"):
        mod = importlib.import_module(f"ember.nn.{name}")
        globals()[name] = mod
        return mod
    if name == "factory_kwargs":             # torch.nn.factory_kwargs (ember/nn/_factory_kwargs.py)
        from ._factory_kwargs import factory_kwargs
        return factory_kwargs
    raise AttributeError(f"module 'ember.nn' has no attribute '{name}'")
