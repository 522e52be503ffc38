"""``ember.autograd.profiler_legacy``: torch's legacy (pre-Kineto) profiler entry point. ember
has one profiler; ``profile`` here is ``ember.autograd.profiler.profile``."""
from __future__ import annotations

from ..profiler import EventList, FunctionEvent
from ..profiler._kineto_compat import DeviceType, ProfilerConfig, ProfilerState
from .profiler import profile

__all__ = ["profile", "EventList", "FunctionEvent", "DeviceType", "ProfilerConfig", "ProfilerState"]
