"""Native helper libraries built on first use (the convolution kernels, the fused optimizer).

A helper library is compiled by the inductor's code cache (same compiler, flags and on-disk
cache) the first time a kernel needs it. Building can fail -- no C++ compiler, an
unexpected BLAS -- and then the caller keeps its numpy formulation: the failure is logged
once and remembered, so later calls do not retry a compile that cannot succeed.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable


class LazyLibrary:
    """``get()`` returns ``build()``'s result, built once (thread-safe), or None when it raised
    (``what`` and the error logged once as a warning on ``logger``)."""

    def __init__(self, build: Callable[[], Any], what: str, logger: logging.Logger):
        self._build, self._what, self._log = build, what, logger
        self._lock = threading.Lock()
        self._done = False
        self._value = None

    def get(self):
        if self._done:
            return self._value
        with self._lock:
            if not self._done:
                try:
                    self._value = self._build()
                except Exception as e:  # noqa: BLE001 - any failure: the caller's numpy path runs
                    self._log.warning("ember: %s unavailable (%s)", self._what, e)
                    self._value = None
                self._done = True
        return self._value
