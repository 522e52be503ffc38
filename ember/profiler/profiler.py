"""``ember.profiler.profiler``: the module torch code imports ``torch.profiler.profiler``'s names
from (``profile``, ``schedule``, ``tensorboard_trace_handler``, ...); they are ember.profiler's."""
from . import (ExecutionTraceObserver, ProfilerAction, ProfilerActivity, profile, record_function, schedule,
               supported_activities, tensorboard_trace_handler)
from ._step_tracker import KinetoStepTracker

PROFILER_STEP_NAME = "ProfilerStep"

__all__ = ["supported_activities", "ProfilerAction", "schedule", "tensorboard_trace_handler", "profile",
           "ExecutionTraceObserver", "ProfilerActivity", "record_function", "KinetoStepTracker"]
