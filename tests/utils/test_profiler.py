"""ember.profiler: op-level timing (a dispatch mode below autograd), record_function ranges,
compiled-graph calls, schedules, tables and Chrome traces."""
import json

import numpy as np
import pytest

import ember
from ember._state import STATE
from ember.profiler import ProfilerAction, profile, record_function, schedule

RNG = np.random.default_rng()


def _t(*shape, grad=False):
    return ember.tensor(RNG.standard_normal(shape), dtype=ember.float32, requires_grad=grad)


def _counts(prof):
    return {e.key: e.count for e in prof.key_averages()}


def test_ops_ranges_and_self_time():
    a, b = _t(8, 8, grad=True), _t(8, 8)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                y = (a @ b) @ b
            y.sum().backward()
    counts = _counts(prof)
    assert counts["outer"] == 1 and counts["inner"] == 1
    assert counts["ember::mm"] >= 2 + 2        # two forward matmuls, and the backward's
    evs = prof.events()
    outer = next(e for e in evs if e.name == "outer")
    inner = next(e for e in evs if e.name == "inner")
    assert outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns
    for e in evs:
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9
    # everything ran inside "outer": the self times add up to its total
    total_self = sum(e.self_cpu_time_total for e in evs)
    assert total_self == pytest.approx(outer.cpu_time_total, rel=1e-9, abs=1e-3)
    assert STATE.modes == []


def test_table_sorting_shapes_and_errors():
    x = _t(4, 5)
    with profile(record_shapes=True) as prof:
        for n in (3, 4):
            _ = x[:n].exp()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "Self CPU %" in table and "ember::exp" in table and "Self CPU time total" in table
    by_shape = prof.key_averages(group_by_input_shape=True)
    exp_rows = [e for e in by_shape if e.key == "ember::exp"]
    assert sorted(r.input_shapes[0] for r in exp_rows) == [[3, 5], [4, 5]]
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="cuda_memory_usage")
    with pytest.raises(NotImplementedError, match="profile_memory"):
        profile(profile_memory=True)


def test_compiled_graph_calls_are_counted():
    m = ember.nn.Sequential(ember.nn.Linear(6, 7), ember.nn.Tanh())
    cm = ember.compile(m)
    x = _t(3, 6)
    cm(x)
    from ember.aot.runtime import AOTModule
    plain = AOTModule.__call__
    with profile() as prof:
        for _ in range(3):
            cm(x)
    assert _counts(prof).get("ember::compiled_graph") == 3
    assert AOTModule.__call__ is plain      # unpatched once no profiler records


def test_schedule_records_only_active_steps():
    assert [schedule(wait=1, warmup=1, active=2, repeat=1)(i) for i in range(6)] == [
        ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE,
        ProfilerAction.NONE, ProfilerAction.NONE]
    x = _t(5)
    saved = []
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: saved.append(_counts(p))) as prof:
        for step in range(6):
            with record_function(f"step{step}"):
                x.exp()
            prof.step()
    assert len(saved) == 1
    assert {k for k in saved[0] if k.startswith("step")} == {"step2", "step3"}
    assert saved[0]["ember::exp"] == 2
    assert STATE.modes == []


def test_chrome_trace_and_exception_safety(tmp_path):
    x = _t(4)
    with pytest.raises(RuntimeError):
        with profile() as prof:
            x.exp()
            x.reshape(3)               # raises inside the profiled block
    assert STATE.modes == []
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    data = json.loads(open(path).read())
    names = [e["name"] for e in data["traceEvents"]]
    assert "ember::exp" in names and all(e["ph"] == "X" and e["dur"] >= 0 for e in data["traceEvents"])


def test_legacy_autograd_profiler():
    x = _t(3, grad=True)
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("f"):
            (x * 2).sum().backward()
    assert "f" in _counts(prof) and "ember::mul" in _counts(prof)
    with ember.autograd.profiler.profile(enabled=False) as off:
        x.exp()
    assert list(off.key_averages()) == []


def test_record_function_inside_compiled_code_is_traced_through():
    @record_function("helper")
    def helper(x):
        return x * 3

    def f(x):
        with record_function("block"):
            y = x * 2
        with ember.autograd.profiler.record_function("b2"):
            y = y + 1
        return helper(y)

    r = ember.dynamo.explain(f)(_t(3))
    assert r.graph_count == 1 and r.graph_break_count == 0
    x = _t(3)
    np.testing.assert_allclose(ember.compile(f)(x).numpy(), f(x).numpy(), rtol=1e-6)
    with profile() as prof:
        f(x)                                   # eager: the ranges are recorded
    assert {"block", "b2", "helper"} <= set(_counts(prof))


def test_inplace_ops_still_write_while_profiling():
    """The profiler passes ops down below autograd; an in-place variant must keep writing into
    its tensor there (it used to run out of place and leave ``x`` unchanged)."""
    import numpy as np
    x = ember.tensor(np.random.default_rng(3).standard_normal(4).astype(np.float32))
    want = (x.clone() + 1.5) * 3
    v = x[1:3]
    with ember.profiler.profile() as prof:
        x.add_(1.5)
        x.mul_(3)
        v.zero_()
    want[1:3] = 0
    assert ember.equal(x, want)
    names = [e.name for e in prof.events()]
    assert any("add_" in n for n in names) and any("mul_" in n for n in names)
