"""ember.nn: modules, parameters, init and the functional API (PyTorch's ``torch.nn``)."""
from ..tensor import Parameter
from .parameter import Buffer, UninitializedParameter, UninitializedBuffer
from .modules import *  # noqa: F401,F403
from .modules import Module
from . import modules


def __getattr__(name):
    import importlib
    if name in ("functional", "init", "utils", "parameter", "attention", "parallel", "quantized",
                "qat", "intrinsic", "quantizable", "grad"):
        mod = importlib.import_module(f"ember.nn.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'ember.nn' has no attribute '{name}'")
