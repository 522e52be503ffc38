"""Eager NN ops on small tensors (8x8, 2x3x8x8): ember vs PyTorch, side by side in one process.

At these sizes an op's time is mostly per-call work -- argument parsing, dtype and shape
checks, autograd recording, numpy temporaries, thread start-up -- not arithmetic. Each row times
one call (or one forward + backward step) of the same code written against a torch-like
namespace; the machine this was written on is shared, so times are CPU time of this process
(``time.process_time``: what a loaded machine steals from wall time does not count) and each
cell is the median of ``--repeat`` runs, ember's and torch's runs interleaved.

    python benchmarks/eager_small_ops.py              # all rows (~2 min)
    python benchmarks/eager_small_ops.py --quick      # fewer repeats
    python benchmarks/eager_small_ops.py conv softmax # rows whose name contains a word

Prints a table (median microseconds per call and ember/torch; the target is <= 3x, as
``eager_overhead.py``'s) and writes benchmarks/results/eager_small_ops.json.
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
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

TARGET_RATIO = 3.0
RESULTS = Path(__file__).resolve().parent / "results" / "eager_small_ops.json"


def make_cases(torch) -> Dict[str, Callable[[], object]]:
    """name -> zero-argument callable doing one call (or one training step) with ``torch``
    (ember or PyTorch), on the same float32 data for both."""
    F = __import__(torch.__name__ + ".nn.functional", fromlist=["functional"])
    g = np.random.default_rng(0)

    def t(*shape, rg=False):
        return torch.tensor(g.standard_normal(shape).astype(np.float32), requires_grad=rg)

    x, w, b = t(2, 3, 8, 8), t(4, 3, 3, 3), t(4)
    q, k, v = t(2, 2, 8, 8), t(2, 2, 8, 8), t(2, 2, 8, 8)
    m = t(8, 8)
    u = torch.tensor((g.random((8, 8)) * 1.8 - 0.9).astype(np.float32))
    tgt = torch.tensor(g.integers(0, 8, 8))
    rm, rv = torch.zeros(3), torch.ones(3)
    lw, lb = t(8, 8), t(8)
    ew, idx = t(10, 8), torch.tensor(g.integers(0, 10, 8))
    isel, gidx = torch.tensor(g.integers(0, 8, 3)), torch.tensor(g.integers(0, 8, (8, 8)))
    l810, t8 = t(8, 10), torch.tensor(g.integers(0, 10, 8))
    l3210, t32 = t(32, 10), torch.tensor(g.integers(0, 10, 32))
    v100, d1000, m16 = t(100), t(1000), t(16, 16)
    gidx16 = torch.tensor(g.integers(0, 16, (16, 16)))
    c = {
        "conv2d 2x3x8x8 k3": lambda: F.conv2d(x, w, b, padding=1),
        "max_pool2d 2x3x8x8 k2": lambda: F.max_pool2d(x, 2),
        "avg_pool2d 2x3x8x8 k2": lambda: F.avg_pool2d(x, 2),
        "adaptive_avg_pool2d 1": lambda: F.adaptive_avg_pool2d(x, 1),
        "interpolate bilinear x2": lambda: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
        "batch_norm train": lambda: F.batch_norm(x, rm, rv, training=True),
        "batch_norm eval": lambda: F.batch_norm(x, rm, rv, training=False),
        "sdpa 2x2x8x8": lambda: F.scaled_dot_product_attention(q, k, v),
        "layer_norm 8x8": lambda: F.layer_norm(m, (8,)),
        "linear 8x8": lambda: F.linear(m, lw, lb),
        "embedding": lambda: F.embedding(idx, ew),
        "softmax 8x8": lambda: F.softmax(m, -1),
        "log_softmax 8x8": lambda: F.log_softmax(m, -1),
        "gelu 8x8": lambda: F.gelu(m),
        "dropout 8x8": lambda: F.dropout(m, 0.5, training=True),
        "cross_entropy 8x8": lambda: F.cross_entropy(m, tgt),
        "nll_loss 8x8": lambda: F.nll_loss(m, tgt),
        "mse_loss 8x8": lambda: F.mse_loss(m, u),
        "topk 8x8 k3": lambda: torch.topk(m, 3),
        "erfinv 8x8": lambda: torch.erfinv(u),
        "index_select": lambda: torch.index_select(m, 0, isel),
        "gather": lambda: torch.gather(m, 1, gidx),
        "cat": lambda: torch.cat([m, m], 0),
        "stack": lambda: torch.stack([m, m], 0),
        # the sizes of the small-loss/indexing rows (session 32)
        "nll_loss 8x10": lambda: F.nll_loss(l810, t8),
        "cross_entropy 32x10": lambda: F.cross_entropy(l3210, t32),
        "topk 100 k5": lambda: torch.topk(v100, 5),
        "dropout 1000": lambda: F.dropout(d1000, 0.5, training=True),
        "gather 16x16": lambda: torch.gather(m16, 1, gidx16),
    }
    xr, wr, br = t(2, 3, 8, 8, rg=True), t(4, 3, 3, 3, rg=True), t(4, rg=True)
    qr, mr = t(2, 2, 8, 8, rg=True), t(8, 8, rg=True)

    def step(fn, *leaves):
        def run():
            for leaf in leaves:
                leaf.grad = None
            fn().sum().backward()
        return run

    c.update({
        "conv2d fw+bw": step(lambda: F.conv2d(xr, wr, br, padding=1), xr, wr, br),
        "max_pool2d fw+bw": step(lambda: F.max_pool2d(xr, 2), xr),
        "avg_pool2d fw+bw": step(lambda: F.avg_pool2d(xr, 2), xr),
        "batch_norm train fw+bw": step(lambda: F.batch_norm(xr, rm, rv, training=True), xr),
        "sdpa fw+bw": step(lambda: F.scaled_dot_product_attention(qr, k, v), qr),
        "layer_norm fw+bw": step(lambda: F.layer_norm(mr, (8,)), mr),
        "linear fw+bw": step(lambda: F.linear(mr, lw, lb), mr),
        "softmax fw+bw": step(lambda: F.softmax(mr, -1), mr),
        "cross_entropy fw+bw": step(lambda: F.cross_entropy(mr, tgt), mr),
        "gelu fw+bw": step(lambda: F.gelu(mr), mr),
    })
    l810r, l3210r, v100r, d1000r, m16r = t(8, 10, rg=True), t(32, 10, rg=True), t(100, rg=True), \
        t(1000, rg=True), t(16, 16, rg=True)
    ur = torch.tensor((g.random((8, 8)) * 1.8 - 0.9).astype(np.float32), requires_grad=True)
    c.update({
        "nll_loss 8x10 fw+bw": step(lambda: F.nll_loss(l810r, t8), l810r),
        "cross_entropy 32x10 fw+bw": step(lambda: F.cross_entropy(l3210r, t32), l3210r),
        "topk 100 k5 fw+bw": step(lambda: torch.topk(v100r, 5)[0], v100r),
        "dropout 1000 fw+bw": step(lambda: F.dropout(d1000r, 0.5, training=True), d1000r),
        "gather 16x16 fw+bw": step(lambda: torch.gather(m16r, 1, gidx16), m16r),
        "erfinv fw+bw": step(lambda: torch.erfinv(ur), ur),
    })
    return c


def _runs(fn: Callable[[], object], number: int) -> float:
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number * 1e6


def time_pair(fe, ft, repeat: int, target_s: float) -> Dict[str, Dict[str, float]]:
    """Median microseconds per call of ember's fe and torch's ft (None: ember only), runs
    interleaved so that both see the same machine load."""
    out = {}
    fns = {"ember": fe, "torch": ft}
    number = {}
    for lib, fn in fns.items():
        if fn is None:
            continue
        for _ in range(3):
            fn()
        n = 1
        while _runs(fn, n) * n * 1e-6 < target_s / 4 and n < 1 << 16:
            n *= 4
        number[lib] = n
    runs = {lib: [] for lib in number}
    for _ in range(repeat):
        for lib in number:
            runs[lib].append(_runs(fns[lib], number[lib]))
    for lib, r in runs.items():
        out[lib] = {"median_us": statistics.median(r), "min_us": min(r), "max_us": max(r),
                    "number": number[lib], "repeat": repeat}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("only", nargs="*", help="run the rows whose name contains one of these words")
    ap.add_argument("--repeat", type=int, default=11, help="runs per case (median is reported)")
    ap.add_argument("--run-seconds", type=float, default=0.05, help="target duration of one run")
    ap.add_argument("--quick", action="store_true", help="5 runs of ~20 ms each")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--json", type=Path, default=RESULTS, help=f"output file (default {RESULTS})")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat, args.run_seconds = 5, 0.02

    import ember
    from eager_overhead import render_table

    torch = None
    if not args.no_torch:
        try:
            import torch  # type: ignore
            torch.set_num_threads(1)
        except ImportError:
            torch = None

    ec = make_cases(ember)
    tc = make_cases(torch) if torch is not None else {}
    ember_res, torch_res = {}, {}
    for name in ec:
        if args.only and not any(w in name for w in args.only):
            continue
        try:
            r = time_pair(ec[name], tc.get(name), args.repeat, args.run_seconds)
        except Exception as exc:  # report, keep going
            r = {"ember": {"error": f"{type(exc).__name__}: {exc}"}}
        ember_res[name] = r["ember"]
        if "torch" in r:
            torch_res[name] = r["torch"]
        print(f"  {name}: {ember_res[name].get('median_us', float('nan')):.1f} us", flush=True, file=sys.stderr)

    print(f"small-tensor eager ops, float32, CPU time per call, median of {args.repeat} interleaved runs")
    print(render_table(ember_res, torch_res or None))
    ratios = {n: ember_res[n]["median_us"] / torch_res[n]["median_us"] for n in ember_res
              if n in torch_res and "error" not in ember_res[n] and "error" not in torch_res[n]}
    if ratios:
        print(f"\ngeometric mean ember/torch: {statistics.geometric_mean(ratios.values()):.2f}x "
              f"(target <= {TARGET_RATIO:g}x)")
    doc = {
        "benchmark": "eager_small_ops",
        "unit": "microseconds of process CPU time per call (median over interleaved runs)",
        "target_ratio": TARGET_RATIO,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "ember_path": str(Path(ember.__file__).parent),
        "torch_version": getattr(torch, "__version__", None) if torch is not None else None,
        "results": {n: {"ember": ember_res[n], "torch": torch_res.get(n), "ratio": ratios.get(n)}
                    for n in ember_res},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
