"""The FX-graph-level compile cache (``ember/inductor/fx_graph_cache.py``): a hit in a new
process gives the results of a miss, every input of the compilation is in the key, damaged
entries are rebuilt, and concurrent writers of one entry both succeed."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember.prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor import codecache, compile_fx, config, fx_graph_cache

from ._helpers import assert_same, rand

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A program run in fresh processes: prims with a C++ kernel, a matmul extern, a numpy
# fallback (sort), a view output and an input returned as is; plus an nn model's training
# step through ember.compile (forward and backward graphs). Prints the cache counters and
# writes every result to an .npz for bitwise comparison.
CHILD = r'''
import json, sys
import numpy as np
import ember, ember.prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.inductor import compile_fx, fx_graph_cache
from ember.tensor import _make

rng = np.random.default_rng(7)
x = _make(rng.uniform(-2, 2, (6, 10)).astype(np.float32))
w = _make(rng.uniform(-2, 2, (10, 4)).astype(np.float32))

def fn(x, w):
    y = P.tanh(P.add(P.mm(x, w), 0.5))
    s = P.sort(x, 1, False, True)[0]
    many = P.cat([P.slice(x, [0, i], [6, i + 1]) for i in range(10)], 0)   # the cat extern
    return y, P.permute(y, [1, 0]), s, x, many

gm = make_fx(fn)(x, w)
cf = compile_fx(gm, [x, w])
assert cf.compiled is not None, cf.eager_reason
outs = {f"prims{i}": o.numpy() for i, o in enumerate(cf(x, w))}
outs["view_strides"] = np.array(cf(x, w)[1].numpy().strides)
outs["fallbacks"] = np.array(cf.compiled.fallbacks)

ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(10, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                            ember.nn.Linear(16, 3))
cm = ember.compile(model)
xin = ember.randn(5, 10)
loss = cm(xin).pow(2).mean()
loss.backward()
outs["loss"] = loss.detach().numpy()
for i, p in enumerate(model.parameters()):
    outs[f"grad{i}"] = p.grad.numpy()
np.savez(sys.argv[1], **outs)
print(json.dumps(dict(fx_graph_cache.stats, sympy="sympy.core" in sys.modules)))   # (sympy itself is a lazy module)
'''


def _run_child(cache, out, env_extra=None):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=ROOT, **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(out)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(p):
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _same_npz(a, b):
    a, b = np.load(a), np.load(b)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


def test_hit_in_a_fresh_process_matches_the_miss(tmp_path):
    cache = tmp_path / "cache"
    miss = _finish(_run_child(cache, tmp_path / "miss.npz"))
    assert miss["hits"] == 0 and miss["stores"] == miss["misses"] >= 3    # prims graph, forward, backward
    hit = _finish(_run_child(cache, tmp_path / "hit.npz"))
    assert hit["misses"] == 0 and hit["stores"] == 0 and hit["corrupt"] == 0
    assert hit["hits"] == miss["misses"]
    assert not hit["sympy"]        # a process whose graphs all hit never imports sympy
    _same_npz(tmp_path / "miss.npz", tmp_path / "hit.npz")
    # ... and both are what the same program gives without any cache (eager prims: the C++
    # kernels are IEEE, so within rounding of numpy's tanh)
    res = np.load(tmp_path / "hit.npz")
    assert "prims.sort: no C++ lowering" in " ".join(res["fallbacks"])
    assert res["view_strides"].tolist() == [4, 16]             # a transposed view, as on the miss


def test_bypassed_with_env_switch(tmp_path):
    stats = _finish(_run_child(tmp_path / "cache", tmp_path / "a.npz", {"EMBER_FX_GRAPH_CACHE": "0"}))
    assert stats["hits"] == stats["misses"] == stats["stores"] == 0 and stats["bypassed"] >= 3
    assert not (tmp_path / "cache" / "inductor" / "fxgraph").exists()


def test_two_processes_fill_the_same_entry(tmp_path):
    cache = tmp_path / "cache"
    procs = [_run_child(cache, tmp_path / f"p{i}.npz") for i in range(2)]
    stats = [_finish(p) for p in procs]
    assert all(s["corrupt"] == 0 for s in stats)
    _same_npz(tmp_path / "p0.npz", tmp_path / "p1.npz")
    files = [f for _, _, fs in os.walk(cache) for f in fs]
    assert not [f for f in files if f.startswith(".tmp-")]
    n_graphs = len([f for f in files if f.endswith(".fxg")])
    assert n_graphs == stats[0]["hits"] + stats[0]["misses"]
    third = _finish(_run_child(cache, tmp_path / "p2.npz"))
    assert third["hits"] == n_graphs and third["misses"] == 0
    _same_npz(tmp_path / "p0.npz", tmp_path / "p2.npz")


# ------------------------------------------------------------------ in-process
@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private cache dir, and none of the conditions that bypass the cache left on by
    other tests in this process (the schedule/fusion logs, the kernel profiler)."""
    import logging
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_FX_GRAPH_CACHE", raising=False)
    if hasattr(config, "profile_kernels"):
        monkeypatch.setattr(config, "profile_kernels", False)
    for n in ("schedule", "fusion"):
        lg = logging.getLogger(f"ember.inductor.{n}")
        monkeypatch.setattr(lg, "level", logging.WARNING)
        lg.manager._clear_cache()
    assert fx_graph_cache.bypass_reason([]) is None
    codecache.clear_memory_cache()
    yield tmp_path / "cache"
    codecache.clear_memory_cache()


def _fn(x):
    return P.exp(P.mul(P.sin(x), 1.5))


def _compile(fn, *inputs):
    gm = make_fx(fn)(*inputs)
    cf = compile_fx(gm, list(inputs))
    assert cf.compiled is not None, cf.eager_reason
    return cf, gm


def _delta(before):
    return {k: fx_graph_cache.stats[k] - before[k] for k in before}


def test_in_process_hit_skips_lowering_and_matches(fresh_cache):
    x = rand(7, 11)
    s0 = dict(fx_graph_cache.stats)
    cf1, gm = _compile(_fn, x)
    assert _delta(s0)["misses"] == 1 and _delta(s0)["stores"] == 1
    cf2, _ = _compile(_fn, x)
    assert _delta(s0)["hits"] == 1
    assert cf2.compiled.source == cf1.compiled.source and cf2.compiled.wrapper_src == cf1.compiled.wrapper_src
    assert cf2.compiled.n_kernels == cf1.compiled.n_kernels == 1
    assert cf2(x).numpy().tobytes() == cf1(x).numpy().tobytes()
    assert_same(cf2(x).numpy(), gm(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("change", ["config", "dtype", "shape", "strides", "graph", "constant_arg"])
def test_what_changes_the_key_misses(fresh_cache, change):
    x = rand(8, 6)
    _compile(_fn, x)
    s0 = dict(fx_graph_cache.stats)
    fn, inputs, old = _fn, [x], None
    if change == "config":
        old = config.simd
        config.simd = not old
    elif change == "dtype":
        inputs = [rand(8, 6, dtype=np.float64)]
    elif change == "shape":
        inputs = [rand(8, 7)]
    elif change == "strides":
        inputs = [rand(6, 8).transpose(0, 1)]
    elif change == "graph":
        fn = lambda x: P.exp(P.mul(P.cos(x), 1.5))  # noqa: E731
    elif change == "constant_arg":
        fn = lambda x: P.exp(P.mul(P.sin(x), 2.5))  # noqa: E731
    try:
        cf, gm = _compile(fn, *inputs)
    finally:
        if old is not None:
            config.simd = old
    d = _delta(s0)
    assert d["misses"] == 1 and d["hits"] == 0 and d["stores"] == 1
    assert_same(cf(*inputs).numpy(), gm(*inputs).numpy(), rtol=1e-6)
    if change == "config":
        assert "#pragma omp simd" not in cf.compiled.source


def _entry_path(fn, x):
    gm = make_fx(fn)(x)
    return fx_graph_cache._path(fx_graph_cache.graph_key(gm, [x], False))


@pytest.mark.parametrize("damage", ["truncated", "garbage_payload", "bad_header", "empty"])
def test_corrupt_entry_is_recompiled_and_rewritten(fresh_cache, damage):
    x = rand(5, 9)
    cf, gm = _compile(_fn, x)
    path = _entry_path(_fn, x)
    data = open(path, "rb").read()
    head, _, payload = data.partition(b"\n")
    bad = {"truncated": data[: len(data) * 2 // 3],
           "garbage_payload": head + b"\n" + bytes(reversed(payload)),
           "bad_header": b"not an entry\n" + payload,
           "empty": b""}[damage]
    with open(path, "wb") as f:
        f.write(bad)
    s0 = dict(fx_graph_cache.stats)
    cf2, _ = _compile(_fn, x)
    d = _delta(s0)
    assert d["corrupt"] == 1 and d["hits"] == 0 and d["stores"] == 1
    assert cf2(x).numpy().tobytes() == cf(x).numpy().tobytes()
    assert open(path, "rb").read() == data                       # rewritten whole
    s1 = dict(fx_graph_cache.stats)
    _compile(_fn, x)
    assert _delta(s1)["hits"] == 1


def test_entry_whose_kernel_library_vanished_rebuilds_it(fresh_cache):
    x = rand(4, 13)
    cf, _ = _compile(_fn, x)
    for d, _, fs in os.walk(fresh_cache / "inductor"):
        for f in fs:
            if f.endswith(".so"):
                os.unlink(os.path.join(d, f))
    codecache.clear_memory_cache()
    n0, s0 = codecache.stats["compiles"], dict(fx_graph_cache.stats)
    cf2, _ = _compile(_fn, x)
    assert _delta(s0)["hits"] == 1 and codecache.stats["compiles"] == n0 + 1
    assert cf2(x).numpy().tobytes() == cf(x).numpy().tobytes()


def test_argument_without_stable_description_is_uncacheable(fresh_cache):
    class Opaque:                   # repr is its address: no stable key
        pass

    x = rand(3, 4)
    gm = make_fx(_fn)(x)
    k0 = fx_graph_cache.graph_key(gm, [x], False)
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.meta["custom"] = Opaque()           # metadata lowering does not read: not in the key
    assert fx_graph_cache.key_for(gm, [x], False) == k0
    node.kwargs = {**node.kwargs, "extra": Opaque()}
    s0 = dict(fx_graph_cache.stats)
    assert fx_graph_cache.key_for(gm, [x], False) is None
    assert _delta(s0)["uncacheable"] == 1


def test_logs_hit_and_miss(fresh_cache, caplog):
    import logging
    x = rand(6, 3)
    with caplog.at_level(logging.INFO, logger="ember.inductor.fx_graph_cache"):
        _compile(_fn, x)
        _compile(_fn, x)
    msgs = [r.getMessage() for r in caplog.records if r.name == "ember.inductor.fx_graph_cache"]
    assert any(m.startswith("fx graph cache miss") for m in msgs)
    assert any(m.startswith("fx graph cache store") for m in msgs)
    assert any(m.startswith("fx graph cache hit") for m in msgs)


def test_fallback_rebuilt_in_a_process_that_traced_nothing(tmp_path):
    """A second run of a script whose graph calls numpy's sort finds its aot and FX graphs in
    the cache without tracing anything, so nothing had imported ``ember.prims``: rebuilding the
    sort fallback failed (KeyError 'prims.sort') and the graph was compiled again."""
    script = ("import ember\nx = ember.randn(3, 4)\n"
              "print(ember.compile(lambda a: a.sort(0)[0] + 1)(x.t()).shape)\n")
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert "[4, 3]" in r.stdout
    assert "cannot be rebuilt" not in runs[1].stderr, runs[1].stderr


def _symbolic_pair(rows, cols):
    """exp(a) * exp(b) traced with independent symbols for its two inputs' sizes: lowering
    needs a's and b's sizes equal, a guard it gives the caller's ShapeEnv."""
    from ember.fx.experimental.symbolic_shapes import ShapeEnv
    from ember.fx.fake_tensor import FakeTensorMode
    env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(env)
    x, y = rand(rows, cols), rand(rows, cols)
    fx_, fy = mode.from_tensor(x, symbolic=True, source="x"), mode.from_tensor(y, symbolic=True, source="y")
    with mode:
        g = make_fx(lambda a, b: P.mul(P.exp(a), P.exp(b)), tracing_mode="symbolic")(fx_, fy)
    return g, [fx_, fy], env


def test_symbolic_graph_hit_replays_the_lowering_guards(fresh_cache):
    """A graph of a caller's symbolic sizes (aot's graphs under compile(dynamic=True)) is cached
    too: a later compile with other example sizes hits, gives the caller's ShapeEnv the guards
    the lowering added (here: the two inputs' sizes equal), and runs every size correctly."""
    s0 = dict(fx_graph_cache.stats)
    g1, fakes1, env1 = _symbolic_pair(6, 3)
    n1 = len(env1.guards)
    cf1 = compile_fx(g1, fakes1, dynamic=True)
    assert cf1.compiled is not None and _delta(s0)["stores"] == 1
    added1 = env1.guards[n1:]
    assert added1

    g2, fakes2, env2 = _symbolic_pair(9, 5)
    n2 = len(env2.guards)
    cf2 = compile_fx(g2, fakes2, dynamic=True)
    assert _delta(s0)["hits"] == 1 and _delta(s0)["stores"] == 1
    assert [str(g) for g in env2.guards[n2:]] == [str(g) for g in added1]
    assert env2.evaluate_guards({"x.size()[0]": 7, "x.size()[1]": 4, "y.size()[0]": 7, "y.size()[1]": 4})
    assert not env2.evaluate_guards({"x.size()[0]": 7, "x.size()[1]": 4, "y.size()[0]": 8, "y.size()[1]": 4})
    for r, c in ((9, 5), (2, 3), (17, 8)):
        a, b = rand(r, c), rand(r, c)
        assert_same(cf2(a, b).numpy(), g2(a, b).numpy(), rtol=1e-6)


def test_stored_guard_that_fails_the_example_sizes_recompiles(fresh_cache):
    """A stored guard is replayed only when it holds for this compile's example sizes; else the
    entry is not this compile's: nothing is added to the ShapeEnv and the graph is compiled."""
    import sympy
    from ember.fx.experimental.symbolic_shapes import ShapeEnv

    class Stored:
        shape_env_guards = None

    env = ShapeEnv()
    x = env.create_symbol(5, "x.size()[0]")
    fake = type("T", (), {})()
    fake._data = type("A", (), {"shape": (x, 3)})()
    s = x.expr
    Stored.shape_env_guards = [sympy.Eq(s, 8)]
    assert not fx_graph_cache.replay_shape_env_guards(Stored, [fake]) and env.guards == []
    Stored.shape_env_guards = [sympy.Eq(sympy.Mod(s, 5), 0), sympy.Ne(s, 3)]
    assert fx_graph_cache.replay_shape_env_guards(Stored, [fake])
    assert [str(g) for g in env.guards] == ["Eq(Mod(s0, 5), 0)", "Ne(s0, 3)"]

    s1 = dict(fx_graph_cache.stats)
    g1, fakes1, _ = _symbolic_pair(6, 3)
    compile_fx(g1, fakes1, dynamic=True)
    calls = []
    real = fx_graph_cache.replay_shape_env_guards
    fx_graph_cache.replay_shape_env_guards = lambda c, ex: calls.append(1) or False
    try:
        g2, fakes2, env2 = _symbolic_pair(6, 3)
        cf2 = compile_fx(g2, fakes2, dynamic=True)
    finally:
        fx_graph_cache.replay_shape_env_guards = real
    assert calls and _delta(s1)["stores"] == 2 and cf2.compiled is not None
    assert env2.guards       # the recompile's lowering added its guards itself
