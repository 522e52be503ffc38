"""``ember.utils.benchmark``: time ember code the way ``torch.utils.benchmark`` times PyTorch code.

``Timer(stmt, setup, globals=...)`` measures a statement (``blocked_autorange()``,
``adaptive_autorange()``, ``timeit(n)``) with ember's thread count pinned and CUDA
synchronised; the resulting ``Measurement`` prints its median and spread, and
``Compare`` lays many of them out as a table -- e.g. eager against ``ember.compile``.
Printed output matches PyTorch's for the same numbers.

Not provided: the fuzzers (``Fuzzer``, ``FuzzedParameter``, ``FuzzedTensor``,
``FuzzedSparseTensor``, ``ParameterAlias``), Callgrind instruction counts
(``CallgrindStats``, ``FunctionCounts``, ``Timer.collect_callgrind``) and C++ statements.
Asking for one of those names raises an AttributeError that says so.
"""
from .utils.common import (Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads, trim_sigfig,
                           unit_to_english)
from .utils.compare import Colorize, Compare
from .utils.timer import Language, Timer, timer

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads", "Timer", "timer", "Language", "Colorize", "Compare"]

_FUZZER_NAMES = ("Fuzzer", "FuzzedParameter", "FuzzedTensor", "FuzzedSparseTensor", "ParameterAlias")
_CALLGRIND_NAMES = ("CallgrindStats", "FunctionCount", "FunctionCounts", "CopyIfCallgrind")


def __getattr__(name):
    if name in _FUZZER_NAMES:
        raise AttributeError(
            f"ember.utils.benchmark.{name} is not implemented: ember has no benchmark input fuzzers "
            "(Fuzzer, FuzzedParameter, FuzzedTensor, FuzzedSparseTensor); build the inputs yourself "
            "and pass them to Timer through globals=")
    if name in _CALLGRIND_NAMES:
        raise AttributeError(
            f"ember.utils.benchmark.{name} is not implemented: instruction counting under valgrind "
            "(Callgrind) is not supported in ember; use Timer.blocked_autorange() for wall times")
    raise AttributeError(f"module 'ember.utils.benchmark' has no attribute '{name}'")
