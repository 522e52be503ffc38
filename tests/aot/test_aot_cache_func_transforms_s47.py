"""The aot cache keys the subgraphs dynamo traces for ``ember.func`` transforms (``call_traced``)
and ``ember.cond`` branches: such a graph hits in a fresh process with the results of the miss,
and a different subgraph (another op, another constant) behind the same outer graph misses."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.aot import cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A training step through grad inside vmap, and a cond, compiled; eager float64 references.
CHILD = r'''
import json, sys
import numpy as np
import ember
from ember.aot import cache

def inner(w, x):
    return (ember.tanh(x @ w + ember.tensor([0.5, -1.0, 2.0], dtype=w.dtype)) ** 2).sum()

def f(w, xs):
    g = ember.func.vmap(ember.func.grad(inner), in_dims=(None, 0))(w, xs)
    return (g * w).sum(0)

def c(x, w):
    # (branches return a tuple: a compiled cond returning one tensor gains a leading dim of 1 today)
    return ember.cond(x.sum() > 0, lambda x, w: ((x @ w).sin(), x * 2.0), lambda x, w: ((x @ w).cos(), x - 1.0),
                      (x, w))

rng = np.random.default_rng(11)
wv = rng.standard_normal((4, 3))
xv = rng.standard_normal((5, 2, 4))
outs = {}
for dt, run in ((np.float32, ember.compile), (np.float64, lambda fn: fn)):
    w = ember.tensor(wv.astype(dt), requires_grad=True)
    xs = ember.tensor(xv.astype(dt))
    out = run(f)(w, xs)
    out.pow(2).sum().backward()
    # (the cond inference only: a compiled cond's backward under inductor raises a GuardError of its own)
    co, co2 = run(c)(xs[0], ember.tensor(wv.astype(dt)))
    tag = "eager64" if dt is np.float64 else "compiled"
    outs.update({f"{tag}_out": out.detach().numpy(), f"{tag}_wgrad": w.grad.numpy(),
                 f"{tag}_cond": co.numpy(), f"{tag}_cond2": co2.numpy()})
np.savez(sys.argv[1], **outs)
print(json.dumps(cache.stats))
'''


def _run_child(cache_dir, out):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
    for k in ("EMBER_LOGS", "EMBER_AOT_CACHE"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_func_transform_and_cond_graphs_hit_in_a_fresh_process(tmp_path):
    c = tmp_path / "cache"
    miss = _run_child(c, tmp_path / "miss.npz")
    # (before: "a get_attr node (func_transform_0) ... not in the key": bypassed, every process traced)
    assert miss["bypassed"] == 0 and miss["hits"] == 0 and miss["stores"] == miss["misses"] == 2, miss
    hit = _run_child(c, tmp_path / "hit.npz")
    assert hit["hits"] == 2 and hit["misses"] == hit["stores"] == hit["corrupt"] == hit["bypassed"] == 0, hit
    a, b = np.load(tmp_path / "miss.npz"), np.load(tmp_path / "hit.npz")
    for k in a.files:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k
    for k in ("out", "wgrad", "cond", "cond2"):
        np.testing.assert_allclose(b[f"compiled_{k}"], b[f"eager64_{k}"], rtol=2e-4, atol=2e-5, err_msg=k)


def _inner_tanh(w, x):
    return (ember.tanh(x @ w + ember.tensor([0.5, -1.0, 2.0])) ** 2).sum()


def _inner_sin(w, x):
    return (ember.sin(x @ w + ember.tensor([0.5, -1.0, 2.0])) ** 2).sum()


def _inner_other_constant(w, x):
    return (ember.tanh(x @ w + ember.tensor([0.5, -1.0, 2.5])) ** 2).sum()


def _outer(inner):
    def f(w, xs):
        return ember.func.vmap(ember.func.grad(inner), in_dims=(None, 0))(w, xs).sum(0)
    return f


@pytest.fixture
def fresh_cache(fresh_cache):
    """The shared empty cache (tests/aot/conftest.py), with dynamo's caches reset around the test."""
    from ember.dynamo import reset
    reset()
    yield fresh_cache
    reset()


@pytest.mark.parametrize("changed", [_inner_sin, _inner_other_constant])
def test_a_changed_inner_function_misses(fresh_cache, changed):
    """The outer graph is the same node for node (get_attr, call_traced, getitem, sum): only the
    subgraph differs, so an entry keyed without it would hand back the first function's graphs."""
    from ember.dynamo import reset
    rng = np.random.default_rng(5)
    w = ember.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    xs = ember.tensor(rng.standard_normal((6, 2, 4)).astype(np.float32))

    def compiled(inner):
        reset()
        s0 = dict(cache.stats)
        out = ember.compile(_outer(inner))(w, xs).numpy()
        return out, {k: cache.stats[k] - s0[k] for k in s0}

    first, d1 = compiled(_inner_tanh)
    assert d1["misses"] == 1 and d1["stores"] == 1 and d1["bypassed"] == 0, d1
    again, d2 = compiled(_inner_tanh)
    assert d2["hits"] == 1 and d2["misses"] == 0, d2
    assert first.tobytes() == again.tobytes()
    out, d3 = compiled(changed)
    assert d3["hits"] == 0 and d3["misses"] == 1 and d3["stores"] == 1, d3
    w64, xs64 = ember.tensor(w.numpy().astype(np.float64)), ember.tensor(xs.numpy().astype(np.float64))
    ref = _outer(changed)(w64, xs64).numpy()
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-5)
    assert not np.allclose(out, first, rtol=1e-3)


def test_a_corrupt_cond_entry_is_traced_again(fresh_cache):
    """A cond's stored graphs hold its branch subgraphs; a damaged entry is traced again."""
    from ember.dynamo import reset
    rng = np.random.default_rng(8)
    x = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32))

    def c(x):
        # (two outputs: a compiled cond with one output gains a leading dim of 1 today)
        return ember.cond(x.sum() > 0, lambda x: (x.sin() * 3.0, x + 1.0), lambda x: (x.cos() - 1.0, x * x),
                          (x,))[0]

    reset()
    first = ember.compile(c)(x).numpy()
    [path] = [os.path.join(d, f) for d, _, fs in os.walk(fresh_cache / "aot") for f in fs]
    data = open(path, "rb").read()
    head, _, payload = data.partition(b"\n")
    with open(path, "wb") as f:
        f.write(head + b"\n" + payload[: len(payload) // 2] + bytes(reversed(payload[len(payload) // 2:])))
    reset()
    s0 = dict(cache.stats)
    second = ember.compile(c)(x).numpy()
    d = {k: cache.stats[k] - s0[k] for k in s0}
    assert d["corrupt"] == 1 and d["hits"] == 0 and d["stores"] == 1, d
    assert first.tobytes() == second.tobytes()
    ref = c(ember.tensor(x.numpy().astype(np.float64))).numpy()
    np.testing.assert_allclose(second, ref, rtol=1e-5, atol=1e-6)
