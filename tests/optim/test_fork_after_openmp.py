"""A forked child of a process whose OpenMP pool has threads (the fused native Adam step, compiled
kernels) must not hang in its own first parallel region: ember's at-fork handler makes the child's
OpenMP loops single-threaded (ember/_openmp.py), as torch does."""
import os
import signal
import sys

import pytest

import ember


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs os.fork (Linux)")
def test_forked_child_runs_native_adam_and_compiled_kernels():
    p = ember.nn.Parameter(ember.randn(200_000))
    opt = ember.optim.Adam([p], lr=0.1)
    p.grad = ember.randn(200_000)
    opt.step()                                   # the parent's pool now has worker threads
    f = ember.compile(lambda x: (x * 2 + 1).sum())
    want = f(ember.ones(100_000)).item()
    pid = os.fork()
    if pid == 0:                                 # the child: exit code says what happened
        code = 1
        try:
            signal.alarm(60)                     # a hang ends as SIGALRM, not a stuck test run
            p.grad = ember.randn(200_000)
            opt.step()
            got = f(ember.ones(100_000)).item()
            code = 0 if got == want and ember._openmp.num_threads() == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the forked child was killed (signal {os.WTERMSIG(status)}): it hung"
    assert os.WEXITSTATUS(status) == 0
    assert ember._openmp.num_threads() >= 1 and not ember._openmp._forked[0]
