"""``ember.mtia``: Meta's MTIA backend, which ember does not have (see ember/_absent_backend.py):
``is_available()`` is False, ``device_count()`` 0, and the rest raises torch's error."""
from ._absent_backend import populate as _populate


def _error(name):
    if name in ("init", "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
                "initial_seed"):       # (these initialise the backend first, as torch's)
        return AssertionError("ember not compiled with MTIA enabled")
    return RuntimeError(f"Cannot execute {name}() without MTIA backend.")


_populate(globals(), "MTIA",
          queries={"is_available": False, "device_count": 0, "is_initialized": False, "is_bf16_supported": False},
          quiet=("manual_seed", "manual_seed_all", "seed", "seed_all"),
          failing=("init", "current_device", "set_device", "current_stream", "default_stream", "set_stream", "stream",
                   "synchronize", "get_device_capability", "get_device_properties", "empty_cache",
                   "memory_allocated", "max_memory_allocated", "memory_stats", "reset_peak_memory_stats",
                   "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "initial_seed",
                   "record_memory_history", "snapshot", "attach_out_of_memory_observer", "device"),
          error=_error)
