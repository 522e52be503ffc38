"""What a timing run produces and the small numeric helpers that format it.

``TaskSpec`` says *what* was timed (the statement, its setup and the labels that
``Compare`` groups by); ``Measurement`` holds the raw block times of one run and
derives the statistics (median, IQR, a significant-figure estimate) that its
``repr`` and ``Compare`` print. Everything here is meant to print exactly what
``torch.utils.benchmark`` prints for the same numbers, so a user moving between
the two reads the same tables.

PyTorch computes a few of these quantities on default-dtype (float32) tensors:
the unit choice, the significant-figure estimate and ``trim_sigfig``. The
helpers below round through float32 at the same points (with numpy) so that a
value sitting on a unit or digit boundary lands on the same side as in PyTorch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

import ember

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads"]

# At most this many significant figures are claimed for any measurement.
_MAX_SIGNIFICANT_FIGURES = 4
# A confidence interval narrower than this (25 ns) is not believable for a Python-driven loop.
_MIN_CONFIDENCE_INTERVAL = 25e-9
# IQR / median above these fractions earns a warning in the repr (and a marker in Compare).
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25

_UNIT_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
_UNIT_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}


def _f32(x) -> np.float32:
    return np.float32(x)


def _log10_f32(x: float) -> float:
    """log10 of ``x`` rounded to float32, then the result rounded to float32 -- what
    ``torch.tensor(x).log10()`` gives for a Python float. (Taken through float64 rather than
    numpy's float32 log10, whose last bit can differ: log10(float32(1e-6)) must be -6 exactly.)"""
    v = float(_f32(x))
    if v > 0:
        return float(_f32(math.log10(v)))
    if v == 0:
        return -math.inf
    return math.nan


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """Everything that identifies a timed task except its globals.

    Frozen and hashable because ``Measurement.merge`` (and so ``Compare``) use it as
    the key that decides which replicate runs belong together.
    """
    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """A readable name: the label if there is one, else the statement itself."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        paren = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{paren}\n" + textwrap.indent(self.stmt, "  ")

    def setup_str(self) -> str:
        """The setup line of a summary; empty when the setup does nothing."""
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return "setup:\n" + textwrap.indent(self.setup, "  ")
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The TaskSpec part of a Measurement's repr: title, description, setup.
        A multi-line section is followed by a blank line so it stands apart."""
        parts = [p for p in (self.title, self.description or "", self.setup_str()) if p]
        return "\n".join(p + "\n" if "\n" in p else p for p in parts)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


def _quantile(sorted_values: tuple[float, ...], q: float) -> float:
    """Linear-interpolation quantile of already sorted values, with the two-sided lerp
    (start + w * (end - start) below w = 0.5, end - (1 - w) * (end - start) from it on)
    that PyTorch's ``quantile`` uses, so medians agree to the last bit."""
    rank = q * (len(sorted_values) - 1)
    lo = math.floor(rank)
    hi = math.ceil(rank)
    w = rank - lo
    start, end = sorted_values[lo], sorted_values[hi]
    if abs(w) < 0.5:
        return start + w * (end - start)
    return end - (end - start) * (1 - w)


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """The result of timing one task: ``raw_times`` holds the seconds each block of
    ``number_per_run`` executions took.

    Statistics are per execution (raw time / ``number_per_run``), computed lazily on
    first use and then kept. The fields of ``task_spec`` (``stmt``, ``label``,
    ``num_threads``, ...) can be read directly off the measurement. It is a plain
    dataclass so it pickles, which lets results from several processes be merged.
    """
    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None  # free for the user; never read here

    def __post_init__(self) -> None:
        self._sorted_times: tuple[float, ...] = ()
        self._warnings: tuple[str, ...] = ()
        self._median: float = -1.0
        self._mean: float = -1.0
        self._p25: float = -1.0
        self._p75: float = -1.0

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: forward the TaskSpec fields.
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    # ------------------------------------------------------------------ statistics
    @property
    def times(self) -> list[float]:
        """Seconds per single execution of the statement, one entry per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """A rough count of trustworthy digits in the median (between 1 and 4).

        Only the interquartile points are used, so that a few slow outliers do not
        swamp the estimate, and a fixed z of 1.645 stands in for Student's t. ``Compare``
        uses it when asked to trim significant figures; the repr does not.
        """
        self._lazy_init()
        n = len(self._sorted_times)
        lo = n // 4
        hi = int(math.ceil(_f32(3 * n / 4)))
        middle = np.asarray(self._sorted_times[lo:hi], dtype=np.float32).astype(np.float64)
        std = float(_f32(middle.std())) if middle.size else math.nan
        sqrt_n = float(np.sqrt(_f32(middle.size)))
        confidence_interval = max(1.645 * std / sqrt_n, _MIN_CONFIDENCE_INTERVAL)
        figures = int(math.floor(_log10_f32(self._median / confidence_interval)))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self) -> None:
        if not self.raw_times or self._sorted_times:
            return
        self._sorted_times = tuple(sorted(self.times))
        self._median = _quantile(self._sorted_times, 0.5)
        self._mean = float(np.mean(np.asarray(self._sorted_times, dtype=np.float64)))
        self._p25 = _quantile(self._sorted_times, 0.25)
        self._p75 = _quantile(self._sorted_times, 0.75)

        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            hint = "This suggests significant environmental influence."
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            hint = "This could indicate system fluctuation."
        else:
            return
        rel_iqr = self.iqr / self.median * 100
        self._warnings += (
            f"  WARNING: Interquartile range is {rel_iqr:.1f}% of the median measurement.\n           {hint}",)

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether the spread (IQR / median) is below ``threshold``."""
        return self.iqr / self.median < threshold

    # ------------------------------------------------------------------ labels
    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str | None:
        """The task's ``env`` tag (None when unset; PyTorch's Measurement answers the same)."""
        return self.task_spec.env

    @property
    def as_row_name(self) -> str:
        """The row heading ``Compare`` shows: the sub_label, else the statement."""
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self) -> str:
        """Object line, task summary, median (and IQR from four blocks on), the counts
        line and any spread warnings, formatted as PyTorch's Measurement prints them."""
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        threads = self.num_threads
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                         f"({self._p25 / scale:.2f} to {self._p75 / scale:.2f})")
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}")
        lines.append("\n".join(self._warnings))
        return "\n".join("\n".join(lines).strip().splitlines())

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Pool replicate measurements of the same TaskSpec into one each.

        Times are normalised to one execution per entry (``number_per_run=1``) because
        replicates may have used different block sizes; metadata is dropped since it
        may differ between replicates. Groups keep the order of first appearance.
        """
        groups: dict[TaskSpec, list[float]] = {}
        for m in measurements:
            groups.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(number_per_run=1, raw_times=times, task_spec=spec, metadata=None)
                for spec, times in groups.items()]


def select_unit(t: float) -> tuple[str, float]:
    """The unit (s, ms, us, ns) that gives ``t`` seconds between 1 and 1000, and its scale."""
    exponent = _log10_f32(t) // 3
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(exponent), "s")
    return unit, _UNIT_SCALE[unit]


def unit_to_english(u: str) -> str:
    return _UNIT_ENGLISH[u]


def trim_sigfig(x: float, n: int) -> float:
    """Round ``x`` to ``n`` significant figures (3.14159, 2 -> 3.1), in float32 as PyTorch does."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(math.ceil(_log10_f32(abs(x))))
    scale = 10 ** (magnitude - n)
    return float(np.round(_f32(x / scale)) * _f32(scale))


def ordered_unique(elements: Iterable[Any]) -> list[Any]:
    """Distinct elements in order of first appearance."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """Run the body with ember's intra-op thread count set to ``n``, then restore it.
    (Named as in PyTorch so code written against ``torch.utils.benchmark`` finds it.)"""
    prior = ember.get_num_threads()
    try:
        ember.set_num_threads(n)
        yield
    finally:
        ember.set_num_threads(prior)
