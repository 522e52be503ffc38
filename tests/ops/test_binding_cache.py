"""``ember/ops/_binding_cache.py``: the generated op bindings' code objects come from a file in
the cache root, so a warm ``import ember`` compiles none of them. A cached import must give the
very same functions as a compiling one; a corrupt, foreign or stale file, or a cache root that
cannot be written, must only cost the compile, never an error or a wrong binding.

Import-level tests run ``import ember`` in a subprocess with a fresh ``EMBER_CACHE_DIR``."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ember.ops import _binding_cache as bc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Fingerprint every binding (and its specialised run) and run a few ops: plain, broadcast with a
# Python number, in-place, a view, a composite, erf, a reduction, and autograd through them.
_PROBE = r"""
import hashlib, json, sys
import ember
import ember.prims
from ember.ops import OPS, _binding_cache

h = hashlib.sha256()
for name in sorted(OPS):
    fn = OPS[name].binding
    assert fn._ember_op is OPS[name]
    fns = [fn] + [g for g in (fn.__globals__.get("_run"),) if g is not None and hasattr(g, "__code__")]
    for f in fns:
        c = f.__code__
        h.update(repr((f.__name__, f.__qualname__, f.__module__, f.__doc__, f.__defaults__, f.__kwdefaults__,
                       c.co_code, c.co_consts, c.co_names, c.co_varnames, c.co_filename, c.co_flags,
                       c.co_firstlineno)).encode())
assert ember.mul is ember.Tensor.mul and ember.add_ is OPS["add_"].binding

x = ember.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], requires_grad=True)
w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x * w + 2).exp().sum(dim=0) + ember.erf(x).t().reshape(6)[:3] + ember.nn.functional.softmax(x, dim=1)[0]
y.sum().backward()
a = ember.zeros(3)
a.add_(1).mul_(ember.tensor([1.0, 2.0, 3.0]))
out = {"y": y.tolist(), "dx": x.grad.tolist(), "dw": w.grad.tolist(), "a": a.tolist(),
       "grad_fn": type(y.grad_fn).__name__,
       "sig": [ember.add.__defaults__, ember.sum.__doc__, ember.Tensor.add_.__qualname__],
       "fingerprint": h.hexdigest(), "stats": _binding_cache.stats}
print(json.dumps(out, default=repr))
"""


def _import(cache_dir, **env_extra):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), EMBER_BLAS_THREADS="native")  # no helper build
    env.pop("EMBER_BINDING_CACHE", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _same_functions(a, b):
    assert {k: v for k, v in a.items() if k != "stats"} == {k: v for k, v in b.items() if k != "stats"}


def _files(cache_dir):
    d = os.path.join(cache_dir, "bindings")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def _compiled_everything(out):
    return all(s["compiled"] == s["used"] > 0 for s in out["stats"].values())


@pytest.fixture(scope="module")
def _cold(tmp_path_factory):
    """One cold ``import ember`` (an empty cache root: every binding compiled and written) for the
    module: its probe output and its cache root, which a test copies before touching it."""
    d = tmp_path_factory.mktemp("binding_cold") / "cache"
    return _import(d), d


def _cold_copy(cold, tmp_path):
    """A private copy of the cold import's cache root (a cached import's starting point)."""
    shutil.copytree(cold[1], tmp_path, dirs_exist_ok=True)
    return cold[0]


def test_warm_import_execs_the_cached_code(tmp_path, _cold):
    cold = _cold_copy(_cold, tmp_path)
    # (limited_dtypes: the bindings ember/ops/limited_dtypes.py regenerates at the end of the import;
    # sparse_routing / nested_routing: the layout routing swapped into factories and F functions)
    groups = {"ops", "prims", "limited_dtypes", "sparse_routing", "nested_routing"}
    assert set(cold["stats"]) == groups and _compiled_everything(cold)
    tag = sys.implementation.cache_tag
    assert _files(tmp_path) == sorted(f"{g}-{tag}.bin" for g in groups)
    warm = _import(tmp_path)
    assert all(s["compiled"] == 0 and s["used"] == cold["stats"][g]["used"] for g, s in warm["stats"].items())
    _same_functions(cold, warm)
    # and a process that never caches builds the same functions (and writes nothing)
    off = _import(tmp_path / "off", EMBER_BINDING_CACHE="0")
    assert off["stats"] == {} and _files(tmp_path / "off") == []
    _same_functions(cold, off)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "empty"])
def test_corrupt_cache_file_is_rebuilt(tmp_path, damage, _cold):
    reference = _cold_copy(_cold, tmp_path)
    path = os.path.join(tmp_path, "bindings", f"ops-{sys.implementation.cache_tag}.bin")
    data = open(path, "rb").read()
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "flipped":            # one byte of a code object's payload, header intact
        i = len(data) * 3 // 4
        data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
    elif damage == "garbage":
        data = b"\x00\xff" * 1000
    else:
        data = b""
    with open(path, "wb") as f:
        f.write(data)
    out = _import(tmp_path)
    assert out["stats"]["ops"]["compiled"] == out["stats"]["ops"]["used"]
    assert out["stats"]["prims"]["compiled"] == 0          # the other group's file was fine
    _same_functions(reference, out)
    assert _import(tmp_path)["stats"]["ops"]["compiled"] == 0    # rewritten


def test_unwritable_cache_root_still_imports(tmp_path, _cold):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = _import(blocker / "cache")        # makedirs fails (as root too): no caching at all
    assert _compiled_everything(out)
    _same_functions(_cold[0], out)          # the functions of an import that cached


# ---------------------------------------------------------------------- CodeCache in process
_SRC = "def f(x, y=_d0):\n    return x + y\n"


def _fresh(name="t"):
    return bc.CodeCache(name)


def _run(code, d0=1):
    ns = {"_d0": d0}
    exec(code, ns)
    return ns["f"]


def test_changed_source_misses_and_stale_entries_are_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    c = _fresh()
    assert _run(c.code(_SRC, "<ember op f>"))(2) == 3 and c.misses == 1
    c.save()
    c = _fresh()
    assert _run(c.code(_SRC, "<ember op f>"))(2) == 3 and c.misses == 0
    # ember's code changed: the generated source of f is a new one
    changed = _SRC.replace("x + y", "x * y")
    c = _fresh()
    f = _run(c.code(changed, "<ember op f>"), d0=5)
    assert c.misses == 1 and f(2) == 10 and f.__defaults__ == (5,)
    c.save()
    c = _fresh()
    assert list(c.stored) == [("<ember op f>", changed)]     # only what the last import used
    assert c.code(_SRC, "<ember op g>") is not c.code(changed, "<ember op f>")   # the name is part of the key
    assert c.misses == 1


def test_another_interpreters_file_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    assert sys.implementation.cache_tag in bc.path("t")     # each version has a file of its own
    assert bc.FORMAT_VERSION.startswith(f"1-{sys.implementation.cache_tag}-")
    monkeypatch.setattr(bc, "FORMAT_VERSION", "1-cpython-399-0-0-m4-O0")
    c = _fresh()
    c.code(_SRC, "<ember op f>")
    c.save()
    monkeypatch.undo()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    c = _fresh()
    assert c.stored == {}
    c.code(_SRC, "<ember op f>")
    assert c.misses == 1


def test_failed_write_is_silent(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def refuse(*a, **k):
        raise PermissionError("read-only cache root")

    monkeypatch.setattr(bc.disk_cache, "atomic_write", refuse)
    c = _fresh()
    c.code(_SRC, "<ember op f>")
    c.save()
    assert not os.path.exists(bc.path("t"))


def test_group_caches_only_inside_its_block(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    with bc.group("t") as c:
        bc.code(_SRC, "<ember op f>")
        assert c.misses == 1
    assert bc.stats["t"] == {"used": 1, "compiled": 1} and os.path.exists(bc.path("t"))
    bc.code(_SRC, "<ember op f>")      # outside any group: compiled, not recorded
    assert bc.stats["t"] == {"used": 1, "compiled": 1}
    with pytest.raises(RuntimeError):
        with bc.group("u"):
            bc.code(_SRC, "<ember op f>")
            raise RuntimeError("an op module failed to import")
    assert not os.path.exists(bc.path("u")) and not bc._active
    bc.stats.pop("t", None)
