"""Roofline check: compiled fused kernels against the machine's copy bandwidth.

    OPENBLAS_NUM_THREADS=1 python benchmarks/roofline.py            # 16M elements (64 MB) per tensor
    python benchmarks/roofline.py --numel 4000000 --reps 20
    python benchmarks/roofline.py --clock cpu      # process CPU time (a loaded, shared machine)
    python benchmarks/roofline.py --torch          # torch.compile on the same programs, side by side

Measures the memory bandwidth of a plain copy (``np.copyto``; bytes read +
bytes written) and, for a few memory-bound programs compiled by ember's
default backend (inductor), the bandwidth each achieves counting only the
bytes it must move (its inputs read once, its outputs written once). A
well-fused kernel approaches the copy bandwidth; the issue's target is >= 70%.
The programs write fresh outputs (first-touch page faults included); the
"fresh copy" column compares with a copy into a fresh array, which pays the same.
Medians over ``--reps`` runs after warm-up.

Each program is timed alternately with the copies (program, copy, fresh copy, ...) and
its ratios are the medians of the per-round ratios: the copy bandwidth of this 2-vCPU
VM moved between 34 and 74 GB/s from one run to the next, so a copy measured once,
before the programs, judged each program against another hour's machine. The first
line still reports that up-front copy.

``--clock cpu`` times with ``time.process_time`` (the CPU time of all of the
process's threads) instead of wall time, for the copy and the programs alike, and
reports bandwidth per CPU-second times the core count: on a machine shared with
other jobs, wall time measures the other jobs; CPU time measures the kernel (the
ratio to the copy is what matters, and both use every core).

Two pairs of rows tell compute from memory: the log chain and ``(x * y + x).tanh()`` compute a
transcendental per element, the "arithmetic" chain and the three-input program the same shapes
of work without one. On a 2-vCPU machine the first pair is bound by arithmetic (about 1 ns of
core time per element for tanh's staged exp and division), the second by memory: there the
fused kernels' streamed stores move only the bytes counted, and they pass the copy.

``--torch`` adds torch.compile's kernel for each program (PyTorch's inductor, same
inputs, timed in the same rounds as ember's and the copies): on a 2-vCPU machine the
programs with a transcendental are bound by arithmetic, not memory, and its column
says how far the same hardware lets another compiler get.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


_CLOCK = time.perf_counter
_SCALE = 1.0


def _median_time(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = _CLOCK()
        fn()
        ts.append((_CLOCK() - t0) / _SCALE)
    return statistics.median(ts)


def _paired(fn, roofs, reps, warmup=3):
    """(median time of fn, [median time of each roof], [median per-round ratio roof/fn]):
    fn and the roofs (each a list of alternatives, the fastest counts) run in turn."""
    for _ in range(warmup):
        fn()
        for alts in roofs:
            for c in alts:
                c()
    tf, tr = [], [[] for _ in roofs]
    for _ in range(reps):
        t0 = _CLOCK()
        fn()
        tf.append((_CLOCK() - t0) / _SCALE)
        for k, alts in enumerate(roofs):
            best = None
            for c in alts:
                t0 = _CLOCK()
                c()
                t = (_CLOCK() - t0) / _SCALE
                best = t if best is None else min(best, t)
            tr[k].append(best)
    ratios = [statistics.median(r / f for r, f in zip(trk, tf)) for trk in tr]
    return statistics.median(tf), [statistics.median(t) for t in tr], ratios


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--numel", type=int, default=16_000_000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: perf_counter; cpu: process CPU time / core count")
    ap.add_argument("--torch", action="store_true",
                    help="also time torch.compile's kernels on the same programs (needs torch)")
    args = ap.parse_args(argv)
    global _CLOCK, _SCALE
    if args.clock == "cpu":
        _CLOCK, _SCALE = time.process_time, float(os.cpu_count() or 1)
    import ember      # (before torch: ember sets OMP_WAIT_POLICY=passive for the OpenMP runtime both use)
    torch = _torch_for_cases() if args.torch else None   # (before any timing: a missing torch fails fast)

    n = args.numel
    src = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    dst = np.empty_like(src)
    # the copy runs on every core (numpy releases the GIL for large copies), as the compiled
    # kernels do with OpenMP; the better of that and a single-threaded copy is the roof
    from concurrent.futures import ThreadPoolExecutor
    workers = os.cpu_count() or 1
    bounds = np.linspace(0, n, workers + 1).astype(int)
    pool = ThreadPoolExecutor(workers)

    def threaded_copy():
        list(pool.map(lambda i: np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]]),
                      range(workers)))
    t_copy = _median_time(threaded_copy, args.reps)
    if args.clock == "wall":   # (a one-thread copy's CPU time is not comparable to a parallel kernel's)
        t_copy = min(_median_time(lambda: np.copyto(dst, src), args.reps), t_copy)
    # a copy into a fresh array, as every program here writes a fresh output: the
    # first touch of new memory (page faults, the kernel zeroing pages) is part of
    # both then
    chunks = [(bounds[i], bounds[i + 1]) for i in range(workers)]

    def threaded_fresh_copy():
        out = np.empty_like(src)
        list(pool.map(lambda c: np.copyto(out[c[0]:c[1]], src[c[0]:c[1]]), chunks))
        return out
    t_fresh = _median_time(threaded_fresh_copy, args.reps)
    copy_alts = [threaded_copy] + ([lambda: np.copyto(dst, src)] if args.clock == "wall" else [])
    copy_bw = 2 * src.nbytes / t_copy / 1e9
    fresh_bw = 2 * src.nbytes / t_fresh / 1e9

    rows = 1000
    cases = {
        # name: (fn, input shapes, bytes that must move as a multiple of one tensor)
        "pointwise chain (10 ops)": (lambda x: ((((x * 1.5 + 0.5).relu() - 0.25) * x).abs() + 1.0).log() * 0.5,
                                     [(n,)], 2),
        "two-input pointwise": (lambda x, y: (x * y + x).tanh(), [(n,), (n,)], 3),
        # the same shapes of program without a transcendental (no exp/log/tanh to compute)
        "pointwise chain, arithmetic": (lambda x: (((x * 1.5 + 0.5).relu() - 0.25) * x).abs() * 0.5 + 1.0,
                                        [(n,)], 2),
        "three-input pointwise": (lambda x, y, z: (x * y + z).relu(), [(n,), (n,), (n,)], 4),
        "row sum of squares": (lambda x: (x * x).sum(-1), [(rows, n // rows)], 1),
        # a bias gradient's shape of reduction: over the rows, one result per column
        "column sum of squares": (lambda x: (x * x).sum(0), [(n // 1024, 1024)], 1),
        "softmax over rows": (lambda x: x.softmax(-1), [(rows, n // rows)], 2),
        "layer_norm over rows": (lambda x: ember.nn.functional.layer_norm(x, (n // rows,)),
                                 [(rows, n // rows)], 2),
    }
    print(f"copy bandwidth: {copy_bw:.1f} GB/s ({2 * src.nbytes / 1e6:.0f} MB moved per copy; clock: {args.clock}); "
          f"into a fresh array: {fresh_bw:.1f} GB/s")
    print(f"{'program':<28}{'ms':>9}{'GB/s':>9}{'copy GB/s':>11}{'of copy':>10}{'of fresh copy':>15}"
          + (f"{'torch.compile ms':>18}{'of copy':>9}" if torch else ""))
    for name, (fn, shapes, units) in cases.items():
        inputs = [ember.randn(*s) for s in shapes]
        compiled = ember.compile(fn)
        roofs = [copy_alts, [threaded_fresh_copy]]
        if torch is not None:
            t_inputs = [torch.from_numpy(x.numpy().copy()) for x in inputs]
            t_fn = torch.compile(_for_torch(fn, name, torch))
            with torch.no_grad():
                t_fn(*t_inputs)
            roofs.append([lambda: t_fn(*t_inputs)])
        with ember.no_grad():
            if torch is not None:
                with torch.no_grad():
                    t, times, ratios = _paired(lambda: compiled(*inputs), roofs, args.reps)
            else:
                t, times, ratios = _paired(lambda: compiled(*inputs), roofs, args.reps)
        tc, rc, rf = times[0], ratios[0], ratios[1]
        bw = units * n * 4 / t / 1e9
        # bytes moved: the program's `units` tensors, the copy's 2
        line = (f"{name:<28}{t * 1e3:>9.2f}{bw:>9.1f}{2 * src.nbytes / tc / 1e9:>11.1f}"
                f"{rc * units / 2:>9.0%}{rf * units / 2:>14.0%}")
        if torch is not None:
            # torch's share of the copy: its time against the copy's, through ember's
            # per-round ratios (copy/ember and torch/ember, both medians of rounds)
            line += f"{times[2] * 1e3:>18.2f}{rc / ratios[2] * units / 2:>9.0%}"
        print(line)
    pool.shutdown()
    return 0


def _torch_for_cases():
    try:
        import torch
    except ImportError:
        raise SystemExit("roofline.py --torch: PyTorch is not installed (pip install torch==2.13.0)")
    torch.set_num_threads(os.cpu_count() or 1)
    return torch


def _for_torch(fn, name, torch):
    """The program for torch tensors: the lambdas above use only tensor methods, except
    layer_norm, which goes through ember.nn.functional."""
    if name.startswith("layer_norm"):
        return lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],))
    return fn


if __name__ == "__main__":
    sys.exit(main())
