"""ember.utils: data loading, activation checkpointing, hook handles, DLPack, pytrees, benchmark timers."""
import importlib as _importlib


def __getattr__(name):
    if name in ("data", "checkpoint", "hooks", "dlpack", "_pytree", "benchmark", "collect_env", "deterministic",
                "backend_registration", "weak", "throughput_benchmark"):
        mod = _importlib.import_module(f"ember.utils.{name}")
        globals()[name] = mod
        return mod
    if name == "ThroughputBenchmark":           # torch.utils.ThroughputBenchmark (throughput_benchmark.py)
        from .throughput_benchmark import ThroughputBenchmark
        return ThroughputBenchmark
    if name == "swap_tensors":                  # torch.utils.swap_tensors (ember/utils/_swap.py)
        from ._swap import swap_tensors
        return swap_tensors
    if name in ("rename_privateuse1_backend", "generate_methods_for_privateuse1_backend"):
        from . import backend_registration
        return getattr(backend_registration, name)
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")


def set_module(obj, mod):
    """Set ``obj.__module__`` to ``mod`` (a str), for nicer printing (torch.utils.set_module)."""
    if not isinstance(mod, str):
        raise TypeError("The mod argument should be a string")
    obj.__module__ = mod
