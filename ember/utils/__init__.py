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
    if name == "cmake_prefix_path":
        raise AttributeError("ember.utils.cmake_prefix_path: ember ships no C++ library or CMake package (torch's "
                             "points at torch/share/cmake, for building C++ code against libtorch)")
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")


def get_cpp_backtrace(frames_to_skip=0, maximum_number_of_frames=64) -> str:
    """The current call stack in torch's backtrace format (``frame #i: function + ... (file:line)``).
    torch lists its C++ frames; ember has none (no native extension runs Python code), so the
    frames listed are the Python ones, innermost first -- what one reads such a backtrace for."""
    import sys
    if not isinstance(frames_to_skip, int) or not isinstance(maximum_number_of_frames, int):
        raise TypeError("get_cpp_backtrace(): frames_to_skip and maximum_number_of_frames must be ints")
    frame = sys._getframe(1)
    for _ in range(max(frames_to_skip, 0)):
        if frame is None:
            break
        frame = frame.f_back
    lines = []
    while frame is not None and len(lines) < maximum_number_of_frames:
        code = frame.f_code
        lines.append(f"frame #{len(lines)}: {code.co_qualname if hasattr(code, 'co_qualname') else code.co_name} "
                     f"({code.co_filename}:{frame.f_lineno})")
        frame = frame.f_back
    return "\n".join(lines) + ("\n" if lines else "")


def set_module(obj, mod):
    """Set ``obj.__module__`` to ``mod`` (a str), for nicer printing (torch.utils.set_module)."""
    if not isinstance(mod, str):
        raise TypeError("The mod argument should be a string")
    obj.__module__ = mod
