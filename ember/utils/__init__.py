"""ember.utils: data loading, activation checkpointing, hook handles, DLPack, pytrees, benchmark timers."""
import importlib as _importlib


def __getattr__(name):
    if name in ("data", "checkpoint", "hooks", "dlpack", "_pytree", "benchmark"):
        mod = _importlib.import_module(f"ember.utils.{name}")
        globals()[name] = mod
        return mod
    if name == "swap_tensors":                  # torch.utils.swap_tensors (ember/utils/_swap.py)
        from ._swap import swap_tensors
        return swap_tensors
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")
