"""Each ``ember.compile(module)`` wrapper keeps its own frame state.

The wrappers all called one ``_call_module`` function, and the state the frame hook keeps per code
object (automatic-dynamic sizes, unspecialised numbers, the ``*_then_compile`` stances' first
call) was shared: a model compiled after another whose batch size had changed started dynamic.
"""
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
    caches = [c for code, c in convert_frame._caches.items()
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
