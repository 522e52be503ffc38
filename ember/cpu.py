"""``ember.cpu``: the cpu device's module (PyTorch's ``torch.cpu``), also what
``ember.get_device_module("cpu")`` returns.

The host runs every op synchronously on one logical device, so streams and events
are placeholders that let device-generic code (``mod.synchronize()``,
``with mod.stream(s):``, ``mod.Event().record()``) run unchanged on the CPU.
``get_capabilities`` reports the instruction sets the kernels can use; ``ember.cpu.amp``
holds PyTorch's deprecated spellings of ``ember.amp.autocast("cpu")`` /
``ember.amp.GradScaler("cpu")``.
"""
from __future__ import annotations

import contextlib
import functools

__all__ = ["is_available", "is_initialized", "synchronize", "current_device", "current_stream", "stream",
           "set_device", "device_count", "get_capabilities", "Stream", "StreamContext", "Event", "amp"]


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


@functools.lru_cache(maxsize=None)
def get_capabilities() -> dict:
    """What the host CPU offers (the instruction-set flags the kernels care about, cores, cache
    sizes), read from ``/proc/cpuinfo`` and ``os`` where available, in torch's keys."""
    import os
    import platform
    flags, name = set(), platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "flags" and not flags:
                    flags = set(value.split())
                elif key == "model name" and not name:
                    name = value.strip()
    except OSError:
        pass
    caps = {"architecture": platform.machine(), "cpu_name": name,
            "num_logical_cores": os.cpu_count() or 1}
    for key, flag in (("sse", "sse"), ("sse2", "sse2"), ("sse3", "pni"), ("ssse3", "ssse3"),
                      ("sse4_1", "sse4_1"), ("sse4_2", "sse4_2"), ("sse4a", "sse4a"), ("avx", "avx"),
                      ("avx2", "avx2"), ("fma3", "fma"), ("fma4", "fma4"), ("f16c", "f16c"),
                      ("avx512_f", "avx512f"), ("avx512_bw", "avx512bw"), ("avx512_cd", "avx512cd"),
                      ("avx512_dq", "avx512dq"), ("avx512_vl", "avx512vl"), ("avx512_vnni", "avx512_vnni"),
                      ("avx512_bf16", "avx512_bf16"), ("avx512_fp16", "avx512_fp16"), ("avx_vnni", "avx_vnni"),
                      ("amx_bf16", "amx_bf16"), ("amx_int8", "amx_int8"), ("amx_tile", "amx_tile"),
                      ("popcnt", "popcnt"), ("bmi", "bmi1"), ("bmi2", "bmi2"), ("lzcnt", "abm")):
        caps[key] = flag in flags
    return caps


from ._amp_spellings import device_amp as _device_amp  # noqa: E402

amp = _device_amp("cpu", "bfloat16")   # torch.cpu.amp: deprecated spellings of ember.amp
