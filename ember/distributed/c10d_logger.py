"""``torch.distributed.c10d_logger``: the logger c10d reports failures and timings to, and the
decorators that do the reporting.

* ``_get_or_create_logger(destination="default")``: a ``logging.Logger`` named
  ``c10d-<HandlerType>-<destination>`` writing (at DEBUG and up, not propagating) through
  ``logging_handlers._log_handlers[destination]``; ``_c10d_logger`` is the default one.
* ``_get_msg_dict(func_name, *args, **kwargs)``: what a record says about the call: the function
  name and, with a process group up, the group's name, backend, world and group sizes and ranks.
* ``_exception_logger(fn)``: ``fn``, logging the message dict with the error to the c10d logger
  (debug level) when it raises, then re-raising.
* ``_time_logger(fn)``: ``fn``, counted and timed under ``pytorch.wait_counter.c10d.<name>``
  (``_wait_counters()`` reads them: calls and total seconds)."""
from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Dict, Tuple

from .logging_handlers import _log_handlers

__all__: list = []

_DEFAULT_DESTINATION = "default"


def _get_logging_handler(destination: str = _DEFAULT_DESTINATION) -> Tuple[logging.Handler, str]:
    handler = _log_handlers[destination]
    return handler, f"{type(handler).__name__}-{destination}"


def _get_or_create_logger(destination: str = _DEFAULT_DESTINATION) -> logging.Logger:
    handler, name = _get_logging_handler(destination)
    logger = logging.getLogger(f"c10d-{name}")
    logger.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(filename)s:%(lineno)s %(levelname)s p:%(processName)s t:%(threadName)s: %(message)s"))
    logger.propagate = False
    if handler not in logger.handlers:
        logger.addHandler(handler)
    return logger


_c10d_logger = _get_or_create_logger()


def _get_msg_dict(func_name, *args, **kwargs) -> Dict[str, Any]:
    from . import distributed_c10d as c10d
    if not c10d.is_initialized():
        return {"func_name": f"{func_name}"}
    group = kwargs.get("group") or kwargs.get("process_group")
    pg = kwargs.get("pg")
    return {
        "func_name": f"{func_name}",
        "pg_name": f"{c10d._get_process_group_name(pg) if pg is not None else None}",
        "backend": f"{c10d.get_backend(group)}",
        "world_size": f"{c10d.get_world_size()}",
        "group_size": f"{c10d.get_world_size(group)}",
        "global_rank": f"{c10d.get_rank()}",
        "local_rank": f"{c10d.get_rank(group)}",
    }


def _exception_logger(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as error:
            msg = _get_msg_dict(func.__name__, *args, **kwargs)
            msg["error"] = f"{error}"
            _c10d_logger.debug(msg)
            raise
    return wrapper


_COUNTERS: Dict[str, list] = {}
_COUNTERS_LOCK = threading.Lock()


def _wait_counters() -> Dict[str, Tuple[int, float]]:
    """{counter name: (calls, total seconds)} of the functions ``_time_logger`` wraps."""
    with _COUNTERS_LOCK:
        return {k: (v[0], v[1]) for k, v in _COUNTERS.items()}


def _time_logger(func):
    key = f"pytorch.wait_counter.c10d.{func.__name__}"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            took = time.perf_counter() - start
            with _COUNTERS_LOCK:
                c = _COUNTERS.setdefault(key, [0, 0.0])
                c[0] += 1
                c[1] += took
    return wrapper
