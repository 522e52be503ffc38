"""The kernels' precompiled standard headers (``codecache._pch_flags``): built once per cache
key, used by every compile, the same results without it, a corrupt one rebuilt, a failed
build leaving the compiles without it (not failing them)."""
import ctypes
import logging
import os
import uuid

import numpy as np
import pytest

from ember.inductor import codecache, config

SRC = '''
#include <cmath>
#include <cstdint>
#include <immintrin.h>
// {token}
extern "C" void ember_pch_probe(const float* x, float* y, int64_t n) {{
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * {k} + std::sin(x[i]);
}}
'''


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A cache of its own and no memory of built headers; the state is restored after."""
    if "g++" not in codecache.compiler_version() and "GCC" not in codecache.compiler_version():
        pytest.skip("precompiled headers are used with GCC only")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codecache, "_pch", {})
    monkeypatch.setattr(config, "precompiled_header", True)
    monkeypatch.setattr(config, "prebuilt", False)     # the code cache's own build, not the install's
    return tmp_path


def _run(lib, x):
    y = np.empty_like(x)
    f = lib.ember_pch_probe
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    f.restype = None
    f(x.ctypes.data, y.ctypes.data, x.size)
    return y


def _gch(root):
    found = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".gch")]
    assert len(found) == 1, found
    return found[0]


def test_compiles_use_it_and_agree_without_it(fresh, monkeypatch):
    x = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
    src = SRC.format(k=3, token=uuid.uuid4().hex)
    flags = codecache._pch_flags()
    assert flags[0] == "-include" and flags[1].endswith("ember_prelude.h") and "-Winvalid-pch" in flags
    gch = _gch(fresh)
    assert os.path.getsize(gch) > 1 << 20 and gch.startswith(str(fresh))
    # g++ uses it (an invalid one draws -Winvalid-pch's warning; a valid one none)
    report = codecache.compile_so(src, str(fresh / "a.so"))
    assert "pch" not in report.lower(), report
    with_pch = _run(ctypes.CDLL(str(fresh / "a.so")), x)
    monkeypatch.setattr(config, "precompiled_header", False)
    assert codecache._pch_flags() == []
    codecache.compile_so(src, str(fresh / "b.so"))
    without = _run(ctypes.CDLL(str(fresh / "b.so")), x)
    np.testing.assert_array_equal(with_pch, without)
    np.testing.assert_allclose(with_pch, np.exp(x) * 3 + np.sin(x), rtol=1e-6, atol=1e-6)


def test_built_once_then_reused_and_a_corrupt_one_rebuilt(fresh, monkeypatch):
    codecache._pch_flags()
    gch = _gch(fresh)
    size, mtime = os.path.getsize(gch), os.stat(gch).st_mtime_ns
    monkeypatch.setattr(codecache, "_pch", {})             # a new process: found on disk
    codecache._pch_flags()
    assert os.stat(gch).st_mtime_ns == mtime
    with open(gch, "r+b") as f:                            # truncated: the checksum fails
        f.truncate(size // 2)
    monkeypatch.setattr(codecache, "_pch", {})
    codecache._pch_flags()
    assert os.path.getsize(gch) > size * 0.9 and codecache._valid(gch, gch + ".sha256")   # rebuilt
    lib = codecache.load(SRC.format(k=5, token=uuid.uuid4().hex))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(_run(lib, x), np.exp(x) * 5 + np.sin(x), rtol=1e-6, atol=1e-6)


def test_failed_build_leaves_compiles_without_it(fresh, monkeypatch, caplog):
    monkeypatch.setattr(config, "cpp_flags", list(config.cpp_flags) + ["-DEMBER_PCH_PROBE", "-fno-such-flag-ember"])
    with caplog.at_level(logging.INFO, logger="ember.inductor"):
        assert codecache._pch_flags() == []
    assert any("no precompiled header" in r.getMessage() for r in caplog.records)
    assert not [f for _, _, fs in os.walk(fresh) for f in fs if f.endswith(".gch")]
