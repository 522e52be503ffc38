"""Per-kernel profiler of compiled graphs.

``ember.inductor.config.profile_kernels = True`` (or ``EMBER_LOGS=kernel_times``)
before compiling makes every compiled graph time each of its kernel calls (the
generated C++ kernels and the externs: matmul, fallbacks) with
``time.perf_counter`` and ``time.process_time`` around the call. :func:`report` returns a table -- one row
per kernel: calls, total ms, bytes moved per call (the arrays passed to the
kernel: every input read once, every output written once), the achieved GB/s,
and the FX nodes the kernel computes -- sorted by total time; with
``kernel_times`` in ``EMBER_LOGS`` it is printed to stderr at exit.

Why a wrapper around each call instead of cProfile: cProfile attributes all
generated code to the one ``<ember.inductor wrapper>:call`` frame, and the question
is *which* kernel is slow and whether it is memory bound (bytes / time against
the machine's copy bandwidth, see ``benchmarks/roofline.py``).
Cost: ~0.3 us per call plus the byte count (summing ``nbytes``) and a process CPU-time read
(``cpu ms``: all threads' CPU time, the steadier number on a loaded machine), so leave it off
when timing the whole model.
"""
from __future__ import annotations

import atexit
import itertools
import sys
import time
from typing import Dict, List

import numpy as np

from . import config

_graph_ids = itertools.count()


class KernelStats:
    __slots__ = ("label", "kind", "origins", "calls", "seconds", "cpu", "nbytes")

    def __init__(self, label, kind, origins):
        self.label = label
        self.kind = kind
        self.origins = list(origins)
        self.calls = 0
        self.seconds = 0.0
        self.cpu = 0.0
        self.nbytes = 0


STATS: Dict[str, KernelStats] = {}


def reset():
    """Forget all recorded calls (the kernels stay registered)."""
    for s in STATS.values():
        s.calls, s.seconds, s.cpu, s.nbytes = 0, 0.0, 0.0, 0


def _nbytes(x):
    if isinstance(x, np.ndarray):
        return x.nbytes
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v) for v in x)
    return 0


def _timed(fn, stats: KernelStats, count_result: bool):
    perf, cpu = time.perf_counter, time.process_time

    def call(*args, **kwargs):
        c0 = cpu()
        t0 = perf()
        res = fn(*args, **kwargs)
        stats.seconds += perf() - t0
        stats.cpu += cpu() - c0
        stats.calls += 1
        n = _nbytes(args)
        if count_result:
            n += _nbytes(res)
        stats.nbytes += n
        return res

    call.__name__ = getattr(fn, "__name__", "kernel")
    return call


def instrument(glb: dict, kernels: Dict[str, tuple]):
    """Replace the kernel callables in a wrapper's globals ``glb`` by timed ones.
    ``kernels`` maps the global name to ``(kernel name, kind, origins, returns)``,
    ``returns`` saying whether the callable returns its output (an extern run by
    ``_run_extern``) instead of writing an argument."""
    gid = next(_graph_ids)
    for gname, (kname, kind, origins, returns) in kernels.items():
        if gname not in glb:
            continue
        label = f"g{gid}.{kname}"
        st = STATS[label] = KernelStats(label, kind, origins)
        glb[gname] = _timed(glb[gname], st, returns)
    return gid


def rows(min_calls: int = 1, sort: str = "time") -> List[KernelStats]:
    key = (lambda s: -s.cpu) if sort == "cpu" else (lambda s: -s.seconds)
    return sorted((s for s in STATS.values() if s.calls >= min_calls), key=key)


def report(top: int = 40, max_origins: int = 6, sort: str = "time") -> str:
    """The table of the kernels called since the last :func:`reset`, slowest first
    (by wall time, or by CPU time with ``sort="cpu"``)."""
    rs = rows(sort=sort)
    total = sum(s.seconds for s in rs)
    lines = [f"{'kernel':<18}{'kind':<14}{'calls':>6}{'total ms':>10}{'%':>6}{'ms/call':>9}{'cpu ms':>9}"
             f"{'MB/call':>9}{'GB/s':>8}  FX nodes"]
    for s in rs[:top]:
        per = s.seconds / s.calls
        mb = s.nbytes / s.calls / 1e6
        gbs = s.nbytes / s.seconds / 1e9 if s.seconds > 0 else 0.0
        org = ", ".join(s.origins[:max_origins]) + (f", ... (+{len(s.origins) - max_origins})"
                                                     if len(s.origins) > max_origins else "")
        lines.append(f"{s.label:<18}{s.kind[:13]:<14}{s.calls:>6}{s.seconds * 1e3:>10.2f}"
                     f"{100 * s.seconds / total if total else 0:>6.1f}{per * 1e3:>9.3f}{s.cpu * 1e3:>9.2f}{mb:>9.2f}{gbs:>8.1f}  {org}")
    if len(rs) > top:
        rest = sum(s.seconds for s in rs[top:])
        lines.append(f"... {len(rs) - top} more kernels, {rest * 1e3:.2f} ms")
    by_kind: Dict[str, list] = {}
    for s in rs:
        k = "cpp" if s.kind.startswith("cpp") else s.kind
        acc = by_kind.setdefault(k, [0.0, 0.0])
        acc[0] += s.seconds
        acc[1] += s.cpu
    lines.append("total " + f"{total * 1e3:.2f} ms (cpu {sum(s.cpu for s in rs) * 1e3:.2f} ms): " + ", ".join(
        f"{k} {v[0] * 1e3:.2f} ms (cpu {v[1] * 1e3:.2f})" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][0])))
    return "\n".join(lines)


def _at_exit():
    if config.profile_kernels and any(s.calls for s in STATS.values()):
        print("[ember.inductor.kernel_times]\n" + report(), file=sys.stderr)


atexit.register(_at_exit)
