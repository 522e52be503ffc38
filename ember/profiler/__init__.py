"""``ember.profiler``: where the time of a piece of ember code goes, op by op (``torch.profiler``).

    with ember.profiler.profile(record_shapes=True) as prof:
        with ember.profiler.record_function("train_step"):
            loss = model(x).sum(); loss.backward()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

What is recorded, on the thread that entered the profiler (wall-clock times):

* every kernel op the dispatcher runs, forward and backward (``ember::mm``, ...): the
  profiler is a dispatch mode below autograd, so an op that decomposes shows as the kernels
  it runs; ops dispatched inside another kernel count toward that kernel;
* each call of a compiled graph (``ember::compiled_graph``) -- its generated kernels are not
  ops (see ``EMBER_LOGS=kernel_times`` for a per-kernel table of compiled code); the backward
  of a compiled training graph runs inside the autograd engine and is counted by an enclosing
  ``record_function`` only;
* ``record_function`` ranges. Self time is a range's time minus the ranges and ops inside it.

No CUDA activity is recorded (ember's GPU kernels are timed by ``benchmarks/``); asking for
``ProfilerActivity.CUDA`` is accepted and records the CPU side. Memory, stack, FLOP and
module recording are not implemented: asking for them raises an error that names them.

Also here, as in ``torch.profiler``: ``ExecutionTraceObserver`` (torch's execution-trace JSON
of the ops run, ``_execution_trace.py``), ``itt`` (no ITT in ember: annotations are no-ops),
``KinetoStepTracker``, ``supported_activities``/``kineto_available`` (ember's profiler is not
Kineto), ``register_optimizer_step_post_hook`` and the ``profiler.profiler`` module.
"""
from __future__ import annotations

import enum
import functools
import json
import os
import threading
import time
from collections import OrderedDict
from typing import Callable, List, Optional

from .._state import STATE

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "EventList", "FunctionEvent", "FunctionEventAvg", "supported_activities",
           "kineto_available", "DeviceType", "ExecutionTraceObserver", "KinetoStepTracker",
           "register_optimizer_step_post_hook", "itt"]

PROFILER_STEP_NAME = "ProfilerStep"


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """Step number -> action, as ``torch.profiler.schedule``: skip ``skip_first`` steps, then
    cycles of ``wait`` idle, ``warmup`` (profiling, discarded) and ``active`` recorded steps, the
    last of which saves (calls ``on_trace_ready``); ``repeat`` cycles (0: forever)."""
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule(): {name} must be a non-negative int, got {v!r}")
    if active < 1:
        raise ValueError("schedule(): active must be at least 1")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait and step < wait:
            return ProfilerAction.NONE
        cycle = wait + warmup + active
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


# ---------------------------------------------------------------------- events
class FunctionEvent:
    """One recorded op call or range: name, start/end (ns, perf_counter), self time."""
    __slots__ = ("name", "start_ns", "end_ns", "child_ns", "input_shapes", "thread", "kind")

    def __init__(self, name, start_ns, kind, input_shapes=None):
        self.name = name
        self.start_ns = start_ns
        self.end_ns = start_ns
        self.child_ns = 0
        self.input_shapes = input_shapes
        self.thread = threading.get_ident()
        self.kind = kind

    key = property(lambda self: self.name)
    cpu_time_total = property(lambda self: (self.end_ns - self.start_ns) / 1e3)      # us, as PyTorch
    self_cpu_time_total = property(lambda self: (self.end_ns - self.start_ns - self.child_ns) / 1e3)

    def __repr__(self):
        return f"<FunctionEvent {self.name} cpu_time_total={self.cpu_time_total:.3f}us>"


class FunctionEventAvg:
    """The events of one name (and input shapes, when grouped by them), summed."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, ev: FunctionEvent):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / max(self.count, 1)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


_SORT_KEYS = {"cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
              "cpu_time": "cpu_time", "self_cpu_time": "self_cpu_time", "count": "count"}


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of events (or of their averages) with PyTorch's ``table()``."""

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: Optional[str] = None, top_level_events_only: bool = False, **_ignored) -> str:
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table(): sort_by must be one of {sorted(_SORT_KEYS)} (ember records no "
                                 f"device time or memory), got {sort_by!r}")
            rows.sort(key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        shapes = any(getattr(e, "input_shapes", None) for e in rows)
        width = min(max([len("Name")] + [len(e.key) for e in rows]), max_name_column_width)
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        head = ["Name".rjust(width)] + [c.rjust(12) for c in cols] + (["Input Shapes"] if shapes else [])
        line = "  ".join("-" * len(h) for h in head)
        out = [header] if header else []
        out += [line, "  ".join(head), line]
        for e in rows:
            name = e.key if len(e.key) <= width else e.key[:width - 3] + "..."
            count = getattr(e, "count", 1)
            cells = [name.rjust(width), f"{100 * e.self_cpu_time_total / total_self:.2f}%".rjust(12),
                     _fmt_us(e.self_cpu_time_total).rjust(12),
                     f"{100 * e.cpu_time_total / total_self:.2f}%".rjust(12), _fmt_us(e.cpu_time_total).rjust(12),
                     _fmt_us(e.cpu_time_total / max(count, 1)).rjust(12), str(count).rjust(12)]
            if shapes:
                cells.append(str(e.input_shapes or []))
            out.append("  ".join(cells))
        out += [line, f"Self CPU time total: {_fmt_us(sum(e.self_cpu_time_total for e in self))}", ""]
        return "\n".join(out)

    def key_averages(self, group_by_input_shape: bool = False) -> "EventList":
        groups: "OrderedDict[tuple, FunctionEventAvg]" = OrderedDict()
        for ev in self:
            shapes = ev.input_shapes if group_by_input_shape else None
            k = (ev.name, str(shapes) if shapes is not None else None)
            if k not in groups:
                groups[k] = FunctionEventAvg(ev.name, shapes)
            groups[k].add(ev)
        return EventList(groups.values())

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def __str__(self):
        return self.table()


# ---------------------------------------------------------------------- recording
def _shapes(args):
    out = []
    for a in args:
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            out.append(list(a.shape))
        elif isinstance(a, (list, tuple)) and a and all(hasattr(t, "shape") for t in a):
            out.append([list(t.shape) for t in a])
        else:
            out.append([])
    return out


class _Recorder:
    """The dispatch mode that times ops; ``open``/``close`` time ranges (record_function,
    compiled graphs). Events nest through ``stack``: a finished one adds its time to its parent's
    children, so self time excludes what ran inside it."""

    def __init__(self, record_shapes: bool):
        self.record_shapes = record_shapes
        self.events: List[FunctionEvent] = []
        self.stack: List[FunctionEvent] = []
        self.thread = threading.get_ident()

    def open(self, name, kind, shapes=None) -> FunctionEvent:
        ev = FunctionEvent(name, time.perf_counter_ns(), kind, shapes)
        self.stack.append(ev)
        return ev

    def close(self, ev: FunctionEvent):
        ev.end_ns = time.perf_counter_ns()
        # pop through ev (a range left open by an exception inside it closes with it)
        while self.stack:
            top = self.stack.pop()
            if top is ev:
                break
        if self.stack:
            self.stack[-1].child_ns += ev.end_ns - ev.start_ns
        self.events.append(ev)

    def __ember_dispatch__(self, op, args):
        from ..ops import registry
        ev = self.open(f"ember::{op.name}", "op", _shapes(args) if self.record_shapes else None)
        try:
            return registry.below_autograd(op, args)
        finally:
            self.close(ev)


_ACTIVE: List["profile"] = []          # profilers recording now (compiled-graph timing on while any)
_AOT_CALL = []


def _patch_compiled_graphs(on: bool):
    """Time compiled-graph calls while a profiler records: ``AOTModule.__call__`` is swapped
    for a timed one (no cost at all when no profiler is active)."""
    from ..aot.runtime import AOTModule
    if on and not _AOT_CALL:
        orig = AOTModule.__call__
        _AOT_CALL.append(orig)

        @functools.wraps(orig)
        def timed(self, *inputs):
            rec = _current_recorder()
            if rec is None:
                return orig(self, *inputs)
            ev = rec.open("ember::compiled_graph", "compiled",
                          _shapes(inputs) if rec.record_shapes else None)
            try:
                return orig(self, *inputs)
            finally:
                rec.close(ev)
        AOTModule.__call__ = timed
    elif not on and _AOT_CALL:
        AOTModule.__call__ = _AOT_CALL.pop()


def _current_recorder() -> Optional[_Recorder]:
    me = threading.get_ident()
    for p in reversed(_ACTIVE):
        rec = p._recorder
        if rec is not None and rec.thread == me:
            return rec
    return None


class profile:
    """Record ops, compiled-graph calls and ``record_function`` ranges (see the module docstring).
    Use as a context manager (or ``start()``/``stop()``); with a ``schedule``, call ``step()``
    once per iteration and ``on_trace_ready(prof)`` runs at the end of each active cycle."""

    def __init__(self, activities=None, *, schedule: Optional[Callable[[int], ProfilerAction]] = None,
                 on_trace_ready: Optional[Callable[["profile"], None]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: Optional[bool] = None, enabled: bool = True, **_legacy):
        for flag, name in ((profile_memory, "profile_memory"), (with_stack, "with_stack"),
                           (with_flops, "with_flops"), (with_modules, "with_modules")):
            if flag:
                raise NotImplementedError(f"ember.profiler.profile({name}=True): ember's profiler records op "
                                          "times and input shapes only")
        for a in activities or ():
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile(activities=...): expected ProfilerActivity members, got {a!r}")
        self.record_shapes = record_shapes
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.enabled = enabled
        self.acc_events = acc_events
        self.step_num = 0
        self._recorder: Optional[_Recorder] = None
        self._events: EventList = EventList()
        self._action = ProfilerAction.RECORD if schedule is None else schedule(0)
        self.execution_trace_observer = execution_trace_observer
        KinetoStepTracker.init_step_count(PROFILER_STEP_NAME)

    # -- on / off --------------------------------------------------------------------
    def _begin(self):
        if self._recorder is not None:
            return
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.start()
        self._recorder = _Recorder(self.record_shapes)
        STATE.modes.insert(0, self._recorder)      # bottom of the stack: fake/tracing modes stay above
        _ACTIVE.append(self)
        _patch_compiled_graphs(True)

    def _end(self, keep: bool):
        rec = self._recorder
        if rec is None:
            return
        self._recorder = None
        try:
            STATE.modes.remove(rec)
        except ValueError:
            pass
        _ACTIVE.remove(self)
        if not _ACTIVE:
            _patch_compiled_graphs(False)
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.stop()
        if keep:
            self._events = EventList((self._events if self.acc_events else []) + rec.events)

    def start(self):
        if self.enabled and self._action is not ProfilerAction.NONE:
            self._begin()
        return self

    def stop(self):
        if self._recorder is None:
            return
        keep = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        self._end(keep)
        if keep and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        KinetoStepTracker.erase_step_count(PROFILER_STEP_NAME)
        if self.execution_trace_observer is not None:
            self.execution_trace_observer.cleanup()      # writes its file
        return False

    def step(self):
        """End one iteration: move along the schedule (start, keep or drop the recording)."""
        if self.schedule is None:
            self.step_num += 1
            return
        prev = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        if prev is ProfilerAction.RECORD_AND_SAVE:
            self._end(keep=True)
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        elif prev is ProfilerAction.WARMUP and self._action is ProfilerAction.NONE:
            self._end(keep=False)
        if prev is ProfilerAction.WARMUP and self._action in (ProfilerAction.RECORD,
                                                               ProfilerAction.RECORD_AND_SAVE):
            self._end(keep=False)            # warm-up events are discarded
        if self.enabled and self._action is not ProfilerAction.NONE:
            self._begin()

    # -- results ---------------------------------------------------------------------
    def events(self) -> EventList:
        return EventList(sorted(self._events, key=lambda e: e.start_ns))

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self.events().key_averages(group_by_input_shape)

    def table(self, *args, **kwargs) -> str:
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path: str):
        """The events as a Chrome trace (chrome://tracing, Perfetto): one complete event each."""
        evs = self.events()
        t0 = min((e.start_ns for e in evs), default=0)
        trace = {"traceEvents": [
            {"name": e.name, "ph": "X", "cat": {"op": "cpu_op", "user": "user_annotation",
                                                  "compiled": "compiled_graph"}[e.kind],
             "ts": (e.start_ns - t0) / 1e3, "dur": (e.end_ns - e.start_ns) / 1e3, "pid": os.getpid(),
             "tid": e.thread, "args": ({"Input Dims": e.input_shapes} if e.input_shapes is not None else {})}
            for e in evs], "displayTimeUnit": "ms"}
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(trace, f)
        os.replace(tmp, path)
        return path

    @property
    def profiler(self):
        return self           # torch code reads prof.profiler.function_events sometimes

    @property
    def function_events(self) -> EventList:
        return self.events()


def tensorboard_trace_handler(dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False):
    """An ``on_trace_ready`` that writes each saved cycle as a Chrome trace file in ``dir_name``
    (TensorBoard's profiler plugin reads that format)."""
    if use_gzip:
        raise NotImplementedError("tensorboard_trace_handler(use_gzip=True) is not implemented")

    def handler(prof: profile):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json"))
    return handler


class record_function:
    """A named range in the profile (context manager or decorator); costs nothing when no
    profiler records on this thread. Inside compiled code the range is dropped (dynamo traces
    the block as plain code: the graph's time shows as ``ember::compiled_graph``)."""

    def __init__(self, name: str, args: Optional[str] = None):
        self.name = name
        self.args = args
        self._ev = None
        self._rec = None

    def __enter__(self):
        rec = _current_recorder() if _ACTIVE else None
        if rec is not None:
            self._rec, self._ev = rec, rec.open(self.name, "user")
        return self

    def __exit__(self, *exc):
        if self._ev is not None:
            self._rec.close(self._ev)
            self._ev = self._rec = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            with record_function(self.name, self.args):
                return fn(*a, **k)
        wrapped._ember_dynamo_inline = fn     # compiled code traces ``fn`` itself (no range)
        return wrapped


# ---------------------------------------------------------------------- torch.profiler's other names
from . import itt  # noqa: E402
from ._execution_trace import ExecutionTraceObserver  # noqa: E402
from ._kineto_compat import DeviceType, ProfilerConfig, ProfilerState, kineto_available, supported_activities  # noqa: E402
from ._step_tracker import KinetoStepTracker  # noqa: E402

_supported_activities = supported_activities


def register_optimizer_step_post_hook(hook):
    """``ember.optim.optimizer.register_optimizer_step_post_hook``: ``hook(optimizer, args, kwargs)``
    after every optimizer's ``step()``; returns a removable handle. (A function, not a re-export:
    ember.optim imports ember.autograd, which imports this module.)"""
    from ..optim.optimizer import register_optimizer_step_post_hook as register
    return register(hook)


def _optimizer_post_hook(optimizer, args, kwargs):
    """An optimizer step-post hook counting steps for the profiler (``KinetoStepTracker``)."""
    KinetoStepTracker.increment_step("Optimizer")


from . import profiler  # noqa: E402,F401 - ``ember.profiler.profiler``, torch.profiler.profiler's names
