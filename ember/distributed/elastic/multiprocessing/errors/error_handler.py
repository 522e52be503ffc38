"""``ErrorHandler``: how a worker's uncaught exception reaches the launcher.

A worker is a separate process (often not even Python's ``multiprocessing``), so the only
channel back to the launcher is a file: the launcher names one per worker in
``TORCHELASTIC_ERROR_FILE`` and reads it after the worker exits. The file is torch's JSON
(``{"message": {"message": "Type: text", "extraInfo": {"py_callstack": ..., "timestamp":
...}}}``) so tools that parse torchrun's error files read ember's too."""
from __future__ import annotations

import faulthandler
import json
import logging
import os
import time
import traceback
import warnings

__all__ = ["ErrorHandler", "get_error_handler"]

log = logging.getLogger(__name__)


class ErrorHandler:
    """Writes the exception being handled to ``TORCHELASTIC_ERROR_FILE`` (or only logs it
    when that variable is unset: the process was not started by the launcher)."""

    def _get_error_file_path(self):
        return os.environ.get("TORCHELASTIC_ERROR_FILE")

    def initialize(self):
        """Dump Python stacks on fatal signals (SIGSEGV...), which no ``except`` can catch."""
        try:
            faulthandler.enable(all_threads=True)
        except Exception as e:  # noqa: BLE001 - e.g. stderr closed: the worker still runs
            warnings.warn(f"Unable to enable fault handler. {type(e).__name__}: {e}", stacklevel=2)

    def record_exception(self, e: BaseException):
        """Call inside ``except``: the traceback is the one being handled."""
        path = self._get_error_file_path()
        if not path:
            return
        payload = {"message": {"message": f"{type(e).__name__}: {e}",
                               "extraInfo": {"py_callstack": traceback.format_exc(),
                                             "timestamp": str(int(time.time()))}}}
        with open(path, "w") as f:
            json.dump(payload, f)

    def dump_error_file(self, rootcause_error_file, error_code=0):
        """Copy a child's error file to this process's own (a launcher launched by a launcher),
        stamping the child's exit code, which the child could not know when killed by a signal."""
        with open(rootcause_error_file) as f:
            data = json.load(f)
        if error_code and isinstance(data.get("message"), dict):
            data["message"]["errorCode"] = error_code
        mine = self._get_error_file_path()
        if not mine:
            log.error("no error file defined for parent, to copy child error file (%s)", rootcause_error_file)
            return
        if os.path.isfile(mine):
            log.warning("%s already exists and will be overwritten.", mine)
            os.remove(mine)
        with open(mine, "w") as f:
            json.dump(data, f)


def get_error_handler():
    return ErrorHandler()
