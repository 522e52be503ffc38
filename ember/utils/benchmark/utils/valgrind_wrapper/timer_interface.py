"""Instruction counts of a Python statement under Valgrind's Callgrind (``Timer.collect_callgrind``).

Instruction counts are deterministic where wall times are noisy, so they can compare two
versions of an op exactly. The statement runs in a fresh Python process under
``valgrind --tool=callgrind``; the script there switches collection on only around the timed
loop (client requests from ``_bindings``), dumps one profile per repeat plus one for an empty
``pass`` loop (the baseline: interpreter overhead), and ``callgrind_annotate`` turns each profile
into per-function counts (``FunctionCounts``, inclusive and exclusive), collected in a
``CallgrindStats``.

Globals must be wrapped in ``CopyIfCallgrind``: they cross the process boundary by pickling
(builtins) or ``ember.save`` (modules), which the caller must opt into.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import itertools as it
import operator
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import ember

from .. import common
from . import _bindings

__all__ = ["FunctionCount", "FunctionCounts", "CallgrindStats", "CopyIfCallgrind"]


class FunctionCount(NamedTuple):
    count: int
    function: str


def _linewidth() -> int:
    from ember._tensor_str import get_printoptions
    return get_printoptions()["linewidth"]


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class FunctionCounts:
    """Instruction counts per ``file:function``, sorted from the largest; arithmetic merges by
    function (``a - b`` is the per-function delta)."""

    _data: tuple[FunctionCount, ...]
    inclusive: bool
    truncate_rows: bool = True
    _linewidth: int | None = None

    def __iter__(self) -> Iterator[FunctionCount]:
        yield from self._data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item):
        """An int gives one FunctionCount, a slice a FunctionCounts (PyTorch 2.13 wraps both, since
        a FunctionCount is itself a tuple)."""
        data = self._data[item]
        return FunctionCounts(data, self.inclusive, truncate_rows=False) if isinstance(item, slice) else data

    def __repr__(self) -> str:
        count_len = max((len(str(c)) + int(c < 0) for c, _ in self), default=0)
        fn_len = max((self._linewidth or _linewidth()) - count_len - 4, 40)
        lines = []
        for c, fn in self:
            if len(fn) > fn_len:
                left = int((fn_len - 5) // 2)
                fn = fn[:left] + " ... " + fn[-(fn_len - left - 5):]
            lines.append(f"  {c:>{count_len}}  {fn}")
        if self.truncate_rows and len(lines) > 18:
            lines = lines[:9] + ["...".rjust(count_len + 2)] + lines[-9:]
        if not self.inclusive:
            lines.extend(["", f"Total: {self.sum()}"])
        return "\n".join([object.__repr__(self)] + lines)

    def __add__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, lambda c: c)

    def __sub__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, operator.neg)

    def __mul__(self, other: int | float) -> FunctionCounts:
        return self._from_dict({fn: int(c * other) for c, fn in self._data}, self.inclusive)

    def transform(self, map_fn: Callable[[str], str]) -> FunctionCounts:
        """Rename functions (e.g. strip paths); counts of names that become equal are summed."""
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self._data:
            counts[map_fn(fn)] += c
        return self._from_dict(counts, self.inclusive)

    def filter(self, filter_fn: Callable[[str], bool]) -> FunctionCounts:
        """Keep the functions whose name passes ``filter_fn``."""
        return FunctionCounts(tuple(i for i in self if filter_fn(i.function)), self.inclusive)

    def sum(self) -> int:
        return sum(c for c, _ in self)

    def denoise(self) -> FunctionCounts:
        """Drop CPython's dict lookups, whose counts vary run to run with string hashing."""
        return self.filter(lambda fn: "dictobject.c:lookdict_unicode" not in fn)

    def _merge(self, second: FunctionCounts, merge_fn: Callable[[int], int]) -> FunctionCounts:
        if self.inclusive != second.inclusive:
            raise AssertionError("Cannot merge inclusive and exclusive counts.")
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self:
            counts[fn] += c
        for c, fn in second:
            counts[fn] += merge_fn(c)
        return self._from_dict(counts, self.inclusive)

    @staticmethod
    def _from_dict(counts: dict[str, int], inclusive: bool) -> FunctionCounts:
        flat = (FunctionCount(c, fn) for fn, c in counts.items() if c)
        return FunctionCounts(tuple(sorted(flat, reverse=True)), inclusive)


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class CallgrindStats:
    """One repeat's counts for the statement (``number_per_run`` executions), and the baseline."""

    task_spec: common.TaskSpec
    number_per_run: int
    built_with_debug_symbols: bool
    baseline_inclusive_stats: FunctionCounts
    baseline_exclusive_stats: FunctionCounts
    stmt_inclusive_stats: FunctionCounts
    stmt_exclusive_stats: FunctionCounts
    stmt_callgrind_out: str | None

    def __repr__(self) -> str:
        base = self.baseline_exclusive_stats
        threads = self.task_spec.num_threads
        return f"""
{object.__repr__(self)}
{self.task_spec.summarize()}
  {'':>25}All{'':>10}Noisy symbols removed
    Instructions: {self.counts(denoise=False):>12}{'':>15}{self.counts(denoise=True):>12}
    Baseline:     {base.sum():>12}{'':>15}{base.denoise().sum():>12}
{self.number_per_run} runs per measurement, {threads} thread{'s' if threads > 1 else ''}
""".strip()

    def stats(self, inclusive: bool = False) -> FunctionCounts:
        """Per-function counts: ``inclusive`` includes what callees executed."""
        return self.stmt_inclusive_stats if inclusive else self.stmt_exclusive_stats

    def counts(self, *, denoise: bool = False) -> int:
        """Total instructions executed by the ``number_per_run`` runs."""
        stats = self.stmt_exclusive_stats
        return (stats.denoise() if denoise else stats).sum()

    def delta(self, other: CallgrindStats, inclusive: bool = False) -> FunctionCounts:
        """Per-function difference ``self - other``."""
        return self.stats(inclusive=inclusive) - other.stats(inclusive=inclusive)

    def as_standardized(self) -> CallgrindStats:
        """Strip install-specific path prefixes and library names from function names, so that
        profiles from different builds/environments diff cleanly."""
        transforms = ((r"^.+build/\.\./", "build/../"), (r"^.+/" + re.escape("Python/"), "Python/"),
                      (r"^.+/" + re.escape("Objects/"), "Objects/"), (r"^.+/site-packages/", "site-packages/"),
                      (r"\s\[.+\]$", ""))

        def strip(stats: FunctionCounts) -> FunctionCounts:
            for before, after in transforms:
                stats = stats.transform(lambda fn, b=before, a=after: re.sub(b, a, fn))
            return stats

        return CallgrindStats(
            task_spec=self.task_spec, number_per_run=self.number_per_run,
            built_with_debug_symbols=self.built_with_debug_symbols,
            baseline_inclusive_stats=strip(self.baseline_inclusive_stats),
            baseline_exclusive_stats=strip(self.baseline_exclusive_stats),
            stmt_inclusive_stats=strip(self.stmt_inclusive_stats),
            stmt_exclusive_stats=strip(self.stmt_exclusive_stats), stmt_callgrind_out=None)


class Serialization(enum.Enum):
    PICKLE = 0
    TORCH = 1
    TORCH_JIT = 2


def _allowed_types():
    return {Serialization.PICKLE: (str, bytes, bool, int, float, complex),
            Serialization.TORCH: (ember.nn.Module,)}


class CopyIfCallgrind:
    """Mark a global as copied into the Callgrind process: builtins by pickle, an ``nn.Module``
    by ``ember.save`` (tensors are refused: build them in ``setup``). ``setup`` is code run
    before loading it there (e.g. imports its class needs)."""

    def __init__(self, value: Any, *, setup: str | None = None):
        for method, types_ in _allowed_types().items():
            if isinstance(value, types_):
                self._value = value
                self._setup = setup
                self._serialization = method
                break
        else:
            supported = "\n".join(getattr(t, "__name__", repr(t)) for t in it.chain(*_allowed_types().values()))
            raise ValueError(f"Unsupported type: {type(value)}\n`collect_callgrind` restricts globals to the "
                             f"following types:\n{textwrap.indent(supported, '  ')}")

    @property
    def value(self) -> Any:
        return self._value

    @property
    def setup(self) -> str | None:
        return self._setup

    @property
    def serialization(self) -> Serialization:
        return self._serialization

    @staticmethod
    def unwrap_all(globals: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, CopyIfCallgrind) else v) for k, v in globals.items()}


class GlobalsBridge:
    """Writes the wrapped globals to ``data_dir`` and the code that loads them in the child."""

    def __init__(self, globals: dict[str, Any], data_dir: str):
        self._globals: dict[str, CopyIfCallgrind] = {}
        self._data_dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        for key in ("torch", "ember"):
            if globals.get(key, ember) is not ember:
                raise ValueError(f"`collect_callgrind` does not support mocking out `{key}`.")
        for name, value in globals.items():
            if name in ("torch", "ember", "__builtins__"):
                continue
            if not isinstance(value, CopyIfCallgrind):
                raise ValueError("`collect_callgrind` requires that globals be wrapped in "
                                 "`CopyIfCallgrind` so that serialization is explicit.")
            self._globals[name] = value

    def construct(self) -> str:
        lines = []
        for name, wrapped in self._globals.items():
            if wrapped.setup is not None:
                lines.append(textwrap.dedent(wrapped.setup))
            if wrapped.serialization == Serialization.PICKLE:
                path = os.path.join(self._data_dir, f"{name}.pkl")
                with open(path, "wb") as f:
                    pickle.dump(wrapped.value, f)
                lines.append(f"with open({path!r}, 'rb') as f:\n    {name} = pickle.load(f)")
            else:
                path = os.path.join(self._data_dir, f"{name}.pt")
                ember.save(wrapped.value, path)
                lines.append(f"{name} = ember.load({path!r}, weights_only=False)")
        return "\n".join(lines)


_ANNOTATE_TOTAL = re.compile(r"^([0-9,]+)\s+(\(\s*[0-9.]+%\)\s+)?PROGRAM TOTALS")
_ANNOTATE_BEGIN = re.compile(r"Ir\s+(\S+\s+)?file:function")
_ANNOTATE_FN = re.compile(r"^\s*([0-9,]+)\s+(?:\(\s*[0-9.]+%\)\s+)?(.+:.+)$")


def parse_callgrind_annotate(text: str, inclusive: bool) -> FunctionCounts:
    """``callgrind_annotate`` output -> FunctionCounts: the function table after the header, minus
    entries equal to the program total (callgrind's top-level pseudo-frames)."""
    total = None
    state = "total"
    counts = []
    for line in text.splitlines():
        if state == "total":
            m = _ANNOTATE_TOTAL.match(line)
            if m:
                total = int(m.group(1).replace(",", ""))
                state = "start"
        elif state == "start":
            if _ANNOTATE_BEGIN.match(line.strip()):
                state = "parse"
        else:
            m = _ANNOTATE_FN.match(line)
            if m:
                ir = int(m.group(1).replace(",", ""))
                if ir != total:
                    counts.append(FunctionCount(ir, m.group(2)))
            elif re.match(r"-+", line):
                continue
            else:
                break
    if state != "parse":
        raise AssertionError("Failed to parse callgrind_annotate output")
    return FunctionCounts(tuple(sorted(counts, reverse=True)), inclusive=inclusive)


def _block_stmt(stmt: str, number: int, indent: int = 0) -> str:
    """``number`` copies of ``stmt``, in blocks of 100 under a ``for`` (a bare loop per execution
    would add the loop's own instructions to every run)."""
    block = 100
    loops = number // block
    if loops == 1:
        loops = 0
    remainder = number - block * loops
    out = ""
    if loops:
        out += f"for _ in range({loops}):\n" + textwrap.indent("\n".join([stmt] * block), " " * 4) + "\n"
    if remainder:
        out += "\n".join([stmt] * remainder)
    return textwrap.indent(out, " " * indent)


class _ValgrindWrapper:
    def __init__(self):
        self._supported_platform = _bindings.supported_platform()
        self._commands_available = {}
        if self._supported_platform:
            for cmd in ("valgrind", "callgrind_control", "callgrind_annotate"):
                self._commands_available[cmd] = shutil.which(cmd) is not None

    def _validate(self) -> None:
        if not self._supported_platform:
            raise OSError("Valgrind is not supported on this platform.")
        missing = [cmd for cmd, ok in self._commands_available.items() if not ok]
        if missing:
            raise OSError("Missing: " + ", ".join(missing))

    def collect_callgrind(self, task_spec, globals, *, number, repeats, collect_baseline, is_python,
                          retain_out_file):
        self._validate()
        if not is_python:
            raise NotImplementedError("ember.utils.benchmark: Callgrind collection of C++ statements is not supported")
        *task_stats, baseline = self._invoke(task_spec, globals, number=number, repeats=repeats,
                                             collect_baseline=collect_baseline, retain_out_file=retain_out_file)
        return tuple(CallgrindStats(task_spec=task_spec, number_per_run=number, built_with_debug_symbols=True,
                                    baseline_inclusive_stats=baseline[0], baseline_exclusive_stats=baseline[1],
                                    stmt_inclusive_stats=inc, stmt_exclusive_stats=exc, stmt_callgrind_out=out)
                     for inc, exc, out in task_stats)

    def _invoke(self, task_spec, globals, *, number, repeats, collect_baseline, retain_out_file):
        work = tempfile.mkdtemp(prefix="ember_callgrind_")
        script = os.path.join(work, "timer_callgrind.py")
        out_file = os.path.join(work, "callgrind.out")
        error_log = os.path.join(work, "error.txt")
        try:
            with open(script, "w") as f:
                f.write(self._script(task_spec, GlobalsBridge(globals, os.path.join(work, "data")), number=number,
                                     repeats=repeats, collect_baseline=collect_baseline, error_log=error_log))
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
            proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                                   "--dump-line=yes", "--dump-instr=yes", "--instr-atstart=no", "--collect-atstart=no",
                                   sys.executable, script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=env, cwd=work, text=True, check=False)
            if proc.returncode:
                report = ""
                if os.path.exists(error_log):
                    with open(error_log) as f:
                        report = f.read()
                raise OSError("Failed to collect callgrind profile:\n" + (report or "Unknown error.\n" + proc.stdout))

            def parse(path, inclusive):
                res = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                                      "--threshold=100", path], capture_output=True, text=True, check=True)
                return parse_callgrind_annotate(res.stdout, inclusive)

            def read(i):
                if i == repeats and not collect_baseline:
                    return FunctionCounts((), inclusive=True), FunctionCounts((), inclusive=False), None
                path = f"{out_file}.{i + 1}"          # callgrind numbers dumps from 1
                contents = None
                if retain_out_file:
                    with open(path) as f:
                        contents = f.read()
                return parse(path, True), parse(path, False), contents

            return tuple(read(i) for i in range(repeats + 1))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    @staticmethod
    def _script(task_spec, globals: GlobalsBridge, *, number, repeats, collect_baseline, error_log) -> str:
        load_globals = globals.construct()
        # ember is imported in the valgrind process only when the code uses it: importing it
        # there takes seconds, and a pure-Python statement's counts do not depend on it.
        uses_ember = re.search(r"\b(ember|torch)\b", "\n".join((task_spec.stmt, task_spec.setup, load_globals)))
        import_ember = (f"import ember\nimport ember as torch\nember.set_num_threads({task_spec.num_threads})"
                        if uses_ember else "pass")
        baseline = ("lib.ember_cg_toggle()\n" + _block_stmt("pass", number) + "\nlib.ember_cg_toggle_and_dump()"
                    if collect_baseline else "")
        return textwrap.dedent(r"""
            import gc
            import os
            import pickle
            import sys
            import traceback

            def fail(msg):
                with open({error_log!r}, "wt") as f:
                    f.write(msg)
                sys.exit(1)

            try:
                import ctypes
                lib = ctypes.CDLL({library!r})
                if not lib.ember_cg_running():
                    fail("Process is not running under Valgrind.")
            {import_ember}
            {load_globals}
            {setup}
                for _ in range({warmup}):
            {warmup_stmt}
            except Exception:
                fail(traceback.format_exc())

            lib.ember_cg_start_instrumentation()
            for _ in range({repeats}):
                gc.collect()
                lib.ember_cg_toggle()
            {blocked_stmt}
                lib.ember_cg_toggle_and_dump()
            gc.collect()
            {baseline}
        """).strip().format(
            error_log=error_log, library=_bindings.library_path(),
            import_ember=textwrap.indent(import_ember, " " * 4),
            load_globals=textwrap.indent(load_globals, " " * 4),
            setup=textwrap.indent(task_spec.setup, " " * 4),
            warmup=min(number, 10), warmup_stmt=textwrap.indent(task_spec.stmt, " " * 8),
            repeats=repeats, blocked_stmt=_block_stmt(task_spec.stmt, number, indent=4),
            baseline=baseline)


_WRAPPER = None


def wrapper_singleton() -> _ValgrindWrapper:
    global _WRAPPER
    if _WRAPPER is None:
        _WRAPPER = _ValgrindWrapper()
    return _WRAPPER
