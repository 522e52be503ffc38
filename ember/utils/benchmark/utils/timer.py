"""``Timer``: timeit with replicates, thread control and device synchronisation.

It wraps the standard library's ``timeit.Timer`` (which compiles ``stmt`` into a
tight loop) and adds what timing framework code needs: a warm-up, a block size
chosen so the clock's own cost is negligible, many replicate blocks so the median
and spread can be judged, ember's thread count pinned for the run, and -- when
ember has a CUDA device -- a device synchronisation at every clock read, because
ember's cupy kernels are launched asynchronously and the clock would otherwise
measure only the launch.
"""
from __future__ import annotations

import enum
import textwrap
import timeit
from collections.abc import Callable
from typing import Any

import ember

from . import common

__all__ = ["Timer", "timer", "Language"]


def _cuda_available() -> bool:
    return ember.cuda.is_available()


def timer() -> float:
    """The default clock: ``timeit.default_timer`` after waiting for queued CUDA work.

    Synchronising at both ends of a block makes the block's time include the device
    work it launched (PyTorch's default timer does the same with its accelerator).
    Without cupy or a GPU the check is a cached flag and the clock is plain.
    """
    if _cuda_available():
        ember.cuda.synchronize()
    return timeit.default_timer()


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


class Timer:
    """Time a Python statement over ember (``torch.utils.benchmark.Timer``'s API).

    Args:
        stmt: code run in the timed loop (a string, as in PyTorch).
        setup: code run once before timing; defines what ``stmt`` uses.
        global_setup: C++ only in PyTorch; rejected for Python statements.
        timer: the clock; the default synchronises CUDA around each read.
        globals: names ``stmt`` and ``setup`` see (copied). ``ember`` and ``torch``
            (both meaning ember, as with ``import ember as torch``) are added unless given.
        label, sub_label, description, env: tags for the repr and for ``Compare``
            (label: table; sub_label: row; description: column; env: A/B environments).
        num_threads: ember's thread count while timing (restored afterwards). One by
            default: single-thread speed is the most comparable number.
        language: only ``Language.PYTHON`` ("py"/"python"); C++ timing is not available.

    ``blocked_autorange`` is the main entry point; ``adaptive_autorange`` keeps going until
    the spread is small; ``timeit(number)`` times exactly ``number`` executions.
    """

    _timer_cls = timeit.Timer

    def __init__(
        self,
        stmt: str = "pass",
        setup: str = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = timer,
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: Language | str = Language.PYTHON,
    ) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")

        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError(
                "ember.utils.benchmark.Timer: language=Language.CPP (timing C++ statements) is not "
                "supported; ember has no C++ frontend. Time the Python statement instead.")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(
                f"global_setup is C++ only, got `{global_setup}`. Most "
                "likely this code can simply be moved to `setup`.")

        # A copy, so that what exec adds (``__builtins__``) does not leak into the caller's dict.
        self._globals = dict(globals or {})
        self._globals.setdefault("ember", ember)
        self._globals.setdefault("torch", ember)
        self._language = Language.PYTHON
        if timer is _default_timer():
            _cuda_available()  # find out now (may import cupy) rather than inside the first timed block

        stmt = _normalise_snippet(stmt)
        setup = _normalise_snippet(setup)
        # Values marked CopyIfCallgrind (for collect_callgrind's process) are used as they are here.
        from .valgrind_wrapper.timer_interface import CopyIfCallgrind
        self._timer = self._timer_cls(stmt=stmt, setup=setup, timer=timer,
                                      globals=CopyIfCallgrind.unwrap_all(self._globals))
        self._task_spec = common.TaskSpec(
            stmt=stmt, setup=setup, global_setup=global_setup, label=label, sub_label=sub_label,
            description=description, env=env, num_threads=num_threads)

    # ------------------------------------------------------------------ primitives
    def _timeit(self, number: int) -> float:
        # No real statement takes under a nanosecond; the floor also keeps ratios finite.
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> common.Measurement:
        """Run ``stmt`` ``number`` times (after a warm-up of 1% of that, at least twice) and
        return one measurement, as ``timeit.Timer.timeit`` does."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return common.Measurement(number_per_run=number, raw_times=[self._timeit(number=number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        """Not provided (as in PyTorch): ``blocked_autorange`` measures replicates."""
        raise NotImplementedError("Timer.repeat is not supported (as in PyTorch). See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable[[int, float], Any] | None = None) -> None:
        """Not provided (as in PyTorch): ``blocked_autorange`` chooses the block size."""
        raise NotImplementedError(
            "Timer.autorange is not supported (as in PyTorch). See `Timer.blocked_autorange.`")

    def _measurement_loop(
        self,
        number: int,
        can_stop: Callable[[list[float]], bool],
        min_run_time: float,
        max_run_time: float | None = None,
        callback: Callable[[int, float], Any] | None = None,
    ) -> list[float]:
        """Time blocks of ``number`` executions until at least ``min_run_time`` seconds have
        been spent and ``can_stop`` agrees, or ``max_run_time`` is exceeded."""
        times: list[float] = []
        total = 0.0
        stop = False
        with common.set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not stop:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                stop = can_stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time: float) -> int:
        """Grow the block size tenfold until the clock's overhead (timing an empty block) is
        at most 0.01% of a block and a block takes at least min_run_time / 1000 -- or one block
        alone exceeds min_run_time. Doubles as the warm-up."""
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = sorted(self._timeit(0) for _ in range(5))[2]
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    break
                if taken > min_run_time:
                    break
                if number * 10 > 2147483647:  # keep block sizes within a C int, as PyTorch does
                    break
                number *= 10
        return number

    def blocked_autorange(
        self,
        callback: Callable[[int, float], Any] | None = None,
        min_run_time: float = 0.2,
    ) -> common.Measurement:
        """Time as many blocks as fit in ``min_run_time`` seconds (at least one).

        The block size is picked first so the clock costs less than 0.01% of a block:
        small blocks give more replicates and better statistics, large blocks amortise
        the clock (and, on CUDA, the synchronisation). ``callback(number, seconds)`` is
        called after every block.
        """
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda times: True, min_run_time=min_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Callable[[int, float], Any] | None = None,
    ) -> common.Measurement:
        """Like ``blocked_autorange``, but keep timing blocks until there are more than
        three, ``min_run_time`` has passed and IQR / median is below ``threshold`` -- or
        ``max_run_time`` seconds of blocks have been spent."""
        number = self._estimate_block_size(min_run_time=0.05)

        def can_stop(times: list[float]) -> bool:
            if len(times) <= 3:
                return False
            m = common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
            return m.meets_confidence(threshold=threshold)

        times = self._measurement_loop(number, can_stop, min_run_time, max_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def collect_callgrind(self, number: int = 100, *, repeats: int | None = None, collect_baseline: bool = True,
                          retain_out_file: bool = False) -> Any:
        """Instruction counts of ``number`` executions of ``stmt`` under Valgrind's Callgrind
        (a ``CallgrindStats``; a tuple of ``repeats`` of them when ``repeats`` is given).

        The statement runs in a new Python process under valgrind, so ``globals`` must be
        wrapped in ``CopyIfCallgrind`` (see ``valgrind_wrapper.timer_interface``). Raises
        OSError when valgrind (or ``callgrind_annotate``) is not installed, as PyTorch does."""
        if not isinstance(self._task_spec.stmt, str):
            raise ValueError("`collect_callgrind` currently only supports string `stmt`")
        if repeats is not None and repeats < 1:
            raise ValueError("If specified, `repeats` must be >= 1")
        # Check that the statement is valid before paying for valgrind's startup.
        self._timeit(1)
        from .valgrind_wrapper import timer_interface
        user_globals = {k: v for k, v in self._globals.items() if k != "__builtins__"}
        result = timer_interface.wrapper_singleton().collect_callgrind(
            task_spec=self._task_spec, globals=user_globals, number=number, repeats=repeats or 1,
            collect_baseline=collect_baseline, is_python=True, retain_out_file=retain_out_file)
        return result[0] if repeats is None else result


def _default_timer():
    """The module's default clock (the ``timer`` function above); a function so that the
    ``timer`` parameter of ``Timer.__init__`` does not hide it."""
    return timer


def _normalise_snippet(code: str) -> str:
    """Dedent, drop the newline that opens a triple-quoted block and trailing whitespace, so
    snippets written indented inside a function run and print tidily."""
    code = textwrap.dedent(code)
    if code.startswith("\n"):
        code = code[1:]
    return code.rstrip()
