"""``ember.futures``: a value that becomes available later (``torch.futures``).

ember runs everything eagerly in one process, so its futures are mostly already complete
(``jit.fork`` runs the function at once), but user code and RPC-style helpers also create
pending ones and complete them from another thread; waiting blocks on a condition variable.
Callbacks run, in the order they were added, on the thread that completes the future (or at
once when it is already complete). ``then`` chains: the callback's return value completes
the new future; an exception inside it completes the new future with a RuntimeError saying so.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Generic, List, Optional, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")

_log = logging.getLogger(__name__)
_ALREADY_COMPLETED = ("Attempting to mark a completed Future as complete again. Note that a Future can only be "
                      "marked completed once.")


class Future(Generic[T]):
    """A result (or an exception) some code will provide; see the module."""

    def __init__(self, *, devices: Optional[list] = None):
        if devices is not None:
            from .types import device as _device
            bad = [d for d in devices if _device(d).type != "cpu"]
            if bad:
                raise NotImplementedError(f"ember.futures.Future: devices={bad!r} -- ember futures track no "
                                          "accelerator streams; only CPU devices are supported")
        self._cond = threading.Condition()
        self._done = False
        self._result = None
        self._exception: Optional[BaseException] = None
        self._callbacks: List[Callable] = []

    def done(self) -> bool:
        """Whether a result or an exception has been set (never blocks)."""
        return self._done

    def wait(self) -> T:
        """Block until the future completes; its result, or raise its exception."""
        with self._cond:
            while not self._done:
                self._cond.wait()
        if self._exception is not None:
            raise self._exception
        return self._result

    def value(self) -> T:
        """The result of a completed future (raising its exception); never blocks."""
        if not self._done:
            raise RuntimeError("ember.futures.Future.value(): the Future is not completed yet; call wait() to "
                               "block until it is")
        if self._exception is not None:
            raise self._exception
        return self._result

    def set_result(self, result: T) -> None:
        """Complete the future with ``result``, wake the waiters and run the callbacks."""
        self._complete(result, None)

    def set_exception(self, result: Exception) -> None:
        """Complete the future with an exception, raised by ``wait()`` and ``value()``."""
        assert isinstance(result, Exception), f"{result} is of type {type(result)}, not an Exception."
        self._complete(None, result)

    def _complete(self, result, exception):
        with self._cond:
            if self._done:
                raise RuntimeError(_ALREADY_COMPLETED)
            self._result, self._exception, self._done = result, exception, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def _on_done(self, callback):
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback: Callable[["Future[T]"], S]) -> "Future[S]":
        """A new future completed with ``callback(self)`` once this one completes."""
        nxt: Future = Future()

        def run(fut):
            try:
                out = callback(fut)
            except Exception as exc:  # noqa: BLE001 - handed to the chained future
                err = RuntimeError(f"Got the following error when running the callback: {type(exc).__name__}: {exc}")
                err.__cause__ = exc
                nxt.set_exception(err)
            else:
                nxt.set_result(out)
        self._on_done(run)
        return nxt

    def add_done_callback(self, callback: Callable[["Future[T]"], None]) -> None:
        """Run ``callback(self)`` once complete; its return value is ignored and an exception it
        raises is logged, not propagated (as torch)."""
        def run(fut):
            try:
                callback(fut)
            except Exception as exc:  # noqa: BLE001 - a done-callback must not break the completer
                _log.error("Got the following error when running the callback: %s: %s", type(exc).__name__, exc)
        self._on_done(run)


def _check_futures(futures, fn):
    futures = list(futures)
    for f in futures:
        if not isinstance(f, Future):
            raise TypeError(f"ember.futures.{fn}: expected a list of ember.futures.Future, got an element of type "
                            f"{type(f).__name__}")
    return futures


def collect_all(futures: List[Future]) -> Future[List[Future]]:
    """A future completed with the list ``futures`` once all of them complete, or with the
    first exception any of them completes with."""
    futures = _check_futures(futures, "collect_all")
    out: Future = Future()
    if not futures:
        out.set_result([])
        return out
    lock = threading.Lock()
    remaining = [len(futures)]

    def one_done(fut):
        with lock:
            if out.done():
                return
            if fut._exception is not None:
                out.set_exception(fut._exception)
                return
            remaining[0] -= 1
            if remaining[0] == 0:
                out.set_result(futures)
    for f in futures:
        f._on_done(one_done)
    return out


def wait_all(futures: List[Future]) -> list:
    """The results of ``futures``, waiting for all; raises the first exception among them."""
    return [f.wait() for f in collect_all(futures).wait()]
