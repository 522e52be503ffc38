"""``ember.ao``: architecture optimisation -- quantization (``ember.ao.quantization``) and the
quantized modules (``ember.ao.nn.quantized``), sparsity (``ember.ao.pruning``) and the numeric suite
(``ember.ao.ns``), as ``torch.ao``. Submodules load on first use."""
import importlib as _importlib


def __getattr__(name):
    if name in ("quantization", "nn", "pruning", "ns"):
        mod = _importlib.import_module(f"{__name__}.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'ember.ao' has no attribute '{name}'")
