"""The fixed native helpers built at install time (``ember/inductor/prebuilt.py``, called by
setup.py): built under the code cache's own keys, found by the code cache in place of a build,
ignored when their checksum fails, when ``config.prebuilt`` is off, or when the key moved (an
edited source, other flags); the build never raises; setup.py can load the module without numpy."""
import ctypes
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from ember.inductor import codecache, config, prebuilt

PROBE = '''
#include <cstdint>
// {token}
extern "C" int64_t ember_prebuilt_probe(int64_t x) {{ return x * {k} + 1; }}
'''


def _probe(lib, x):
    f = lib.ember_prebuilt_probe
    f.argtypes, f.restype = [ctypes.c_int64], ctypes.c_int64
    return f(x)


@pytest.fixture
def install(tmp_path, monkeypatch):
    """An install's prebuilt directory of its own, an empty code cache and no loaded libraries."""
    root = tmp_path / "prebuilt"
    root.mkdir()
    monkeypatch.setattr(prebuilt, "directory", lambda: str(root))
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "prebuilt", True)
    monkeypatch.setattr(codecache, "_memory", {})
    monkeypatch.setattr(codecache, "_pch", {})
    return root


def _prebuild_probe(root, k):
    """A helper compiled into the install directory under its code-cache key, as setup.py does."""
    src = PROBE.format(token=uuid.uuid4().hex, k=k)
    key = codecache.helper_key(src, "probe")
    path = root / "probe.cpp"
    path.write_text(src)
    prebuilt._compile([config.cxx, *config.cpp_flags, "-x", "c++", str(path), *config.cpp_libs],
                      str(root / (key + ".so")))
    return src, key


def test_a_prebuilt_helper_is_loaded_instead_of_built(install):
    src, key = _prebuild_probe(install, 7)
    n0, p0 = codecache.stats["compiles"], codecache.stats["prebuilt_hits"]
    lib = codecache.load_key(key, src)
    assert _probe(lib, 6) == 43
    assert codecache.stats["prebuilt_hits"] == p0 + 1 and codecache.stats["compiles"] == n0
    assert not os.path.exists(codecache.cache_dir())             # nothing written to the cache


def test_a_corrupt_prebuilt_helper_is_ignored_and_left_alone(install):
    src, key = _prebuild_probe(install, 3)
    so = install / (key + ".so")
    data = so.read_bytes()
    so.write_bytes(data[: len(data) // 2])                         # truncated: the checksum fails
    n0 = codecache.stats["compiles"]
    assert prebuilt.find_so(key) is None
    assert _probe(codecache.load_key(key, src), 5) == 16
    assert codecache.stats["compiles"] == n0 + 1                    # built into the code cache
    assert so.read_bytes() == data[: len(data) // 2]                # the install is not rewritten


def test_switched_off_the_code_cache_builds_itself(install, monkeypatch):
    src, key = _prebuild_probe(install, 2)
    monkeypatch.setattr(config, "prebuilt", False)
    n0, p0 = codecache.stats["compiles"], codecache.stats["prebuilt_hits"]
    assert _probe(codecache.load_key(key, src), 4) == 9
    assert codecache.stats["compiles"] == n0 + 1 and codecache.stats["prebuilt_hits"] == p0


def test_keys_move_with_the_source_flags_and_tag():
    src = PROBE.format(token="t", k=1)
    key = codecache.helper_key(src, "probe")
    assert key == prebuilt.helper_key(src, "probe", config.cxx, config.cpp_flags, config.cpp_libs)
    assert codecache.helper_key(src + " ", "probe") != key
    assert codecache.helper_key(src, "other") != key
    assert prebuilt.helper_key(src, "probe", config.cxx, [*config.cpp_flags, "-DX"], config.cpp_libs) != key
    assert prebuilt.helper_key(src, "probe", "no-such-compiler-ember", config.cpp_flags, config.cpp_libs) is None


def test_build_writes_the_helpers_the_code_cache_looks_for(install):
    """setup.py's step into a directory of its own: the GEMM and the BLAS-threads callback under
    the keys gemm.py and _blas_threads.py compute, the precompiled header under _pch_flags's, and
    the prebuilt GEMM computes a product."""
    said = []
    written = prebuilt.build(str(install), config.cxx, config.cpp_flags, config.cpp_libs,
                             use_pch=config.precompiled_header, say=said.append)
    assert all(os.path.exists(p) for p in written)
    sources = {tag: open(path).read() for tag, path in prebuilt.HELPERS}
    from ember import _blas_threads
    assert sources["blas-threads"] == _blas_threads._SOURCE
    keys = {tag: codecache.helper_key(src, tag) for tag, src in sources.items()}
    for tag, key in keys.items():
        if prebuilt.find_so(key) is None:
            # the GEMM refuses CPUs with neither AVX-512 nor AVX2 (its #error): said, not raised
            assert tag == "gemm" and any("gemm" in s for s in said), said
            continue
        assert str(install) in prebuilt.find_so(key)
    if prebuilt.is_gcc(codecache.compiler_version()) and config.precompiled_header:
        flags = codecache._pch_flags()
        assert flags and flags[1].startswith(str(install)), flags
    gemm_so = prebuilt.find_so(keys["gemm"])
    if gemm_so is not None:
        lib = ctypes.CDLL(gemm_so)
        rng = np.random.default_rng()
        a, b = rng.standard_normal((70, 90), np.float32), rng.standard_normal((90, 50), np.float32)
        c = np.empty((70, 50), np.float32)
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        lib.ember_sgemm.argtypes = [i64, i64, i64, i64, ptr, i64, i64, i64, ptr, i64, i64, i64, ptr, ctypes.c_int]
        lib.ember_sgemm.restype = None
        # (batch, M, N, K, A, batch/row/column strides of A, B and its strides, C and its strides, threads)
        lib.ember_sgemm(1, 70, 50, 90, a.ctypes.data, 0, 90, 1, b.ctypes.data, 0, 50, 1, c.ctypes.data, 1)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_build_never_raises_without_a_compiler(tmp_path):
    said = []
    assert prebuilt.build(str(tmp_path), "no-such-compiler-ember", config.cpp_flags, config.cpp_libs,
                          say=said.append) == []
    assert said and "no-such-compiler-ember" in said[0]


def test_setup_loads_it_without_numpy_or_ember():
    """pip's build environment has neither numpy nor ember: setup.py loads config.py and
    prebuilt.py by path, and both must import only the standard library."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = f"""
import importlib.util, sys
sys.modules['numpy'] = None; sys.modules['ember'] = None        # importing either fails
for name, rel in (('c', 'ember/inductor/config.py'), ('p', 'ember/inductor/prebuilt.py')):
    spec = importlib.util.spec_from_file_location(name, {here!r} + '/' + rel)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(m.directory())
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(os.path.join("ember", "_C", "prebuilt"))
