"""torch's device-agnostic ``Stream`` and ``Event`` (``torch.Stream()``, ``torch.Event()``), and
the odd top-level objects that go with them (``SymFloat``, ``Tag``).

Why: accelerator-generic code (``torch.accelerator``, FSDP2, pipelining) makes ``torch.Stream``
and ``torch.Event`` objects for the current device and calls ``synchronize``/``wait_stream``/
``query`` on them. On the CPU -- ember's one real device -- work is synchronous: a stream is
always idle, and torch's CPU backend has no events (recording one raises). ember follows the CPU
semantics; a ``cuda`` stream is refused as torch without CUDA refuses it.
"""
from __future__ import annotations

import enum

__all__ = ["Stream", "Event", "SymFloat", "Tag"]


def _device_type(device, what):
    from . import types as _t
    if device is None:
        return "cpu", -1
    d = _t.device(device) if not isinstance(device, _t.device) else device
    if d.type != "cpu":
        raise RuntimeError(f"ember is not linked with support for {d.type} devices")
    return "cpu", -1 if d.index is None else d.index


class Stream:
    """A queue of work on a device; on the CPU everything runs at once, so it is always done."""

    def __init__(self, device=None, *, priority=0):
        self.device_type, self.device_index = _device_type(device, "Stream")
        self.stream_id = 0
        self.priority = priority

    @property
    def device(self):
        from . import types as _t
        return _t.device(self.device_type) if self.device_index < 0 else _t.device(self.device_type,
                                                                                    self.device_index)

    def query(self):
        """True: the CPU stream has no pending work."""
        return True

    def synchronize(self):
        """Wait for the stream's work: none is pending on the CPU."""
        return None

    def wait_stream(self, stream):
        if not isinstance(stream, Stream):
            raise TypeError(f"wait_stream(): argument 'stream' must be Stream, not {type(stream).__name__}")
        raise RuntimeError("cpu backend doesn't support events.")

    def wait_event(self, event):
        if not isinstance(event, Event):
            raise TypeError(f"wait_event(): argument 'event' must be Event, not {type(event).__name__}")
        raise RuntimeError("cpu backend doesn't support events.")

    def record_event(self, event=None):
        raise RuntimeError("cpu backend doesn't support events.")

    def is_capturing(self):
        return False

    @property
    def native_handle(self):
        return 0

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device_type, self.device_index, self.stream_id) == \
            (other.device_type, other.device_index, other.stream_id)

    def __hash__(self):
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self):
        return (f"ember.Stream device_type={self.device_type}, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")


class Event:
    """A marker in a stream's work. torch's CPU backend has no events: making one works,
    recording, synchronizing and waiting on one raise, and an unrecorded one is complete."""

    def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        self.device_type, self.device_index = _device_type(device, "Event")
        self.event_flag = 1 if enable_timing else 0
        self.event_id = 0
        self._timing = enable_timing

    @property
    def device(self):
        from . import types as _t
        return _t.device(self.device_type)

    def query(self):
        return True

    def record(self, stream=None):
        raise RuntimeError("cpu backend doesn't support events.")

    def synchronize(self):
        raise RuntimeError("cpu backend doesn't support events.")

    def wait(self, stream=None):
        raise RuntimeError("cpu backend doesn't support events.")

    def elapsed_time(self, end_event):
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): argument 'end_event' must be Event, not {type(end_event).__name__}")
        if not (self._timing and end_event._timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        # a CPU event can never be recorded (record() raises)
        raise ValueError("Both events must be recorded before calculating elapsed time.")

    def ipc_handle(self):
        raise RuntimeError("cpu backend doesn't support events.")

    @classmethod
    def from_ipc_handle(cls, device, ipc_handle):
        raise RuntimeError("cpu backend doesn't support events.")

    def __repr__(self):
        return (f"ember.Event device_type={self.device_type}, device_index={self.device_index}, "
                f"event_flag={self.event_flag}, event_id={self.event_id}")


class SymFloat:
    """A float computed from symbolic sizes. ember decides float arithmetic on sizes at once (a
    ``SymInt / n`` is a float), so a SymFloat is a float together with the expression it came from,
    for code that checks ``isinstance(x, ember.SymFloat)``; every operation uses its value."""

    __slots__ = ("_value", "expr")

    def __init__(self, value, expr=None):
        self._value = float(value)
        self.expr = expr

    def __float__(self):
        return self._value

    def __repr__(self):
        return repr(self._value) if self.expr is None else str(self.expr)

    def __bool__(self):
        return bool(self._value)

    def __hash__(self):
        raise TypeError("unhashable type: non-nested SymFloat")

    def is_integer(self):
        return self._value.is_integer()

    def as_integer_ratio(self):
        return self._value.as_integer_ratio()

    def conjugate(self):
        return self._value

    def hex(self):
        return self._value.hex()

    def __neg__(self):
        return -self._value

    def __abs__(self):
        return abs(self._value)

    def __trunc__(self):
        return int(self._value)


def _binop(name):
    op = getattr(float, name)

    def f(self, other):
        if isinstance(other, SymFloat):
            other = other._value
        return op(self._value, other)
    f.__name__ = name
    return f


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
           "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__eq__", "__ne__",
           "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(SymFloat, _n, _binop(_n))
del _n


class Tag(enum.Enum):
    """Operator tags (``torch.Tag``): what a schema says about an op (``pointwise``, ``inplace_view``,
    ``nondeterministic_seeded`` ...). ember's registry tags its ops with these names too."""

    core = 0
    cudagraph_unsafe = 1
    data_dependent_output = 2
    dynamic_output_shape = 3
    flexible_layout = 4
    generated = 5
    inplace = 6
    inplace_view = 7
    maybe_aliasing_or_mutating = 8
    needs_contiguous_strides = 9
    needs_exact_strides = 10
    needs_fixed_stride_order = 11
    nondeterministic_bitwise = 12
    nondeterministic_seeded = 13
    out = 14
    out_variant = 15
    pointwise = 16
    pt2_compliant_tag = 17
    reduction = 18
    view_copy = 19

    def __repr__(self):
        return f"<Tag.{self.name}: {self.value}>"
