"""``ember.xpu``: Intel's GPU backend, which ember does not have (see ember/_absent_backend.py):
``is_available()`` is False, ``device_count()`` 0, and the rest raises torch's error."""
from ._absent_backend import populate as _populate


def _error(name):
    return AssertionError("ember not compiled with XPU enabled")


_populate(globals(), "XPU",
          queries={"is_available": False, "device_count": 0, "is_initialized": False,
                   "is_bf16_supported": False, "is_tf32_supported": False, "get_arch_list": [],
                   "get_gencode_flags": "", "is_current_stream_capturing": False},
          quiet=("manual_seed", "manual_seed_all", "seed", "seed_all", "empty_cache"),
          failing=("init", "current_device", "set_device", "current_stream", "set_stream", "stream", "synchronize",
                   "get_device_name", "get_device_capability", "get_device_properties", "can_device_access_peer",
                   "memory_allocated", "max_memory_allocated", "memory_reserved",
                   "max_memory_reserved", "memory_stats", "memory_stats_as_nested_dict", "mem_get_info",
                   "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_snapshot",
                   "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "initial_seed",
                   "device_memory_used", "memory_usage", "utilization", "temperature", "power_draw", "clock_rate",
                   "set_per_process_memory_fraction", "get_per_process_memory_fraction", "device", "device_of"),
          error=_error)
