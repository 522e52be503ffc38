"""Compile-start/compile-end hooks (``ember._dynamo.on_compile_start`` / ``on_compile_end``, as
``torch._dynamo.callback``): tools that time compilation or pause other work while ember
compiles register a function here; it is called with a ``CallbackArgs`` when the outermost
compile begins and when it ends (a compile that starts another inside -- the retrace ember makes
after a graph break -- calls them once). ``ember.dynamo.reset()`` forgets them, as torch's
``reset`` does."""
from __future__ import annotations

import contextlib
import enum
import threading
from dataclasses import dataclass, field
from typing import Callable, List


class CallbackTrigger(enum.Enum):
    DYNAMO = 1
    LAZY_BACKWARD = 2
    TRITON_AUTOTUNING = 3
    CUDAGRAPH_RECORDING = 4


@dataclass
class CallbackArgs:
    callback_trigger: CallbackTrigger
    compile_id: str       # "<frame id>/<compile number of that frame>", as torch's CompileId


@dataclass
class CompilationCallbackHandler:
    start_callbacks: List[Callable[[CallbackArgs], None]] = field(default_factory=list)
    end_callbacks: List[Callable[[CallbackArgs], None]] = field(default_factory=list)

    def __post_init__(self):
        self._pending = 0
        self._lock = threading.Lock()
        self._frame_ids = {}          # code -> frame id, in the order codes were first compiled

    def register_start_callback(self, callback):
        if not callable(callback):
            raise TypeError(f"on_compile_start: argument 'callback' must be callable, got {type(callback).__name__}")
        self.start_callbacks.append(callback)
        return callback

    def register_end_callback(self, callback):
        if not callable(callback):
            raise TypeError(f"on_compile_end: argument 'callback' must be callable, got {type(callback).__name__}")
        self.end_callbacks.append(callback)
        return callback

    def remove_start_callback(self, callback):
        self.start_callbacks.remove(callback)

    def remove_end_callback(self, callback):
        self.end_callbacks.remove(callback)

    def run_start_callbacks(self, args: CallbackArgs) -> None:
        for cb in list(self.start_callbacks):
            cb(args)

    def run_end_callbacks(self, args: CallbackArgs) -> None:
        for cb in list(self.end_callbacks):
            cb(args)

    @contextlib.contextmanager
    def install_callbacks(self, code, compile_number: int, trigger=CallbackTrigger.DYNAMO):
        """Run the start callbacks if this is the outermost compile, the end ones when it ends."""
        with self._lock:
            fid = self._frame_ids.setdefault(code, len(self._frame_ids))
        args = CallbackArgs(trigger, f"{fid}/{compile_number}")
        with self._lock:
            self._pending += 1
            first = self._pending == 1
        try:
            if first:
                self.run_start_callbacks(args)
            yield
        finally:
            with self._lock:
                last = self._pending == 1
            try:
                if last:
                    self.run_end_callbacks(args)
            finally:
                with self._lock:
                    self._pending -= 1

    def clear(self) -> None:
        self.start_callbacks.clear()
        self.end_callbacks.clear()
        self._frame_ids.clear()


handler = callback_handler = CompilationCallbackHandler()


def on_compile_start(callback):
    """Decorator: call ``callback(CallbackArgs)`` when a compile starts; returns ``callback``."""
    return handler.register_start_callback(callback)


def on_compile_end(callback):
    """Decorator: call ``callback(CallbackArgs)`` when a compile ends; returns ``callback``."""
    return handler.register_end_callback(callback)
