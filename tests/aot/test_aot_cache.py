"""The AOT-level compile cache (``ember/aot/cache.py``): a hit -- in a new process or this
one -- skips the joint trace and the partition and gives the results of a miss (forward,
gradients, mutated inputs, aliasing outputs); everything the trace depends on is in the
key; damaged entries are traced again and rewritten; symbolic sizes bypass it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import fx
from ember.aot import aot_autograd, cache, config as aot_config
from ember.aot import runtime as aot_runtime
from ember.aot.backends import _interpreter_compiler
from ember.tensor import _make

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run in fresh processes: an nn model's training step and an inference call through
# ember.compile (inductor: forward/backward/inference graphs), and a function that mutates
# an input and returns a view of it. Writes every result to an .npz, prints the counters.
CHILD = r'''
import json, sys
import numpy as np
import ember
from ember.aot import cache
from ember.inductor import fx_graph_cache

ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(10, 16), ember.nn.GELU(), ember.nn.LayerNorm(16),
                            ember.nn.Linear(16, 3))
cm = ember.compile(model)
rng = np.random.default_rng(3)
xin = ember.tensor(rng.standard_normal((5, 10)).astype(np.float32))
loss = cm(xin).pow(2).mean()
loss.backward()
outs = {"loss": loss.detach().numpy()}
for i, p in enumerate(model.parameters()):
    outs[f"grad{i}"] = p.grad.numpy()
with ember.no_grad():
    outs["inference"] = cm(xin).numpy()

def f(x, y):
    x.add_(y)
    return x.view(-1)[2:5], (x * y).sum()

cf = ember.compile(f)
x = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32))
y = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
v, s = cf(x, y)
s.backward()
# y requires grad, so after x.add_(y) x does too (it has the compiled graph's history)
outs["mut_x"] = x.detach().numpy().copy()
outs["view"] = v.detach().numpy().copy()
outs["ygrad"] = y.grad.numpy()
v.mul_(0.0)                           # the output aliases x: the write reaches it
outs["x_after_view_write"] = x.detach().numpy().copy()
np.savez(sys.argv[1], **outs)
# a run whose graphs all hit never builds them, so never imports the prims their nodes name
print(json.dumps({"aot": cache.stats, "fx": fx_graph_cache.stats, "prims_imported": "ember.prims" in sys.modules}))
'''


def _run_child(cache_dir, out, env_extra=None):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT, **(env_extra or {}))
    env.pop("EMBER_LOGS", None)
    p = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_hit_in_a_fresh_process_matches_the_miss(tmp_path):
    c = tmp_path / "cache"
    miss = _run_child(c, tmp_path / "miss.npz")
    assert miss["aot"]["hits"] == 0 and miss["aot"]["stores"] == miss["aot"]["misses"] >= 3
    hit = _run_child(c, tmp_path / "hit.npz")
    assert hit["aot"]["misses"] == 0 and hit["aot"]["stores"] == 0 and hit["aot"]["corrupt"] == 0
    assert hit["aot"]["hits"] == miss["aot"]["misses"]
    # the rebuilt graphs are the traced ones: the FX graph cache hits on every one of them
    assert hit["fx"]["misses"] == 0 and hit["fx"]["hits"] == miss["fx"]["misses"]
    assert miss["prims_imported"] and not hit["prims_imported"]
    a, b = np.load(tmp_path / "miss.npz"), np.load(tmp_path / "hit.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k
    # and the mutation and the aliasing are eager's
    assert not np.array_equal(b["x_after_view_write"], b["mut_x"])
    assert (b["x_after_view_write"].reshape(-1)[2:5] == 0).all()
    np.testing.assert_array_equal(b["x_after_view_write"].reshape(-1)[5:], b["mut_x"].reshape(-1)[5:])
    np.testing.assert_array_equal(b["view"], b["mut_x"].reshape(-1)[2:5])


def test_env_switch_bypasses(tmp_path):
    stats = _run_child(tmp_path / "cache", tmp_path / "a.npz", {"EMBER_AOT_CACHE": "0"})
    assert stats["aot"]["hits"] == stats["aot"]["misses"] == stats["aot"]["stores"] == 0
    assert stats["aot"]["bypassed"] >= 3
    assert not (tmp_path / "cache" / "aot").exists()


# ---------------------------------------------------------------------------- in process
def rand(*shape, dtype=np.float32, requires_grad=False, seed=0):
    rng = np.random.default_rng(seed + sum(shape))
    t = _make(rng.uniform(-2, 2, shape).astype(dtype))
    return t.requires_grad_(True) if requires_grad else t


def _fn(x, w):
    return ember.tanh(x @ w).sum(-1) * 0.5


def _fn2(x, w):
    return ember.sin(x @ w).sum(-1) * 0.5


def _backend(memory_budget=None):
    return aot_autograd(fw_compiler=_interpreter_compiler, memory_budget=memory_budget)


def _delta(before):
    return {k: cache.stats[k] - before[k] for k in before}


def _step(fn, x, w, backend=None):
    """Compile ``fn`` (symbolically traced: an FX graph like dynamo's) and run fwd+bwd."""
    gm = fx.symbolic_trace(fn)
    compiled = (backend or _backend())(gm, [x, w])
    for t in (x, w):
        t.grad = None
    out = compiled(x, w)
    if out.requires_grad:
        out.sum().backward()
    grads = [None if t.grad is None else t.grad.numpy().copy() for t in (x, w)]
    return out.detach().numpy().copy(), grads


def test_in_process_hit_skips_the_trace_and_matches(fresh_cache, monkeypatch):
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    s0 = dict(cache.stats)
    out1, g1 = _step(_fn, x, w)
    assert _delta(s0)["misses"] == 1 and _delta(s0)["stores"] == 1

    def no_trace(*a, **k):
        raise AssertionError("traced on a hit")
    monkeypatch.setattr(aot_runtime, "trace_joint", no_trace)
    monkeypatch.setattr(aot_runtime, "partition", no_trace)
    out2, g2 = _step(_fn, x, w)
    assert _delta(s0)["hits"] == 1
    assert out1.tobytes() == out2.tobytes() and g1[1].tobytes() == g2[1].tobytes()
    # the eager reference
    w.grad = None
    ref = _fn(x, w)
    ref.sum().backward()
    np.testing.assert_allclose(out2, ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g2[1], w.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", ["graph", "shape", "dtype", "requires_grad", "strides", "memory_budget",
                                    "aot_config", "grad_mode"])
def test_what_changes_the_key_misses(fresh_cache, change, monkeypatch):
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    _step(_fn, x, w)
    s0 = dict(cache.stats)
    fn, backend = _fn, None
    if change == "graph":
        fn = _fn2
    elif change == "shape":
        x = rand(5, 6)
    elif change == "dtype":
        x, w = rand(4, 6, dtype=np.float64), rand(6, 3, dtype=np.float64, requires_grad=True)
    elif change == "requires_grad":
        x = rand(4, 6, requires_grad=True)
    elif change == "strides":
        x = rand(6, 4).transpose(0, 1)
    elif change == "memory_budget":
        backend = _backend(memory_budget=1.0)
    elif change == "aot_config":
        monkeypatch.setattr(aot_config, "activation_memory_budget", 0.5)
    if change == "grad_mode":
        with ember.no_grad():
            out, grads = _step(fn, x, w, backend)
    else:
        out, grads = _step(fn, x, w, backend)
    d = _delta(s0)
    assert d["misses"] == 1 and d["hits"] == 0 and d["stores"] == 1, d
    ref = fn(x, w)
    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["truncated", "garbage_payload", "bad_header", "empty"])
def test_corrupt_entry_is_traced_again_and_rewritten(fresh_cache, damage):
    x, w = rand(3, 5), rand(5, 2, requires_grad=True)
    out1, g1 = _step(_fn, x, w)
    [path] = [os.path.join(d, f) for d, _, fs in os.walk(fresh_cache / "aot") for f in fs]
    data = open(path, "rb").read()
    head, _, payload = data.partition(b"\n")
    bad = {"truncated": data[: len(data) * 2 // 3],
           "garbage_payload": head + b"\n" + bytes(reversed(payload)),
           "bad_header": b"not an entry\n" + payload,
           "empty": b""}[damage]
    with open(path, "wb") as f:
        f.write(bad)
    s0 = dict(cache.stats)
    out2, g2 = _step(_fn, x, w)
    d = _delta(s0)
    assert d["corrupt"] == 1 and d["hits"] == 0 and d["stores"] == 1
    assert out1.tobytes() == out2.tobytes() and g1[1].tobytes() == g2[1].tobytes()
    s1 = dict(cache.stats)
    _step(_fn, x, w)
    assert _delta(s1)["hits"] == 1


def _mutating(x, y):
    x.mul_(2.0)
    return x.view(-1)[1:4], x + y


@pytest.mark.parametrize("training", [True, False])
def test_mutated_inputs_and_aliasing_outputs_survive(fresh_cache, training):
    results = []
    for attempt in range(2):          # a miss, then a hit
        x = rand(3, 4, seed=1)
        y = rand(3, 4, seed=2, requires_grad=training)
        gm = fx.symbolic_trace(_mutating)
        s0 = dict(cache.stats)
        compiled = _backend()(gm, [x, y])
        v, s = compiled(x, y)
        assert _delta(s0)["hits" if attempt else "misses"] == 1
        if training:
            s.sum().backward()
        x_after = x.numpy().copy()
        v.mul_(0.0)                     # the view's write reaches x
        results.append((x_after, v.numpy().copy(), s.detach().numpy().copy(), x.numpy().copy(),
                        None if y.grad is None else y.grad.numpy().copy()))
    (xa, va, sa, xa2, ga), (xb, vb, sb, xb2, gb) = results
    x0, y0 = rand(3, 4, seed=1).numpy(), rand(3, 4, seed=2).numpy()
    np.testing.assert_array_equal(xa, x0 * 2)
    np.testing.assert_array_equal(xb, xa)
    np.testing.assert_array_equal(sb, sa)
    np.testing.assert_array_equal(sb, x0 * 2 + y0)
    assert (xb2.reshape(-1)[1:4] == 0).all() and (xa2.reshape(-1)[1:4] == 0).all()
    np.testing.assert_array_equal(xb2, xa2)
    if training:
        np.testing.assert_array_equal(gb, np.ones_like(y0))
        np.testing.assert_array_equal(ga, gb)


def test_symbolic_sizes_bypass(fresh_cache, caplog):
    import logging
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    gm = fx.symbolic_trace(_fn)
    s0 = dict(cache.stats)
    with caplog.at_level(logging.INFO, logger="ember.aot.cache"):
        compiled = aot_autograd(fw_compiler=_interpreter_compiler, dynamic=True)(gm, [x, w])
        out = compiled(x, w)
    assert _delta(s0)["bypassed"] == 1 and _delta(s0)["stores"] == 0
    assert "symbolic sizes" in caplog.text
    np.testing.assert_allclose(out.detach().numpy(), _fn(x, w).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_foreign_callable_bypasses(fresh_cache, caplog):
    import logging

    def fn(x, w):
        return np_free(x @ w)
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    gm = fx.symbolic_trace(fn)
    s0 = dict(cache.stats)
    with caplog.at_level(logging.INFO, logger="ember.aot.cache"):
        _backend()(gm, [x, w])(x, w)
    assert _delta(s0)["bypassed"] == 1 and _delta(s0)["stores"] == 0
    assert "not in the key" in caplog.text


@fx.wrap
def np_free(t):
    """A leaf function of this test module: its code is not in the aot cache's source hash."""
    return t * 2.0


def test_logs_hit_and_miss(fresh_cache, caplog):
    import logging
    x, w = rand(2, 6), rand(6, 3, requires_grad=True)
    with caplog.at_level(logging.INFO, logger="ember.aot.cache"):
        _step(_fn, x, w)
        _step(_fn, x, w)
    assert "aot cache miss training" in caplog.text
    assert "aot cache store training" in caplog.text
    assert "aot cache hit training" in caplog.text


def _constant_graph():
    """A dynamo-like graph calling a factory (nanoGPT's positions): ``(x @ w)[:, arange(3)]``
    -- the trace creates the index tensor as a ``get_attr`` constant of its graphs."""
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    mm = g.call_function(ember.matmul, (x, w))
    idx = g.call_function(ember.arange, (3,))
    g.output(g.call_function(ember.index_select, (mm, 1, idx)))
    return fx.GraphModule({}, g)


def test_constants_the_trace_created_round_trip(fresh_cache):
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    results = []
    for attempt in range(2):
        s0 = dict(cache.stats)
        compiled = _backend()(_constant_graph(), [x, w])
        w.grad = None
        out = compiled(x, w)
        out.sum().backward()
        assert _delta(s0)["hits" if attempt else "stores"] == 1, _delta(s0)
        results.append((out.detach().numpy().copy(), w.grad.numpy().copy()))
    assert results[0][0].tobytes() == results[1][0].tobytes()
    assert results[0][1].tobytes() == results[1][1].tobytes()
    w.grad = None
    ref = ember.index_select(x @ w, 1, ember.arange(3))
    ref.sum().backward()
    np.testing.assert_allclose(results[1][0], ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][1], w.grad.numpy(), rtol=1e-5, atol=1e-6)


def _bool_mask(x, w):
    y = x @ w
    return ember.where(y > 0, y, y * 0.1)


def test_bool_and_int_dtypes_in_graphs_round_trip(fresh_cache):
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    out1, g1 = _step(_bool_mask, x, w)
    s0 = dict(cache.stats)
    out2, g2 = _step(_bool_mask, x, w)
    assert _delta(s0)["hits"] == 1 and _delta(s0)["corrupt"] == 0
    assert out1.tobytes() == out2.tobytes() and g1[1].tobytes() == g2[1].tobytes()


def _half_precision(x, w):
    return (x.to(ember.bfloat16) @ w.to(ember.bfloat16)).float() + x.to(ember.float16).float().sum()


def test_bfloat16_and_float16_graphs_round_trip(fresh_cache):
    """bfloat16 values in a graph (numpy spells ml_dtypes' bfloat16 '|V2') used to make every
    entry read back as corrupt, so such graphs were traced again on each compile."""
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    out1, g1 = _step(_half_precision, x, w)
    s0 = dict(cache.stats)
    out2, g2 = _step(_half_precision, x, w)
    assert _delta(s0)["hits"] == 1 and _delta(s0)["corrupt"] == 0
    assert out1.tobytes() == out2.tobytes() and g1[1].tobytes() == g2[1].tobytes()


def test_autocast_state_is_in_the_key(fresh_cache):
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    out1, _ = _step(_fn, x, w)
    s0 = dict(cache.stats)
    with ember.autocast("cpu"):
        out2, _ = _step(_fn, x, w)              # the same graph, traced with the region's casts
    assert _delta(s0)["hits"] == 0 and _delta(s0)["misses"] == 1
    assert out2.dtype != out1.dtype or not np.array_equal(out1, out2)


def test_an_optimizer_first_step_is_cached(fresh_cache):
    """An optimizer's first step creates its state with ``zeros_like``: the graph calls it, so
    the key must name it (it was a closure, ``_like.<locals>.like``, and every such graph
    bypassed the cache: a warm AdamW compile re-traced both aot graphs, ~0.2 s)."""
    import pickle
    from ember.inductor.fx_graph_cache import _fn_name
    for f in (ember.zeros_like, ember.ones_like, ember.empty_like, ember.scatter,
              ember.nn.functional.max_pool1d_with_indices, ember.nn.functional.max_pool2d_with_indices):
        assert "<" not in _fn_name(f) and pickle.loads(pickle.dumps(f)) is f

    def run():
        ember.manual_seed(3)
        ps = [ember.randn(5, 4, requires_grad=True) for _ in range(3)]
        for p in ps:
            p.grad = ember.randn(5, 4)
        opt = ember.optim.AdamW(ps, lr=1e-2)
        opt.step = ember.compile(opt.step)
        s0 = dict(cache.stats)
        opt.step()
        return _delta(s0), [p.detach().numpy().copy() for p in ps]

    from ember.dynamo import reset
    reset()
    miss, first = run()
    assert miss["bypassed"] == 0 and miss["stores"] >= 1, miss
    reset()
    hit, second = run()
    assert hit["bypassed"] == 0 and hit["hits"] >= 1 and hit["misses"] == 0, hit
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    ember.manual_seed(3)
    ps = [ember.randn(5, 4, requires_grad=True) for _ in range(3)]
    for p in ps:
        p.grad = ember.randn(5, 4)
    ember.optim.AdamW(ps, lr=1e-2).step()              # eager
    for p, a in zip(ps, first):
        np.testing.assert_allclose(p.detach().numpy(), a, rtol=1e-6, atol=1e-7)


def test_a_graph_without_gradients_builds_its_key_body_once(fresh_cache, monkeypatch):
    """An optimizer step is called with grad mode on and parameters that require grad, so the
    training trace runs first, finds no gradient and the inference compile follows: the two keys
    differ in their mode line only, and the body (~15 ms for a 40-parameter AdamW) is made once.
    The memo lasts for that pair only: a later compile makes its own."""
    calls = []
    real = cache._key_body
    monkeypatch.setattr(cache, "_key_body", lambda aot: calls.append(aot) or real(aot))
    keys = []
    real_for = cache.key_for
    monkeypatch.setattr(cache, "key_for", lambda aot, training: keys.append(real_for(aot, training)) or keys[-1])

    from ember.dynamo import reset
    reset()
    ember.manual_seed(5)
    ps = [ember.randn(3, 2, requires_grad=True) for _ in range(2)]
    for p in ps:
        p.grad = ember.randn(3, 2)
    opt = ember.optim.SGD(ps, lr=0.1)
    opt.step = ember.compile(opt.step)
    before = [p.detach().numpy().copy() for p in ps]
    opt.step()
    for p, b in zip(ps, before):
        np.testing.assert_allclose(p.detach().numpy(), b - 0.1 * p.grad.numpy(), rtol=1e-6)
    mod = calls[0]
    assert mod._training is False and mod._inference is not None
    assert len(keys) == 2 and len(set(keys)) == 2 and None not in keys
    assert len(calls) == 1 and mod._key_body_memo is None
    assert cache.key_lines(mod, False)[1:] == cache.key_lines(mod, True)[1:]
    assert len(calls) == 3          # (outside the pair: made again each time)


# ---------------------------------------------------------------------------- lazy graphs (inductor)
def _inductor_backend():
    from ember.inductor.dynamic import compile_fx_maybe_symbolic
    return aot_autograd(fw_compiler=compile_fx_maybe_symbolic, bw_compiler=compile_fx_maybe_symbolic)


def _compiled_graphs(fn, x, w):
    """(aot module, forward CompiledFunction, backward CompiledFunction, out, grads) of one step."""
    gm = fx.symbolic_trace(fn)
    mod = _inductor_backend()(gm, [x, w])
    w.grad = None
    out = mod(x, w)
    out.backward(rand(*out.shape, seed=7))       # (a contiguous gradient: the layout bw was compiled for)
    _, fw, bw = mod._training[:3]
    return mod, fw, bw, out.detach().numpy().copy(), w.grad.numpy().copy()


def test_inductor_hit_finds_its_code_without_building_the_graphs(fresh_cache):
    """On an aot hit the stored graphs come as LazyGraphModules with inductor's digests: inductor
    finds its entries by digest and the graphs are never built (what made a warm LSTM training
    compile 0.3 s: rebuilding and re-hashing 2.8k nodes, importing the prims)."""
    from ember.fx.lazy_graph_module import LazyGraphModule
    from ember.inductor import fx_graph_cache
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    _, fw0, bw0, out0, g0 = _compiled_graphs(_fn, x, w)
    assert isinstance(fw0.graph_digest, str) and isinstance(bw0.graph_digest, str)
    s0, f0 = dict(cache.stats), dict(fx_graph_cache.stats)
    _, fw, bw, out, g = _compiled_graphs(_fn, x, w)
    assert _delta(s0)["hits"] == 1
    assert fx_graph_cache.stats["hits"] - f0["hits"] == 2 and fx_graph_cache.stats["misses"] == f0["misses"]
    for cf, ref in ((fw, fw0), (bw, bw0)):
        assert isinstance(cf._gm, LazyGraphModule) and not cf._gm.materialized
        assert cf._gm.graph_digest_hint == ref.graph_digest
    assert out.tobytes() == out0.tobytes() and g.tobytes() == g0.tobytes()
    # the hint is the truth: the built graph hashes to it, with the inputs it was compiled for
    assert fx_graph_cache.graph_digest(fw.gm, [x, w], False) == fw0.graph_digest
    assert not isinstance(fw._gm, LazyGraphModule) and fw.gm.code == fw0.gm.code


def test_inductor_miss_on_the_hint_builds_the_graph(fresh_cache):
    """The aot entry hits but inductor's entry is gone: the lazy graph is built and compiled."""
    from ember.inductor import fx_graph_cache
    x, w = rand(5, 6), rand(6, 3, requires_grad=True)
    _, _, _, out0, g0 = _compiled_graphs(_fn2, x, w)
    fx_graph_cache.clear()
    s0, f0 = dict(cache.stats), dict(fx_graph_cache.stats)
    _, fw, bw, out, g = _compiled_graphs(_fn2, x, w)
    assert _delta(s0)["hits"] == 1
    assert fx_graph_cache.stats["misses"] - f0["misses"] == 2 and fx_graph_cache.stats["stores"] - f0["stores"] == 2
    assert fw._gm.__class__.__name__ != "LazyGraphModule" and bw._gm.__class__.__name__ != "LazyGraphModule"
    assert out.tobytes() == out0.tobytes() and g.tobytes() == g0.tobytes()
    ref = _fn2(x, w)
    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_graph_called_with_other_strides_is_built_and_compiled_for_them(fresh_cache):
    """The digest hint describes the graph with its first inputs' layout only: a call with
    other strides must build the graph and compile a variant, not reuse the hint."""
    x, w = rand(4, 6), rand(6, 3, requires_grad=True)
    _compiled_graphs(_fn, x, w)
    mod, fw, _, _, _ = _compiled_graphs(_fn, x, w)
    assert not fw._gm.materialized
    xt = _make(np.asfortranarray(x.numpy()))          # same values, column-major strides
    w.grad = None
    out = mod(xt, w)
    out.backward(rand(*out.shape, seed=7))
    assert fw._gm.__class__.__name__ != "LazyGraphModule" and len(fw.variants) == 2
    w2 = ember.tensor(w.detach().numpy(), requires_grad=True)
    ref = _fn(x, w2)
    ref.backward(rand(*ref.shape, seed=7))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_graph_module_behaves_as_the_graph_it_stands_for():
    from ember.fx.lazy_graph_module import LazyGraphModule, materialize
    gm = fx.symbolic_trace(_fn)
    built = []

    def build():
        built.append(1)
        return gm
    lazy = LazyGraphModule(build, "d")
    assert not lazy.materialized and lazy.graph_digest_hint == "d" and not built
    assert "not built" in repr(lazy)
    x, w = rand(3, 6), rand(6, 2)
    assert lazy.code == gm.code and built == [1]              # any attribute builds it, once
    np.testing.assert_array_equal(lazy(x, w).numpy(), gm(x, w).numpy())
    assert materialize(lazy) is gm and materialize(gm) is gm and built == [1]
    with pytest.raises(AttributeError):
        lazy.no_such_attribute


def test_lazy_graph_that_cannot_be_rebuilt_says_what_to_do():
    from ember.fx.lazy_graph_module import LazyGraphModule

    def broken():
        raise KeyError("prims.no_such_op")
    lazy = LazyGraphModule(broken, "d")
    with pytest.raises(RuntimeError, match="EMBER_CACHE_DIR/aot"):
        lazy.materialize()
    assert not lazy.materialized


# compile(dynamic=True) in fresh processes: a program traced with dynamo's symbolic sizes
# ("mlp": a model's forward and backward; "pool": a stride-2 convolution, whose input gradient's
# decomposition guards the sizes' parity -- a 2x2 max pool's did until its pad amounts stayed
# symbolic). Prints the caches' counters, the size guards dynamo's ShapeEnv ends
# up with, and the largest difference to eager (values and gradients) over the input shapes (relative to 1 + |eager|).
CHILD_DYNAMIC = r'''
import json, sys
import numpy as np
import ember
from ember.aot import cache
from ember.dynamo import lookup_backend
from ember.inductor import fx_graph_cache

envs = []
inductor = lookup_backend("inductor")

def backend(gm, example_inputs):
    envs.append(gm.meta.get("shape_env"))
    return inductor(gm, example_inputs)

program, shapes = json.loads(sys.argv[1])
ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.LayerNorm(16), ember.nn.Linear(16, 4))

def mlp(x):
    return model(x).reshape(-1, 2).softmax(-1).pow(2).sum()   # a reshape whose size is 2 * batch

weight = ember.randn(2, 1, 3, 3)

def pool(x):
    return ember.nn.functional.conv2d(x.exp().unsqueeze(0), weight, stride=2).pow(2).sum()

f = {"mlp": mlp, "pool": pool}[program]
cf = ember.compile(f, backend=backend, dynamic=True)
err = 0.0
for shape in shapes:
    x = ember.randn(*shape)
    x.requires_grad_(program == "pool")
    res = []
    for fn in (f, cf):
        out = fn(x)
        out.backward()
        grads = [p.grad for p in model.parameters()] if program == "mlp" else [x.grad]
        res.append([out.detach().numpy()] + [g.numpy().copy() for g in grads])
        for p in list(model.parameters()) + [x]:
            p.grad = None
    err = max([err] + [float((np.abs(a - b) / (np.abs(a) + 1)).max()) for a, b in zip(*res)])
guards = sorted({str(g) for e in envs if e is not None for g in e.guards})
print(json.dumps({"aot": cache.stats, "fx": fx_graph_cache.stats, "guards": guards, "err": err,
                  "graphs": len(envs)}))
'''


def _run_dynamic_child(cache_dir, program, shapes, env_extra=None):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT, **(env_extra or {}))
    env.pop("EMBER_LOGS", None)
    p = subprocess.run([sys.executable, "-c", CHILD_DYNAMIC, json.dumps([program, shapes])], env=env,
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


_NO_CACHES = {"EMBER_AOT_CACHE": "0", "EMBER_FX_GRAPH_CACHE": "0"}


def test_dynamic_compile_hits_in_a_fresh_process_with_the_same_guards(tmp_path):
    """compile(dynamic=True): the aot and FX graph caches serve a new process whose batch sizes
    differ from the ones the entries were traced with, and it matches eager at every size."""
    cache_dir = tmp_path / "cache"
    miss = _run_dynamic_child(cache_dir, "mlp", [[6, 8], [9, 8], [13, 8]])
    assert miss["aot"]["stores"] == 1 and miss["aot"]["hits"] == 0 and miss["fx"]["stores"] == 2
    hit = _run_dynamic_child(cache_dir, "mlp", [[11, 8], [4, 8], [7, 8]])
    assert hit["aot"]["hits"] == 1 and hit["aot"]["stores"] == 0
    assert hit["fx"]["hits"] == 2 and hit["fx"]["stores"] == 0
    cold = _run_dynamic_child(tmp_path / "other", "mlp", [[11, 8], [4, 8], [7, 8]], _NO_CACHES)
    assert hit["graphs"] == cold["graphs"] == miss["graphs"] == 1
    assert hit["guards"] == cold["guards"]
    for r in (miss, hit, cold):
        assert r["err"] < 1e-4, r


def test_dynamic_hit_replays_the_trace_guards_and_checks_them(tmp_path):
    """A strided convolution's trace guards the input sizes' parity (its input gradient's
    decomposition decided on it). A hit with other even sizes replays those guards: the process ends with exactly the
    guards of one that traced (caches off), so an odd size later recompiles instead of reusing
    even-size code. Odd example sizes fail the stored guards: the entry is not used (a miss),
    the graph is traced again, and the results match eager."""
    cache_dir = tmp_path / "cache"
    miss = _run_dynamic_child(cache_dir, "pool", [[1, 6, 8]])
    assert miss["aot"]["stores"] == 1 and any("floor" in g for g in miss["guards"]), miss
    hit = _run_dynamic_child(cache_dir, "pool", [[1, 10, 12], [1, 4, 6]])
    cold = _run_dynamic_child(tmp_path / "other", "pool", [[1, 10, 12], [1, 4, 6]], _NO_CACHES)
    assert hit["aot"]["hits"] == 1 and hit["fx"]["hits"] >= 1, hit
    assert hit["guards"] == cold["guards"] and hit["graphs"] == cold["graphs"] == 1
    odd = _run_dynamic_child(cache_dir, "pool", [[1, 7, 9]])
    assert odd["aot"]["hits"] == 0 and odd["aot"]["misses"] == 1 and odd["aot"]["stores"] == 1, odd
    for r in (miss, hit, cold, odd):
        assert r["err"] < 1e-4, r


def test_the_key_tells_apart_how_inputs_share_memory():
    """Two tensors' views, disjoint views of one tensor, a tensor and its view, overlapping
    views: the functionalization traces each differently, so each has its own key line (the
    disjoint views' elements do not overlap: ``may_share_memory`` alone took them for two
    tensors)."""
    x, y, b = rand(10, seed=1), rand(10, seed=2), rand(10, seed=3)
    layouts = {"two tensors": (x[0:5], y[0:5]), "disjoint views of one": (b[0:5], b[5:10]),
               "a tensor and its view": (x, x[:]),
               "overlapping views": (b[0:5], b[2:7]), "the same view twice": (b[1:6], b[1:6])}
    keys = {name: tuple(cache._alias_groups(list(args))) for name, args in layouts.items()}
    assert keys["two tensors"] == ("0", "1")
    assert keys["disjoint views of one"] == ("0", "0@20")
    assert keys["a tensor and its view"] == ("0", "0@0")
    assert keys["overlapping views"] == ("0", "0@8")
    assert keys["the same view twice"] == ("0", "0@0")
