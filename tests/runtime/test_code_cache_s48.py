"""The disk cache of generated source's code objects (ember/runtime/code_cache.py)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ember.runtime import code_cache


def _src(n=60, tag="a"):
    """A generated-looking function longer than the cache's threshold."""
    body = "".join(f"    x{i} = a * {i} + {len(tag)}\n" for i in range(n))
    return f"def f_{tag}(a):\n{body}    return {' + '.join(f'x{i}' for i in range(n))}\n"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_CODE_CACHE", raising=False)
    code_cache._memo.clear()
    yield tmp_path
    code_cache._memo.clear()


def _files(root):
    return sorted(p for p in (root / "code").rglob("*.bin")) if (root / "code").exists() else []


def _run(code, name):
    ns = {}
    exec(code, ns)
    return ns[name](3)


def test_second_compile_reads_the_stored_code(root):
    src = _src()
    s0 = dict(code_cache.stats)
    c1 = code_cache.compile_source(src, "<gen a>")
    assert len(_files(root)) == 1 and code_cache.stats["stores"] - s0["stores"] == 1
    code_cache._memo.clear()                          # (as a new process: only the disk has it)
    c2 = code_cache.compile_source(src, "<gen a>")
    assert code_cache.stats["hits"] - s0["hits"] == 1
    assert c2 == c1 and c2.co_filename == "<gen a>"
    assert _run(c2, "f_a") == _run(compile(src, "<x>", "exec"), "f_a")


def test_other_source_or_name_is_another_entry(root):
    code_cache.compile_source(_src(tag="a"), "<gen>")
    code_cache.compile_source(_src(tag="bb"), "<gen>")
    code_cache.compile_source(_src(tag="a"), "<other>")
    assert len(_files(root)) == 3
    code_cache._memo.clear()
    assert _run(code_cache.compile_source(_src(tag="bb"), "<gen>"), "f_bb") == \
        _run(compile(_src(tag="bb"), "<x>", "exec"), "f_bb")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "other_source"])
def test_a_damaged_entry_is_compiled_again_and_rewritten(root, damage):
    src = _src()
    code_cache.compile_source(src, "<gen a>")
    (path,) = _files(root)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not an entry at all")
    else:       # a valid entry for another source at this path (a hash collision): not trusted
        import marshal
        from ember.runtime import disk_cache
        other = _src(tag="zz")
        payload = marshal.dumps({"format": code_cache.FORMAT_VERSION, "filename": "<gen a>", "src": other,
                                 "code": compile(other, "<gen a>", "exec")})
        path.write_bytes(disk_cache.frame(code_cache._MAGIC, code_cache.FORMAT_VERSION, payload))
    code_cache._memo.clear()
    s0 = dict(code_cache.stats)
    code = code_cache.compile_source(src, "<gen a>")
    assert code_cache.stats["misses"] - s0["misses"] == 1
    assert _run(code, "f_a") == _run(compile(src, "<x>", "exec"), "f_a")
    code_cache._memo.clear()
    s1 = dict(code_cache.stats)
    code_cache.compile_source(src, "<gen a>")
    assert code_cache.stats["hits"] - s1["hits"] == 1        # rewritten


def test_switched_off_or_short_sources_write_nothing(root, monkeypatch):
    code_cache.compile_source("def g():\n    return 1\n", "<short>")
    assert _files(root) == []
    monkeypatch.setenv("EMBER_CODE_CACHE", "0")
    code_cache.compile_source(_src(), "<gen a>")
    assert _files(root) == []


def test_an_unwritable_root_only_means_no_caching(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(blocker))     # a file: no folder can be made under it
    code_cache._memo.clear()
    code = code_cache.compile_source(_src(), "<gen a>")
    assert _run(code, "f_a") == _run(compile(_src(), "<x>", "exec"), "f_a")
    code_cache._memo.clear()


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember
    from ember.runtime import code_cache
    lin = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))
    f = ember.compile(lin)
    x = ember.tensor(np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32))
    out = f(x)
    out.sum().backward()
    ref = lin(x)
    print(json.dumps({"stats": code_cache.stats, "err": float((out - ref).abs().max())}))
""")


def test_a_warm_compile_in_a_new_process_compiles_no_generated_source(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    env.pop("EMBER_CODE_CACHE", None)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["stats"]["stores"] >= 1
    assert warm["stats"]["misses"] == 0 and warm["stats"]["hits"] >= 1, warm
    assert warm["err"] < 1e-5 and cold["err"] < 1e-5
