"""Per-call overhead of a compiled function with the eager backend (guard check + call).

For 1 and 8 tensor inputs it times: the plain function, ember.compile(backend="eager")
and, where torch is installed, torch.compile(backend="eager"). The function is a
single cheap op per input on tiny tensors, so the difference is dispatch overhead.

    python benchmarks/dynamo_overhead.py
"""
import time


def _time(fn, args, n=20000):
    for _ in range(200):
        fn(*args)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def f1(a):
    return a + 1


def f8(a, b, c, d, e, f, g, h):
    return a + b + c + d + e + f + g + h


def main():
    import ember
    rows = []
    for name, fn, k in (("1 input", f1, 1), ("8 inputs", f8, 8)):
        args = [ember.ones(4) for _ in range(k)]
        eager = _time(fn, args)
        compiled = ember.compile(fn, backend="eager")
        comp = _time(compiled, args)
        row = [name, eager, comp, comp - eager]
        try:
            import torch
            import torch._dynamo
            targs = [torch.ones(4) for _ in range(k)]
            teager = _time(fn, targs)
            tc = torch.compile(fn, backend="eager")
            tcomp = _time(tc, targs)
            row += [teager, tcomp, tcomp - teager]
        except ImportError:
            row += [None, None, None]
        rows.append(row)
    print(f"{'':10} {'ember eager':>12} {'ember compiled':>15} {'overhead':>9} "
          f"{'torch eager':>12} {'torch.compile':>14} {'overhead':>9}   (us per call)")
    for r in rows:
        cells = [f"{v:12.2f}" if v is not None else f"{'-':>12}" for v in r[1:]]
        print(f"{r[0]:10} {cells[0]} {cells[1]:>15} {cells[2]:>9} {cells[3]} {cells[4]:>14} {cells[5]:>9}")


if __name__ == "__main__":
    main()
