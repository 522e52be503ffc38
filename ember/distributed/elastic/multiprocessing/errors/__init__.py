"""``record`` and ``ChildFailedError``: a worker's failure, as the launcher reports it.

``@record`` on a worker's entry point writes its uncaught exception (type, message, traceback)
to the error file the launcher gave it. When a worker fails, the launcher builds a
``ProcessFailure`` per failed worker (exit code, pid, the error file's traceback when there is
one, else the signal or a pointer to ``@record``) and raises ``ChildFailedError``, whose
message is torch's report: every failure, then the root cause (the earliest)."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps

from .error_handler import ErrorHandler, get_error_handler

__all__ = ["ProcessFailure", "ChildFailedError", "record", "ErrorHandler", "get_error_handler"]

log = logging.getLogger(__name__)

_NA = "<N/A>"
_RECORD_HINT = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


@dataclass
class ProcessFailure:
    """One failed worker: ``local_rank``, ``pid``, ``exitcode`` (negative: killed by that
    signal) and ``error_file``; ``message`` and ``timestamp`` come from the error file when
    the worker wrote one (``@record``), else from the exit status."""

    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: dict = field(init=False)
    message: object = field(init=False)
    timestamp: int = field(init=False)

    def __post_init__(self):
        self.error_file_data = {"message": "<NONE>"}
        self.message = ""
        if self.error_file and os.path.isfile(self.error_file):
            with open(self.error_file) as f:
                self.error_file_data = json.load(f)
            msg = self.error_file_data["message"]
            self.message = msg
            if isinstance(msg, str):
                self.timestamp = int(self.error_file_data.get("timestamp", 0))
            else:
                self.timestamp = int(msg["extraInfo"]["timestamp"])
        else:
            self.error_file = _NA
            self.timestamp = int(time.time())
        if not self.message:
            if self.exitcode < 0:
                self.message = f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
            else:
                self.error_file_data["errorTraits"] = {"category": "system_terminated_error",
                                                       "retryability": "False"}
                self.message = _RECORD_HINT

    def signal_name(self):
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return _NA
        return _NA

    def timestamp_isoformat(self):
        """``YYYY-MM-DD_HH:MM:SS``, local time."""
        return datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


class ChildFailedError(Exception):
    """Raised by the launcher when workers of ``name`` failed; ``failures`` maps global rank
    to ``ProcessFailure``. ``@record`` on the launcher's own entry point copies the root
    cause's error file upwards (for a launcher that is itself a launched worker)."""

    def __init__(self, name, failures):
        if not failures:
            raise AssertionError("ChildFailedError: failures must not be empty")
        self.name = name
        self.failures = failures
        super().__init__(self.format_msg())

    def get_first_failure(self):
        """``(rank, failure)`` of the earliest failure: the root cause."""
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim="=", section_delim="-"):
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root, others, width = "", [], len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            text = self._format_failure(idx, rank, failure)
            width = max(width, *(len(line) for line in text.split("\n")))
            if rank == root_rank:
                root = text
            else:
                others.append(text)
        width = min(width, 60)
        border, section = boarder_delim * width, section_delim * width
        return "\n".join(["", border, title, section, "Failures:", "\n".join(others or ["  <NO_OTHER_FAILURES>"]),
                          section, "Root Cause (first observed failure):", root, border])

    @staticmethod
    def _format_failure(idx, rank, failure):
        msg = failure.message
        if isinstance(msg, dict):
            msg = msg.get("extraInfo", {}).get("py_callstack", msg.get("message", _NA)).replace("\n", "\n  ")
        sig = failure.signal_name()
        sig = f" ({sig})" if sig != _NA else ""
        return (f"[{idx}]:\n"
                f"  time      : {failure.timestamp_isoformat()}\n"
                f"  host      : {socket.getfqdn()}\n"
                f"  rank      : {rank} (local_rank: {failure.local_rank})\n"
                f"  exitcode  : {failure.exitcode} (pid: {failure.pid}) {sig}\n"
                f"  error_file: {failure.error_file}\n"
                f"  traceback : {msg}")


def record(fn, error_handler=None):
    """Decorate a worker's entry point: an uncaught exception is written to the error file
    (``TORCHELASTIC_ERROR_FILE``) and re-raised; ``sys.exit(0)`` becomes a plain return."""
    handler = error_handler or get_error_handler()

    @wraps(fn)
    def wrapper(*args, **kwargs):
        handler.initialize()
        try:
            return fn(*args, **kwargs)
        except SystemExit as se:
            if se.code == 0:
                return None
            raise
        except ChildFailedError as e:
            rank, failure = e.get_first_failure()
            if failure.error_file != _NA:
                handler.dump_error_file(failure.error_file, failure.exitcode)
            else:
                log.info("local_rank %s FAILED with no error file. Decorate your entrypoint fn with @record for "
                         "traceback info. See: https://pytorch.org/docs/stable/elastic/errors.html", rank)
            raise
        except Exception as e:
            handler.record_exception(e)
            raise

    return wrapper
