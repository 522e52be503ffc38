"""``torch._dynamo.decorators`` names that change how dynamo treats a function or a region:
``forbid_in_graph``, ``nonstrict_trace``, ``patch_dynamo_config`` / ``dont_skip_tracing`` /
``error_on_graph_break`` (context managers and decorators over ``ember.dynamo.config``),
``skip_frame`` / ``step_unsupported`` (markers the tracer acts on)."""
from __future__ import annotations

import functools
import types

from ..dynamo import config as _dcfg
from ..dynamo.exc import skip_frame, step_unsupported  # noqa: F401 - re-exported
from ..dynamo.variables.allowed import allow_wrapper_in_graph, forbid_in_graph  # noqa: F401 - re-exported


def nonstrict_trace(traceable_fn):
    """Mark ``traceable_fn`` so that dynamo does not trace its body: each call is one opaque
    ``call_function`` node of the graph, whose tensor inputs and outputs flow through it (aot
    autograd traces the body, so gradients flow; ``graph_break()`` inside is harmless), as
    ``torch._dynamo.nonstrict_trace``. Arguments must be tensors, (nested) lists/tuples of
    tensors or constants (baked into the graph); results tensors or (nested) tuples/lists of
    tensors. A call with any other argument (an ``nn.Module``, a user object) or result is a
    logged graph break at that call, which then runs eagerly. Returns a new function that calls
    ``traceable_fn``."""
    if not callable(traceable_fn):
        raise AssertionError("nonstrict_trace expects a callable")

    @functools.wraps(traceable_fn)
    def wrapped(*args, **kwargs):
        return traceable_fn(*args, **kwargs)
    return allow_wrapper_in_graph(wrapped)


# torch's _allowed_config_patches, restricted to the knobs ember has (ember.dynamo.config)
_PATCHABLE = {"verbose": None, "capture_scalar_outputs": "capture_scalar_outputs",
              "dont_skip_tracing": "dont_skip_tracing", "error_on_graph_break": "error_on_graph_break"}
_TORCH_ONLY = ("verify_correctness", "rewrite_assert_with_torch_assert", "allow_unspec_int_on_nn_module",
               "skip_torchrec", "nested_graph_breaks")


class DynamoConfigPatchProxy:
    """A context manager and decorator that sets ember.dynamo.config knobs while it is in force
    (what ``patch_dynamo_config`` / ``dont_skip_tracing`` / ``error_on_graph_break`` return).

    Around a call of a compiled function, the knobs apply to everything compiled during it. As a
    decorator, a call of the function from compiled code whose config already matches is traced
    as usual; one that would change it splits the graph at the call, and the function's own
    frame is compiled under the patched knobs. Used as a ``with`` block inside a compiled
    function, the frame falls back to eager (ember does not trace into this manager)."""

    def __init__(self, changes: dict):
        self.changes = dict(changes)
        self._saved = []

    @staticmethod
    def _module(name):
        # error_on_graph_break is ember's own knob (torch keeps it outside its config module)
        if name == "error_on_graph_break":
            return _dcfg
        from . import config as _cfg
        return _cfg

    def __enter__(self):
        saved = {k: getattr(self._module(k), k) for k in self.changes}
        for k, v in self.changes.items():
            setattr(self._module(k), k, v)
        self._saved.append(saved)
        return None

    def __exit__(self, *exc):
        for k, v in self._saved.pop().items():
            setattr(self._module(k), k, v)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"expected a callable to decorate, got {type(fn).__name__}")
        if isinstance(fn, type):
            raise TypeError("cannot decorate a class with a dynamo config patch")
        proxy = self

        @functools.wraps(fn)
        def patched(*args, **kwargs):
            with proxy:
                return fn(*args, **kwargs)
        if isinstance(fn, types.FunctionType):
            # what the tracer compares with ember.dynamo.config (variables/builder.py)
            patched._ember_config_patch = {_PATCHABLE[k] or k: v for k, v in self.changes.items()
                                           if _PATCHABLE[k] is not None}
        return patched


def _safe_constant(v):
    return v is None or type(v) in (bool, int, float, str)


def patch_dynamo_config(arg1=None, arg2=None, **kwargs):
    """Set dynamo config knobs while a block or a function runs: ``patch_dynamo_config("k", v)``,
    ``patch_dynamo_config({"k": v})`` or ``patch_dynamo_config(k=v)`` (as ``torch._dynamo.config.patch``).
    Only the knobs torch allows here and ember has (``verbose``, ``capture_scalar_outputs``,
    ``dont_skip_tracing``, ``error_on_graph_break``); values must be constants."""
    if isinstance(arg1, tuple):
        arg1 = dict(arg1)
    if isinstance(arg1, str):
        changes = {arg1: arg2}
    elif isinstance(arg1, dict):
        if arg2 is not None:
            raise TypeError("patch_dynamo_config: a dict of changes takes no second argument")
        changes = dict(arg1)
    elif arg1 is None:
        if arg2 is not None:
            raise TypeError("patch_dynamo_config: a value without a config name")
        changes = {}
    else:
        raise TypeError(f"patch_dynamo_config: expected a config name, a dict or a tuple of pairs, "
                        f"got {type(arg1).__name__}")
    changes.update(kwargs)
    for k, v in changes.items():
        if k in _TORCH_ONLY:
            raise NotImplementedError(f"patch_dynamo_config: ember's dynamo has no config {k!r}")
        if k not in _PATCHABLE:
            raise ValueError(f"patch_dynamo_config does not support patching config {k}")
        if not _safe_constant(v):
            raise ValueError(f"patch_dynamo_config does not support patching config {k} with "
                             f"non-safe-constant value {v}")
    return DynamoConfigPatchProxy(changes)


def dont_skip_tracing(fn=None):
    """Context manager/decorator: frames of the standard library and site-packages, which ember
    never captures, are captured (compiled) while it is in force; ember's own code stays skipped,
    and code already looked at and skipped stays so."""
    ctx = patch_dynamo_config(dont_skip_tracing=True)
    return ctx(fn) if fn is not None else ctx


def error_on_graph_break(error_on_graph_break: bool):
    """Context manager/decorator: while in force, a graph break in a frame being compiled raises
    (``FullGraphError``, as ``fullgraph=True`` would) instead of splitting the graph; ``False``
    allows breaks again inside an outer ``True``. ``fullgraph=True`` takes precedence. Unlike
    ``fullgraph``, one graph is not guaranteed: a call that switches the setting is a split of
    its own."""
    if not isinstance(error_on_graph_break, bool):
        raise TypeError(f"error_on_graph_break: argument must be a bool, got {type(error_on_graph_break).__name__}")
    return patch_dynamo_config(error_on_graph_break=error_on_graph_break)


for _factory in (patch_dynamo_config, dont_skip_tracing, error_on_graph_break):
    _factory._ember_config_patch_factory = True        # (variables/builder.py)
del _factory

__all__ = ["forbid_in_graph", "nonstrict_trace", "patch_dynamo_config", "dont_skip_tracing",
           "error_on_graph_break", "skip_frame", "step_unsupported", "DynamoConfigPatchProxy"]
