"""ember.profiler beyond profile/record_function: the execution-trace observer (torch's JSON
layout), ITT annotations, the step tracker, optimizer step hooks and torch.profiler's other
names -- compared with PyTorch 2.13 where torch has them."""
from __future__ import annotations

import gzip
import importlib
import json
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng()
LIBS = ["ember", "torch"]


def _lib(name):
    return importlib.import_module(name)


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _trace(name, path, program):
    T = _lib(name)
    run = program(T)                      # inputs made before the trace starts
    et = T.profiler.ExecutionTraceObserver().register_callback(str(path))
    assert et.is_registered and not et.is_running()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        et.start()
        assert et.is_running()
        run()
        et.stop()
        assert not et.is_running()
        et.unregister_callback()
    assert not et.is_registered and et.get_output_file_path() == str(path)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _mm_relu_sum(T):
    x, w = T.tensor(_XA), T.tensor(_WA)
    return lambda: T.mm(x, w).relu().sum()


_XA, _WA = _arr(2, 3), _arr(3, 4)


def _top_level(doc):
    return [n for n in doc["nodes"] if n["ctrl_deps"] == 2 and not n["name"].startswith("[")]


def test_execution_trace_layout_matches_torch(tmp_path):
    got = _trace("ember", tmp_path / "e.json", _mm_relu_sum)
    want = _trace("torch", tmp_path / "t.json", _mm_relu_sum)
    assert set(got) == set(want) and got["schema"] == want["schema"]
    assert got["finish_ts"] >= got["start_ts"]
    names = [n["name"] for n in got["nodes"]]
    assert names[0] == "[pytorch|profiler|execution_trace|thread]"
    assert names[-1] == "[pytorch|profiler|execution_trace|process]"
    for g_node in got["nodes"]:
        assert set(g_node) == set(want["nodes"][0])
        assert [a["name"] for a in g_node["attrs"]] == [a["name"] for a in want["nodes"][0]["attrs"]]
        assert [a["type"] for a in g_node["attrs"]] == [a["type"] for a in want["nodes"][0]["attrs"]]
        for io in ("inputs", "outputs"):
            assert set(g_node[io]) == {"values", "shapes", "types", "strides"}
    g_top, w_top = _top_level(got), _top_level(want)
    assert [n["name"] for n in g_top] == [n["name"] for n in w_top] == ["aten::mm", "aten::relu", "aten::sum"]
    g_mm, w_mm = g_top[0], w_top[0]
    for io in ("inputs", "outputs"):
        for key in ("shapes", "types", "strides"):
            assert g_mm[io][key] == w_mm[io][key], (io, key)
        # [tensor id, storage id, offset, numel, itemsize, device]: all but the ids equal torch's
        assert [v[2:] for v in g_mm[io]["values"]] == [v[2:] for v in w_mm[io]["values"]]
    assert dict((a["name"], a["value"]) for a in g_mm["attrs"])["op_schema"].startswith("aten::mm(Tensor self")
    # data flow: relu reads the tensor mm wrote, sum reads relu's
    for doc_top in (g_top, w_top):
        assert doc_top[1]["inputs"]["values"][0][0] == doc_top[0]["outputs"]["values"][0][0]
        assert doc_top[2]["inputs"]["values"][0][0] == doc_top[1]["outputs"]["values"][0][0]


def test_execution_trace_nesting_views_and_gzip(tmp_path):
    def program(T):
        x = T.tensor(_arr(4, 4), requires_grad=True)

        def run():
            v = x[1:]
            (v * 2).sum().backward()
        return run

    doc = _trace("ember", tmp_path / "e.json.gz", program)
    ids = {n["id"] for n in doc["nodes"]}
    for n in doc["nodes"]:
        assert n["ctrl_deps"] in ids                       # every node hangs under a recorded one
    assert len(ids) == len(doc["nodes"])
    ops = [n for n in doc["nodes"] if not n["name"].startswith("[")]
    sl = next(n for n in ops if n["name"] == "aten::slice")
    x_val, v_val = sl["inputs"]["values"][0], sl["outputs"]["values"][0]
    assert x_val[1] == v_val[1]                             # a view shares its base's storage id
    assert v_val[2] == 4 and v_val[3] == 12 and v_val[4] == 4 and v_val[5] == "cpu"
    assert any(n["name"] == "aten::mul" for n in ops)


def test_profile_drives_the_observer(tmp_path):
    path = tmp_path / "p.json"
    et = ember.profiler.ExecutionTraceObserver().register_callback(str(path))
    with ember.profiler.profile(execution_trace_observer=et):
        ember.tensor(_arr(3)).exp()
    assert not et.is_registered                             # written on exit
    doc = json.loads(path.read_text())
    assert [n["name"] for n in _top_level(doc)] == ["aten::exp"]
    et2 = ember.profiler.ExecutionTraceObserver()
    et2.start()                                             # not registered: nothing happens
    assert not et2.is_running() and et2.get_output_file_path() is None


@pytest.mark.parametrize("name", LIBS)
def test_itt_annotations_never_break_code(name):
    itt = _lib(name).profiler.itt
    if name == "ember":
        assert itt.is_available() is False
    assert itt.range_push("step") is None
    assert itt.mark("here") is None
    assert itt.range_pop() is None
    with itt.range("epoch {}", 3):
        pass
    assert set(itt.__all__) == {"is_available", "range_push", "range_pop", "mark", "range"}


def test_itt_checks_its_argument():
    with pytest.raises(TypeError, match="msg must be a str"):
        ember.profiler.itt.range_push(3)


def _tracker_sequence(name):
    K = _lib(name).profiler.KinetoStepTracker
    base = K.current_step()
    out = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        K.init_step_count("A_test")
        K.init_step_count("B_test")
        out.append(K.increment_step("A_test") - base)
        out.append(K.increment_step("B_test") - base)      # B catches up: no new global step
        out.append(K.increment_step("B_test") - base)
        K._step_dict["A_test"] += 2                         # A jumps ahead by more than one step
        out.append(K.increment_step("A_test") - base)
        out.append(K.current_step() - base)
        out.append(K.erase_step_count("A_test"))
        out.append(K.erase_step_count("A_test"))
        K.erase_step_count("B_test")
    out.append(sum("increased more than 1" in str(x.message) for x in w))
    return out


def test_step_tracker_matches_torch():
    assert _tracker_sequence("ember") == _tracker_sequence("torch") == [1, 1, 2, 4, 4, True, False, 1]


@pytest.mark.parametrize("name", LIBS)
def test_optimizer_step_post_hook_from_profiler(name):
    T = _lib(name)
    seen = []
    lin = T.nn.Linear(3, 2)
    opt = T.optim.SGD(lin.parameters(), lr=0.1)
    handle = T.profiler.register_optimizer_step_post_hook(lambda o, args, kwargs: seen.append(o is opt))
    try:
        lin(T.tensor(_arr(4, 3))).sum().backward()
        opt.step()
    finally:
        handle.remove()
    opt.step()
    assert seen == [True]


def test_profiler_module_names_and_activities():
    P = ember.profiler
    assert P.supported_activities() == {P.ProfilerActivity.CPU} == {
        P.ProfilerActivity[a.name] for a in torch.profiler.supported_activities()}
    assert P.kineto_available() is False
    assert [m.name for m in P.DeviceType] == list(torch.profiler.DeviceType.__members__)
    from ember.profiler.profiler import ExecutionTraceObserver, profile, schedule, tensorboard_trace_handler
    assert profile is P.profile and schedule is P.schedule and ExecutionTraceObserver is P.ExecutionTraceObserver
    assert tensorboard_trace_handler is P.tensorboard_trace_handler
    missing = {n for n in set(dir(torch.profiler)) - set(dir(P))
               if not n.startswith("_") and n not in {"Any", "Optimizer", "TypeVarTuple", "Unpack", "is_fbcode"}}
    assert missing <= {"RecordScope"}, missing
