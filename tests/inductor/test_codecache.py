"""The kernel cache: memory and disk hits, rebuild of corrupt entries, atomic
concurrent writes."""
import os
import subprocess
import sys
import uuid

import numpy as np

import ember.prims as P
from ember.inductor import codecache

from ._helpers import assert_same, compile_and_run, rand

SRC = '''
#include <cstdint>
extern "C" int64_t ember_cache_probe(int64_t x) {{ return x * {k} + 1; }}
// {token}
'''


def _source(k=3):
    return SRC.format(k=k, token=uuid.uuid4().hex)


def test_memory_and_disk_hits():
    src = _source()
    n0 = codecache.stats["compiles"]
    lib = codecache.load(src)
    assert lib.ember_cache_probe(5) == 16
    assert codecache.stats["compiles"] == n0 + 1
    assert codecache.load(src) is lib                       # memory hit
    codecache.clear_memory_cache()
    d0 = codecache.stats["disk_hits"]
    lib2 = codecache.load(src)                              # disk hit, no compile
    assert lib2.ember_cache_probe(2) == 7
    assert codecache.stats["compiles"] == n0 + 1
    assert codecache.stats["disk_hits"] == d0 + 1
    _, so, sha = codecache._paths(codecache.cache_key(src))
    assert so.startswith(os.environ["EMBER_CACHE_DIR"]) and os.path.exists(sha)


def test_corrupt_entry_is_rebuilt():
    src = _source(7)
    codecache.load(src)
    _, so, sha = codecache._paths(codecache.cache_key(src))
    size = os.path.getsize(so)
    # a truncated .so (a writer that died mid-way, a full disk) ... (written as a new
    # file: truncating the mapped library in place would crash this very process)
    data = open(so, "rb").read()[: size // 3]
    with open(so + ".bad", "wb") as f:
        f.write(data)
    os.replace(so + ".bad", so)
    codecache.clear_memory_cache()
    n0 = codecache.stats["compiles"]
    lib = codecache.load(src)
    assert lib.ember_cache_probe(1) == 8
    assert codecache.stats["compiles"] == n0 + 1
    assert os.path.getsize(so) == size
    # ... and a .so whose checksum file is missing are both rebuilt
    os.unlink(sha)
    codecache.clear_memory_cache()
    lib = codecache.load(src)
    assert lib.ember_cache_probe(2) == 15
    assert codecache.stats["compiles"] == n0 + 2


def test_concurrent_processes_compile_the_same_kernel(tmp_path):
    src = _source(11)
    path = tmp_path / "src.cpp"
    path.write_text(src)
    code = ("import sys; from ember.inductor import codecache; "
            "lib = codecache.load(open(sys.argv[1]).read()); print(lib.ember_cache_probe(3))")
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=os.getcwd()) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "34"
    leftovers = [f for _, _, fs in os.walk(tmp_path / "cache") for f in fs if f.startswith(".tmp-")]
    assert leftovers == []
    sos = [f for _, _, fs in os.walk(tmp_path / "cache") for f in fs if f.endswith(".so")]
    assert len(sos) == 1


def test_recompiling_a_graph_hits_the_cache():
    x = rand(9, 14)
    fn = lambda x: P.log1p(P.abs(P.mul(x, 3.0)))  # noqa: E731
    compile_and_run(fn, x)
    n0 = codecache.stats["compiles"]
    cf, got, want = compile_and_run(fn, x)
    assert codecache.stats["compiles"] == n0
    assert_same(got[0], want[0], rtol=1e-6)


def test_load_by_stored_key_rebuilds_a_missing_library():
    """``load_key`` (the graph cache's path: the key stored in its entry, no source hashing)
    loads the stored library, and recompiles the source into that key's place when the
    library is gone."""
    src = _source(5)
    key = codecache.cache_key(src)
    n0 = codecache.stats["compiles"]
    assert codecache.load_key(key, src).ember_cache_probe(2) == 11
    assert codecache.stats["compiles"] == n0 + 1
    _, so, sha = codecache._paths(key)
    os.unlink(so)
    codecache.clear_memory_cache()
    assert codecache.load_key(key, src).ember_cache_probe(3) == 16
    assert codecache.stats["compiles"] == n0 + 2 and os.path.exists(so) and os.path.exists(sha)


def test_long_compiler_output_keeps_the_first_error():
    """A failing compile with pages of diagnostics: the message keeps the first ``error:`` line
    (the cause) ahead of the tail that fits."""
    from ember.inductor.codecache import _compiler_message
    first = "kernel.cpp:3:5: error: 'foo' was not declared in this scope"
    noise = "".join(f"kernel.cpp:{i}:1: note: candidate {i}\n" for i in range(2000))
    msg = _compiler_message(first + "\n" + noise + "kernel.cpp:9999:1: error: last\n")
    assert msg.splitlines()[0] == first and msg.rstrip().endswith("error: last") and len(msg) < 8300
    assert _compiler_message("a.cpp:1:1: error: short\n") == "a.cpp:1:1: error: short\n"
