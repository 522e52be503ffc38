"""The benchmark suite: ember eager, ember compiled, PyTorch eager and torch.compile, side by side.

    python benchmarks/suite.py                    # every model, inference + training (minutes)
    python benchmarks/suite.py --models mlp,lstm --scale 0.25 --reps 5
    python benchmarks/suite.py --no-torch         # ember only
    python benchmarks/suite.py --backend aot_eager

For each model (``benchmarks/models.py``) and mode it measures, in one
process and one run, the median wall time per step over ``--reps`` timed
steps after warm-up, plus the cold compile time (first compiled call minus a
warm call). Inference = forward under no_grad; training = forward, loss,
backward and an SGD-free AdamW step (the optimizer is not compiled). A row
that fails records its error instead of a time, so one missing feature costs
one cell. Results go to stdout (a table), ``benchmarks/results/suite.json``
and ``benchmarks/results/suite.md``. Machines are noisy: compare ratios taken
in one run, never across runs.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import BUILDERS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _sync(lib):
    cuda = getattr(lib, "cuda", None)
    if cuda is not None and getattr(cuda, "is_available", lambda: False)():
        cuda.synchronize()


def _time(fn: Callable[[], Any], lib, reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    _sync(lib)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(lib)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _step_fns(lib, case, model_fn, mode: str):
    """(one step, a fresh-input step) for ``mode``; inputs are drawn outside the timed call."""
    if case.kind == "optimizer":
        opt = case.model
        return lambda: opt.step()
    x = case.make_input()
    if mode == "inference":
        def infer():
            with lib.no_grad():
                return model_fn(x)
        return infer
    opt = lib.optim.AdamW(case.model.parameters(), lr=1e-4)

    def train():
        opt.zero_grad()
        loss = case.loss(model_fn(x), x)
        loss.backward()
        opt.step()
        return loss
    return train


def _measure(lib, name: str, scale: float, mode: str, compiled: Optional[Callable], reps: int,
             warmup: int) -> Dict[str, Any]:
    lib.manual_seed(0)
    case = BUILDERS[name](lib, scale)
    if case.kind == "optimizer" and mode == "inference":
        return {"skipped": "an optimizer step has no inference mode"}
    row: Dict[str, Any] = {}
    try:
        if compiled is None:
            fn = _step_fns(lib, case, case.model, mode)
        else:
            target = case.model.step if case.kind == "optimizer" else case.model
            cfn = compiled(target)
            if case.kind == "optimizer":
                case.model.step = cfn
                fn = _step_fns(lib, case, None, mode)
            else:
                fn = _step_fns(lib, case, cfn, mode)
            t0 = time.perf_counter()
            fn()
            _sync(lib)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            fn()
            _sync(lib)
            row["compile_s"] = max(first - (time.perf_counter() - t0), 0.0)
        row["ms"] = _time(fn, lib, reps, warmup) * 1e3
    except Exception as e:  # noqa: BLE001 - a failing cell is recorded, not fatal
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        if os.environ.get("EMBER_BENCH_TRACEBACK"):
            traceback.print_exc()
    return row


def _fmt(cell: Dict[str, Any]) -> str:
    if "ms" in cell:
        return f"{cell['ms']:.2f}"
    if "skipped" in cell:
        return "-"
    return "ERR"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(BUILDERS))
    ap.add_argument("--modes", default="inference,training")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--backend", default="inductor", help="ember.compile backend")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads / OMP threads")
    args = ap.parse_args(argv)

    import ember
    libs: List[tuple] = [("ember eager", ember, None),
                         (f"ember compiled ({args.backend})", ember,
                          lambda m: ember.compile(m, backend=args.backend))]
    torch = None
    if not args.no_torch:
        try:
            import torch
            if args.threads:
                torch.set_num_threads(args.threads)
            libs += [("torch eager", torch, None), ("torch.compile", torch, lambda m: torch.compile(m))]
        except ImportError:
            print("(torch not installed: PyTorch columns skipped)")
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in BUILDERS:
            ap.error(f"unknown model {m!r}; known: {', '.join(BUILDERS)}")
    modes = [m for m in args.modes.split(",") if m]
    results: Dict[str, Any] = {}
    for model in models:
        for mode in modes:
            key = f"{model}/{mode}"
            results[key] = {}
            for col, lib, comp in libs:
                print(f"  {key:<24} {col:<32}", end="", flush=True)
                cell = _measure(lib, model, args.scale, mode, comp, args.reps, args.warmup)
                results[key][col] = cell
                print(cell.get("ms", cell.get("error", cell.get("skipped"))))
    cols = [c for c, _, _ in libs]
    header = f"| model/mode | {' | '.join(cols)} | compiled/eager (ember) | ember compiled/torch.compile |"
    lines = [header, "|" + "---|" * (len(cols) + 3)]
    for key, row in results.items():
        cells = [_fmt(row[c]) for c in cols]
        e, c = row.get(cols[0], {}), row.get(cols[1], {})
        speed = f"{e['ms'] / c['ms']:.2f}x" if "ms" in e and "ms" in c else "-"
        tc = row.get("torch.compile", {})
        vs = f"{tc['ms'] / c['ms']:.2f}x" if "ms" in tc and "ms" in c else "-"
        lines.append(f"| {key} | {' | '.join(cells)} | {speed} | {vs} |")
    compile_lines = ["", "| model/mode | cold compile (s): " + " | ".join(c for c in cols if "compile" in c) + " |"]
    for key, row in results.items():
        cs = [f"{row[c]['compile_s']:.2f}" if "compile_s" in row[c] else "-" for c in cols if "compile" in c]
        compile_lines.append(f"| {key} | {' | '.join(cs)} |")
    table = "\n".join(lines + compile_lines)
    errors = [f"- {k} / {c}: {v['error']}" for k, row in results.items() for c, v in row.items() if "error" in v]
    print()
    print(table)
    if errors:
        print("\nerrors:\n" + "\n".join(errors))
    RESULTS.mkdir(exist_ok=True)
    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"), "machine": platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "scale": args.scale,
            "reps": args.reps, "backend": args.backend,
            "torch": getattr(torch, "__version__", None)}
    (RESULTS / "suite.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    (RESULTS / "suite.md").write_text(f"Benchmark suite, {meta['date']}, {meta['cpus']} CPUs, scale "
                                      f"{args.scale}, median of {args.reps} (ms per step)\n\n{table}\n"
                                      + ("\nErrors:\n" + "\n".join(errors) + "\n" if errors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
