"""The profiler configuration types torch exposes from its Kineto bindings (``ProfilerState``,
``DeviceType``, ``ProfilerConfig``) and the questions asked of the backend
(``kineto_available``, ``supported_activities``), answered for ember's own profiler.

ember's profiler is not Kineto: ``kineto_available()`` is False, and the activities it records
are the CPU's (``ProfilerActivity.CUDA`` is accepted and records the CPU side).
"""
from __future__ import annotations

import enum

__all__ = ["ProfilerState", "DeviceType", "ProfilerConfig", "kineto_available", "supported_activities"]


class ProfilerState(enum.Enum):
    """Which profiler backend a ``ProfilerConfig`` asks for (torch's ``ProfilerState``)."""
    Disabled = 0
    CPU = 1
    CUDA = 2
    NVTX = 3
    ITT = 4
    PRIVATEUSE1 = 5
    KINETO = 6
    KINETO_GPU_FALLBACK = 7
    KINETO_PRIVATEUSE1_FALLBACK = 8
    KINETO_PRIVATEUSE1 = 9


class DeviceType(enum.Enum):
    """Device kinds as torch's profiler events name them (``FunctionEvent.device_type``)."""
    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    Vulkan = 10
    Metal = 11
    XPU = 12
    MPS = 13
    MTIA = 19
    Meta = 14
    HPU = 15
    VE = 16
    Lazy = 17
    IPU = 18
    PrivateUse1 = 20


class ProfilerConfig:
    """What a profiling session records (torch's ``ProfilerConfig``): a plain record, checked."""

    def __init__(self, state, report_input_shapes, profile_memory, with_stack, with_flops, with_modules,
                 experimental_config=None, trace_id=""):
        if not isinstance(state, ProfilerState):
            raise TypeError(f"ProfilerConfig(): state must be a ProfilerState, got {type(state).__name__}")
        for name, v in (("report_input_shapes", report_input_shapes), ("profile_memory", profile_memory),
                        ("with_stack", with_stack), ("with_flops", with_flops), ("with_modules", with_modules)):
            if not isinstance(v, bool):
                raise TypeError(f"ProfilerConfig(): {name} must be a bool, got {type(v).__name__}")
        self.state = state
        self.report_input_shapes = report_input_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = experimental_config
        self.trace_id = trace_id

    def __repr__(self):
        return (f"ProfilerConfig(state={self.state}, report_input_shapes={self.report_input_shapes}, "
                f"profile_memory={self.profile_memory}, with_stack={self.with_stack}, with_flops={self.with_flops}, "
                f"with_modules={self.with_modules})")


def kineto_available() -> bool:
    """False: ember records with its own dispatch-level profiler, not Kineto."""
    return False


def supported_activities():
    """The activities ember's profiler records: the CPU's."""
    from . import ProfilerActivity
    return {ProfilerActivity.CPU}
