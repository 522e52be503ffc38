"""``ember.cuda``: the cuda device's PyTorch-style surface (cupy-backed; see
``ember.runtime.cuda``): availability, devices, synchronisation, streams and
events, memory statistics of cupy's pool."""
from .runtime.cuda import (Event, Stream, current_device, current_stream, default_stream, device, device_count,
                           empty_cache, get_device_capability, get_device_name, is_available, manual_seed,
                           manual_seed_all, max_memory_allocated, memory_allocated, memory_reserved, set_device,
                           stream, synchronize)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "get_device_name",
           "get_device_capability", "synchronize", "memory_allocated", "memory_reserved", "max_memory_allocated",
           "empty_cache", "Stream", "Event", "current_stream", "default_stream", "stream", "manual_seed",
           "manual_seed_all"]


from ._amp_spellings import device_amp as _device_amp  # noqa: E402

amp = _device_amp("cuda", "float16")   # torch.cuda.amp: deprecated spellings of ember.amp
