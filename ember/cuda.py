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


def _warn_deprecated(kind):
    import warnings
    warnings.warn(f"`ember.cuda.amp.{kind}(args...)` is deprecated. Please use `ember.amp.{kind}('cuda', args...)` "
                  "instead.", FutureWarning, stacklevel=3)


class amp:  # noqa: N801 - torch.cuda.amp, PyTorch's deprecated spelling of torch.amp with device "cuda"
    """``ember.cuda.amp.autocast(...)`` / ``ember.cuda.amp.GradScaler(...)``: ``ember.amp``'s, on cuda."""

    @staticmethod
    def autocast(enabled=True, dtype=None, cache_enabled=True):
        from .amp import autocast as _autocast
        import ember
        _warn_deprecated("autocast")
        return _autocast("cuda", dtype=ember.float16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)

    @staticmethod
    def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,  # noqa: N802
                   enabled=True):
        from .amp import GradScaler as _GradScaler
        _warn_deprecated("GradScaler")
        return _GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
