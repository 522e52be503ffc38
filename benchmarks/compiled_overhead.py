"""Per-call overhead of compiled graphs: ember.compile (inductor) vs torch.compile.

The programs are tiny (16 elements, a 4x16 Linear), so what is timed is the
per-call machinery, not the math: guard checks, the AOT runtime (autograd
Function, saved tensors), the inductor wrapper (buffer allocation, one
ctypes call per kernel, the matmul externs) and the output wrapping.

    python benchmarks/compiled_overhead.py [--reps 7] [--n 3000]

Columns are microseconds per call (median of ``--reps`` repeats of ``--n``
calls), for ember eager, ember compiled, torch eager and torch.compile, all
in this one process. ``train`` rows compile ``fn(*args).sum()`` (so the loss
is inside the graph) and call ``backward()`` on it: forward graph, autograd
node, backward graph, gradient accumulation. Times are CPU time of the process (``time.process_time``), which
a busy shared machine disturbs less than wall time; nothing here is
multithreaded at these sizes.

``OMP_WAIT_POLICY=passive`` is set before anything is imported: torch ships
its own libgomp, and importing torch first would otherwise leave ember's
OpenMP kernels on a libgomp with spinning idle threads (ember warns then).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402


def _time(fn, n, reps):
    for _ in range(max(50, n // 20)):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        ts.append((time.process_time() - t0) / n)
    return statistics.median(ts) * 1e6


def _programs(lib):
    """name -> (fn, make inputs(requires_grad), training?)"""
    nn = lib.nn

    def sin1(x):
        return x.sin() + 1

    def chain8(a, b, c, d, e, f, g, h):
        return (a * b + c * d).tanh() + (e - f) * g / (h.abs() + 1)

    lin = nn.Linear(16, 16)

    def linear_relu(x):
        return lin(x).relu()

    def one(rg):
        return [lib.randn(16, requires_grad=rg)]

    def eight(rg):
        return [lib.randn(16, requires_grad=rg) for _ in range(8)]

    def x4(rg):
        return [lib.randn(4, 16, requires_grad=rg)]

    return [("x.sin()+1", sin1, one), ("8-input chain", chain8, eight), ("Linear(16)+relu", linear_relu, x4)]


def _with_loss(fn):
    def loss(*args):
        return fn(*args).sum()
    return loss


def _step(lib, fn, args, train):
    if train:          # fn computes the loss: the whole forward is one compiled graph
        def run():
            fn(*args).backward()
    else:
        def run():
            with lib.no_grad():
                fn(*args)
    return run


def _measure(lib, compile_fn, n, reps):
    lib.manual_seed(0)
    rows = []
    for name, fn, make in _programs(lib):
        for train in (False, True):
            args = make(train)
            f = _with_loss(fn) if train else fn
            eager = _time(_step(lib, f, args, train), n, reps)
            compiled = compile_fn(f)
            comp = _time(_step(lib, compiled, args, train), n, reps)
            rows.append((f"{name} {'train' if train else 'infer'}", eager, comp))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    import ember
    rows = _measure(ember, ember.compile, args.n, args.reps)
    trows = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(1)
            trows = _measure(torch, torch.compile, args.n, args.reps)
        except ImportError:
            pass
    print(f"{'program':28} {'ember eager':>12} {'ember compiled':>15} {'torch eager':>12} {'torch.compile':>14}"
          f"   (us per call, CPU time)")
    for i, (name, e, c) in enumerate(rows):
        t = (f"{trows[i][1]:12.1f} {trows[i][2]:14.1f}" if trows else f"{'-':>12} {'-':>14}")
        print(f"{name:28} {e:12.1f} {c:15.1f} {t}")


if __name__ == "__main__":
    main()
