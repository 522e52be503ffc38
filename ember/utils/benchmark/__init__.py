"""``ember.utils.benchmark``: time ember code the way ``torch.utils.benchmark`` times PyTorch code.

``Timer(stmt, setup, globals=...)`` measures a statement (``blocked_autorange()``,
``adaptive_autorange()``, ``timeit(n)``) with ember's thread count pinned and CUDA
synchronised; the resulting ``Measurement`` prints its median and spread, and
``Compare`` lays many of them out as a table -- e.g. eager against ``ember.compile``.
Printed output matches PyTorch's for the same numbers.

``Fuzzer`` draws benchmark inputs (``FuzzedParameter``, ``FuzzedTensor``, ``FuzzedSparseTensor``,
``ParameterAlias``) from a seeded numpy RandomState as PyTorch's does; ``Timer.collect_callgrind``
counts instructions under valgrind (``CallgrindStats``, ``FunctionCounts``; globals crossing into
the valgrind process are wrapped in ``CopyIfCallgrind``). C++ statements are not supported.
"""
from .utils.common import (Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads, trim_sigfig,
                           unit_to_english)
from .utils.compare import Colorize, Compare
from .utils.fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias
from .utils.sparse_fuzzer import FuzzedSparseTensor
from .utils.timer import Language, Timer, timer
from .utils.valgrind_wrapper.timer_interface import CallgrindStats, CopyIfCallgrind, FunctionCount, FunctionCounts

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads", "Timer", "timer", "Language", "Colorize", "Compare", "Fuzzer", "FuzzedParameter",
           "FuzzedTensor", "FuzzedSparseTensor", "ParameterAlias", "CallgrindStats", "FunctionCount", "FunctionCounts",
           "CopyIfCallgrind"]
