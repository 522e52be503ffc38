"""``ember.autograd.profiler``: PyTorch's older profiler entry points, on ``ember.profiler``
(``with ember.autograd.profiler.profile() as prof: ...; prof.key_averages().table()``)."""
from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ..profiler import profile as _profile
from ..profiler._kineto_compat import DeviceType, ProfilerConfig, ProfilerState, kineto_available  # noqa: F401
from ..profiler._step_tracker import KinetoStepTracker  # noqa: F401
from ..profiler import ProfilerActivity  # noqa: F401

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg", "EnforceUnique",
           "emit_nvtx", "emit_itt", "load_nvprof", "parse_nvprof_trace", "KinetoStepTracker"]


class profile(_profile):
    """The legacy signature: ``profile(enabled=True, *, use_cuda=False, record_shapes=False, ...)``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False, **_ignored):
        super().__init__(record_shapes=record_shapes, with_flops=with_flops, profile_memory=profile_memory,
                         with_stack=with_stack, with_modules=with_modules, acc_events=acc_events,
                         enabled=enabled)


class EnforceUnique:
    """Raises when a key is seen a second time (torch.autograd.profiler's helper)."""

    def __init__(self):
        self.seen = set()

    def see(self, *key):
        if key in self.seen:
            raise RuntimeError("duplicate key: " + str(key))
        self.seen.add(key)


class _VendorRanges:
    """``emit_nvtx`` / ``emit_itt``: annotate every op with a vendor-tool range. ember has neither
    NVTX nor ITT, so only ``enabled=False`` (a no-op block) is accepted."""

    _tool = ""

    def __init__(self, enabled=True, record_shapes=False):
        if enabled:
            raise NotImplementedError(f"ember.autograd.profiler.{type(self).__name__}: ember has no {self._tool} "
                                      f"binding, so ops cannot be annotated with {self._tool} ranges (use "
                                      f"ember.profiler.profile for op timings)")
        self.enabled = False
        self.record_shapes = record_shapes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class emit_nvtx(_VendorRanges):
    _tool = "NVTX"


class emit_itt(_VendorRanges):
    _tool = "ITT"


def load_nvprof(path):
    """torch reads an nvprof database into events; ember has no nvprof support."""
    raise NotImplementedError("ember.autograd.profiler.load_nvprof: reading nvprof traces is not supported")


def parse_nvprof_trace(path):
    raise NotImplementedError("ember.autograd.profiler.parse_nvprof_trace: reading nvprof traces is not supported")
