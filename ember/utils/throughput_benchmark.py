"""``ThroughputBenchmark``: how many calls per second a module sustains when several Python
threads call it at once (PyTorch's ``torch.utils.ThroughputBenchmark``, written in Python).

Inputs are registered with ``add_input``; ``benchmark()`` gives each calling thread its own
randomly chosen inputs, runs the warm-up iterations, then lets all threads start together and
share a budget of ``num_iters`` calls. The average latency is the wall time of the timed phase
times the number of threads over the number of calls, as PyTorch reports it. ember ops release
the GIL only inside numpy kernels, so threads overlap only there -- the benchmark measures what
a multi-threaded server would actually get.
"""
from __future__ import annotations

import random
import threading
import time
import warnings

__all__ = ["ThroughputBenchmark", "ExecutionStats", "BenchmarkConfig", "format_time"]


def format_time(time_us=None, time_ms=None, time_s=None) -> str:
    """A duration in the largest unit (s / ms / us) where it is at least 1, three decimals."""
    if sum([time_us is not None, time_ms is not None, time_s is not None]) != 1:
        raise AssertionError("Expected only one of time_us, time_ms, time_s is given.")
    if time_us is None:
        time_us = time_ms * 1e3 if time_ms is not None else time_s * 1e6
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


class BenchmarkConfig:
    """Settings of one ``benchmark()`` run (PyTorch's ``torch._C.BenchmarkConfig``)."""

    def __init__(self):
        self.num_calling_threads = 1
        self.num_worker_threads = 1
        self.num_warmup_iters = 1
        self.num_iters = 100
        self.profiler_output_path = ""


class _BenchmarkExecutionStats:
    def __init__(self, latency_avg_ms: float, num_iters: int):
        self.latency_avg_ms = latency_avg_ms
        self.num_iters = num_iters


class ExecutionStats:
    """The result of ``benchmark()``: average latency per call and the derived throughput."""

    def __init__(self, c_stats, benchmark_config):
        self._c_stats = c_stats
        self.benchmark_config = benchmark_config

    @property
    def latency_avg_ms(self):
        return self._c_stats.latency_avg_ms

    @property
    def num_iters(self):
        return self._c_stats.num_iters

    @property
    def iters_per_second(self):
        """Calls per second across all calling threads."""
        return self.num_iters / self.total_time_seconds

    @property
    def total_time_seconds(self):
        return self.num_iters * (self.latency_avg_ms / 1000.0) / self.benchmark_config.num_calling_threads

    def __str__(self) -> str:
        return "\n".join([
            "Average latency per example: " + format_time(time_ms=self.latency_avg_ms),
            f"Total number of iterations: {self.num_iters}",
            f"Total number of iterations per second (across all threads): {self.iters_per_second:.2f}",
            "Total time: " + format_time(time_s=self.total_time_seconds),
        ])


class ThroughputBenchmark:
    """Benchmark ``module`` (any callable, usually an ``nn.Module``) from several threads.

    >>> bench = ThroughputBenchmark(model)
    >>> bench.add_input(x)             # as many example inputs as you like
    >>> stats = bench.benchmark(num_calling_threads=4, num_warmup_iters=10, num_iters=200)
    >>> stats.iters_per_second
    """

    def __init__(self, module):
        if not callable(module):
            raise TypeError(f"ThroughputBenchmark: module must be callable (an nn.Module or a function), "
                            f"got {type(module).__name__}")
        self._module = module
        self._inputs: list[tuple[tuple, dict]] = []

    def run_once(self, *args, **kwargs):
        """One call of the module on these arguments (to check it runs, and its output)."""
        return self._module(*args, **kwargs)

    def add_input(self, *args, **kwargs) -> None:
        """Register one example input: the positional and keyword arguments of one call."""
        self._inputs.append((args, kwargs))

    def benchmark(self, num_calling_threads=1, num_warmup_iters=10, num_iters=100, profiler_output_path=""):
        """Run ``num_iters`` calls over ``num_calling_threads`` threads after ``num_warmup_iters``
        warm-up calls per thread; with ``profiler_output_path``, the timed phase is profiled and
        written there as a Chrome trace."""
        config = BenchmarkConfig()
        config.num_calling_threads = num_calling_threads
        config.num_warmup_iters = num_warmup_iters
        config.num_iters = num_iters
        config.profiler_output_path = profiler_output_path
        return ExecutionStats(self._run(config), config)

    def _run(self, config: BenchmarkConfig) -> _BenchmarkExecutionStats:
        if config.num_worker_threads != 1:
            raise RuntimeError("Only parallelization by callers is supported")
        if not self._inputs:
            raise RuntimeError("Please provide benchmark inputs.Did you forget to call add_input()? ")
        if config.num_calling_threads < 1:
            raise ValueError(f"num_calling_threads must be at least 1, got {config.num_calling_threads}")
        from .. import nn
        if isinstance(self._module, nn.Module):
            warnings.warn("Starting benchmark on an nn.Module. This can be slow due to Python GIL.", UserWarning,
                          stacklevel=3)
        n_threads = config.num_calling_threads
        picks = [[random.randrange(len(self._inputs)) for _ in range(config.num_warmup_iters + config.num_iters)]
                 for _ in range(n_threads)]
        start = threading.Barrier(n_threads + 1)
        lock = threading.Lock()
        remaining = [config.num_iters]
        errors: list[BaseException] = []

        def caller(tid: int):
            try:
                mine = iter(picks[tid])
                for _ in range(config.num_warmup_iters):
                    args, kwargs = self._inputs[next(mine)]
                    self._module(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(e)
            start.wait()
            while not errors:
                with lock:
                    if remaining[0] <= 0:
                        return
                    remaining[0] -= 1
                try:
                    args, kwargs = self._inputs[next(mine)]
                    self._module(*args, **kwargs)
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)

        threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(n_threads)]
        for t in threads:
            t.start()
        profiler = None
        if config.profiler_output_path:
            from ..profiler import profile
            profiler = profile()
            profiler.__enter__()
        start.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        elapsed_ms = (time.perf_counter() - began) * 1e3
        if profiler is not None:
            profiler.__exit__(None, None, None)
            profiler.export_chrome_trace(config.profiler_output_path)
        if errors:
            raise errors[0]
        latency = elapsed_ms * n_threads / config.num_iters if config.num_iters else 0.0
        return _BenchmarkExecutionStats(latency, config.num_iters)
