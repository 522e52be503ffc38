"""``ember.autograd.profiler``: PyTorch's older profiler entry points, on ``ember.profiler``
(``with ember.autograd.profiler.profile() as prof: ...; prof.key_averages().table()``)."""
from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ..profiler import profile as _profile
from ..profiler._kineto_compat import DeviceType, ProfilerConfig, ProfilerState, kineto_available  # noqa: F401
from ..profiler._step_tracker import KinetoStepTracker  # noqa: F401
from ..profiler import ProfilerActivity  # noqa: F401

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile(_profile):
    """The legacy signature: ``profile(enabled=True, *, use_cuda=False, record_shapes=False, ...)``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False, **_ignored):
        super().__init__(record_shapes=record_shapes, with_flops=with_flops, profile_memory=profile_memory,
                         with_stack=with_stack, with_modules=with_modules, acc_events=acc_events,
                         enabled=enabled)
