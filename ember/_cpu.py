"""The cpu device's module, what ``ember.get_device_module("cpu")`` returns (PyTorch's
``torch.cpu``). It is not reachable as ``ember.cpu``: there ember keeps the cpu *device*
constant (``ember.cpu == ember.device("cpu")``).

The host runs every op synchronously on one logical device, so streams and events
are placeholders that let device-generic code (``mod.synchronize()``,
``with mod.stream(s):``, ``mod.Event().record()``) run unchanged on the CPU.
"""
from __future__ import annotations

import contextlib

__all__ = ["is_available", "is_initialized", "synchronize", "current_device", "current_stream", "stream",
           "set_device", "device_count", "Stream", "StreamContext", "Event"]


def is_available() -> bool:
    """The CPU is always there."""
    return True


def is_initialized() -> bool:
    """Nothing to initialise."""
    return True


def device_count() -> int:
    """One cpu device."""
    return 1


def current_device() -> str:
    return "cpu"


def set_device(device) -> None:
    """A no-op: there is only one cpu device."""


def synchronize(device=None) -> None:
    """A no-op: every cpu op has finished when its call returns."""


class Stream:
    """A stand-in stream: cpu work is never queued, so there is nothing to order."""

    def __init__(self, priority: int = -1):
        self.priority = priority

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        return event if event is not None else Event()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class Event:
    """A stand-in event: always complete."""

    def query(self) -> bool:
        return True

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass


_default_stream = Stream()
_current = _default_stream


def current_stream(device=None) -> Stream:
    return _current


class StreamContext(contextlib.AbstractContextManager):
    """``with stream(s):`` makes ``s`` what :func:`current_stream` returns (None: no change)."""

    def __init__(self, stream):
        self.stream = stream
        self.prev_stream = _default_stream

    def __enter__(self):
        global _current
        if self.stream is not None:
            self.prev_stream, _current = _current, self.stream
        return self.stream

    def __exit__(self, *exc):
        global _current
        if self.stream is not None:
            _current = self.prev_stream
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
