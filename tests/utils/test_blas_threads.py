"""``ember/_blas_threads.py``: numpy's OpenBLAS runs its threaded jobs on ember's OpenMP pool.

Each check runs in a fresh process: the callback is process-global and installed once.
Results must be bit-identical to OpenBLAS's own pool (same split of the work, other threads).
"""
import os
import subprocess
import sys
import textwrap

import pytest

from ember import _blas_threads

if not _blas_threads.openblas_libraries():
    pytest.skip("numpy's BLAS is not an OpenBLAS that takes a threads callback", allow_module_level=True)


def _run(code, **env_extra):
    env = dict(os.environ)
    for k in ("EMBER_BLAS_THREADS", "OPENBLAS_NUM_THREADS", "OMP_THREAD_LIMIT", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        env.pop(k, None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()


_PRODUCTS = """
    import numpy as np
    def products(seed):
        rng = np.random.default_rng(seed)
        out = []
        for dt in (np.float32, np.float64):
            for (m, k, n) in ((512, 384, 640), (1024, 256, 768), (33, 700, 65)):
                a = rng.standard_normal((m, k)).astype(dt)
                b = rng.standard_normal((k, n)).astype(dt)
                out += [a @ b, a.T.copy().T @ b, (a @ b[:, :1])[:, 0]]
            x = rng.standard_normal((6, 128, 64)).astype(dt)
            y = rng.standard_normal((6, 64, 128)).astype(dt)
            out.append(x @ y)
        return out
"""


@pytest.mark.parametrize("extra", [{}, {"OPENBLAS_NUM_THREADS": "2", "OMP_THREAD_LIMIT": "1"}],
                         ids=["pool", "team-smaller-than-jobs"])
def test_products_bit_identical_to_openblas_pool(extra, tmp_path):
    # OMP_THREAD_LIMIT=1 gives a one-thread team for two jobs: the rest run on pthreads
    ref = tmp_path / "ref.npz"
    out = _run(_PRODUCTS + f"""
    import ember
    from ember import _blas_threads as bt
    assert bt.installed() == []
    np.savez({str(ref)!r}, *products(0))
    print("ok")
    """, EMBER_BLAS_THREADS="native", **extra)
    assert out == ["ok"]
    out = _run(_PRODUCTS + f"""
    import ember
    from ember import _blas_threads as bt
    assert bt.installed(), "import ember did not install the callback"
    before = bt.calls()
    got = products(0)
    assert bt.calls() > before, "no BLAS call went through the callback"
    ref = np.load({str(ref)!r})
    for i, q in enumerate(got):
        p = ref[f"arr_{{i}}"]
        assert p.dtype == q.dtype and np.array_equal(p, q), i
    print("ok")
    """, **extra)
    assert out == ["ok"]


def test_compiled_matches_eager():
    """Compiled kernels and BLAS calls on the one pool; the compiled product goes to numpy's BLAS
    here (``EMBER_GEMM=blas``), not ember's own GEMM, so that the callback is exercised."""
    out = _run("""
    import numpy as np, ember
    from ember import _blas_threads as bt
    lin = ember.nn.Linear(300, 500)
    x = ember.randn(200, 300)
    f = ember.compile(lambda x: ember.nn.functional.gelu(lin(x)))
    y = f(x)
    assert bt.installed() and bt.calls() > 0
    ref = ember.nn.functional.gelu(lin(x))
    np.testing.assert_allclose(y.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    print("ok")
    """, EMBER_GEMM="blas")
    assert out == ["ok"]


def test_kept_off_by_the_environment():
    out = _run("""
    import numpy as np, ember
    from ember import _blas_threads as bt
    print(bt.install(), bt.calls())
    """, EMBER_BLAS_THREADS="native")
    assert out == ["[] 0"]


def test_threads_calling_blas_at_once():
    # three Python threads in matmuls at once: the callback takes one call at a time (OpenBLAS
    # indexes its per-thread buffers by job number: concurrent calls overwrote each other)
    out = _run(_PRODUCTS + """
    import threading, ember
    from ember import _blas_threads as bt
    ref = products(1)
    bad = []
    def worker():
        for _ in range(3):
            got = products(1)
            if not all(np.array_equal(p, q) for p, q in zip(ref, got)):
                bad.append(1)
    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert not bad and bt.calls() > 0
    print("ok")
    """)
    assert out == ["ok"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_forked_child_uses_openblas_pool():
    out = _run(_PRODUCTS + """
    import os, ember
    from ember import _blas_threads as bt
    ref = products(2)
    assert bt.installed()
    pid = os.fork()
    if pid == 0:
        ok = all(np.array_equal(p, q) for p, q in zip(ref, products(2))) and not bt.installed()
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    """)
    assert out == ["child 0"]


@pytest.mark.parametrize("env, spins", [({}, "30000"), ({"OMP_WAIT_POLICY": "passive"}, None),
                                        ({"EMBER_BLAS_THREADS": "native"}, None),
                                        ({"GOMP_SPINCOUNT": "7"}, "7")])
def test_workers_spin_only_when_blas_shares_the_pool(env, spins):
    # with OpenBLAS's own pool still there, spinning OpenMP workers made nanoGPT 2.3x slower
    code = """
    import os, ember
    print(os.environ.get("GOMP_SPINCOUNT"), ember._openmp.spin_count_set)
    """
    r = _run(code, **env)
    want_set = spins is not None and "GOMP_SPINCOUNT" not in env
    assert r == [f"{spins} {want_set}"]
