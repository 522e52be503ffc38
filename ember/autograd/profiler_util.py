"""``ember.autograd.profiler_util``: the event containers torch code imports from
``torch.autograd.profiler_util`` -- ember's profiler's own (see ``ember.profiler``)."""
from __future__ import annotations

from collections import namedtuple

from ..profiler import EventList, FunctionEvent, FunctionEventAvg

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval", "Kernel"]


class Interval:
    """A time span (start and end in microseconds)."""

    def __init__(self, start, end):
        if end < start:
            raise ValueError(f"Interval: end ({end}) is before start ({start})")
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start}, end={self.end})"


Kernel = namedtuple("Kernel", ["name", "device", "duration"])
