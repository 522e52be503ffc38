"""``ember.compiler``: user-level controls of the compiler (mirrors ``torch.compiler``).

* ``reset()``: forget all compiled code (cache entries, skip marks, counters);
* ``disable(fn)``: run ``fn`` eagerly even when called from compiled code (a
  graph break at its call);
* ``list_backends()``: backend names ``ember.compile(backend=...)`` accepts;
* ``is_compiling()``: True while dynamo traces the calling code, False when it runs
  (lets library code pick a graph-friendly formulation, as ``torch.compiler.is_compiling``);
* ``set_stance(stance, force_backend=...)``: how compiled functions behave for a while
  (force eager, never recompile, fail on recompile, eager first call...): see
  ``ember/dynamo/stance.py``;
* ``assume_constant_result(fn)``: calls of ``fn`` are made while tracing, on constant
  arguments, and their result is baked into the compiled code (no guard: the caller vouches
  that it does not change), as ``torch.compiler.assume_constant_result``;
* ``allow_in_graph(fn)`` / ``disallow_in_graph(fn)``: a call of ``fn`` becomes one graph node
  (its body is not traced by dynamo; aot traces through it) / always breaks the graph: see
  ``ember/dynamo/variables/allowed.py``;
* ``get_default_backend()`` / ``set_default_backend(backend)``: what ``ember.compile`` uses
  without ``backend=``;
* ``is_exporting()``: True while ``ember.export`` traces (stricter than ``is_compiling``);
* ``substitute_in_graph(original)(traceable)``: dynamo traces ``traceable`` where code calls
  ``original`` (a C function it cannot trace), see ``ember/dynamo/polyfill.py``;
* ``nested_compile_region(fn)``: mark a repeated block (see its docstring: ember inlines it);
* ``wrap_numpy(fn)``: a numpy-array function as a tensor function;
* guard filters for ``ember.compile(options={"guard_filter_fn": ...})``:
  ``skip_guard_on_inbuilt_nn_modules_unsafe``, ``skip_guard_on_all_nn_modules_unsafe``,
  ``keep_tensor_guards_unsafe``, ``skip_guard_on_globals_unsafe``, ``skip_all_guards_unsafe``,
  ``keep_portable_guards_unsafe`` -- each takes the list of ``GuardFilterEntry`` objects
  (``ember/dynamo/guards.py``) and returns one bool per entry (False drops the guard). Unsafe as
  in torch: a dropped guard lets compiled code run on inputs it was not traced for.

* ``compile(...)``: ``ember.compile``;
* ``config``: cross-cutting knobs (``job_id``, ``dynamic_sources``, aliases of dynamo's knobs):
  ``ember/_compiler_config.py``;
* ``save_cache_artifacts()`` / ``load_cache_artifacts(blob)`` and ``CacheInfo``: the "mega-cache"
  -- the aot / FX-graph / kernel cache entries this process used, as one blob another process
  loads into its empty cache so its first compile hits (``ember/_dynamo/mega_cache.py``);
* ``set_enable_guard_collectives(enabled)``: see its docstring;
* ``NestedCompileRegionOptions``: the ``options`` of ``nested_compile_region``.

Not provided: ``load_compiled_function`` (torch's serialized precompiled functions -- ember has
no format to save a compiled function's guards and code in, so the name is absent rather than a
function that cannot work).

``ember.compile`` itself (``ember/dynamo/__init__.py``) takes torch's arguments: ``options``
are knobs of ``ember.inductor.config`` (an unknown name or a value of the wrong type is a
RuntimeError, as in torch), set while that function's graphs compile and run; ``mode`` and
``options`` together are refused; ``recompile_limit`` bounds this function's recompiles (with
``fullgraph=True`` one more raises ``FailOnRecompileLimitHit``); ``isolate_recompiles`` is
accepted -- every ``ember.compile`` call already keeps its own entries; ``shapes_spec`` raises
NotImplementedError; inside ``ember.export`` a call is ignored with a warning (as torch).
"""
import dataclasses as _dataclasses
import functools as _functools
import sys as _sys
from typing import Any as _Any, Callable as _Callable, Optional as _Optional

from . import _compiler_config as config
from .dynamo import compile, disable, list_backends
from .dynamo import reset as _reset_dynamo
from .dynamo.backends import get_default_backend, set_default_backend
from .dynamo.exc import FailOnRecompileLimitHit
from .dynamo.polyfill import substitute_in_graph
from .dynamo.stance import set_stance
from .dynamo.variables.allowed import allow_in_graph, disallow_in_graph

__all__ = ["compile", "config", "save_cache_artifacts", "load_cache_artifacts", "CacheInfo",
           "set_enable_guard_collectives", "NestedCompileRegionOptions", "reset", "disable", "list_backends", "is_compiling", "is_dynamo_compiling", "set_stance",
           "assume_constant_result", "allow_in_graph", "disallow_in_graph", "get_default_backend",
           "set_default_backend", "is_exporting", "substitute_in_graph", "nested_compile_region", "wrap_numpy",
           "cudagraph_mark_step_begin", "skip_guard_on_inbuilt_nn_modules_unsafe",
           "skip_guard_on_all_nn_modules_unsafe", "keep_tensor_guards_unsafe", "skip_guard_on_globals_unsafe",
           "skip_all_guards_unsafe", "keep_portable_guards_unsafe", "FailOnRecompileLimitHit"]

_EXPORT_DEPTH = 0       # > 0 while ember.export.export runs (ember/export/_trace.py)
_sys.modules[__name__ + ".config"] = config      # ``import ember.compiler.config`` works too


def reset() -> None:
    """Forget all compiled code, counters and compile hooks (as ``torch.compiler.reset``: a fresh
    process's compiler state; the disk caches are kept)."""
    from .dynamo.callback import callback_handler
    _reset_dynamo()
    callback_handler.clear()


def save_cache_artifacts():
    """``(bytes, CacheInfo)`` bundling the compiled artifacts of this process (aot, FX-graph and
    kernel cache entries it wrote or hit), or None when it compiled nothing cacheable."""
    from ._dynamo.mega_cache import save_cache_artifacts as _save
    return _save()


def load_cache_artifacts(serialized_artifacts: bytes):
    """Install a ``save_cache_artifacts`` blob into this process's caches (``$EMBER_CACHE_DIR``)
    so its compiles of the same programs hit; returns a ``CacheInfo``, or None (a warning logged)
    when the blob is not valid."""
    from ._dynamo.mega_cache import load_cache_artifacts as _load
    return _load(serialized_artifacts)


def __getattr__(name):
    if name == "CacheInfo":
        from ._dynamo.mega_cache import CacheInfo
        return CacheInfo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_guard_collectives = [False]


def set_enable_guard_collectives(enabled: bool) -> bool:
    """torch: every rank issues a collective during guard evaluation so that all ranks agree on
    recompiling (SPMD programs with compiler collectives). Returns the previous setting.

    ember's guards never issue collectives: in one process (no process group, or a group of one
    rank) agreement is trivial, so enabling is accepted there; with several ranks it raises
    NotImplementedError rather than letting ranks silently diverge."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_enable_guard_collectives: argument 'enabled' must be a bool, "
                        f"got {type(enabled).__name__}")
    if enabled:
        dist = _sys.modules.get("ember.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            raise NotImplementedError("ember.compiler.set_enable_guard_collectives(True): guard evaluation "
                                      "with collectives across ranks is not supported")
    prev, _guard_collectives[0] = _guard_collectives[0], enabled
    return prev


set_enable_guard_collectives._ember_forbidden_in_graph = True


@_dataclasses.dataclass
class NestedCompileRegionOptions:
    """``nested_compile_region(options=...)`` (torch's ``NestedCompileRegionOptions``): compilers,
    partitioner and decompositions for the region's own compile. ember inlines nested regions
    into the enclosing graph, which is compiled as a whole, so only the defaults (all None) are
    accepted."""
    fw_compiler: _Optional[_Callable] = None
    bw_compiler: _Optional[_Callable] = None
    partitioner: _Any = None
    decompositions: _Optional[dict] = None


def is_compiling() -> bool:
    """False at run time; dynamo folds a call of it to True while tracing."""
    return False


is_compiling._ember_is_compiling = True


is_dynamo_compiling = is_compiling


def assume_constant_result(fn):
    """Mark ``fn`` so that compiled code calls it once, while tracing, and uses the result as a
    constant. Its arguments must be constants there (numbers, strings, shapes of static
    tensors); a call with a tensor argument breaks the graph. Called normally, it just runs."""
    if not callable(fn):
        raise TypeError(f"assume_constant_result expects a callable, got {type(fn).__name__}")
    fn._ember_assume_constant = True
    return fn


def is_exporting() -> bool:
    """True while ``ember.export.export`` captures the program (dynamo folds the call to the value
    it has during the trace), False otherwise -- also under plain ``ember.compile``."""
    return _EXPORT_DEPTH > 0


is_exporting._ember_is_compiling = True
is_exporting._ember_traced_value = is_exporting


def nested_compile_region(fn=None, *, options=None, max_reuse_entries: int = 8, reuse_hash_fn=None):
    """Mark ``fn`` as a region repeated in a model (a transformer layer's body), as torch's
    ``nested_compile_region``; usable as ``@nested_compile_region`` or with arguments.

    Semantics are a plain call, eager or compiled. torch compiles such a region once and reuses
    the compiled subgraph at each call site (less compile time); ember inlines the region at
    every call site into the enclosing graph (same results; the compile time is that of the
    inlined graph -- ember's warm-cache and fusion work on the whole graph)."""
    if options is not None:
        if not isinstance(options, NestedCompileRegionOptions):
            raise TypeError(f"nested_compile_region: argument 'options' must be a NestedCompileRegionOptions, "
                            f"got {type(options).__name__}")
        custom = [f.name for f in _dataclasses.fields(options) if getattr(options, f.name) is not None]
        if custom:
            raise NotImplementedError(f"nested_compile_region(options=...): {', '.join(custom)} not supported: "
                                      f"ember inlines the region into the enclosing graph and compiles them together")
    if not isinstance(max_reuse_entries, int) or max_reuse_entries < 1:
        raise ValueError(f"max_reuse_entries must be a positive int, got {max_reuse_entries!r}")
    if reuse_hash_fn is not None and not callable(reuse_hash_fn):
        raise TypeError(f"reuse_hash_fn must be callable, got {type(reuse_hash_fn).__name__}")

    def mark(f):
        if not callable(f):
            raise TypeError(f"nested_compile_region expects a callable, got {type(f).__name__}")
        return f
    return mark if fn is None else mark(fn)


def wrap_numpy(fn):
    """Turn ``fn`` from numpy arrays to numpy arrays into a function from tensors to tensors:
    tensor arguments (anywhere in nested lists/tuples/dicts) are passed as ``t.numpy()`` and
    arrays in the result come back as tensors (``ember.as_tensor``), as ``torch.compiler.wrap_numpy``.
    A tensor that requires grad is refused by ``.numpy()`` (call ``.detach()``), as in torch. Under
    ``ember.compile`` the numpy calls run eagerly (a graph break around them)."""
    import numpy as np
    from .utils._pytree import tree_map_only
    from .tensor import Tensor

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args, kwargs = tree_map_only(Tensor, lambda t: t.numpy(), (args, kwargs))
        out = fn(*args, **kwargs)
        from . import as_tensor
        return tree_map_only(np.ndarray, as_tensor, out)
    return wrapper


def cudagraph_mark_step_begin():
    """Mark the start of a training/inference iteration for CUDA-graph trees. ember does not
    record CUDA graphs (``mode="reduce-overhead"`` compiles without them), so there is no
    iteration state to reset: the call does nothing."""
    return None


# ---------------------------------------------------------------------- guard filters
def skip_guard_on_inbuilt_nn_modules_unsafe(guard_entries):
    """Drop the guards on ember's own nn modules (``nn.Linear``...) and everything read through
    them (their parameters' tensor checks included), keeping the rest."""
    return [not (e.nn_module is not None and (e.nn_module.__module__ or "").startswith("ember.nn."))
            for e in guard_entries]


def skip_guard_on_all_nn_modules_unsafe(guard_entries):
    """Drop the guards on every nn module, user-defined or ember's, and what is read through them."""
    return [e.nn_module is None for e in guard_entries]


def keep_tensor_guards_unsafe(guard_entries, keep_parameters: bool = False):
    """Keep only the tensor guards (dtype, device, shape, strides, requires_grad), and of those
    on module parameters only when ``keep_parameters``."""
    return [e.guard_type == "TENSOR_MATCH" and (keep_parameters or not e.is_parameter) for e in guard_entries]


def skip_guard_on_globals_unsafe(guard_entries):
    """Drop the guards on global (and builtin) names."""
    return [not e.is_global for e in guard_entries]


def skip_all_guards_unsafe(guard_entries):
    """Drop every guard: the first compiled entry serves every later call."""
    return [False] * len(guard_entries)


_PORTABLE = {"TENSOR_MATCH", "SHAPE_ENV", "GLOBAL_STATE", "DEFAULT_DTYPE", "NO_TENSOR_ALIASING",
             "EQUALS_MATCH", "TYPE_MATCH", "LENGTH_CHECK", "DICT_KEYS_MATCH"}


def keep_portable_guards_unsafe(guard_entries):
    """Keep the guards that check values, not object identities: tensor metadata and sizes, the
    global state (grad mode, autocast, default dtype), constants, types and lengths."""
    return [e.guard_type in _PORTABLE for e in guard_entries]
