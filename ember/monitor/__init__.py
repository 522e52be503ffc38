"""ember.monitor: torch.monitor's windowed statistics and event logging, in Python.

A :class:`Stat` aggregates the values added to it over a time window (``window_size``, a
``datetime.timedelta``). When a window ends -- noticed at the next ``add`` -- or when it has
collected ``max_samples`` values, its aggregations are published: ``get()`` returns them and
an :class:`Event` named ``"torch.monitor.Stat"`` with data ``{"<name>.<aggregation>": value}``
goes to every registered event handler (unless the window saw no values); a Stat destroyed
mid-window publishes that window too. Values added after a window was closed early by
``max_samples`` are dropped until the next window starts.
This is torch.monitor's C++ semantics, including two of its details: ``Aggregation.VALUE``
is accepted but never reported, and a ``bool`` in an Event's data is stored as a float.
"""
from __future__ import annotations

import datetime as _dt
import enum
import threading
import time

__all__ = ["Aggregation", "Stat", "Event", "EventHandlerHandle", "data_value_t", "log_event",
           "register_event_handler", "unregister_event_handler", "TensorboardEventHandler", "STAT_EVENT",
           "VALUE", "MEAN", "COUNT", "SUM", "MAX", "MIN"]

STAT_EVENT = "torch.monitor.Stat"


class Aggregation(enum.Enum):
    """How a Stat summarizes a window's values."""
    VALUE = 0
    MEAN = 2
    COUNT = 3
    SUM = 4
    MAX = 5
    MIN = 6


VALUE, MEAN, COUNT, SUM, MAX, MIN = (Aggregation.VALUE, Aggregation.MEAN, Aggregation.COUNT, Aggregation.SUM,
                                     Aggregation.MAX, Aggregation.MIN)

# the orders torch reports them in: get()'s dict, and an event's data keys
_GET_ORDER = (Aggregation.MIN, Aggregation.MAX, Aggregation.SUM, Aggregation.COUNT, Aggregation.MEAN)
_EVENT_ORDER = (Aggregation.COUNT, Aggregation.SUM, Aggregation.MEAN, Aggregation.MAX, Aggregation.MIN)


class data_value_t:
    """
        data_value_t is one of ``str``, ``float``, ``int``, ``bool``.
    """

    def __init__(self):
        raise TypeError("data_value_t cannot be instantiated: an Event's data values are str, float, int or bool")


def _check_data_value(key, value):
    if isinstance(value, bool):
        return float(value)          # as torch's binding converts it
    if isinstance(value, (str, float, int)):
        return value
    raise TypeError(f"Event: data[{key!r}] must be a str, float, int or bool (data_value_t), "
                    f"got {type(value).__name__}")


class Event:
    """A named, timestamped record of ``str -> data_value_t`` data, handed to the event handlers."""

    def __init__(self, name: str, timestamp: _dt.datetime, data):
        if not isinstance(name, str):
            raise TypeError(f"Event: name must be a str, got {type(name).__name__}")
        if not isinstance(timestamp, _dt.datetime):
            raise TypeError(f"Event: timestamp must be a datetime.datetime, got {type(timestamp).__name__}")
        if not hasattr(data, "items"):
            raise TypeError(f"Event: data must be a mapping of str to data_value_t, got {type(data).__name__}")
        checked = {}
        for k, v in data.items():
            if not isinstance(k, str):
                raise TypeError(f"Event: data keys must be str, got {type(k).__name__}")
            checked[k] = _check_data_value(k, v)
        self.name = name
        self.timestamp = timestamp
        self.data = checked

    def __repr__(self):
        return f"Event(name={self.name!r}, timestamp={self.timestamp!r}, data={self.data!r})"


class EventHandlerHandle:
    """What register_event_handler returns; pass it to unregister_event_handler."""

    __slots__ = ("_handler", "__weakref__")

    def __init__(self, handler):
        self._handler = handler


_handlers: list = []
_handlers_lock = threading.RLock()      # reentrant: a Stat collected by GC mid-call may publish


def register_event_handler(callback) -> EventHandlerHandle:
    """Call ``callback(event)`` for every event logged from now on (in registration order)."""
    if not callable(callback):
        raise TypeError(f"register_event_handler: callback must be callable, got {type(callback).__name__}")
    handle = EventHandlerHandle(callback)
    with _handlers_lock:
        _handlers.append(handle)
    return handle


def unregister_event_handler(handler: EventHandlerHandle) -> None:
    """Stop sending events to the handler registered with ``handler``."""
    if not isinstance(handler, EventHandlerHandle):
        raise TypeError("unregister_event_handler: expected the EventHandlerHandle that register_event_handler "
                        f"returned, got {type(handler).__name__}")
    with _handlers_lock:
        if handler not in _handlers:
            raise ValueError("unregister_event_handler: this handler is not registered (already unregistered?)")
        _handlers.remove(handler)


def log_event(event: Event) -> None:
    """Send ``event`` to every registered handler (a handler's exception propagates)."""
    if not isinstance(event, Event):
        raise TypeError(f"log_event: expected an Event, got {type(event).__name__}")
    with _handlers_lock:
        handlers = list(_handlers)
    for h in handlers:
        h._handler(event)


class _Window:
    """The running aggregates of one window."""
    __slots__ = ("count", "sum", "max", "min")

    def __init__(self):
        self.count = 0
        self.sum = 0.0
        self.max = 0.0
        self.min = 0.0


class Stat:
    """Aggregates values over time windows (see the module docstring)."""

    def __init__(self, name: str, aggregations, window_size: _dt.timedelta, max_samples: int = 2 ** 63 - 1):
        if not isinstance(name, str):
            raise TypeError(f"Stat: name must be a str, got {type(name).__name__}")
        aggs = list(aggregations)
        for a in aggs:
            if not isinstance(a, Aggregation):
                raise TypeError(f"Stat: aggregations must be ember.monitor.Aggregation members, got {a!r}")
        if not isinstance(window_size, _dt.timedelta):
            raise TypeError("Stat: window_size must be a datetime.timedelta (torch.monitor's windows are "
                            f"intervals of time), got {type(window_size).__name__}")
        if window_size <= _dt.timedelta(0):
            raise ValueError(f"Stat: window_size must be positive, got {window_size}")
        if isinstance(max_samples, bool) or not isinstance(max_samples, int):
            raise TypeError(f"Stat: max_samples must be an int, got {type(max_samples).__name__}")
        self._name = name
        self._aggs = frozenset(aggs)
        self._window_s = window_size.total_seconds()
        self._max_samples = max_samples
        self._lock = threading.Lock()
        self._current = _Window()
        self._prev = _Window()
        self._window_id = self._current_window_id()
        self._closed_window = None      # the window already published early by max_samples

    def _current_window_id(self):
        return int(time.monotonic() // self._window_s)

    @property
    def name(self) -> str:
        """The name of the stat, used as the prefix of its events' data keys."""
        return self._name

    @property
    def count(self) -> int:
        """Number of values collected in the current window (reset when it is published)."""
        return self._current.count

    def add(self, v) -> None:
        """Add a value to the current window."""
        if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
            raise TypeError(f"Stat.add: v must be a number, got {type(v).__name__}")
        v = float(v)
        with self._lock:
            self._roll_over()
            if self._closed_window == self._window_id:
                return       # this window was closed by max_samples: dropped
            w = self._current
            if Aggregation.MAX in self._aggs and (w.count == 0 or v > w.max):
                w.max = v
            if Aggregation.MIN in self._aggs and (w.count == 0 or v < w.min):
                w.min = v
            w.sum += v
            w.count += 1
            if w.count >= self._max_samples:
                self._publish()
                self._closed_window = self._window_id

    def get(self) -> dict:
        """The aggregations of the last published window (zeros before the first one)."""
        with self._lock:
            return self._values(self._prev, _GET_ORDER)

    def _roll_over(self):
        wid = self._current_window_id()
        if wid != self._window_id:
            self._publish()
            self._window_id = wid

    def _values(self, w, order):
        out = {}
        for a in order:
            if a not in self._aggs:
                continue
            if a is Aggregation.MEAN:
                out[a] = w.sum / w.count if w.count else 0.0
            elif a is Aggregation.COUNT:
                out[a] = float(w.count)
            else:
                out[a] = {Aggregation.SUM: w.sum, Aggregation.MAX: w.max, Aggregation.MIN: w.min}[a]
        return out

    def _publish(self):
        self._prev, self._current = self._current, _Window()
        if self._prev.count == 0:
            return
        data = {f"{self._name}.{a.name.lower()}": v for a, v in self._values(self._prev, _EVENT_ORDER).items()}
        log_event(Event(STAT_EVENT, _dt.datetime.now(), data))

    def __del__(self):
        # torch's Stat publishes its unfinished window when it is destroyed
        current = getattr(self, "_current", None)
        if current is not None and current.count:
            self._publish()

    def __repr__(self):
        return f"Stat(name={self._name!r}, aggregations={sorted(self._aggs, key=lambda a: a.value)})"


class TensorboardEventHandler:
    """An event handler writing Stat events as scalars to a SummaryWriter
    (``ember.utils.tensorboard.SummaryWriter``); other events are ignored."""

    def __init__(self, writer) -> None:
        self._writer = writer

    def __call__(self, event: Event) -> None:
        if event.name == STAT_EVENT:
            for k, v in event.data.items():
                self._writer.add_scalar(k, v, walltime=event.timestamp.timestamp())
