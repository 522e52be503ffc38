"""``torch.cpu.amp`` / ``torch.cuda.amp``: PyTorch's deprecated per-device spellings of
``torch.amp.autocast(device)`` and ``torch.amp.GradScaler(device)``, with its FutureWarning.
One factory for both device modules (ember/cpu.py, ember/cuda.py); ``ember.amp`` is imported
on use, since the device modules load before it."""
from __future__ import annotations

import types
import warnings


def device_amp(device_type: str, default_dtype: str) -> types.SimpleNamespace:
    """The ``amp`` namespace of ``ember.<device_type>``; autocast defaults to ``default_dtype``."""

    def warn(kind):
        warnings.warn(f"`ember.{device_type}.amp.{kind}(args...)` is deprecated. Please use "
                      f"`ember.amp.{kind}('{device_type}', args...)` instead.", FutureWarning, stacklevel=3)

    def autocast(enabled=True, dtype=None, cache_enabled=True):
        import ember
        warn("autocast")
        return ember.amp.autocast(device_type, dtype=getattr(ember, default_dtype) if dtype is None else dtype,
                                  enabled=enabled, cache_enabled=cache_enabled)

    def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,  # noqa: N802
                   enabled=True):
        import ember
        warn("GradScaler")
        return ember.amp.GradScaler(device_type, init_scale, growth_factor, backoff_factor, growth_interval,
                                    enabled)

    return types.SimpleNamespace(autocast=autocast, GradScaler=GradScaler)
