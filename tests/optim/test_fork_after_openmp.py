"""A forked child of a process whose OpenMP pool has threads (the fused native Adam step, compiled
kernels) must not hang in its own first parallel region: ember's at-fork handler makes the child's
OpenMP loops single-threaded (ember/_openmp.py), as torch does.

The scenario runs in a fresh interpreter: forking the test worker itself would also copy whatever
threads earlier tests left running (a lock one of them holds at the fork deadlocks the child for
reasons that have nothing to do with OpenMP)."""
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent("""
    import os, signal
    import ember
    p = ember.nn.Parameter(ember.randn(200_000))
    opt = ember.optim.Adam([p], lr=0.1)
    p.grad = ember.randn(200_000)
    opt.step()                                   # the parent's pool now has worker threads
    f = ember.compile(lambda x: (x * 2 + 1).sum())
    want = f(ember.ones(100_000)).item()
    pid = os.fork()
    if pid == 0:                                 # the child: its exit code says what happened
        code = 1
        try:
            signal.alarm(60)                     # a hang ends as SIGALRM
            p.grad = ember.randn(200_000)
            opt.step()
            got = f(ember.ones(100_000)).item()
            code = 0 if got == want and ember._openmp.num_threads() == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status):
        raise SystemExit(f"child killed by signal {os.WTERMSIG(status)}: it hung")
    raise SystemExit(os.WEXITSTATUS(status) or (3 if ember._openmp._forked[0] else 0))
""")


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs os.fork (Linux)")
def test_forked_child_runs_native_adam_and_compiled_kernels():
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
