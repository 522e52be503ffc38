"""ember.dynamo: capture Python frames into FX graphs (ARCHITECTURE.md §6).

Pieces: the C frame hook (``ember._C._eval_frame``), the glue
(``eval_frame.py``), the per-code cache and compile driver
(``convert_frame.py``), the symbolic bytecode interpreter
(``symbolic_convert.py``) over variable trackers (``variables/``), the graph
being built (``output_graph.py``), guards (``guards.py``, sources in
``source.py``), resume functions for graph breaks (``resume.py``), example
values (``example_value.py``), backends (``backends.py``) and logging
(``logs.py``).

Design decisions worth knowing before changing anything:

* **The hook returns a callable, not a code object.** The callback gets
  ``(code, func, *argument_slots)`` and returns None (run the frame
  normally) or ``fn``; C calls ``fn(func, *argument_slots)`` and finishes the
  original frame with a tiny stub code object (see eval_frame.c), so no
  CPython-internal frame creation is needed on 3.11/3.12/3.13. ``fn`` is a
  generated Python function (``OutputGraph.compile``): read the graph inputs
  through their sources, run the backend's callable with the hook off,
  replay side effects, rebuild the return value -- or, at a graph break, run
  the breaking instruction and call the resume function.
* **Graph breaks** re-trace the frame and stop before the failing top-level
  instruction (a call, ``TO_BOOL`` or a tensor-conditioned jump). The resume
  function is the original bytecode plus a prefix (``resume.py``) and is an
  ordinary function of the user's file, captured by the hook when called.
  It is always built from the *original* code (a break in a resume function
  maps back), so a loop breaking in every iteration has one resume function
  whose entries later iterations reuse. Its arguments are the stack (a loop's
  iterator as ``iter(remaining items)``, an open grad-mode block's exit as a
  ``GradModeExit``, NULLs re-pushed) and the live locals; cells (the frame's
  own and its free variables) are its closure. In the resume trace arguments
  are wrapped lazily (unread ones get no guard), iterators guard only the
  items taken, and floats/ints are ``UnspecFloatVariable`` (a 0-d graph input in
  tensor arithmetic, guarded by value only when Python reads it). The grad
  mode after a graph is the traced one (``OutputGraph.final_grad_mode``).
  A breaking call covered by an exception-table entry (``try``/``with``)
  runs in a *trampoline* (the original code entered at that call, handler
  live; ``resume.trampoline_code``). Code in ``try`` blocks is traced; if a
  graph over such code raises at run time the compiled code re-runs the frame
  eagerly from its start (same RNG state; refused if the graph mutates in
  place). Writing a shared cell after a break is not modelled (eager).
* **Unsupported means eager, never wrong.** Every failure raises
  ``Unsupported``; the frame runs eagerly and the guards collected up to the
  failure become a cache entry meaning "run eagerly" (no re-trace). Internal
  bugs are caught the same way and counted in ``counters['internal_errors']``.
* **Guards are installed when a value is first wrapped** (``variables/builder``),
  not when used: more recompiles than strictly needed, never a missing one.
  Tensors: type, dtype, device, shape, strides, requires_grad; constants by
  value; modules/functions/classes by identity; containers by type, length
  and keys (an outside list's length and items only once the trace reads it:
  one that is only appended to is guarded by type, ``OutsideListVariable``);
  grad mode and default dtype always. A graph that writes to an
  input also guards how its tensor inputs share memory (``memory_sharing``).
* **Numbers that change are not specialised again** (automatic dynamic for
  int/float arguments, ``CodeCache.unspec_scalars``): after a recompile caused
  by a new value the argument is an ``UnspecFloatVariable`` (a 0-d graph input
  where it meets a floating tensor, guarded only where its value is read: a
  branch, a size); with ``dynamic=True`` from the first call.
* **Example values are fake tensors** (``example_value.py``,
  ``config.use_fake_tensors = True``): ops run their meta functions only, and
  a data-dependent op raises ``DataDependentOutputError``. Setting the knob to
  False traces on stride-exact private copies of the inputs instead (ops run
  for real under a mode that refuses data-dependent ops; the RNG state is
  restored after tracing) -- the fallback used before every op had a meta.
* **Dynamic shapes** (ShapeEnv symbols in the fake example values): with
  ``dynamic=True`` every dim of every tensor input (parameters excepted), with
  ``mark_dynamic(t, d)`` the marked dims, and with ``dynamic=None`` (automatic
  dynamic) the dims whose size changed when an entry's guard failed
  (``CodeCache.auto_dynamic``, logged under ``recompiles``) become symbols;
  ``dynamic=False`` specialises all but marked dims. A C-contiguous input's
  strides follow from its sizes (a contiguity guard replaces the stride guard);
  any other layout with non-negative strides (a stepped slice, ``idx[:, -k:]``, a
  transpose) gets symbolic strides too, read off ``.stride()`` by the guards and
  duck-shared with equal sizes (``strided_dynamic_tensor_match``), also when only
  its strides changed between calls (``CodeCache.auto_strides``); a graph that
  returns a view of such an input is traced again with it static
  (``OutputGraph._check_strided_outputs``). Sizes stay symbolic in Python arithmetic (``ConstantVariable``
  holding a SymInt); passed to an op they become ``sym_size``/``operator``
  nodes of the graph (``OutputGraph._sym_node``); decisions on them record
  ShapeEnv guards, which become guards over the inputs' sizes (sources agree
  for duck-sized symbols, no symbol is 0 or 1, each relation holds -- see
  ``GuardSet.shape_env_guards``). A size leaving the graph as a Python value
  (returned, formatted, a dict key, a builtin call) is specialised with
  ``int()`` (a guard). Backends see ``gm.meta["dynamic"]``; the AOT backends
  compile such a graph once per input shape (AOT's own shape guards would go
  unchecked otherwise). A new shape that violates the guards recompiles (up to
  ``config.recompile_limit``, then eager with one warning).
* ember's own code, the stdlib and site-packages are never captured as
  frames (skip mark in co_extra after one look), except code passed to
  ``ember.compile`` explicitly (``convert_frame.force``). ember functions are
  graph nodes (``EmberFunctionVariable``); ``ember.nn`` module forwards and
  their private helpers are inlined.
"""
from . import config, logs, stdlib_polyfills  # noqa: F401 - registers the standard library's stand-ins
from .backends import list_backends, lookup as lookup_backend, register_backend
from .convert_frame import counters, fallback_reasons, reset
from .eval_frame import OptimizeContext, disable
from .exc import BackendCompilerFailed, FullGraphError, RecompileLimitExceeded, Unsupported, graph_break


def optimize(backend="eager", *, fullgraph=False, dynamic=None, recompile_limit=None, guard_filter_fn=None):
    """A context/decorator that compiles frames with ``backend`` (a name or a callable)."""
    from .convert_frame import Compiler
    return OptimizeContext(Compiler(lookup_backend(backend), fullgraph=fullgraph, dynamic=dynamic,
                                    name=backend if isinstance(backend, str) else None,
                                    recompile_limit=recompile_limit, guard_filter_fn=guard_filter_fn))


_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None,
            name=None, disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """``ember.compile``: see ``ember/compiler.py`` for the user-facing documentation."""
    if backend is None:
        from .backends import get_default_backend
        backend = get_default_backend()
    if model is None:
        def deco(fn):
            if fn is None:
                raise RuntimeError("Model can't be None")
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, name=name, disable=disable, recompile_limit=recompile_limit,
                           isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec)
        return deco
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if shapes_spec is not None:
        raise NotImplementedError("ember.compile(shapes_spec=...) is not supported: mark dims with "
                                  "ember.dynamo.mark_dynamic / mark_static, or pass dynamic=True")
    if recompile_limit is not None and (not isinstance(recompile_limit, int) or recompile_limit < 0):
        raise ValueError(f"recompile_limit must be a non-negative int or None, got {recompile_limit!r}")
    if disable:
        return model
    options = dict(options) if options else {}
    guard_filter_fn = options.pop("guard_filter_fn", None)
    if options.pop("use_aoti", False):
        raise NotImplementedError("ember.compile(options={'use_aoti': True}): ember has no AOTInductor packaging")
    from ..compiler import is_exporting
    if is_exporting():
        import warnings
        warnings.warn("ember.compile is ignored when called inside ember.export region", stacklevel=2)
        return model
    fn = lookup_backend(backend)
    if backend == "inductor":
        if options:
            from ..inductor.config import checked_options
            fn = _with_inductor_options(fn, checked_options(options))
    elif isinstance(backend, str):
        if options or mode not in (None, "default"):
            logs.get("graph_breaks").warning("ember.compile: backend %r ignores mode=%r options=%r",
                                             backend, mode, options or None)
    elif options or mode not in (None, "default"):
        # a user's backend gets them as keyword arguments, as torch passes them
        import functools
        kwargs = {}
        if mode not in (None, "default"):
            kwargs["mode"] = mode
        if options:
            kwargs["options"] = options
        fn = functools.wraps(fn)(functools.partial(fn, **kwargs))
    from .eval_frame import user_level
    return optimize(fn, fullgraph=fullgraph, dynamic=dynamic, recompile_limit=recompile_limit,
                    guard_filter_fn=guard_filter_fn)(user_level(model))


def _with_inductor_options(backend_fn, options: dict):
    """The inductor backend compiling under ``ember.inductor.config`` patched with ``options``
    (``ember.compile(options={...})``): set while the graph is compiled and on every call of the
    compiled function (the AOT wrapper compiles the training graphs at the first call, and a
    recompile for new strides happens inside a call)."""
    from ..inductor.config import patch

    def compiled_with_options(gm, example_inputs):
        with patch(options):
            inner = backend_fn(gm, example_inputs)

        def run(*args):
            with patch(options):
                return inner(*args)
        return run
    compiled_with_options.__name__ = getattr(backend_fn, "__name__", "inductor")
    return compiled_with_options


def explain(fn):
    """``explain(fn)(*args)``: compile with a recording backend and report graphs and fallbacks."""
    from ._explain import explain as _explain
    return _explain(fn)


def mark_dynamic(t, index):
    """Make dim(s) ``index`` of tensor ``t`` symbolic whenever ``t`` is a graph input.

    The mark lives on the tensor (``t._ember_dynamic_dims``). A size of 0 or 1, a tensor
    with a negative stride, or a decision the program takes on the size (an ``int()``, a
    shape guard like ``Eq(s0, 5)``) still specialises it: the guards stay exact."""
    dims = [index] if isinstance(index, int) else list(index)
    nd = t.ndim
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(f"mark_dynamic: dim {d} out of range for a {nd}-d tensor")
    cur = set(getattr(t, "_ember_dynamic_dims", ()))
    cur.update(d % nd for d in dims)
    t._ember_dynamic_dims = frozenset(cur)
    static = getattr(t, "_ember_static_dims", None)
    if static:          # the later mark wins
        t._ember_static_dims = frozenset(static - cur)
    return t


def mark_static(t, dim=None):
    """Keep dim ``dim`` of tensor ``t`` (all dims when ``dim`` is None; an int or a list of
    ints) static whenever ``t`` is a graph input: automatic dynamic shapes never make it
    symbolic -- a call with another size recompiles with that size as a constant instead -- and
    neither does ``dynamic=True``. Useful where a size selects a different kernel or a fixed
    buffer layout. The mark lives on the tensor (``t._ember_static_dims``) and undoes a
    ``mark_dynamic`` of the same dim (the later mark wins).

    An ``nn.Module`` is accepted and left as it is: ember always treats modules read by a
    compiled frame as static (guarded by identity, attributes specialised), which is what
    ``mark_static(module)`` asks of PyTorch."""
    from ..nn import Module
    from ..tensor import Tensor
    if isinstance(t, Module) or (isinstance(t, type) and issubclass(t, Module)):
        return t
    if not isinstance(t, Tensor):
        raise TypeError(f"mark_static: argument 't' must be a Tensor or an nn.Module, got {type(t).__name__}")
    nd = t.ndim
    if dim is None:
        dims = list(range(nd))
    elif isinstance(dim, int):
        dims = [dim]
    elif isinstance(dim, (list, tuple)) and all(isinstance(d, int) for d in dim):
        dims = list(dim)
    else:
        raise TypeError(f"mark_static: argument 'dim' must be None, an int or a list of ints, got {dim!r}")
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(f"mark_static: dim {d} out of range for a {nd}-d tensor")
    marked = {d % nd for d in dims}
    t._ember_static_dims = frozenset(set(getattr(t, "_ember_static_dims", ())) | marked)
    dyn = getattr(t, "_ember_dynamic_dims", None)
    if dyn:
        t._ember_dynamic_dims = frozenset(dyn - marked)
    return t


def mark_static_address(t, guard=True):
    """Accepted as a no-op (``t`` is checked to be a tensor). In PyTorch it tells CUDA graphs
    that the tensor's storage address never changes, so the graph may read it in place rather
    than copy it into a static buffer. ember's CPU backends launch no CUDA graphs (the compiled
    code reads every input through its pointer on each call), so there is nothing to pin; the
    ``guard`` flag (guard on the address) is accordingly without effect too."""
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"mark_static_address: argument 't' must be a Tensor, got {type(t).__name__}")
    if not isinstance(guard, bool):
        raise TypeError(f"mark_static_address: argument 'guard' must be a bool, got {type(guard).__name__}")
    return t


__all__ = ["compile", "optimize", "reset", "disable", "explain", "config", "logs", "counters",
           "fallback_reasons", "list_backends", "register_backend", "Unsupported", "FullGraphError",
           "RecompileLimitExceeded", "BackendCompilerFailed", "mark_dynamic", "mark_static", "mark_static_address",
           "graph_break"]
