"""Run a custom op's Python functions with dynamo's frame hook off.

A custom op is opaque to ``ember.compile`` by definition. Inside a captured graph that
holds by construction (the node is never traced into), but a call that runs eagerly --
after a graph break, or a compiled graph that fell back to eager -- runs in a thread whose
frame hook is on, and the hook would capture the implementation's frames as new frames to
compile (numpy calls: one graph break after another). So the implementation, the fake
impl, ``setup_context`` and the backward run as ``ember.compiler.disable`` runs a function.
make_fx and aot do not use the hook, so their traces of the fake impl and of the backward
are unaffected. Without dynamo imported there is no hook and nothing to do.
"""
from __future__ import annotations

import sys
from typing import Any, Callable


def call_opaque(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    ef = sys.modules.get("ember.dynamo.eval_frame")
    if ef is None:
        return fn(*args, **kwargs)
    prev = ef.set_eval_frame(None)
    try:
        return fn(*args, **kwargs)
    finally:
        ef.set_eval_frame(prev)
