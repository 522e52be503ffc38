"""``torch._inductor.utils`` helpers tests and users reach for: a fresh compile cache, and the
code ember's inductor generated while running a function."""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from typing import Any, Callable, List, Optional, Tuple

_CODE_LOG = "ember.inductor.output_code"


@contextlib.contextmanager
def fresh_inductor_cache(cache_entries: Optional[dict] = None, dir: Optional[str] = None, delete: bool = True):
    """Compile against an empty cache while in force: ``$EMBER_CACHE_DIR`` points at a new temporary
    directory (under ``dir`` if given; removed on exit unless ``delete=False``) and the in-memory
    kernel cache is emptied, so every graph compiled inside is compiled from scratch (graphs
    ``ember.compile`` already holds compiled keep running: reset dynamo for those).
    ``cache_entries``, a dict, receives the new cache files' names by kind on exit."""
    from ..inductor import codecache
    old = os.environ.get("EMBER_CACHE_DIR")
    tmp = tempfile.mkdtemp(prefix="ember-fresh-cache-", dir=dir)
    os.environ["EMBER_CACHE_DIR"] = tmp
    saved_memory = dict(codecache._memory)
    codecache.clear_memory_cache()
    try:
        yield
        if cache_entries is not None:
            for kind in sorted(os.listdir(tmp)):
                files = [f for _, _, fs in os.walk(os.path.join(tmp, kind)) for f in fs]
                cache_entries[kind] = sorted(files)
    finally:
        if old is None:
            os.environ.pop("EMBER_CACHE_DIR", None)
        else:
            os.environ["EMBER_CACHE_DIR"] = old
        codecache._memory.update(saved_memory)
        if delete:
            shutil.rmtree(tmp, ignore_errors=True)


class _CodeCollector(logging.Handler):
    """Collects what the ``output_code`` log carries: (C++ source, Python wrapper) per graph."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.codes: List[str] = []

    def emit(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 2:
            cpp, wrapper = args
            self.codes.append(f"{wrapper}\n# C++ kernels of this graph:\n'''\n{cpp}\n'''\n")


@contextlib.contextmanager
def _collecting_code():
    lg = logging.getLogger(_CODE_LOG)
    h = _CodeCollector()
    old_level, old_prop = lg.level, lg.propagate
    lg.addHandler(h)
    if not lg.isEnabledFor(logging.DEBUG):
        lg.setLevel(logging.DEBUG)
        lg.propagate = False          # (what the caller did not ask to see stays off their root handlers)
    try:
        yield h.codes
    finally:
        lg.removeHandler(h)
        lg.setLevel(old_level)
        lg.propagate = old_prop


def run_and_get_code(fn: Callable, *args, **kwargs) -> Tuple[Any, List[str]]:
    """``(fn(*args, **kwargs), codes)``: ``codes`` holds, for each graph compiled (or loaded from
    the graph cache) during the call, its Python wrapper followed by its C++ kernels. A graph
    ``ember.compile`` compiled before the call is not compiled again, so it is not listed."""
    with _collecting_code() as codes:
        result = fn(*args, **kwargs)
    return result, list(codes)


def run_and_get_cpp_code(fn: Callable, *args, **kwargs) -> Tuple[Any, str]:
    """``(result, code)``: :func:`run_and_get_code`'s codes joined into one string."""
    result, codes = run_and_get_code(fn, *args, **kwargs)
    return result, "\n".join(codes)


def run_fw_bw_and_get_code(fn: Callable) -> Tuple[Any, List[str]]:
    """Run ``fn()`` and the backward of its result's sum; the codes compiled meanwhile."""
    def with_backward():
        result = fn()
        result.sum().backward()
        return result
    return run_and_get_code(with_backward)


__all__ = ["fresh_inductor_cache", "run_and_get_code", "run_and_get_cpp_code", "run_fw_bw_and_get_code"]
