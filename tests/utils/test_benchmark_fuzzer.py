"""ember.utils.benchmark fuzzers, Callgrind stats and ember.utils.ThroughputBenchmark, against
torch.utils.benchmark: the fuzzers draw from numpy's RandomState in torch's order and seed
ember's generator (which draws torch's numbers) from it, so the same seed must give torch's
parameters, sizes, strides, layouts and tensor values."""
import os
import random
import shutil
import textwrap

import numpy as np
import pytest

import ember
import ember.utils.benchmark as eb
from ember.utils import ThroughputBenchmark
from ember.utils.benchmark.utils.valgrind_wrapper import timer_interface as eti
from ember.utils.throughput_benchmark import ExecutionStats, format_time

torch = pytest.importorskip("torch")
import torch.utils.benchmark as tb  # noqa: E402
from torch.utils.benchmark.utils.valgrind_wrapper import timer_interface as tti  # noqa: E402

TRIALS = range(4)   # a fresh seed per trial (drawn inside the test: xdist workers must collect alike)


def _seed():
    return random.randrange(2 ** 31)


def _err(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)
    return None


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("trial", TRIALS)
def test_parameter_draws_match_torch(trial):
    seed = _seed()
    specs = [("a", 1, 100, "uniform"), ("b", 0.5, 7.5, "uniform"), ("c", 8, 4096, "loguniform"),
             ("d", 2.0, 300.0, "loguniform"), ("e", 1, 2, "uniform")]
    for name, lo, hi, dist in specs:
        e, t = eb.FuzzedParameter(name, lo, hi, dist), tb.FuzzedParameter(name, lo, hi, dist)
        se, st = np.random.RandomState(seed), np.random.RandomState(seed)
        de = [e.sample(se) for _ in range(20)]
        dt = [t.sample(st) for _ in range(20)]
        assert de == dt and [type(v) for v in de] == [type(v) for v in dt]
        assert all(lo <= v <= hi for v in de)
        assert e.name == t.name == name


def test_custom_distribution_draws_follow_numpy_choice():
    # torch 2.13's check is inverted (it rejects every normalized dict), so compare with numpy itself
    dist = {"x": 0.2, 3: 0.5, None: 0.3}
    p = eb.FuzzedParameter("k", distribution=dist)
    s1, s2 = np.random.RandomState(5), np.random.RandomState(5)
    keys = list(dist)
    draws = [p.sample(s1) for _ in range(200)]
    assert draws == [keys[s2.choice(np.arange(3), p=tuple(dist.values()))] for _ in range(200)]
    assert set(draws) == set(keys)
    with pytest.raises(AssertionError, match="Distribution is not normalized"):
        eb.FuzzedParameter("k", distribution={1: 0.2, 2: 0.2})
    with pytest.raises(AssertionError, match="'minval' must be None"):
        eb.FuzzedParameter("k", minval=1, distribution={1: 1.0})
    with pytest.raises(AssertionError, match="'maxval' must be None"):
        eb.FuzzedParameter("k", maxval=1, distribution={1: 1.0})
    for m in (eb, tb):
        with pytest.raises(AssertionError, match="Probabilities cannot be negative"):
            m.FuzzedParameter("k", distribution={1: -0.5, 2: 1.5})
    assert _err(lambda: eb.FuzzedParameter("k", 1, 2, "gauss")) == _err(lambda: tb.FuzzedParameter("k", 1, 2, "gauss"))
    assert repr(eb.ParameterAlias("n")) == repr(tb.ParameterAlias("n"))


# ----------------------------------------------------------------------------- fuzzer
def _fuzzer(m, seed, constraints=None, dtype_name="float32"):
    dtype = getattr(ember if m is eb else torch, dtype_name)
    return m.Fuzzer(
        parameters=[
            m.FuzzedParameter("k0", 4, 256, "loguniform"),
            m.FuzzedParameter("k1", 1, 9, "uniform"),
            [m.FuzzedParameter("dim", 1, 3, "uniform"), m.FuzzedParameter("step", 1, 3, "uniform")],
            m.FuzzedParameter("k2", 1, 5, "uniform", strict=True),
            m.FuzzedParameter("k3", m.ParameterAlias("k1") if False else 1, 2, "uniform"),
            m.FuzzedParameter("alias_k", 1, 2, "uniform"),
        ],
        tensors=[
            m.FuzzedTensor("x", size=("k0", "k1", "k2"), steps=("step", 1, "step"), dim_parameter="dim",
                           probability_contiguous=0.5, max_elements=4000, min_elements=4, dtype=dtype),
            [m.FuzzedTensor("y", size=("k1", "k0"), probability_contiguous=0.3, max_allocation_bytes=3000,
                            dtype=dtype)],
        ],
        constraints=constraints, seed=seed)


@pytest.mark.parametrize("trial", TRIALS)
@pytest.mark.parametrize("dtype_name", ["float32", "int16", "float64"])
def test_fuzzer_take_matches_torch(trial, dtype_name):
    seed = _seed()
    constraint = [lambda p: (p["k0"] + p["k1"]) % 3 != 0]
    fe, ft = _fuzzer(eb, seed, constraint, dtype_name), _fuzzer(tb, seed, constraint, dtype_name)
    for (te, pe, params_e), (tt, pt, params_t) in zip(fe.take(6), ft.take(6)):
        assert params_e == params_t
        for name in ("x", "y"):
            a, b = te[name], tt[name]
            assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
            assert a.is_contiguous() == b.is_contiguous()
            assert str(a.dtype).replace("ember", "torch") == str(b.dtype)
            pe_n, pt_n = dict(pe[name]), dict(pt[name])
            assert pe_n.pop("order").tolist() == pt_n.pop("order").tolist()
            assert pe_n.pop("dtype").replace("ember", "torch") == pt_n.pop("dtype")
            assert pe_n == pt_n
            assert np.array_equal(a.double().numpy(), b.double().numpy())
            if dtype_name == "int16":
                assert int(a.min()) >= 1 and int(a.max()) < 127
            else:
                assert 0 <= float(a.min()) and float(a.max()) < 1
    assert fe.rejection_rate == ft.rejection_rate


def test_fuzzer_is_reproducible_and_constructor_receives_params():
    seen = []

    def constructor(size, dtype, **params):
        seen.append(dict(params))
        return ember.full(size, float(params["k0"]), dtype=dtype)

    def make(seed):
        return eb.Fuzzer(parameters=[eb.FuzzedParameter("k0", 1, 50, "uniform")],
                         tensors=[eb.FuzzedTensor("x", size=("k0", 3), tensor_constructor=constructor),
                                  eb.FuzzedTensor("z", size=(2, "k0"))], seed=seed)
    a = [(t["x"].tolist(), t["z"].tolist(), p) for t, _, p in make(7).take(3)]
    b = [(t["x"].tolist(), t["z"].tolist(), p) for t, _, p in make(7).take(3)]
    assert a == b
    assert [s["k0"] for s in seen[:3]] == [p["k0"] for _, _, p in a]
    assert all(x[0][0] == p["k0"] for x, _, p in a)


def test_fuzzer_aliases_and_errors_match_torch():
    def aliased(m):
        return m.Fuzzer(parameters=[m.FuzzedParameter("n", 1, 30, "uniform"),
                                    m.FuzzedParameter("k", distribution={0: 1.0}) if False else
                                    m.FuzzedParameter("k", 1, 3, "uniform")],
                        tensors=[m.FuzzedTensor("a", size=("n", "n"))], seed=1)
    pe = [p for _, _, p in aliased(eb).take(4)]
    pt = [p for _, _, p in aliased(tb).take(4)]
    assert pe == pt
    for m in (eb, tb):
        resolved = m.Fuzzer._resolve_aliases({"a": 3, "b": m.ParameterAlias("a"), "c": m.ParameterAlias("b")})
        assert resolved == {"a": 3, "b": 3, "c": 3}
    cyc = [_err(lambda m=m: m.Fuzzer._resolve_aliases({"a": m.ParameterAlias("b"), "b": m.ParameterAlias("a")}))
           for m in (eb, tb)]
    assert cyc[0][0] == cyc[1][0] == "ValueError" and cyc[0][1].startswith("ParameterAlias cycle detected")
    dup = [_err(lambda m=m: m.Fuzzer([m.FuzzedParameter("x", 1, 2, "uniform")], [m.FuzzedTensor("x", (1,))]))
           for m in (eb, tb)]
    assert dup[0] == dup[1]
    never = [_err(lambda m=m: next(m.Fuzzer([m.FuzzedParameter("x", 1, 2, "uniform")], [],
                                            constraints=[lambda p: False], seed=0).take(1))) for m in (eb, tb)]
    assert never[0] == never[1] == ("ValueError", "Failed to generate a set of valid parameters.")
    f = eb.Fuzzer([eb.FuzzedParameter("x", 1, 2, "uniform")], [])
    assert f.rejection_rate == 0.0


@pytest.mark.parametrize("trial", range(2))
def test_fuzzed_sparse_tensor_matches_torch_structure(trial):
    seed = _seed()
    from torch.utils.benchmark import FuzzedSparseTensor as TSparse

    def make(m, sparse_cls):
        dtype = ember.float32 if m is eb else torch.float32
        return m.Fuzzer(parameters=[m.FuzzedParameter("k0", 2, 20, "uniform"),
                                    m.FuzzedParameter("k1", 2, 20, "uniform"),
                                    m.FuzzedParameter("sparse_dim", 1, 2, "uniform"),
                                    m.FuzzedParameter("density", 0.05, 0.5, "uniform"),
                                    m.FuzzedParameter("coalesced", 0, 1, "uniform")],
                        tensors=[sparse_cls("s", size=("k0", "k1"), sparse_dim="sparse_dim", density="density",
                                            coalesced="coalesced", dtype=dtype)], seed=seed)
    for (te, pe, qe), (tt, pt, qt) in zip(make(eb, eb.FuzzedSparseTensor).take(5), make(tb, TSparse).take(5)):
        assert qe == qt
        a, b = te["s"], tt["s"]
        assert tuple(a.shape) == tuple(b.shape) and a.is_sparse and b.is_sparse
        assert a.sparse_dim() == b.sparse_dim() and a.dense_dim() == b.dense_dim()
        pe_n, pt_n = dict(pe["s"]), dict(pt["s"])
        assert tuple(pe_n.pop("shape")) == tuple(pt_n.pop("shape"))
        assert pe_n.pop("dtype") == "ember.float32" and pt_n.pop("dtype") == "torch.float32"
        ce, ct = pe_n.pop("is_coalesced"), pt_n.pop("is_coalesced")
        assert ce == ct == bool(qe["coalesced"]) or (not qe["coalesced"] and not ce and not ct)
        assert pe_n == pt_n
        assert a._nnz() == b._nnz()
        assert np.array_equal(a._indices().numpy(), b._indices().numpy())
        # (duplicate entries of an uncoalesced draw are summed in another order: last-bit differences)
        np.testing.assert_allclose(a._values().numpy(), b._values().numpy(), rtol=1e-6, atol=0)


# ----------------------------------------------------------------------------- callgrind stats
def _counts(m, data, inclusive):
    return m.FunctionCounts(tuple(m.FunctionCount(c, f) for c, f in data), inclusive=inclusive)


def _strip_addr(text):
    return "\n".join(text.splitlines()[1:])


def test_function_counts_behave_like_torch():
    rng = random.Random(3)
    fns = [f"/usr/src/Python/ceval.c:fn_{i}" + "x" * rng.randint(0, 90) for i in range(25)]
    a = sorted(((rng.randint(-50, 10 ** 6), f) for f in fns), reverse=True)
    b = sorted(((rng.randint(1, 10 ** 5), f) for f in fns[5:15]), reverse=True)
    for inclusive in (False, True):
        ea, eb_, ta, tb_ = (_counts(eti, a, inclusive), _counts(eti, b, inclusive), _counts(tti, a, inclusive),
                            _counts(tti, b, inclusive))
        for fe, ft in ((ea, ta), (ea - eb_, ta - tb_), (ea + eb_, ta + tb_), (ea * 3, ta * 3), (ea[2:7], ta[2:7]),
                       (ea.filter(lambda f: "1" in f), ta.filter(lambda f: "1" in f)),
                       (ea.transform(lambda f: f[:30]), ta.transform(lambda f: f[:30])), (ea.denoise(), ta.denoise())):
            assert list(fe) == list(ft)
            assert _strip_addr(repr(fe)) == _strip_addr(repr(ft))
            assert fe.sum() == ft.sum() and len(fe) == len(ft)
        assert ea[0] == tuple(a[0]) and isinstance(ea[0], eti.FunctionCount)   # torch 2.13 wraps it (a bug)
    with pytest.raises(AssertionError, match="Cannot merge inclusive and exclusive counts"):
        _counts(eti, a, True) - _counts(eti, b, False)


def _stats(m, spec, incl, excl, base_incl, base_excl):
    return m.CallgrindStats(task_spec=spec, number_per_run=100, built_with_debug_symbols=True,
                            baseline_inclusive_stats=base_incl, baseline_exclusive_stats=base_excl,
                            stmt_inclusive_stats=incl, stmt_exclusive_stats=excl, stmt_callgrind_out=None)


def test_callgrind_stats_repr_and_api_match_torch():
    from torch.utils.benchmark.utils.common import TaskSpec as TSpec

    from ember.utils.benchmark.utils.common import TaskSpec as ESpec
    data = [(5000, "/x/Objects/dictobject.c:lookdict_unicode"), (1200, "/a/b/build/../aten/add.cpp:add [libx.so]"),
            (77, "/q/Python/ceval.c:eval")]
    base = [(40, "/q/Python/ceval.c:eval"), (3, "/x/Objects/dictobject.c:lookdict_unicode")]
    out = []
    for m, spec_cls in ((eti, ESpec), (tti, TSpec)):
        spec = spec_cls(stmt="y = x + 1", setup="x = torch.ones(3)", num_threads=2)
        s = _stats(m, spec, _counts(m, data, True), _counts(m, data, False), _counts(m, base, True),
                   _counts(m, base, False))
        other = _stats(m, spec, _counts(m, data[1:], True), _counts(m, data[1:], False), _counts(m, base, True),
                       _counts(m, base, False))
        std = s.as_standardized()
        out.append((_strip_addr(repr(s)), s.counts(), s.counts(denoise=True), list(s.stats()),
                    list(s.stats(inclusive=True)), list(s.delta(other)), list(std.stats()), std.stmt_callgrind_out))
    assert out[0] == out[1]


ANNOTATE = textwrap.dedent("""\
    --------------------------------------------------------------------------------
    Profile data file 'callgrind.out.1' (creator: callgrind-3.19.0)
    --------------------------------------------------------------------------------
    Ir
    --------------------------------------------------------------------------------
    1,234,567  PROGRAM TOTALS

    --------------------------------------------------------------------------------
    Ir         file:function
    --------------------------------------------------------------------------------
    1,234,567  ???:0x0000000000001000 [/usr/lib/ld.so]
      600,000  /src/Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.11.so]
       34,567  /src/Objects/dictobject.c:lookdict_unicode [/lib/libpython3.11.so]
           12  ???:ember_cg_toggle [/tmp/libember_callgrind.so]

    --------------------------------------------------------------------------------
    The following files chosen for auto-annotation could not be found:
    """)


def test_parse_callgrind_annotate_output():
    fc = eti.parse_callgrind_annotate(ANNOTATE, inclusive=False)
    assert list(fc) == [(600000, "/src/Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.11.so]"),
                        (34567, "/src/Objects/dictobject.c:lookdict_unicode [/lib/libpython3.11.so]"),
                        (12, "???:ember_cg_toggle [/tmp/libember_callgrind.so]")]
    assert fc.denoise().sum() == 600012 and not fc.inclusive
    with pytest.raises(AssertionError, match="Failed to parse"):
        eti.parse_callgrind_annotate("no table here", inclusive=True)


def test_copy_if_callgrind_and_globals_bridge(tmp_path):
    for v in (1, 2.5, "s", b"b", True, 1j):
        assert eb.CopyIfCallgrind(v).value == v
    mod = ember.nn.Linear(2, 2)
    assert eb.CopyIfCallgrind(mod).serialization.name == "TORCH"
    for m in (eb, tb):
        with pytest.raises(ValueError, match="Unsupported type: <class 'list'>\n`collect_callgrind` restricts"):
            m.CopyIfCallgrind([1])
    assert eb.CopyIfCallgrind.unwrap_all({"a": eb.CopyIfCallgrind(3), "b": 4}) == {"a": 3, "b": 4}
    msgs = [_err(lambda m=m: m.GlobalsBridge({"n": 3}, str(tmp_path / m.__name__.split(".")[0]))) for m in (eti, tti)]
    assert msgs[0] == msgs[1] is not None
    bridge = eti.GlobalsBridge({"n": eb.CopyIfCallgrind(3, setup="import math"), "ember": ember},
                               str(tmp_path / "d"))
    code = bridge.construct()
    scope = {}
    exec("import pickle\nimport ember\n" + code, scope)
    assert scope["n"] == 3 and "math" in scope
    with pytest.raises(ValueError, match="does not support mocking out `torch`"):
        eti.GlobalsBridge({"torch": np}, str(tmp_path / "e"))


def test_collect_callgrind_without_valgrind_raises_torch_error(monkeypatch):
    w = eti._ValgrindWrapper()
    w._supported_platform = True
    w._commands_available = {"valgrind": False, "callgrind_control": True, "callgrind_annotate": False}
    monkeypatch.setattr(eti, "_WRAPPER", w)
    with pytest.raises(OSError, match="^Missing: valgrind, callgrind_annotate$"):
        eb.Timer("pass").collect_callgrind(number=1)
    w._supported_platform = False
    with pytest.raises(OSError, match="Valgrind is not supported on this platform."):
        eb.Timer("pass").collect_callgrind(number=1)
    for m in (eb, tb):
        with pytest.raises(ValueError, match="If specified, `repeats` must be >= 1"):
            m.Timer("pass").collect_callgrind(repeats=0)
    with pytest.raises(NameError):
        eb.Timer("undefined_name_xyz").collect_callgrind()


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None,
                    reason="valgrind is not installed")
def test_collect_callgrind_counts_instructions():
    # a pure-Python statement: the valgrind process then skips importing ember (seconds under valgrind)
    t = eb.Timer("y = [i * k for i in range(30)]", setup="import math", globals={"k": eb.CopyIfCallgrind(3)})
    first, second, third = t.collect_callgrind(number=20, repeats=3, retain_out_file=True)
    assert isinstance(first, eb.CallgrindStats) and first.number_per_run == 20
    total = first.counts()
    assert total > 20 * 300                        # a 30-element comprehension is hundreds of instructions
    assert 0 < first.baseline_exclusive_stats.sum() < total / 5
    # The first repeat is the first to run the timed block's own bytecode, so on 3.11+ it also pays for
    # the adaptive interpreter specializing it (~20% more, as in torch, whose warm-up runs the statement
    # from another code object too); the repeats after it count the same instructions up to a few.
    assert abs(third.counts() - second.counts()) < 0.02 * second.counts()
    assert 0.98 * second.counts() <= total < 2 * second.counts()
    assert first.stats(inclusive=True)[0].count >= first.stats()[0].count
    assert "events:" in first.stmt_callgrind_out and first.as_standardized().stmt_callgrind_out is None
    assert "Instructions:" in repr(first) and "20 runs per measurement, 1 thread" in repr(first)
    assert first.delta(second).sum() == total - second.counts()
    with pytest.raises(ValueError, match="wrapped in `CopyIfCallgrind`"):
        eb.Timer("pass", globals={"k": 3}).collect_callgrind(number=1)


# ----------------------------------------------------------------------------- throughput benchmark
def test_format_time_and_execution_stats_match_torch():
    from torch.utils.throughput_benchmark import ExecutionStats as TStats
    from torch.utils.throughput_benchmark import format_time as tformat
    for v in (0.5, 12.25, 3456.7, 2.5e6):
        assert format_time(time_us=v) == tformat(time_us=v)
        assert format_time(time_ms=v) == tformat(time_ms=v)
        assert format_time(time_s=v / 1e6) == tformat(time_s=v / 1e6)
    with pytest.raises(AssertionError, match="Expected only one of"):
        format_time(time_us=1, time_ms=1)

    class Raw:
        latency_avg_ms = 0.0731
        num_iters = 250

    class Cfg:
        num_calling_threads = 3
    e, t = ExecutionStats(Raw, Cfg), TStats(Raw, Cfg)
    assert str(e) == str(t)
    assert e.iters_per_second == t.iters_per_second and e.total_time_seconds == t.total_time_seconds


def test_throughput_benchmark_runs_module_over_threads():
    m = ember.nn.Sequential(ember.nn.Linear(5, 4), ember.nn.ReLU())
    bench = ThroughputBenchmark(m)
    x = ember.randn(3, 5)
    assert ember.equal(bench.run_once(x), m(x))
    for mod in (bench, torch.utils.ThroughputBenchmark(torch.nn.Linear(2, 2))):
        with pytest.raises(RuntimeError, match=r"Please provide benchmark inputs.Did you forget to call add_input\(\)"):
            mod.benchmark(num_iters=3)
    calls = []

    def fn(a, scale=1.0):
        calls.append(scale)
        return a * scale

    fb = ThroughputBenchmark(fn)
    fb.add_input(x, scale=2.0)
    fb.add_input(x, scale=3.0)
    stats = fb.benchmark(num_calling_threads=3, num_warmup_iters=2, num_iters=40)
    assert stats.num_iters == 40 and len(calls) == 40 + 3 * 2 and set(calls) <= {2.0, 3.0}
    assert stats.latency_avg_ms > 0 and stats.iters_per_second > 0
    assert str(stats).startswith("Average latency per example: ")
    bench.add_input(x)
    with pytest.warns(UserWarning, match="Starting benchmark on an nn.Module"):
        bench.benchmark(num_calling_threads=2, num_warmup_iters=1, num_iters=10)

    def boom(a):
        raise KeyError("bad input")
    bb = ThroughputBenchmark(boom)
    bb.add_input(1)
    with pytest.raises(KeyError, match="bad input"):
        bb.benchmark(num_warmup_iters=0, num_iters=2)
    with pytest.raises(TypeError, match="module must be callable"):
        ThroughputBenchmark(3)


def test_throughput_benchmark_profiler_trace(tmp_path):
    fb = ThroughputBenchmark(lambda a: a + 1)
    fb.add_input(ember.ones(3))
    path = str(tmp_path / "trace.json")
    fb.benchmark(num_warmup_iters=1, num_iters=5, profiler_output_path=path)
    assert os.path.getsize(path) > 0
