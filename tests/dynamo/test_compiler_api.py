"""``ember.compile``'s torch arguments (options, mode, recompile_limit, name...) and the rest of
``ember.compiler``: default backend, is_exporting, substitute_in_graph, nested_compile_region,
wrap_numpy, guard filters."""
from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

import ember
from ember import dynamo
from ember import compiler
from ember.inductor import config as inductor_config

_RNG = np.random.default_rng(2026)


def rt(*shape, requires_grad=False):
    return ember.tensor(_RNG.standard_normal(shape).astype(np.float32), requires_grad=requires_grad)


# ---------------------------------------------------------------------- options / mode
def test_options_patch_the_inductor_config_while_compiling_and_running():
    seen = []
    real = dynamo.backends._REGISTRY["inductor"]

    def spy(gm, ex):
        seen.append(("compile", inductor_config.simd, inductor_config.fusion))
        inner = real(gm, ex)

        def run(*a):
            seen.append(("run", inductor_config.simd))
            return inner(*a)
        return run
    dynamo.backends._REGISTRY["inductor"] = spy
    try:
        f = ember.compile(lambda x: (x.sin() * 2).relu(), options={"simd": False, "fusion": False})
        x = rt(5, 3)
        out = f(x)
    finally:
        dynamo.backends._REGISTRY["inductor"] = real
    assert ember.allclose(out, (x.sin() * 2).relu())
    assert seen[0] == ("compile", False, False) and ("run", False) in seen
    assert inductor_config.simd is True and inductor_config.fusion is True     # restored


def test_options_change_the_generated_code():
    import logging
    x = rt(64)
    records = []

    class H(logging.Handler):
        def emit(self, r):
            records.append(r.getMessage())
    lg = logging.getLogger("ember.inductor.output_code")
    h, old = H(), lg.level
    lg.addHandler(h)
    lg.setLevel(logging.DEBUG)
    try:
        f = ember.compile(lambda x: x.exp() + 1, options={"simd": False})
        assert ember.allclose(f(x), x.exp() + 1)
    finally:
        lg.removeHandler(h)
        lg.setLevel(old)
    code = "\n".join(records)
    assert "extern" in code or "for" in code
    assert "#pragma omp simd" not in code


def test_dash_names_and_unknown_options_and_types_as_torch():
    f = ember.compile(lambda x: x + 1, options={"inline-max-ops": 4})
    x = rt(3)
    assert ember.allclose(f(x), x + 1)
    with pytest.raises(RuntimeError, match="Unexpected optimization option triton.cudagraphs, known options are"):
        ember.compile(lambda x: x + 1, options={"triton.cudagraphs": True})
    with pytest.raises(RuntimeError, match="Unexpected type of attr simd, got str should be bool"):
        ember.compile(lambda x: x + 1, options={"simd": "no"})


def test_mode_and_options_together_refused_as_torch():
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        ember.compile(lambda x: x, mode="max-autotune", options={"simd": False})


def test_custom_backend_gets_mode_and_options_as_keywords():
    got = {}

    def backend(gm, ex, **kw):
        got.update(kw)
        return gm.forward
    f = ember.compile(lambda x: x * 3, backend=backend, options={"anything": 1})
    x = rt(4)
    assert ember.allclose(f(x), x * 3)
    assert got == {"options": {"anything": 1}}
    got.clear()
    g = ember.compile(lambda x: x * 4, backend=backend, mode="reduce-overhead")
    g(x)
    assert got == {"mode": "reduce-overhead"}


def test_shapes_spec_and_use_aoti_say_they_are_not_supported():
    with pytest.raises(NotImplementedError, match="shapes_spec"):
        ember.compile(lambda x: x, shapes_spec=object())
    with pytest.raises(NotImplementedError, match="use_aoti"):
        ember.compile(lambda x: x, options={"use_aoti": True})


def test_decorator_form_with_all_arguments():
    @ember.compile(name="region", isolate_recompiles=True, recompile_limit=4)
    def f(x):
        return x.cos()
    x = rt(3)
    assert ember.allclose(f(x), x.cos())


# ---------------------------------------------------------------------- default backend
def test_default_backend_set_get_reset():
    calls = []

    def mine(gm, ex):
        calls.append(1)
        return gm.forward
    assert compiler.get_default_backend() == "inductor"
    try:
        compiler.set_default_backend(mine)
        assert compiler.get_default_backend() is mine
        f = ember.compile(lambda x: x.tanh())
        x = rt(3)
        assert ember.allclose(f(x), x.tanh()) and calls == [1]
        compiler.set_default_backend("eager")
        assert compiler.get_default_backend() == "eager"
        with pytest.raises(ValueError, match="unknown backend"):
            compiler.set_default_backend("no-such-backend")
    finally:
        compiler.set_default_backend(None)
    assert compiler.get_default_backend() == "inductor"


# ---------------------------------------------------------------------- recompile_limit
def test_recompile_limit_per_compile_then_eager_with_warning():
    calls = []

    def counting(gm, ex):
        calls.append(1)
        return gm.forward
    f = ember.compile(lambda x, n: x * n, backend=counting, recompile_limit=1, dynamic=False)
    x = rt(3)
    f(x, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (3, 4):
            assert ember.allclose(f(x, n), x * n)
    assert len(calls) == 1
    assert any("recompile limit (1)" in str(m.message) for m in w)


def test_recompile_limit_with_fullgraph_raises():
    f = ember.compile(lambda x, n: x * n, backend="eager", recompile_limit=1, fullgraph=True, dynamic=False)
    x = rt(3)
    f(x, 2)
    with pytest.raises(compiler.FailOnRecompileLimitHit, match="recompile_limit=1"):
        f(x, 3)


def test_recompile_limit_checked():
    with pytest.raises(ValueError, match="recompile_limit"):
        ember.compile(lambda x: x, recompile_limit=-1)


# ---------------------------------------------------------------------- is_exporting
def test_is_exporting_false_eager_and_compiled_true_in_export():
    class M(ember.nn.Module):
        def forward(self, x):
            if compiler.is_exporting():
                return x + 100
            return x - 100
    x = rt(3)
    assert not compiler.is_exporting()
    assert ember.allclose(M()(x), x - 100)
    assert ember.allclose(ember.compile(M(), backend="eager")(x), x - 100)
    ep = ember.export.export(M(), (x,))
    assert ember.allclose(ep.module()(x), x + 100)
    assert not compiler.is_exporting()


def test_compile_inside_export_is_ignored_with_a_warning():
    seen = []

    class M(ember.nn.Module):
        def forward(self, x):
            return x * 2
    m = M()

    def fake_export_region():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            seen.append(ember.compile(m) is m)
            seen.append(any("ignored when called inside ember.export" in str(i.message) for i in w))
    compiler._EXPORT_DEPTH += 1
    try:
        fake_export_region()
    finally:
        compiler._EXPORT_DEPTH -= 1
    assert seen == [True, True]


# ---------------------------------------------------------------------- substitute_in_graph
def test_substitute_in_graph_traces_the_polyfill_and_calls_the_original_eagerly():
    from ember.dynamo import polyfill
    saved = dict(polyfill._POLYFILLS)
    try:
        traced = []

        @compiler.substitute_in_graph(operator.indexOf)
        def index_of(a, b, /):
            traced.append(1)
            for i, item in enumerate(a):
                if item is b or item == b:
                    return i
            raise ValueError("sequence.index(x): x not in sequence")
        assert index_of([1, 2, 3], 3) == 2 and traced == []      # eager: the C function

        def f(x, items):
            return x * operator.indexOf(items, 3)
        calls = []

        def counting(gm, ex):
            calls.append(gm)
            return gm.forward
        g = ember.compile(f, backend=counting, fullgraph=True)
        x = rt(4)
        assert ember.allclose(g(x, [1, 2, 3, 4]), x * 2)
        assert traced and len(calls) == 1
        with pytest.raises(ValueError, match="Duplicate polyfill"):
            compiler.substitute_in_graph(operator.indexOf)(lambda a, b: 0)
    finally:
        polyfill._POLYFILLS.clear()
        polyfill._POLYFILLS.update(saved)


def test_substitute_in_graph_checks_arguments_and_signatures():
    with pytest.raises(TypeError, match="expects a function"):
        compiler.substitute_in_graph(3)
    with pytest.raises(TypeError, match="Signature mismatch"):
        def orig(a, b=1):
            return a
        compiler.substitute_in_graph(orig)(lambda a, c: a)
    with pytest.raises(TypeError, match="expects a function"):
        compiler.substitute_in_graph(operator.indexOf)(len)


# ---------------------------------------------------------------------- nested_compile_region, wrap_numpy
def test_nested_compile_region_is_a_plain_call_compiled_or_not():
    @compiler.nested_compile_region
    def block(x, w):
        return (x @ w).relu()

    @compiler.nested_compile_region(max_reuse_entries=2)
    def other(x):
        return x * 2

    def model(x, w):
        return other(block(block(x, w), w))
    x, w = rt(4, 4), rt(4, 4)
    ref = model(x, w)
    assert ember.allclose(ember.compile(model, fullgraph=True)(x, w), ref, atol=1e-5)
    with pytest.raises(ValueError, match="max_reuse_entries"):
        compiler.nested_compile_region(max_reuse_entries=0)


def test_wrap_numpy_maps_tensors_and_arrays():
    @compiler.wrap_numpy
    def f(a, pair):
        return {"s": np.sin(a) + pair[0], "n": pair[1] * 2}
    x, y = rt(3), rt(3)
    out = f(x, (y, 5))
    assert isinstance(out["s"], ember.Tensor) and out["n"] == 10
    assert ember.allclose(out["s"], x.sin() + y)
    with pytest.raises(RuntimeError):
        f(rt(3, requires_grad=True), (y, 1))
    assert compiler.cudagraph_mark_step_begin() is None


# ---------------------------------------------------------------------- guard filters
class _Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) * SCALE


SCALE = 2.0


def _entries_of(fn):
    got = []

    def spy(entries):
        got.extend(entries)
        return [True] * len(entries)
    return spy, got


def test_guard_filter_entries_describe_the_guards():
    spy, got = _entries_of(None)
    net = _Net()
    f = ember.compile(net, backend="eager", options={"guard_filter_fn": spy})
    x = rt(2, 3)
    assert ember.allclose(f(x), net(x))
    kinds = {e.guard_type for e in got}
    assert {"TENSOR_MATCH", "GLOBAL_STATE"} <= kinds
    tensors = [e for e in got if e.guard_type == "TENSOR_MATCH"]
    assert any(e.is_parameter and e.nn_module is ember.nn.Linear for e in tensors)
    assert any(not e.is_parameter and e.nn_module is None for e in tensors)       # the input x
    assert any(e.is_global and "SCALE" in e.name for e in got)


def test_skip_all_guards_reuses_the_first_entry():
    calls = []

    def counting(gm, ex):
        calls.append(1)
        return gm.forward
    f = ember.compile(lambda x: x + 1, backend=counting,
                      options={"guard_filter_fn": compiler.skip_all_guards_unsafe})
    f(rt(3))
    f(rt(5, 2))            # a new shape: no guard left to fail (unsafe by contract)
    assert len(calls) == 1


def test_keep_tensor_guards_drops_global_guards_but_keeps_shapes():
    global SCALE
    calls = []

    def counting(gm, ex):
        calls.append(1)
        return gm.forward
    net = _Net()
    f = ember.compile(net, backend=counting, options={"guard_filter_fn": compiler.keep_tensor_guards_unsafe})
    x = rt(2, 3)
    ref = f(x)
    SCALE = 5.0
    try:
        assert ember.allclose(f(x), ref)        # the global is no longer guarded: old constant
        assert len(calls) == 1
        f(rt(4, 3))                             # a shape change still recompiles
        assert len(calls) == 2
    finally:
        SCALE = 2.0


def test_module_guard_filters_select_module_guards():
    spy, got = _entries_of(None)
    net = _Net()
    ember.compile(net, backend="eager", options={"guard_filter_fn": spy})(rt(2, 3))
    inbuilt = compiler.skip_guard_on_inbuilt_nn_modules_unsafe(got)
    every = compiler.skip_guard_on_all_nn_modules_unsafe(got)
    for e, a, b in zip(got, inbuilt, every):
        if e.nn_module is ember.nn.Linear:
            assert not a and not b
        elif e.nn_module is _Net:
            assert a and not b
        else:
            assert a and b
    glob = compiler.skip_guard_on_globals_unsafe(got)
    assert all(k == (not e.is_global) for e, k in zip(got, glob))
    portable = compiler.keep_portable_guards_unsafe(got)
    assert all(not k for e, k in zip(got, portable) if e.guard_type == "ID_MATCH")


def test_guard_filter_must_return_one_bool_per_entry():
    f = ember.compile(lambda x: x + 1, backend="eager", options={"guard_filter_fn": lambda es: [True]})
    with pytest.raises(RuntimeError, match="guard_filter_fn must return a list of"):
        f(rt(3))
