"""``ember._dynamo`` / ``ember.compiler`` names that ``torch._dynamo`` / ``torch.compiler`` have:
OptimizedModule, run, optimize_assert, forbid_in_graph, nonstrict_trace, error_on_graph_break,
patch_dynamo_config, dont_skip_tracing, skip_frame, step_unsupported, recursion limit, compile
hooks, config knobs. Compiled results are compared with eager on fresh random data; graph
counts come from a counting backend and ``ember.dynamo.counters``."""
import importlib.util
import logging
import sys

import numpy as np
import pytest

import ember
import ember._dynamo as td
from ember import compiler, dynamo
from ember.dynamo import convert_frame

from ._util import CountingBackend

_rng = np.random.default_rng()


def rand(*shape):
    return ember.tensor(_rng.standard_normal(shape).astype(np.float32))


def close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- names
_PROVIDED_DYNAMO = ["OptimizedModule", "eval_frame", "exc", "is_dynamo_supported", "is_inductor_supported",
                    "set_recursion_limit", "get_recursion_limit", "forbid_in_graph", "substitute_in_graph",
                    "nonstrict_trace", "dont_skip_tracing", "error_on_graph_break", "patch_dynamo_config", "run",
                    "optimize_assert", "reset_code_caches", "on_compile_start", "on_compile_end", "skip_frame",
                    "step_unsupported"]
_PROVIDED_COMPILER = ["compile", "config", "save_cache_artifacts", "load_cache_artifacts", "CacheInfo",
                      "set_enable_guard_collectives", "NestedCompileRegionOptions"]


def test_names_exist_as_in_torch():
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401
    for n in _PROVIDED_DYNAMO:
        assert hasattr(torch._dynamo, n) and hasattr(td, n), n
    for n in _PROVIDED_COMPILER:
        assert hasattr(torch.compiler, n) and hasattr(compiler, n), n
    assert not hasattr(compiler, "load_compiled_function")      # absent on purpose (docstring)


# ----------------------------------------------------------------------------- OptimizedModule
def test_optimized_module_class_and_orig_mod():
    torch = pytest.importorskip("torch")
    m = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU())
    cm = ember.compile(m, backend="eager")
    assert isinstance(cm, td.OptimizedModule) and isinstance(cm, td.eval_frame.OptimizedModule)
    assert td.OptimizedModule is td.eval_frame.OptimizedModule and type(cm).__name__ == "OptimizedModule"
    assert cm._orig_mod is m and not isinstance(m, td.OptimizedModule)
    x = rand(2, 4)
    close(cm(x), m(x))
    tm = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), backend="eager")
    assert list(cm.state_dict()) == list(tm.state_dict())       # "_orig_mod." prefix, as torch


def test_supported_probes():
    import shutil
    from ember.inductor import config as icfg
    assert td.is_dynamo_supported() is True
    assert td.is_inductor_supported() is (shutil.which(icfg.cxx) is not None)


# ----------------------------------------------------------------------------- recursion limit
def _nested(x):
    def a(t):
        return b(t) + 1

    def b(t):
        return c(t) * 2

    def c(t):
        return t.sin()
    return a(x)


def test_recursion_limit_errors_match_torch():
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401
    for bad in (0, -2):
        with pytest.raises(ValueError) as te:
            torch._dynamo.set_recursion_limit(bad)
        with pytest.raises(ValueError) as ee:
            td.set_recursion_limit(bad)
        assert str(ee.value) == str(te.value)
    with pytest.raises(TypeError):
        td.set_recursion_limit(2.5)
    assert td.get_recursion_limit() == torch._dynamo.get_recursion_limit() == -1


def test_recursion_limit_bounds_inlining():
    x = rand(5)
    try:
        td.set_recursion_limit(1)
        assert td.get_recursion_limit() == 1 and dynamo.config.inline_depth_limit == 1
        cnt = CountingBackend()
        close(ember.compile(_nested, backend=cnt)(x), _nested(x))
        assert dynamo.counters["graph_breaks"] + dynamo.counters["eager_fallback"] >= 1
    finally:
        td.set_recursion_limit(-1)
    assert td.get_recursion_limit() == -1 and dynamo.config.inline_depth_limit == 32
    dynamo.reset()
    cnt = CountingBackend()
    close(ember.compile(_nested, backend=cnt)(x), _nested(x))
    assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0


# ----------------------------------------------------------------------------- forbid_in_graph
def test_forbid_in_graph_raises_torchs_error():
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401

    def make():
        def helper(t):
            return t + 1

        def f(t):
            return helper(t) * 2
        return helper, f
    th, tf = make()
    torch._dynamo.forbid_in_graph(th)
    with pytest.raises(AssertionError) as te:
        torch.compile(tf, backend="eager")(torch.randn(3))
    eh, ef = make()
    assert td.forbid_in_graph(eh) is eh
    x = rand(3)
    close(eh(x), x + 1)                                  # eager calls are unaffected
    with pytest.raises(AssertionError) as ee:
        ember.compile(ef, backend="eager")(x)
    assert isinstance(ee.value, td.exc.ForbiddenInGraph)
    assert str(ee.value).split(" <")[0] == str(te.value).split(" <")[0] == "Attempt to trace forbidden callable"
    with pytest.raises(TypeError, match="callable"):
        td.forbid_in_graph(3)


# ----------------------------------------------------------------------------- nonstrict_trace
def test_nonstrict_trace_is_one_opaque_node_and_grads_flow():
    seen = []

    @td.nonstrict_trace
    def body(a, b):
        seen.append(1)
        td.graph_break()             # not traced by dynamo: harmless
        return a.sin() * b + b

    def f(a, b):
        return body(a, b).exp().sum()
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt, fullgraph=True)
    a, b = rand(4), rand(4)
    close(cf(a, b), f(a, b))
    assert cnt.frame_count == 1
    assert [n.target for n in cnt.graphs[0].graph.nodes if n.op == "call_function"][0] is body
    # gradients through the opaque call (aot traces its body)
    a1, b1 = a.clone().requires_grad_(), b.clone().requires_grad_()
    a2, b2 = a.clone().requires_grad_(), b.clone().requires_grad_()
    ember.compile(f, backend="aot_eager")(a1, b1).backward()
    f(a2, b2).backward()
    close(a1.grad, a2.grad)
    close(b1.grad, b2.grad)


def test_nonstrict_trace_with_module_argument_breaks_the_graph():
    lin = ember.nn.Linear(3, 3)

    @td.nonstrict_trace
    def run_mod(mod, x):
        return mod(x) + x

    def f(x):
        return run_mod(lin, x.cos()).relu()
    cnt = CountingBackend()
    x = rand(2, 3)
    close(ember.compile(f, backend=cnt)(x), f(x))
    assert dynamo.counters["graph_breaks"] == 1
    assert any("allow_in_graph" in r for _, r in dynamo.fallback_reasons)


# ----------------------------------------------------------------------------- error_on_graph_break
def _breaks(t):
    t = t + 1
    td.graph_break()
    return t * 2


def test_error_on_graph_break_around_a_call():
    x = rand(4)
    cf = ember.compile(_breaks, backend="eager")
    with td.error_on_graph_break(True):
        with pytest.raises(td.FullGraphError, match="error_on_graph_break"):
            cf(x)
    dynamo.reset()
    with td.error_on_graph_break(False):
        close(cf(x), (x + 1) * 2)
    assert dynamo.counters["graph_breaks"] == 1
    assert dynamo.config.error_on_graph_break is False
    with pytest.raises(TypeError, match="bool"):
        td.error_on_graph_break(1)


def test_error_on_graph_break_decorator_inside_compiled_code():
    @td.error_on_graph_break(True)
    def strict(t):
        t = t.cos()
        td.graph_break()
        return t + 1

    @td.error_on_graph_break(False)
    def lenient(t):
        t = t.cos()
        td.graph_break()
        return t + 1
    x = rand(4)
    with pytest.raises(td.FullGraphError, match="error_on_graph_break"):
        ember.compile(lambda t: strict(t * 3) - 1, backend="eager")(x)
    dynamo.reset()
    with td.error_on_graph_break(True):        # False inside True allows the break
        close(ember.compile(lambda t: lenient(t * 3) - 1, backend="eager")(x), (x * 3).cos() + 1 - 1)
    dynamo.reset()
    cnt = CountingBackend()                    # a decorated function that breaks nothing is inlined
    plain = td.error_on_graph_break(True)(lambda t: t.sin() * 2)
    close(ember.compile(lambda t: plain(t) + 1, backend=cnt)(x), x.sin() * 2 + 1)
    with td.error_on_graph_break(True):
        dynamo.reset()
        cnt = CountingBackend()
        close(ember.compile(lambda t: plain(t) + 1, backend=cnt)(x), x.sin() * 2 + 1)
        assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0


def test_error_on_graph_break_with_block_inside_compiled_code():
    def f(t):
        t = t + 1
        with td.error_on_graph_break(False):
            t = _breaks(t)                 # its own frame is compiled, the break allowed
        return t.sin()
    x = rand(4)
    with td.error_on_graph_break(True):
        close(ember.compile(f, backend="eager")(x), ((x + 2) * 2).sin())
    assert any("runs eagerly" in r for _, r in dynamo.fallback_reasons)
    dynamo.reset()

    def g(t):
        with td.error_on_graph_break(True):
            return _breaks(t)              # its frame is compiled under True: the break raises
    with pytest.raises(td.FullGraphError, match="error_on_graph_break"):
        ember.compile(g, backend="eager")(x)


# ----------------------------------------------------------------------------- patch_dynamo_config
def test_patch_dynamo_config():
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401
    with pytest.raises(ValueError) as te:
        torch._dynamo.patch_dynamo_config(recompile_limit=3)
    with pytest.raises(ValueError) as ee:
        td.patch_dynamo_config(recompile_limit=3)
    assert str(ee.value) == str(te.value)
    with pytest.raises(ValueError, match="non-safe-constant"):
        td.patch_dynamo_config(capture_scalar_outputs=[1])
    with pytest.raises(NotImplementedError, match="nested_graph_breaks"):
        td.patch_dynamo_config(nested_graph_breaks=True)

    def f(t):
        return t * t.sum().item()
    x = rand(5)
    assert dynamo.config.capture_scalar_outputs is False
    with td.patch_dynamo_config("capture_scalar_outputs", True):
        assert dynamo.config.capture_scalar_outputs is True
        cnt = CountingBackend()
        close(ember.compile(f, backend=cnt)(x), f(x))
        assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0
    assert dynamo.config.capture_scalar_outputs is False
    dynamo.reset()
    g = td.patch_dynamo_config({"capture_scalar_outputs": True})(f)
    cnt = CountingBackend()
    close(ember.compile(lambda t: g(t) + 1, backend=cnt)(x), f(x) + 1)
    assert dynamo.config.capture_scalar_outputs is False


def test_dynamo_config_patch_and_knobs(monkeypatch):
    cfg = td.config
    before = cfg.recompile_limit
    with cfg.patch(recompile_limit=2, automatic_dynamic_shapes=False):
        assert dynamo.config.recompile_limit == 2 and dynamo.config.automatic_dynamic_shapes is False
    assert cfg.recompile_limit == before and dynamo.config.automatic_dynamic_shapes is True
    with pytest.raises(AttributeError, match="no knob"):
        cfg.patch(not_a_knob=1)

    @cfg.patch("error_on_recompile", True)
    def call(fn, t):
        return fn(t)
    cf = ember.compile(lambda t: t + 1, backend="eager", dynamic=False)
    call(cf, rand(3))
    with pytest.raises(td.exc.RecompileError, match="Recompiling function"):
        call(cf, rand(4))
    assert cfg.error_on_recompile is False
    dynamo.reset()
    monkeypatch.setattr(dynamo.config, "fail_on_recompile_limit_hit", False)
    with cfg.patch(recompile_limit=1, fail_on_recompile_limit_hit=True):
        cf = ember.compile(lambda t: t - 1, backend="eager", dynamic=False)
        cf(rand(3))
        with pytest.raises(compiler.FailOnRecompileLimitHit, match="fail_on_recompile_limit_hit"):
            cf(rand(4))
    assert set(cfg.get_config_copy()) >= {"recompile_limit", "dont_skip_tracing", "error_on_recompile"}


# ----------------------------------------------------------------------------- dont_skip_tracing
def test_dont_skip_tracing_captures_library_frames(tmp_path, monkeypatch):
    lib = tmp_path / "fake_site_pkg"
    lib.mkdir()
    (lib / "libmod_dst.py").write_text("def lib_fn(t):\n    return t.sin() * 3 + 1\n")
    spec = importlib.util.spec_from_file_location("libmod_dst", lib / "libmod_dst.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(convert_frame, "_SKIP_PREFIXES", convert_frame._SKIP_PREFIXES + (str(lib) + "/",))

    def user(t):
        t = t + 1
        td.graph_break()
        return mod.lib_fn.__call__(t)     # (a call the trace does not inline: the library frame is hooked)

    x = rand(4)
    want = ((x + 1).sin() * 3 + 1)
    cnt = CountingBackend()
    close(ember.compile(user, backend=cnt)(x), want)
    skipped = [g for g in cnt.graphs if any("sin" in str(n.target) for n in g.graph.nodes)]
    dynamo.reset()
    spec2 = importlib.util.spec_from_file_location("libmod_dst2", lib / "libmod_dst.py")
    mod2 = importlib.util.module_from_spec(spec2)
    spec2.loader.exec_module(mod2)
    mod.lib_fn = mod2.lib_fn                     # fresh code object: not yet marked skipped
    cnt2 = CountingBackend()
    with td.dont_skip_tracing():
        close(ember.compile(user, backend=cnt2)(x), want)
    captured = [g for g in cnt2.graphs if any("sin" in str(n.target) for n in g.graph.nodes)]
    assert len(captured) > len(skipped)
    assert dynamo.config.dont_skip_tracing is False


# ----------------------------------------------------------------------------- skip_frame / step_unsupported
def test_skip_frame_runs_the_frame_eagerly():
    def f(t):
        td.skip_frame("not this one")
        return t.exp() + 1
    cnt = CountingBackend()
    x = rand(4)
    close(ember.compile(f, backend=cnt)(x), x.exp() + 1)
    assert cnt.frame_count == 0 and dynamo.counters["skipped"] >= 1


def test_step_unsupported_compiles_the_prefix_only():
    def f(t):
        t = t + 1
        t = t * 2
        td.step_unsupported()
        t = t - 1
        return t.sin()
    cnt = CountingBackend()
    x = rand(4)
    cf = ember.compile(f, backend=cnt)
    for _ in range(2):
        x = rand(4)
        close(cf(x), ((x + 1) * 2 - 1).sin())
    assert cnt.frame_count == 1
    targets = [str(n.target) for n in cnt.graphs[0].graph.nodes if n.op == "call_function"]
    assert len(targets) == 2 and not any("sin" in t for t in targets)


# ----------------------------------------------------------------------------- run / optimize_assert
def test_run_uses_existing_code_only():
    cnt = CountingBackend()
    cf = ember.compile(lambda t: t.relu() * 2, backend=cnt, dynamic=False)
    x = rand(6)
    close(cf(x), x.relu() * 2)
    assert cnt.frame_count == 1
    runner = td.run(cf)
    y = rand(6)
    close(runner(y), y.relu() * 2)
    z = rand(7)                                   # new shape: eager, nothing compiled
    close(runner(z), z.relu() * 2)
    assert cnt.frame_count == 1
    with td.run():
        close(cf(z), z.relu() * 2)                # cf's own hook compiles inside run(): as torch's
    assert cnt.frame_count == 2


def test_optimize_assert_is_fullgraph():
    x = rand(3)
    with pytest.raises(td.FullGraphError):
        td.optimize_assert("eager")(_breaks)(x)
    dynamo.reset()
    close(td.optimize_assert("eager")(lambda t: t.tanh())(x), x.tanh())
    with pytest.raises(NotImplementedError, match="export"):
        td.optimize_assert("eager", export=True)


def test_reset_code_caches_keeps_counters():
    cnt = CountingBackend()
    cf = ember.compile(lambda t: t.abs() + 3, backend=cnt)
    x = rand(3)
    cf(x)
    frames = dynamo.counters["frames"]
    td.reset_code_caches()
    assert dynamo.counters["frames"] == frames
    close(cf(x), x.abs() + 3)
    assert cnt.frame_count == 2 and dynamo.counters["frames"] == frames + 1


# ----------------------------------------------------------------------------- compile hooks
def test_on_compile_start_end_hooks():
    events = []

    @td.on_compile_start
    def start(args):
        events.append(("start", args.compile_id, args.callback_trigger.name))

    @td.on_compile_end
    def end(args):
        events.append(("end", args.compile_id))
    try:
        cf = ember.compile(lambda t: t * 5, backend="eager", dynamic=False)
        cf(rand(2))
        cf(rand(2))                               # a cache hit: no compile
        cf(rand(3))                               # a recompile
        assert [e[0] for e in events] == ["start", "end", "start", "end"]
        assert events[0][2] == "DYNAMO" and events[0][1] == events[1][1]
        assert events[2][1] != events[0][1] and events[2][1].split("/")[0] == events[0][1].split("/")[0]
    finally:
        td.reset()                                # forgets the hooks, as torch's reset
    cf = ember.compile(lambda t: t * 6, backend="eager")
    cf(rand(2))
    assert len(events) == 4


# ----------------------------------------------------------------------------- exc
def test_exc_module():
    assert td.exc.Unsupported is dynamo.Unsupported
    assert issubclass(td.exc.ForbiddenInGraph, AssertionError)
    assert td.exc.FailOnRecompileLimitHit is compiler.FailOnRecompileLimitHit
    assert td.substitute_in_graph is compiler.substitute_in_graph


# ----------------------------------------------------------------------------- ember.compiler
def test_compiler_config():
    cc = compiler.config
    import ember.compiler.config as cc2
    assert cc2 is cc and compiler.compile is ember.compile
    assert cc.recompile_limit == dynamo.config.recompile_limit
    cc.job_id = "run-7"
    assert cc.job_id == "run-7"
    cc.job_id = None
    with pytest.raises(TypeError, match="job_id"):
        cc.job_id = 3
    with pytest.raises(AttributeError, match="no knob"):
        cc.not_a_knob  # noqa: B018
    with pytest.raises(ValueError, match="dynamic_sources"):
        cc.dynamic_sources = "L['x'](:0"


def test_dynamic_sources_marks_dims():
    cnt = CountingBackend()

    def f(x, y):
        return (x * 2).sum(0) + y

    cf = ember.compile(f, backend=cnt, dynamic=False)
    try:
        compiler.config.dynamic_sources = "L['x']:0"
        for n in (3, 5, 8):
            x, y = rand(n, 4), rand(4)
            close(cf(x, y), f(x, y))
        assert cnt.frame_count == 1                  # dim 0 of x symbolic from the first compile
        y2 = rand(2)
        x2 = rand(3, 2)
        close(cf(x2, y2), f(x2, y2))                 # dim 1 stays static: a recompile
        assert cnt.frame_count == 2
    finally:
        compiler.config.dynamic_sources = ""


def test_force_disable_caches(monkeypatch):
    monkeypatch.delenv("EMBER_AOT_CACHE", raising=False)
    monkeypatch.delenv("EMBER_FX_GRAPH_CACHE", raising=False)
    from ember.aot import cache as aot_cache
    from ember.inductor import fx_graph_cache
    assert compiler.config.force_disable_caches is False
    compiler.config.force_disable_caches = True
    assert not aot_cache.enabled() and not fx_graph_cache.enabled()
    compiler.config.force_disable_caches = False
    assert aot_cache.enabled() and fx_graph_cache.enabled()


def test_set_enable_guard_collectives_and_nested_options():
    assert compiler.set_enable_guard_collectives(True) is False
    assert compiler.set_enable_guard_collectives(False) is True
    with pytest.raises(TypeError, match="enabled"):
        compiler.set_enable_guard_collectives("yes")
    opts = compiler.NestedCompileRegionOptions()
    f = compiler.nested_compile_region(lambda t: t + 1, options=opts)
    x = rand(3)
    close(f(x), x + 1)
    with pytest.raises(NotImplementedError, match="fw_compiler"):
        compiler.nested_compile_region(options=compiler.NestedCompileRegionOptions(fw_compiler=lambda *a: None))
    with pytest.raises(TypeError, match="NestedCompileRegionOptions"):
        compiler.nested_compile_region(options={"fw_compiler": None})


# ----------------------------------------------------------------------------- comptime
_COMPTIME_SEEN = []


def test_comptime_runs_at_trace_time(capsys):
    from ember._dynamo.comptime import comptime
    seen = _COMPTIME_SEEN          # (a global: a comptime lambda may close over constants only)
    seen.clear()
    scale = 3

    def f(x):
        y = x.sin() * scale
        comptime.print_graph()
        comptime(lambda ctx: _COMPTIME_SEEN.append((tuple(ctx.get_local("y").as_fake().shape),
                                          ctx.get_local("y").is_dynamic(), ctx.get_local("scale").as_python_constant())))
        return y + 1
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for _ in range(2):
        x = rand(3)
        close(cf(x), x.sin() * 3 + 1)
    assert seen == [((3,), False, 3)]                # once: at the one trace
    out = capsys.readouterr().out
    assert "def forward" in out and "sin" in out
    assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0
    assert comptime(lambda ctx: 1 / 0, lambda: "eager") == "eager"      # eagerly: the fallback

    def g(x):
        x = x * 2
        comptime.graph_break()
        return x + 1
    close(ember.compile(g, backend="eager")(x), x * 2 + 1)
    assert dynamo.counters["graph_breaks"] == 1
