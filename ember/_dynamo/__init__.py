"""``ember._dynamo``: the names PyTorch code reaches through ``torch._dynamo`` (``reset()``,
``config.cache_size_limit``, ``explain``, ``mark_dynamic``, ``graph_break()`` ...), so that such
code runs unchanged under ``import ember as torch``. Everything here is ``ember.dynamo``'s own
machinery; ``config`` translates PyTorch's knob names (see ``ember/_dynamo/config.py``),
``eval_frame`` holds ``OptimizedModule`` / ``run`` / ``optimize_assert``, ``decorators`` the
markers (``forbid_in_graph``, ``nonstrict_trace``, ``error_on_graph_break`` ...), ``exc`` the
exceptions."""
from ..compiler import allow_in_graph, assume_constant_result, disallow_in_graph, is_compiling, set_stance
from ..dynamo import (BackendCompilerFailed, FullGraphError, RecompileLimitExceeded, Unsupported, compile,
                      disable, explain, graph_break, list_backends, lookup_backend, mark_dynamic, mark_static,
                      mark_static_address, optimize, register_backend)
from ..dynamo import config as _dcfg
from ..dynamo import reset as _reset_dynamo
from ..dynamo.callback import callback_handler, on_compile_end, on_compile_start
from ..dynamo.polyfill import substitute_in_graph
from . import backends, config, decorators, eval_frame, exc, utils
from .decorators import (dont_skip_tracing, error_on_graph_break, forbid_in_graph, nonstrict_trace,
                         patch_dynamo_config, skip_frame, step_unsupported)
from .eval_frame import (is_dynamo_supported, is_inductor_supported, optimize_assert, reset_code,
                         reset_code_caches, run)

_DEFAULT_INLINE_DEPTH = _dcfg.inline_depth_limit
_recursion_limit = [-1]        # what set_recursion_limit set (-1: unset)


def reset() -> None:
    """Forget all compiled code, counters and the registered compile hooks (``torch._dynamo.reset``:
    as if the process started afresh; disk caches are kept)."""
    _reset_dynamo()
    callback_handler.clear()


def maybe_mark_dynamic(t, index):
    """As ``mark_dynamic``: ember's marks never raise when the program specialises the size
    (a guard keeps the entry exact), which is what the "maybe" asks for."""
    return mark_dynamic(t, index)


def set_recursion_limit(limit: int) -> None:
    """Bound how deep dynamo inlines nested function calls (``ember.dynamo.config.inline_depth_limit``:
    a call deeper than ``limit`` is a graph break there); ``-1`` restores the default. As torch's,
    it does not change ``sys.setrecursionlimit``."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"set_recursion_limit: argument 'limit' must be an int, got {type(limit).__name__}")
    if limit < 1 and limit != -1:
        raise ValueError("recursion limit must be >= 1, or -1 to reset")
    _recursion_limit[0] = limit
    _dcfg.inline_depth_limit = _DEFAULT_INLINE_DEPTH if limit == -1 else limit


def get_recursion_limit() -> int:
    """The limit ``set_recursion_limit`` set, or -1 when none is set."""
    return _recursion_limit[0]


def __getattr__(name):
    if name == "OptimizedModule":      # built on first use (it subclasses ember.nn.Module)
        return eval_frame._optimized_module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["allow_in_graph", "disallow_in_graph", "assume_constant_result", "is_compiling", "set_stance", "compile",
           "disable", "explain", "graph_break", "list_backends", "lookup_backend", "mark_dynamic",
           "maybe_mark_dynamic", "mark_static", "mark_static_address", "optimize", "optimize_assert", "run",
           "register_backend", "reset", "reset_code_caches", "backends", "config", "utils", "exc", "eval_frame", "decorators",
           "Unsupported", "FullGraphError", "RecompileLimitExceeded", "BackendCompilerFailed", "OptimizedModule",
           "is_dynamo_supported", "is_inductor_supported", "set_recursion_limit", "get_recursion_limit",
           "forbid_in_graph", "substitute_in_graph", "nonstrict_trace", "dont_skip_tracing", "error_on_graph_break",
           "patch_dynamo_config", "skip_frame", "step_unsupported", "on_compile_start", "on_compile_end"]
