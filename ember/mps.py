"""``ember.mps``: Apple's Metal backend, which ember does not have (see ember/_absent_backend.py):
``is_available()`` is False, ``device_count()`` 0, and the rest raises torch's error."""
from ._absent_backend import populate as _populate


def _error(name):
    return RuntimeError(f"Cannot execute {name}() without MPS backend.")


_populate(globals(), "MPS", queries={"is_available": False, "device_count": 0, "is_macos13_or_newer": False},
          quiet=("manual_seed", "seed"),
          failing=("synchronize", "get_rng_state", "set_rng_state", "empty_cache", "set_per_process_memory_fraction",
                   "current_allocated_memory", "driver_allocated_memory", "recommended_max_memory",
                   "compile_shader", "load_metallib"),
          error=_error)
