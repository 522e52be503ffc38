"""ember.utils: data loading, activation checkpointing, hook handles."""
import importlib as _importlib


def __getattr__(name):
    if name in ("data", "checkpoint", "hooks"):
        mod = _importlib.import_module(f"ember.utils.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")
