"""``ember.cuda``: availability, synchronisation and memory stats (cupy-backed)."""
from .runtime.cuda import (device_count, empty_cache, is_available, manual_seed, manual_seed_all,
                           max_memory_allocated, memory_allocated, synchronize)

__all__ = ["is_available", "device_count", "synchronize", "memory_allocated", "max_memory_allocated",
           "empty_cache", "manual_seed", "manual_seed_all"]
