"""Per-op dispatch overhead in eager mode: ember vs PyTorch, side by side.

Every case works on 1-element float32 tensors, so the time measured is almost
entirely framework overhead (argument parsing, dispatch, type promotion,
autograd recording, output allocation), not arithmetic.

    python benchmarks/eager_overhead.py            # full run (~1 min)
    python benchmarks/eager_overhead.py --quick    # fewer repeats
    python benchmarks/eager_overhead.py --no-torch # ember only

Prints a table (median microseconds per call, and ember/torch) and writes
benchmarks/results/eager_overhead.json. The target is ember/torch <= 3x.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import timeit
from pathlib import Path
from typing import Callable, Dict, List, Optional

TARGET_RATIO = 3.0
RESULTS = Path(__file__).resolve().parent / "results" / "eager_overhead.json"


# --------------------------------------------------------------------------
# the cases: written once against a torch-like namespace


def make_cases(torch) -> Dict[str, Callable[[], Callable[[], object]]]:
    """name -> setup function returning a zero-argument callable that does one
    operation with `torch` (ember or PyTorch). Setup is per case so that a
    missing feature only costs its own row."""

    def nn():
        return __import__(torch.__name__ + ".nn", fromlist=["nn"])

    def add():
        a, b = torch.tensor([1.5]), torch.tensor([2.0])
        return lambda: a + b

    def add_requires_grad():
        a = torch.tensor([1.5], requires_grad=True)
        b = torch.tensor([2.0], requires_grad=True)
        return lambda: a + b

    def mul_sum_backward():
        a = torch.tensor([1.5], requires_grad=True)
        b = torch.tensor([2.0], requires_grad=True)

        def step():
            a.grad = None
            b.grad = None
            (a * b).sum().backward()
        return step

    def relu():
        a = torch.tensor([1.5])
        return lambda: a.relu()

    def matmul_1x1():
        a, b = torch.tensor([[1.5]]), torch.tensor([[2.0]])
        return lambda: a @ b

    def view():
        x = torch.tensor([[1.5]])
        return lambda: x.view(-1)

    def linear_call():
        torch.manual_seed(0)
        lin = nn().Linear(1, 1)
        x = torch.tensor([[1.5]])
        return lambda: lin(x)

    return {
        "a + b": add,
        "a + b (requires_grad)": add_requires_grad,
        "(a*b).sum().backward()": mul_sum_backward,
        "a.relu()": relu,
        "a @ b (1x1)": matmul_1x1,
        "x.view(-1)": view,
        "Linear(1,1)(x)": linear_call,
    }


# --------------------------------------------------------------------------
# timing


def _calibrate(fn: Callable[[], object], target_s: float) -> int:
    """Loop count so that one timeit run takes about target_s seconds."""
    number = 1
    while True:
        t = timeit.timeit(fn, number=number)
        if t >= target_s / 5 or number >= 1 << 22:
            return max(1, int(number * target_s / max(t, 1e-9)))
        number *= 4


def time_case(fn: Callable[[], object], repeat: int, target_s: float) -> Dict[str, float]:
    """Median / min / max microseconds per call over `repeat` timeit runs."""
    for _ in range(3):  # warm up caches, lazy imports, first-call paths
        fn()
    number = _calibrate(fn, target_s)
    runs = [t / number * 1e6 for t in timeit.repeat(fn, number=number, repeat=repeat)]
    return {
        "median_us": statistics.median(runs),
        "min_us": min(runs),
        "max_us": max(runs),
        "number": number,
        "repeat": repeat,
    }


def bench(torch, repeat: int, target_s: float) -> Dict[str, Dict[str, float]]:
    out = {}
    for name, setup in make_cases(torch).items():
        try:
            out[name] = time_case(setup(), repeat, target_s)
        except Exception as exc:  # report, keep going
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


# --------------------------------------------------------------------------
# report


def _fmt_us(entry: Optional[dict]) -> str:
    if entry is None:
        return "n/a"
    if "error" in entry:
        return "error"
    return f"{entry['median_us']:.2f}"


def render_table(ember_res: dict, torch_res: Optional[dict]) -> str:
    names = list(ember_res)
    rows = [("op", "ember us", "torch us", "ember/torch")]
    for name in names:
        e = ember_res.get(name)
        t = torch_res.get(name) if torch_res else None
        ratio = "n/a"
        if e and t and "error" not in e and "error" not in t:
            r = e["median_us"] / t["median_us"]
            ratio = f"{r:.2f}x" + ("" if r <= TARGET_RATIO else "  (> target)")
        rows.append((name, _fmt_us(e), _fmt_us(t), ratio))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    errors = [f"  {lib} / {n}: {v['error']}" for lib, res in (("ember", ember_res), ("torch", torch_res or {}))
              for n, v in res.items() if "error" in v]
    if errors:
        lines.append("")
        lines.append("errors:")
        lines.extend(errors)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15, help="timeit runs per case (median is reported)")
    ap.add_argument("--run-seconds", type=float, default=0.05, help="target duration of one timeit run")
    ap.add_argument("--quick", action="store_true", help="5 runs of ~20 ms each")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--json", type=Path, default=RESULTS, help=f"output file (default {RESULTS})")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat, args.run_seconds = 5, 0.02

    import ember

    torch = None
    if not args.no_torch:
        try:
            import torch  # type: ignore
            torch.set_num_threads(1)
        except ImportError:
            torch = None

    print(f"eager dispatch overhead, 1-element float32 tensors, median of {args.repeat} runs",
          flush=True)
    ember_res = bench(ember, args.repeat, args.run_seconds)
    torch_res = bench(torch, args.repeat, args.run_seconds) if torch is not None else None

    print(render_table(ember_res, torch_res))
    ratios = {}
    if torch_res:
        for name, e in ember_res.items():
            t = torch_res.get(name, {})
            if "error" not in e and "error" not in t:
                ratios[name] = e["median_us"] / t["median_us"]
        if ratios:
            gm = statistics.geometric_mean(ratios.values())
            print(f"\ngeometric mean ember/torch: {gm:.2f}x (target <= {TARGET_RATIO:g}x)")

    doc = {
        "benchmark": "eager_overhead",
        "unit": "microseconds per call (median over timeit runs)",
        "target_ratio": TARGET_RATIO,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "ember_version": getattr(ember, "__version__", None),
        "torch_version": getattr(torch, "__version__", None) if torch is not None else None,
        "repeat": args.repeat,
        "results": {
            name: {"ember": ember_res[name],
                   "torch": torch_res.get(name) if torch_res else None,
                   "ratio": ratios.get(name)}
            for name in ember_res
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
