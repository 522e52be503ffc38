"""ember.dynamo: capture Python frames into FX graphs (ARCHITECTURE.md §6).

Pieces: the C frame hook (``ember._C._eval_frame``), the glue
(``eval_frame.py``), the per-code cache and compile driver
(``convert_frame.py``), the symbolic bytecode interpreter
(``symbolic_convert.py``) over variable trackers (``variables/``), the graph
being built (``output_graph.py``), guards (``guards.py``, sources in
``source.py``), backends (``backends.py``) and logging (``logs.py``).

What cannot be captured runs eagerly, with the reason in the
``graph_breaks`` log: results never differ from eager."""
from . import config, logs
from .backends import list_backends, lookup as lookup_backend, register_backend
from .convert_frame import counters, fallback_reasons, reset
from .eval_frame import OptimizeContext, disable
from .exc import BackendCompilerFailed, FullGraphError, RecompileLimitExceeded, Unsupported


def optimize(backend="eager", *, fullgraph=False, dynamic=None):
    """A context/decorator that compiles frames with ``backend`` (a name or a callable)."""
    from .convert_frame import Compiler
    return OptimizeContext(Compiler(lookup_backend(backend), fullgraph=fullgraph, dynamic=dynamic,
                                    name=backend if isinstance(backend, str) else None))


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """``ember.compile``: see ``ember/compiler.py`` for the user-facing documentation."""
    if model is None:
        def deco(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, disable=disable)
        return deco
    if disable:
        return model
    if mode is not None and mode not in ("default", "reduce-overhead", "max-autotune",
                                         "max-autotune-no-cudagraphs"):
        raise ValueError(f"unknown mode {mode!r}")
    if dynamic:
        import warnings
        warnings.warn("ember.compile(dynamic=True): symbolic shapes are not implemented yet; "
                      "shapes are specialised and a new shape recompiles", stacklevel=2)
    return optimize(backend, fullgraph=fullgraph, dynamic=dynamic)(model)


def explain(fn):
    """``explain(fn)(*args)``: compile with a recording backend and report graphs and fallbacks."""
    from ._explain import explain as _explain
    return _explain(fn)


def mark_dynamic(t, index):
    """Accepted for API compatibility; shapes are static (specialised and guarded) in this version."""
    return t


__all__ = ["compile", "optimize", "reset", "disable", "explain", "config", "logs", "counters",
           "fallback_reasons", "list_backends", "register_backend", "Unsupported", "FullGraphError",
           "RecompileLimitExceeded", "BackendCompilerFailed", "mark_dynamic"]
