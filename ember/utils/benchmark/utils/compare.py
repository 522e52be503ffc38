"""``Compare``: lay many Measurements out as tables, as ``torch.utils.benchmark`` does.

One table per ``label``; inside it a row per ``sub_label`` (or statement) and a
column per ``description``. Rows are grouped into blocks by ``num_threads`` (a
``N threads: ----`` rule opens each block) and, when several ``env`` tags are
present, each row names its environment where it changes. Replicates of the same
task are merged first, so the cells are medians over every run given.

The text (widths, centring, digits, colour escapes) is meant to equal PyTorch's
for the same measurements, so tables can be diffed across the two frameworks.
"""
from __future__ import annotations

import enum

import math

from . import common

__all__ = ["Colorize", "Compare"]

# ANSI escapes used when colouring cells relative to the best time.
BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _leading_digits(value: float) -> int:
    """Digits before the decimal point of ``value`` (ceil of log10, in float32 as PyTorch)."""
    return int(math.ceil(common._log10_f32(value)))


def _env_text(env) -> str:
    return str(env)


def _env_order(env):
    # PyTorch sorts raw env tags; a None among strings would not compare, so put it first.
    return (0, "") if env is None else (1, env)


class _ColumnFormat:
    """How one column's numbers are printed: a shared width and number of decimals, plus
    room for a "(! XX%)" variance marker when warnings are highlighted in this column."""

    def __init__(self, cells: list[common.Measurement | None], scale: float, trim: bool, highlight: bool):
        self.trim = trim
        present = [m for m in cells if m is not None]
        self.highlight = highlight and any(m.has_warnings for m in present)
        digits = [_leading_digits(m.median / scale) for m in present]
        int_digits = max(digits)
        if trim:
            decimals = min(max(m.significant_figures - d, 0) for m, d in zip(present, digits))
        else:
            decimals = 1
        self.width = int_digits + decimals + (1 if decimals else 0)
        self.decimals = decimals
        self.marker_width = 7 if self.highlight else 0

    def text(self, value: float | None, sigfigs: int, spread: float | None) -> str:
        if value is None:
            return " " * len(self.text(1, sigfigs, None))
        if self.trim:
            value = common.trim_sigfig(value, sigfigs)
        marker = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return f"{value:>{self.width}.{self.decimals}f}" + f"{marker:>{self.marker_width}}"


def _paint(segment: str, value: float, best: float) -> str:
    """Colour a cell by how far its median is from the best one it is compared with."""
    if value <= best * 1.01 or value <= best + 100e-9:
        return BEST + BOLD + segment + TERMINATE * 2
    if value <= best * 1.1:
        return GOOD + BOLD + segment + TERMINATE * 2
    if value >= best * 5:
        return VERY_BAD + BOLD + segment + TERMINATE * 2
    if value >= best * 2:
        return BAD + segment + TERMINATE * 2
    return segment


class _Table:
    """One label's measurements, arranged and rendered."""

    def __init__(self, results: list[common.Measurement], colorize: Colorize, trim: bool, highlight: bool):
        if len({r.label for r in results}) != 1:
            raise AssertionError("All results must share the same label")
        self.results = results
        self.label = results[0].label
        self.colorize = colorize
        self.highlight = highlight
        self.unit, self.scale = common.select_unit(min(r.median for r in results))

        row_keys = common.ordered_unique((r.num_threads, r.env, r.as_row_name) for r in results)
        # Stable sort on (threads, env) only: rows keep the order their statements came in.
        row_keys.sort(key=lambda k: (k[0], _env_order(k[1])))
        self.row_keys = row_keys
        self.col_keys = common.ordered_unique(r.description for r in results)

        rpos = {k: i for i, k in enumerate(row_keys)}
        cpos = {k: j for j, k in enumerate(self.col_keys)}
        self.grid: list[list[common.Measurement | None]] = [[None] * len(self.col_keys) for _ in row_keys]
        for r in results:
            self.grid[rpos[(r.num_threads, r.env, r.as_row_name)]][cpos[r.description]] = r

        # Thread blocks: consecutive rows with the same thread count.
        self.block_of_row: list[int] = []
        block = -1
        prev_threads = None
        for threads, _, _ in row_keys:
            if threads != prev_threads:
                block += 1
                prev_threads = threads
            self.block_of_row.append(block)

        self.formats = [_ColumnFormat([row[j] for row in self.grid], self.scale, trim, highlight)
                        for j in range(len(self.col_keys))]

    def _best_values(self, i: int) -> list[float | None]:
        """Per column, the median a cell of row ``i`` is coloured against."""
        row = self.grid[i]
        if self.colorize == Colorize.ROWWISE:
            best = min(m.median for m in row if m is not None)
            return [best] * len(row)
        if self.colorize == Colorize.COLUMNWISE:
            out = []
            for j in range(len(self.col_keys)):
                medians = [self.grid[k][j].median for k in range(len(self.grid))
                           if self.block_of_row[k] == self.block_of_row[i] and self.grid[k][j] is not None]
                out.append(min(medians) if medians else None)
            return out
        return [None] * len(row)

    def render(self) -> str:
        envs = {r.env for r in self.results}
        show_envs = len(envs) > 1
        env_width = max(len(_env_text(e)) for e in envs) if show_envs else 0

        header = [""] + ["" if d is None else str(d) for d in self.col_keys]
        body: list[list[str]] = []
        prev_env = ""
        prev_threads = None
        for (threads, env, _), row in zip(self.row_keys, self.grid):
            if threads != prev_threads:
                prev_threads, prev_env = threads, ""
            first = next(m for m in row if m is not None)
            env_cell = f"({_env_text(first.env)})" if show_envs and env != prev_env else ""
            cells = ["  " + env_cell.ljust(env_width + 4) + first.as_row_name]
            for m, fmt in zip(row, self.formats):
                if m is None:
                    cells.append(fmt.text(None, 1, None))
                else:
                    cells.append(fmt.text(m.median / self.scale, m.significant_figures,
                                          m.iqr / m.median if m.has_warnings else None))
            body.append(cells)
            prev_env = env

        widths = [max(len(r[j]) for r in [header] + body) for j in range(len(header))]
        lines = ["  |  ".join(c.center(w) for c, w in zip(header, widths))]
        total_width = len(lines[0])
        prev_block = None
        for i, (cells, row) in enumerate(zip(body, self.grid)):
            if self.block_of_row[i] != prev_block:
                prev_block = self.block_of_row[i]
                lines.append(f"{self.row_keys[i][0]} threads: ".ljust(total_width, "-"))
            out = [cells[0].ljust(widths[0])]
            for text, width, m, best in zip(cells[1:], widths[1:], row, self._best_values(i)):
                text = text.center(width)
                if self.colorize != Colorize.NONE and m is not None and best is not None:
                    text = _paint(text, m.median, best)
                out.append(text)
            lines.append("  |  ".join(out))

        title = (" " + (self.label or "") + " ").center(total_width - 2, "-")
        text = f"[{title}]\n" + "\n".join(lines) + "\n\n"
        text += f"Times are in {common.unit_to_english(self.unit)}s ({self.unit}).\n"
        if self.highlight and any(r.has_warnings for r in self.results):
            text += "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
        return text


class Compare:
    """Print many Measurements side by side.

    ``label`` picks the table, ``sub_label`` (or the statement) the row, ``description``
    the column, ``num_threads`` the block within a table and ``env`` an A/B tag shown in
    the row. Replicates of one task are merged. ``str(compare)`` or ``compare.print()``
    renders; ``trim_significant_figures()``, ``colorize()`` and ``highlight_warnings()``
    switch on the optional presentation.
    """

    def __init__(self, results: list[common.Measurement]) -> None:
        self._results: list[common.Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results) -> None:
        """Add more Measurements (every item must be a ``Measurement``)."""
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Print only the digits each measurement's spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour cells against the fastest in their column (per thread block), or in their
        row with ``rowwise=True``: green within 1%, blue within 10%, dim red from 2x, red from 5x."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Mark cells whose IQR is large relative to the median with "(! XX%)"."""
        self._highlight_warnings = True

    def print(self) -> None:
        print(str(self))

    def _render(self) -> list[str]:
        by_label: dict = {}
        for r in common.Measurement.merge(self._results):
            by_label.setdefault(r.label, []).append(r)
        return [_Table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings).render()
                for group in by_label.values()]
