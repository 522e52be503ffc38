"""ember.utils.benchmark: Timer, Measurement and Compare.

The printed forms (a Measurement's repr, Compare's tables) are checked for string
equality against torch.utils.benchmark built from the *same* fixed numbers, since the
point of the module is that a PyTorch user reads identical output. Real timings are
only checked for structure (counts, positivity, a parseable repr): never for speed.
"""
import pickle
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember
import ember.utils.benchmark as benchmark
from ember.utils.benchmark.utils import common as ecommon


# ----------------------------------------------------------------------------- helpers
def _pair(raw_times, number_per_run=1, **spec):
    """The same measurement built in ember and in torch (torch imported lazily)."""
    torch = pytest.importorskip("torch")
    from torch.utils.benchmark.utils import common as tcommon
    spec.setdefault("stmt", "x @ y")
    spec.setdefault("setup", "pass")
    e = ecommon.Measurement(number_per_run, list(raw_times), ecommon.TaskSpec(**spec))
    t = tcommon.Measurement(number_per_run, list(raw_times), tcommon.TaskSpec(**spec))
    del torch
    return e, t


def _body(measurement):
    """A Measurement's repr without its first line (which holds the object address/module)."""
    return repr(measurement).split("\n", 1)[1]


def _draw_times(rng, n, base=None, spread=None):
    base = base if base is not None else 10 ** rng.uniform(-8.5, 0.5)
    spread = spread if spread is not None else rng.choice([0.002, 0.03, 0.15, 0.6])
    return [base * (1 + spread * rng.random()) for _ in range(n)]


# ----------------------------------------------------------------------------- namespace
def test_import_forms_and_attribute_access():
    import ember.utils.benchmark as b
    assert b is benchmark
    assert ember.utils.benchmark is benchmark
    from ember.utils.benchmark import Compare, Measurement, TaskSpec, Timer  # noqa: F401
    from ember.utils.benchmark.utils.common import Measurement as M2
    assert M2 is benchmark.Measurement
    for name in ("Timer", "timer", "Language", "Compare", "Colorize", "Measurement", "TaskSpec", "select_unit",
                 "unit_to_english", "trim_sigfig", "ordered_unique", "set_torch_threads"):
        assert name in benchmark.__all__ and hasattr(benchmark, name)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        benchmark.nope  # noqa: B018


# ----------------------------------------------------------------------------- Timer errors
def test_timer_rejects_what_it_cannot_do():
    with pytest.raises(ValueError, match="only a `str` stmt"):
        benchmark.Timer(lambda: None)
    with pytest.raises(NotImplementedError, match="C\\+\\+|CPP"):
        benchmark.Timer("x", language="c++")
    with pytest.raises(NotImplementedError, match="CPP"):
        benchmark.Timer("x", language=benchmark.Language.CPP)
    with pytest.raises(ValueError, match="Invalid language"):
        benchmark.Timer("x", language="fortran")
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        benchmark.Timer("pass", global_setup="#include <x>")
    t = benchmark.Timer("pass")
    with pytest.raises(ValueError, match="`repeats` must be >= 1"):
        t.collect_callgrind(repeats=0)
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.repeat(3, 10)
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.autorange()


def test_timer_error_types_match_torch():
    pytest.importorskip("torch")
    import torch.utils.benchmark as tb
    cases = [lambda b: b.Timer(lambda: None), lambda b: b.Timer("x", language="fortran"),
             lambda b: b.Timer("pass", global_setup="int x;"), lambda b: b.Timer("pass").repeat(),
             lambda b: b.Timer("pass").autorange()]
    for case in cases:
        with pytest.raises(Exception) as te:
            case(tb)
        with pytest.raises(type(te.value)):
            case(benchmark)


def test_statement_error_surfaces():
    with pytest.raises(NameError):
        benchmark.Timer("undefined_name + 1").timeit(3)
    with pytest.raises(SyntaxError):
        benchmark.Timer("x = = 1")


# ----------------------------------------------------------------------------- Timer behaviour
def test_timeit_runs_setup_once_and_stmt_number_times_plus_warmup():
    calls = {"setup": 0, "stmt": 0}

    def bump(key):
        calls[key] += 1

    m = benchmark.Timer("bump('stmt')", setup="bump('setup')", globals={"bump": bump}).timeit(300)
    assert m.number_per_run == 300 and len(m.raw_times) == 1 and m.raw_times[0] > 0
    # warm-up of max(300 // 100, 2) = 3, then the 300 timed; timeit's setup runs per timeit call
    assert calls["stmt"] == 303 and calls["setup"] == 2


def test_globals_are_copied_and_ember_is_provided():
    g = {"x": ember.randn(3)}
    seen = []
    g["seen"] = seen
    benchmark.Timer("seen.append((torch is ember, ember.add(x, 1).shape))", globals=g).timeit(2)
    assert seen[-1] == (True, (3,))
    assert set(g) == {"x", "seen"}  # nothing leaked into the caller's dict


def test_snippets_are_dedented_and_stripped():
    t = benchmark.Timer("""
        a = 1
        b = a + 1
    """, setup="""
        c = 2
    """)
    assert t._task_spec.stmt == "a = 1\nb = a + 1"
    assert t._task_spec.setup == "c = 2"
    t.timeit(2)


@pytest.mark.parametrize("method", ["timeit", "blocked_autorange", "adaptive_autorange"])
def test_num_threads_is_set_while_timing_and_restored(method):
    before = ember.get_num_threads()
    want = 1 if before != 1 else 2
    seen = []
    t = benchmark.Timer("seen.append(ember.get_num_threads())", globals={"seen": seen}, num_threads=want)
    if method == "timeit":
        m = t.timeit(5)
    elif method == "blocked_autorange":
        m = t.blocked_autorange(min_run_time=0.01)
    else:
        m = t.adaptive_autorange(min_run_time=0.001, max_run_time=0.02)
    assert seen and set(seen) == {want}
    assert ember.get_num_threads() == before
    assert m.num_threads == want


def test_threads_restored_after_an_exception():
    before = ember.get_num_threads()
    with pytest.raises(ZeroDivisionError):
        benchmark.Timer("1 / 0", num_threads=1 if before != 1 else 2).timeit(2)
    assert ember.get_num_threads() == before


def test_default_timer_synchronises_cuda_when_a_device_is_present(monkeypatch):
    syncs = []
    monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ember.cuda, "synchronize", lambda device=None: syncs.append(device))
    benchmark.Timer("pass").timeit(10)
    # every timed block (warm-up and measurement) reads the clock twice, each after a sync
    assert len(syncs) == 4
    syncs.clear()
    benchmark.Timer("pass", timer=__import__("time").perf_counter).timeit(10)
    assert syncs == []  # a user-supplied clock is used as given


def test_default_timer_does_not_synchronise_without_cuda(monkeypatch):
    monkeypatch.setattr(ember.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ember.cuda, "synchronize", lambda device=None: pytest.fail("synchronised without cuda"))
    benchmark.Timer("pass").timeit(10)
    assert benchmark.timer() > 0


def test_blocked_autorange_structure_and_callback():
    calls = []
    m = benchmark.Timer("sum(range(50))").blocked_autorange(callback=lambda n, t: calls.append((n, t)),
                                                            min_run_time=0.02)
    assert len(calls) == len(m.raw_times) >= 1
    assert all(n == m.number_per_run for n, _ in calls)
    assert [t for _, t in calls] == m.raw_times
    assert sum(m.raw_times) >= 0.02  # the loop stops only once min_run_time has been spent
    assert m.median > 0 and m.times == [t / m.number_per_run for t in m.raw_times]


def test_adaptive_autorange_stops_on_confidence_or_budget():
    for threshold in (0.5, 1e-9):
        m = benchmark.Timer("sum(range(20))").adaptive_autorange(threshold, min_run_time=0.005, max_run_time=0.05)
        total = sum(m.raw_times)
        confident = len(m.raw_times) > 3 and m.meets_confidence(threshold)
        assert (confident and total >= 0.005) or total > 0.05


_REPR = re.compile(
    r"^<ember\.utils\.benchmark\.utils\.common\.Measurement object at 0x[0-9a-f]+>\n"
    r"(?P<title>.+)\n(?P<desc>.+)\n"
    r"  Median: (?P<median>[0-9.]+) (?P<unit>s|ms|us|ns)\n"
    r"(  IQR:    [0-9.]+ (?P=unit) \([0-9.]+ to [0-9.]+\)\n)?"
    r"  (?P<n>\d+) measurements, (?P<number>\d+) runs per measurement, 1 thread"
    r"(\n  WARNING: .*\n           .*)?$")


def test_real_ember_matmul_eager_and_compiled():
    """Time a real op both ways; check only the shape of the results."""
    rng = np.random.default_rng()
    x = ember.tensor(rng.standard_normal((32, 32)), dtype=ember.float32)
    y = ember.tensor(rng.standard_normal((32, 32)), dtype=ember.float32)
    compiled = ember.compile(lambda a, b: a @ b)
    np.testing.assert_allclose(compiled(x, y).numpy(), (x @ y).numpy(), rtol=1e-5, atol=1e-5)
    results = []
    for desc, stmt in [("eager", "x @ y"), ("compiled", "f(x, y)")]:
        m = benchmark.Timer(stmt, globals={"x": x, "y": y, "f": compiled}, label="matmul",
                            sub_label="32x32", description=desc).blocked_autorange(min_run_time=0.05)
        assert len(m.raw_times) >= 1 and m.number_per_run >= 1
        assert all(t > 0 for t in m.raw_times) and m.median > 0
        assert sum(m.raw_times) >= 0.05
        if len(m.raw_times) > 1:
            parsed = _REPR.match(repr(m))
            assert parsed, repr(m)
            assert parsed["title"] == "matmul: 32x32" and parsed["desc"] == desc
            assert int(parsed["n"]) == len(m.raw_times) and int(parsed["number"]) == m.number_per_run
            unit, scale = benchmark.select_unit(m.median)
            assert parsed["unit"] == unit and float(parsed["median"]) == pytest.approx(m.median / scale, abs=0.006)
        results.append(m)
    table = str(benchmark.Compare(results))
    lines = table.splitlines()
    assert lines[0].startswith("[") and " matmul " in lines[0]
    assert "eager" in lines[1] and "compiled" in lines[1]
    assert lines[2].startswith("1 threads: ")
    assert lines[3].lstrip().startswith("32x32")
    assert re.match(r"Times are in (nano|micro|milli)?seconds \((ns|us|ms|s)\)\.", lines[-1])


# ----------------------------------------------------------------------------- Measurement (no torch)
def test_measurement_statistics_and_fields():
    rng = random.Random()
    for _ in range(20):
        n = rng.randint(1, 30)
        raw = _draw_times(rng, n)
        number = rng.choice([1, 10, 1000])
        m = ecommon.Measurement(number, list(raw), ecommon.TaskSpec("a + b", "pass", label="L", sub_label="s",
                                                                    description="d", env="E", num_threads=3))
        per = np.array(raw) / number
        assert m.times == pytest.approx(list(per))
        assert m.median == pytest.approx(np.median(per), rel=1e-12)
        assert m.mean == pytest.approx(per.mean(), rel=1e-12)
        assert m.iqr == pytest.approx(np.percentile(per, 75) - np.percentile(per, 25), rel=1e-9, abs=1e-18)
        assert 1 <= m.significant_figures <= 4
        assert m.has_warnings == (not m.meets_confidence(0.1))
        assert (m.stmt, m.label, m.sub_label, m.description, m.env, m.num_threads) == ("a + b", "L", "s", "d", "E", 3)
        assert m.title == "L: s" and m.as_row_name == "s"
    with pytest.raises(AttributeError):
        m.not_a_field  # noqa: B018


def test_measurement_pickles_and_merges():
    spec_a = ecommon.TaskSpec("a", "pass", description="1")
    spec_b = ecommon.TaskSpec("b", "pass", description="1")
    ms = [ecommon.Measurement(10, [1e-5, 2e-5], spec_a, metadata={"k": 1}),
          ecommon.Measurement(4, [8e-6], spec_b),
          ecommon.Measurement(100, [3e-4], spec_a)]
    back = pickle.loads(pickle.dumps(ms[0]))
    assert back == ms[0] and back.median == ms[0].median and back.metadata == {"k": 1}
    merged = ecommon.Measurement.merge(ms)
    assert [m.task_spec for m in merged] == [spec_a, spec_b]
    assert merged[0].number_per_run == 1 and merged[0].raw_times == pytest.approx([1e-6, 2e-6, 3e-6])
    assert merged[1].raw_times == pytest.approx([2e-6]) and merged[0].metadata is None


def test_helpers():
    assert benchmark.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert benchmark.select_unit(2.5e-7) == ("ns", 1e-9)
    assert benchmark.select_unit(3e-5) == ("us", 1e-6)
    assert benchmark.select_unit(0.02) == ("ms", 1e-3)
    assert benchmark.select_unit(12.0) == ("s", 1)
    assert benchmark.unit_to_english("us") == "microsecond"
    assert benchmark.trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    with pytest.raises(AssertionError):
        benchmark.trim_sigfig(3.1, 1.5)
    before = ember.get_num_threads()
    with benchmark.set_torch_threads(1):
        assert ember.get_num_threads() == 1
    assert ember.get_num_threads() == before


def test_compare_rejects_non_measurements():
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        benchmark.Compare([1.0])


def test_compare_renders_where_torch_would_crash():
    """Deviation: a missing description (PyTorch: TypeError from len(None)) is an empty
    column heading, and a missing env among named ones prints as "(None)"."""
    spec = dict(stmt="f()", setup="pass", label="L")
    ms = [ecommon.Measurement(1, [1e-5, 1.1e-5], ecommon.TaskSpec(**spec, sub_label="a")),
          ecommon.Measurement(1, [2e-5, 2.1e-5], ecommon.TaskSpec(**spec, sub_label="b", env="gpu"))]
    lines = str(benchmark.Compare(ms)).splitlines()
    assert "(None)" in lines[3] and "(gpu)" in lines[4]


# ----------------------------------------------------------------------------- vs torch: repr
_SPECS = [
    dict(stmt="x @ y", setup="pass"),
    dict(stmt="x @ y", setup="x = 1", sub_label="fp32"),
    dict(stmt="y = x + 1\nz = y * 2", setup="pass", sub_label="two"),
    dict(stmt="y = x + 1\nz = y * 2", setup="a = 1\nb = 2", description="multi"),
    dict(stmt="f(x)", setup="pass", label="MyOp", sub_label="s", description="n=4", num_threads=4, env="A"),
    dict(stmt="f(x)", setup="", label="MyOp", num_threads=1),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 40), number=st.sampled_from([1, 7, 100, 10000]), spec=st.sampled_from(_SPECS),
       exponent=st.floats(-9.5, 1.5), spread=st.sampled_from([0.0, 0.001, 0.05, 0.12, 0.3, 2.0]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_measurement_repr_and_stats_match_torch(n, number, spec, exponent, spread, seed):
    rng = random.Random(seed)
    raw = [10 ** exponent * (1 + spread * rng.random()) for _ in range(n)]
    e, t = _pair(raw, number, **spec)
    assert _body(e) == _body(t)
    assert repr(e).startswith("<ember.utils.benchmark.utils.common.Measurement object at 0x")
    assert e.median == t.median and e.iqr == t.iqr and e.mean == pytest.approx(t.mean, rel=1e-14)
    assert e.significant_figures == t.significant_figures
    assert e.has_warnings == t.has_warnings and e.times == t.times
    assert e.meets_confidence(0.02) == t.meets_confidence(0.02)
    assert (e.title, e.env, e.as_row_name) == (t.title, t.env, t.as_row_name)
    assert e.task_spec.summarize() == t.task_spec.summarize()


def test_repr_units_and_single_measurement_match_torch():
    for raw in ([5e-10] * 3, [1e-9], [999e-9, 1.001e-6, 1e-6, 1e-6], [4.2e-3], [1.5, 1.6, 40.0, 1.55, 1.7],
                [2e-6, 2e-6], [1e-3 * (1 - 1e-9)] * 4):
        e, t = _pair(raw, 1)
        assert _body(e) == _body(t)


@settings(max_examples=200, deadline=None)
@given(x=st.floats(1e-6, 1e7), n=st.integers(1, 4))
def test_select_unit_and_trim_sigfig_match_torch(x, n):
    torch = pytest.importorskip("torch")
    from torch.utils.benchmark.utils import common as tcommon
    del torch
    assert benchmark.select_unit(x * 1e-9) == tcommon.select_unit(x * 1e-9)
    assert benchmark.trim_sigfig(x, n) == tcommon.trim_sigfig(x, n)


# ----------------------------------------------------------------------------- vs torch: Compare
def _build_both(rng, n_labels, threads, envs, descriptions, n_rows, replicates, hole_rate, base_spread):
    """Matching lists of ember and torch Measurements over a grid of labels, thread counts,
    envs, rows and columns, with some cells missing and some tasks given several replicates."""
    ems, tms = [], []
    for li in range(n_labels):
        label = None if li == 0 and n_labels > 2 else f"Label {li}"
        for th in threads:
            for env in envs:
                for r in range(n_rows):
                    sub = rng.choice([f"row{r}", f"[{r * 7}, {r + 3}]"]) if r else "first row"
                    base = 10 ** rng.uniform(-7.5, -2.5)
                    for d in descriptions:
                        if rng.random() < hole_rate and not (r == 0 and d == descriptions[0]):
                            continue
                        cell = base * rng.uniform(0.3, 8)
                        for _ in range(rng.randint(1, replicates)):
                            raw = _draw_times(rng, rng.randint(1, 12), base=cell, spread=rng.choice(base_spread))
                            spec = dict(stmt=f"op{r}(x)", setup="pass", label=label, sub_label=sub,
                                        description=d, env=env, num_threads=th)
                            number = rng.choice([1, 10, 100])
                            e, t = _pair(raw, number, **spec)
                            ems.append(e)
                            tms.append(t)
    return ems, tms


def _compare_both(ems, tms, trim=False, colorize=None, highlight=False):
    from torch.utils.benchmark import Compare as TCompare
    ec, tc = benchmark.Compare(ems), TCompare(tms)
    for c in (ec, tc):
        if trim:
            c.trim_significant_figures()
        if colorize is not None:
            c.colorize(rowwise=colorize)
        if highlight:
            c.highlight_warnings()
    return str(ec), str(tc)


@pytest.mark.parametrize("trim", [False, True])
@pytest.mark.parametrize("colorize", [None, False, True])
@pytest.mark.parametrize("highlight", [False, True])
def test_compare_matches_torch_on_a_fixed_grid(trim, colorize, highlight):
    pytest.importorskip("torch")
    rng = random.Random(1234)
    ems, tms = _build_both(rng, n_labels=3, threads=[1, 4], envs=["master", "my-branch"],
                           descriptions=["n=1", "n=64", "n=1024"], n_rows=3, replicates=3, hole_rate=0.2,
                           base_spread=[0.01, 0.2, 0.5])
    mine, theirs = _compare_both(ems, tms, trim, colorize, highlight)
    assert mine == theirs
    if colorize is not None:
        assert "\033[92m" in mine
    if highlight:
        assert "(! XX%)" in mine


def test_compare_single_table_layout_matches_torch_exactly():
    pytest.importorskip("torch")
    spec = dict(stmt="x + y", setup="pass", label="add")
    cells = {("small", "fp32"): [1.2e-6, 1.3e-6, 1.25e-6, 1.21e-6], ("small", "fp64"): [2.5e-6, 2.4e-6],
             ("big", "fp32"): [3.1e-4, 3.3e-4, 3.2e-4], ("big", "fp64"): [6.0e-4, 6.6e-4, 9.9e-4, 6.1e-4]}
    ems, tms = [], []
    for (sub, desc), raw in cells.items():
        e, t = _pair(raw, 1, **spec, sub_label=sub, description=desc)
        ems.append(e)
        tms.append(t)
    for opts in [dict(), dict(trim=True), dict(colorize=False), dict(colorize=True, highlight=True, trim=True)]:
        mine, theirs = _compare_both(ems, tms, **opts)
        assert mine == theirs, (opts, mine, theirs)
    assert _compare_both(ems, tms)[0].endswith("Times are in microseconds (us).\n")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), n_labels=st.integers(1, 3), threads=st.sampled_from([[1], [1, 2], [4, 1]]),
       envs=st.sampled_from([[None], ["a"], ["env-A", "B"]]), n_desc=st.integers(1, 4), n_rows=st.integers(1, 4),
       trim=st.booleans(), colorize=st.sampled_from([None, False, True]), highlight=st.booleans())
def test_compare_matches_torch_random(seed, n_labels, threads, envs, n_desc, n_rows, trim, colorize, highlight):
    pytest.importorskip("torch")
    rng = random.Random(seed)
    descriptions = [f"d{i}" * (i + 1) for i in range(n_desc)]
    ems, tms = _build_both(rng, n_labels, threads, envs, descriptions, n_rows, replicates=2, hole_rate=0.25,
                           base_spread=[0.0, 0.02, 0.3])
    mine, theirs = _compare_both(ems, tms, trim, colorize, highlight)
    assert mine == theirs


def test_compare_extend_and_print_match_torch(capsys):
    pytest.importorskip("torch")
    from torch.utils.benchmark import Compare as TCompare
    rng = random.Random(7)
    ems, tms = _build_both(rng, 2, [1], ["e"], ["a", "b"], 2, 1, 0.0, [0.05])
    ec, tc = benchmark.Compare(ems[:2]), TCompare(tms[:2])
    ec.extend_results(ems[2:])
    tc.extend_results(tms[2:])
    ec.print()
    mine = capsys.readouterr().out
    tc.print()
    assert mine == capsys.readouterr().out
