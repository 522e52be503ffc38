"""The per-call path of compiled graphs: the OpenMP wait policy set at import,
the matmul externs (no copies of transposed operands, preallocated outputs,
fused bias), and the wrapper/runtime layers (buffer reuse across calls that
never hands a caller memory a later call overwrites)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember

PY = sys.executable


# ---------------------------------------------------------------------- OpenMP wait policy
def _run(code, env_policy=None):
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    r = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


_COMPILE_TWO = """
    import os
    print("POLICY", os.environ.get("OMP_WAIT_POLICY"))
    f = ember.compile(lambda x: x.sin() + 1.5)
    g = ember.compile(lambda x: x.cos() * 2.5)
    x = ember.randn(8)
    import numpy as np
    np.testing.assert_allclose(f(x).numpy(), np.sin(x.numpy()) + 1.5, rtol=1e-6)
    np.testing.assert_allclose(g(x).numpy(), np.cos(x.numpy()) * 2.5, rtol=1e-6)
"""


def test_import_sets_passive_policy_and_libgomp_loaded_later_is_fine():
    out, err = _run("import ember\nimport torch\n" + textwrap.dedent(_COMPILE_TWO))
    assert "POLICY passive" in out
    assert "OMP_WAIT_POLICY" not in err


def test_libgomp_loaded_before_ember_warns_once_with_the_fix():
    # torch loads its own libgomp.so.1 at import, initialised without the variable
    out, err = _run("import torch\nimport ember\n" + textwrap.dedent(_COMPILE_TWO))
    assert "POLICY passive" in out
    assert err.count("export OMP_WAIT_POLICY=passive") == 1, err
    assert "libgomp" in err


def test_user_policy_is_kept_and_not_warned_about():
    out, err = _run("import torch\nimport ember\n" + textwrap.dedent(_COMPILE_TWO), env_policy="active")
    assert "POLICY active" in out
    assert "OMP_WAIT_POLICY" not in err


def test_loaded_libgomp_reads_the_process_maps():
    out, _ = _run("""
        import ctypes, importlib.util, os
        import ember
        from ember import _openmp
        before = _openmp.loaded_libgomp()
        lib = os.path.join(importlib.util.find_spec("torch").submodule_search_locations[0], "lib", "libgomp.so.1")
        ctypes.CDLL(lib)
        after = _openmp.loaded_libgomp()
        print("BEFORE", before)
        print("AFTER", [os.path.realpath(p) == os.path.realpath(lib) for p in after])
    """)
    assert "BEFORE []" in out
    assert "AFTER [True]" in out
