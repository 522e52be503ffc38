"""Each ``ember.compile(module)`` wrapper keeps its own frame state.

The wrappers all called one ``_call_module`` function, and the state the frame hook keeps per code
object (automatic-dynamic sizes, unspecialised numbers, the ``*_then_compile`` stances' first
call) was shared: a model compiled after another whose batch size had changed started dynamic.
"""
import gc
import weakref

import numpy as np

import ember
import ember.nn as nn
from ember.dynamo import convert_frame


def _graph_inputs_symbolic(gm):
    return bool(gm.meta.get("dynamic"))


def _compile_recording(mod):
    seen = []

    def backend(gm, example_inputs):
        seen.append(_graph_inputs_symbolic(gm))
        return gm.forward
    return ember.compile(mod, backend=backend), seen


def test_second_model_starts_static_after_first_became_dynamic():
    a, seen_a = _compile_recording(nn.Linear(4, 3))
    b, seen_b = _compile_recording(nn.Linear(4, 3))
    a(ember.randn(2, 4))
    a(ember.randn(5, 4))        # a recompiles with a symbolic batch
    assert seen_a == [False, True]
    x = ember.randn(2, 4)
    np.testing.assert_allclose(b(x).detach().numpy(), b._orig_mod(x).detach().numpy(), rtol=1e-6)
    assert seen_b == [False]     # before: b's first graph was already dynamic


def test_each_wrapper_has_its_own_code():
    cms = [ember.compile(nn.Linear(3, 3)) for _ in range(3)]
    for cm in cms:
        cm(ember.randn(2, 3))
    caches = [c for code, c in list(convert_frame._caches.items())
              if any(e.owner is not None for e in c.entries) and code.co_name == "_call_module"]
    mine = [c for c in caches if any(cm.__dict__["_ember_call"] is not None for cm in cms)]
    assert len({c.code for c in mine}) >= 3
    assert all(len(c.entries) == 1 for c in mine[-3:])


def test_same_wrapper_still_goes_dynamic():
    cm, seen = _compile_recording(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    for n in (2, 3, 4):
        x = ember.randn(n, 4)
        np.testing.assert_allclose(cm(x).detach().numpy(), cm._orig_mod(x).detach().numpy(), rtol=1e-6)
    assert seen == [False, True]


def test_dropped_wrapper_frees_its_model_and_entries():
    # the process-wide cache held every entry's owner (and through its guards and graph the
    # model): a sweep compiling a model per trial kept them all alive
    refs = []
    for _ in range(3):
        m = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        cm = ember.compile(m)
        cm(ember.randn(4, 64))
        refs.append(weakref.ref(m))
        code = cm.__dict__["_ember_call"].__wrapped__.__code__ if hasattr(cm.__dict__["_ember_call"], "__wrapped__") else None
        del m, cm
    gc.collect()
    assert all(r() is None for r in refs)
    assert code is None or code not in convert_frame._caches


def test_dropped_compiled_function_drops_its_entries_only():
    w = ember.randn(8, 8)

    def f(x):
        return (x @ w).relu()

    keep = ember.compile(f)
    drop = ember.compile(f)
    x = ember.randn(3, 8)
    keep(x)
    drop(x)
    cache = convert_frame._caches[f.__code__]
    assert len(cache.entries) == 2
    del drop
    gc.collect()
    assert len(cache.entries) == 1 and cache.entries[0].owner is keep._ember_compiler
    np.testing.assert_allclose(keep(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert convert_frame.counters["recompiles"] >= 0 and len(cache.entries) == 1
