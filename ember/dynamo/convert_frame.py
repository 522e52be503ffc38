"""The callback the frame hook calls: cache lookup, guarded entries, compilation, fallback.

``Compiler(backend, fullgraph)`` is one ``ember.compile`` configuration; its
``__call__(code, func, *argslots)`` is the hook callback (protocol in
``ember/_C/eval_frame.c``). Each code object has one ``CodeCache`` whose
entries belong to a compiler (entries of another backend are not reused).

An entry is (guard function, runtime function or None). None means "these
guards describe a frame we already failed to capture: run it eagerly" -- the
guards collected up to the unsupported instruction are exactly the
assumptions that led there, so the same inputs never re-trace."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import sysconfig
import time
import weakref
import warnings

from .._C import _load_eval_frame
from ..runtime.gc_pause import gc_paused

_eval_frame = _load_eval_frame()
from .._state import DEFAULT_DEVICE_SET as _DEFAULT_DEVICE_SET, STATE as _STATE
from .. import types as _t
from .. import _torch_function as _tf
from ..autograd import forward_ad as _fwd_ad
from . import config, logs
from . import stance as _stance
from . import callback as _callback
from .exc import (AliasedDynamicView, BackendCompilerFailed, FailOnRecompileLimitHit, ForbiddenInGraph,
                  FullGraphError, RecompileError, RecompileLimitExceeded, SkipFrame, Unsupported, UserError)
from .example_value import preserve_rng
from .output_graph import OutputGraph
from .symbolic_convert import run_frame

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_PREFIXES = tuple({p + os.sep for p in (sysconfig.get_paths().get("stdlib"),
                                              sysconfig.get_paths().get("purelib"),
                                              sysconfig.get_paths().get("platlib")) if p} | {_EMBER_DIR})

# Observable counters (tests, explain()).
counters = {"frames": 0, "compiled": 0, "eager_fallback": 0, "skipped": 0, "internal_errors": 0,
            "recompiles": 0, "guard_failures": 0, "graph_breaks": 0}
fallback_reasons: list = []


class CacheEntry:
    """One compiled (or run-eagerly) entry of a code object, owned by the ``Compiler`` that made it.

    The owner is held weakly (``owner_id`` for the lookup's comparison): an entry's guard and
    graph hold the model's parameters and modules, so a strong reference from the process-wide
    cache kept every compiled model alive after its wrapper was dropped (a hyperparameter sweep
    compiling a model per trial grew without bound). When the owner dies, ``_forget_owner``
    removes its entries."""
    __slots__ = ("guard", "fn", "owner_id", "_owner_ref", "info")

    def __init__(self, guard, fn, owner, info):
        self.guard, self.fn, self.info = guard, fn, info
        self.owner_id = id(owner)
        self._owner_ref = weakref.ref(owner)
        owner._note_entry()

    @property
    def owner(self):
        return self._owner_ref()


def _same_instances(entry, args) -> bool:
    """Whether ``args`` are the objects ``entry``'s guards require by identity among the frame's
    own arguments (``a0 is <the module>``): the entries a recompile limit counts."""
    if entry.guard is None:
        return True
    gs = entry.guard.guard_set
    for i, value in gs.selectors.items():     # an int argument that picked a member module
        if i >= len(args) or type(args[i]) is not int or args[i] != value:
            return False
    meta = gs.meta
    for kind, name, value in meta:
        if kind == "ID_MATCH" and type(name) is str and name[:1] == "a" and name[1:].isdigit():
            i = int(name[1:])
            if i >= len(args) or args[i] is not value:
                return False
    return True


def _forget_owner(owner_id):
    """A ``Compiler`` was freed: drop its entries everywhere (run by ``weakref.finalize`` at its
    deallocation, before its id can be reused), and the caches of wrapper codes left empty."""
    from .eval_frame import is_module_call_code
    for code, cache in list(_caches.items()):
        if not any(e.owner_id == owner_id for e in cache.entries):
            continue
        cache.entries = [e for e in cache.entries if e.owner_id != owner_id]
        if cache.hot is not None and cache.hot.owner_id == owner_id:
            cache.hot = None
        if not cache.entries and is_module_call_code(code):
            del _caches[code]           # (a compiled module's own copy of _call_module: unused now)
            _forced.discard(code)


def _noncontiguous_strides(output):
    """Source -> strides of the graph's tensor inputs that are not C-contiguous (automatic
    dynamic compares them with the next call's: ``_note_tensor_size_changes``)."""
    from .guards import _cstrides
    return {s.expr(): tuple(t.stride()) for s, t in zip(output.input_sources, output.input_values)
            if t._data.ndim and t._data.strides != _cstrides(t._data)}


class CodeCache:
    __slots__ = ("entries", "warned", "code", "auto_dynamic", "auto_strides", "hot", "static_views",
                 "unspec_scalars", "unspec_sources", "called_once")

    def __init__(self, code):
        self.code = code
        self.entries: list = []     # in the order they were compiled
        # the entry whose guard passed last, tried first: a compiled optimizer step has an entry
        # for its first call (empty state) that every later call failed first -- 84 us of guard
        # (40 parameters checked) per step of the benchmark's AdamW
        self.hot = None
        self.warned = False
        # automatic dynamic shapes: guard expression of an input -> dims whose size changed
        self.auto_dynamic: dict = {}
        # ... and of non-contiguous inputs whose strides changed (traced with symbolic strides)
        self.auto_strides: set = set()
        # view inputs keep static sizes: set once two inputs were found to share memory with one
        # given symbolic sizes (output_graph.add_tensor_input)
        self.static_views = False
        self.unspec_scalars: set = set()   # argument slots whose int/float value changed (see _note_size_changes)
        self.unspec_sources: set = set()   # outside numbers (source exprs) whose value changed, likewise
        self.called_once = False           # for the *_then_compile stances


_caches: dict = {}
# Codes compiled explicitly (ember.compile(F.relu), a compiled ember.nn module's forward): never file-skipped.
_forced: set = set()


def force(code):
    _forced.add(code)
    _eval_frame.unmark_skip(code)


def reset():
    """Forget every compiled entry (``ember.compiler.reset()``)."""
    for code in list(_caches):
        try:
            _eval_frame.unmark_skip(code)
        except Exception:
            pass
    _caches.clear()
    for k in counters:
        counters[k] = 0
    fallback_reasons.clear()


def _scalar_args(args) -> dict:
    """The int and float argument slots of a call (bools are flags: always specialised)."""
    return {i: a for i, a in enumerate(args) if type(a) in (int, float)}


def _holds_tensors(args) -> bool:
    """Whether a frame's arguments hold a tensor or a module (directly or in a container)."""
    from ..nn.modules.module import Module
    from ..tensor import Tensor
    for a in args:
        items = a.values() if isinstance(a, dict) else a if isinstance(a, (list, tuple)) else (a,)
        if any(isinstance(x, (Tensor, Module)) for x in items):
            return True
    return False


def _skipped_file(code):
    fn = code.co_filename
    if fn.startswith(("<ember", "<frozen")):
        return True
    if fn == "<string>" and code.co_name == "<lambda>" and "_tuple_new" in code.co_names:
        return True      # a namedtuple's __new__ (collections builds it with eval)
    return fn.startswith(_SKIP_PREFIXES)


def _ember_generated(code, func):
    """Code ember generated at run time outside its files: a dataclass's ``__init__`` (exec'd
    from ``<string>`` in the class's module globals), e.g. the print options behind a tensor's
    repr. It is ember's own code, skipped like ember's files."""
    if not code.co_filename.startswith("<"):
        return False
    mod = getattr(func, "__module__", None) or ""
    return mod == "ember" or mod.startswith("ember.")


@contextlib.contextmanager
def _restore_grad_mode():
    """Tracing a ``with no_grad():`` switches the real grad mode; put it back whatever happens."""
    mode, regions, inference = _STATE.grad_enabled, _STATE.autocast, _STATE.inference
    try:
        yield
    finally:
        _STATE.grad_enabled = mode
        _STATE.autocast = regions
        _STATE.inference = inference      # (an inference_mode() block traced: variables/ctx.py)


_autocast_noted = set()
_forward_ad_noted = set()
_tf_mode_noted = set()
_default_device_noted = set()


def _note_forward_ad(code):
    _note_eager(code, "a forward-AD dual level (ember.autograd.forward_ad.dual_level) is active",
                _forward_ad_noted)


def _note_torch_function_mode(code):
    _note_eager(code, "a TorchFunctionMode (ember.overrides) is active", _tf_mode_noted)


def _note_eager(code, reason, noted):
    """A frame runs eagerly for ``reason``: counted every time, logged once per code."""
    counters["eager_fallback"] += 1
    if code not in noted:
        noted.add(code)
        where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        fallback_reasons.append((where, reason))
        logs.get("graph_breaks").info("Running %s eagerly: %s", where, reason)


def _note_autocast(code):
    if code not in _autocast_noted:
        _autocast_noted.add(code)
        logs.get("graph_breaks").info("%s (%s:%s) runs eagerly inside an ember.autocast region",
                                      code.co_name, code.co_filename, code.co_firstlineno)


class Compiler:
    """One ``ember.compile`` configuration; instances are the hook callbacks."""

    def __init__(self, backend, fullgraph=False, dynamic=None, name=None, *, recompile_limit=None,
                 guard_filter_fn=None):
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.name = name or getattr(backend, "__name__", str(backend))
        self.recompile_limit = recompile_limit        # None: config.recompile_limit
        self.guard_filter_fn = guard_filter_fn        # options={"guard_filter_fn": ...}
        self.graphs = []   # (code, info) per compiled entry, for tests and explain()
        self._forced_compilers = {}   # backend -> Compiler, for set_stance(force_backend=...)
        self._finalizer = None        # weakref.finalize dropping this compiler's entries

    def _note_entry(self):
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, _forget_owner, id(self))
            self._finalizer.atexit = False      # (at exit the caches go anyway)

    def __call__(self, code, func, *args):
        stance = _stance.current()
        if stance.stance == "force_eager":
            return None
        if stance.backend is not None:
            # set_stance(force_backend=...): entries of a compiler for that backend, kept apart
            forced = self._forced_compilers.get(stance.backend)
            if forced is None:
                from .backends import lookup
                forced = self._forced_compilers[stance.backend] = Compiler(
                    lookup(stance.backend), self.fullgraph, self.dynamic)
            self = forced
        if _STATE.autocast is not None and not config.compile_under_autocast:
            # an ember.autocast region: its casts are made by the dispatcher, which traces them
            # into the graph (guards.global_state keys the entry to the region); switched off,
            # the frame runs eagerly
            _note_autocast(code)
            return None
        cache = _caches.get(code)
        if cache is None:
            if (_skipped_file(code) or _ember_generated(code, func)) and code not in _forced and not \
                    (config.dont_skip_tracing and not code.co_filename.startswith((_EMBER_DIR, "<"))):
                _eval_frame.mark_skip(code)
                return None
            cache = _caches[code] = CodeCache(code)
        if _fwd_ad._N_ACTIVE[0] and _fwd_ad._is_active():
            # forward AD: tangents ride on the tensors and are made by the eager dispatcher;
            # a compiled graph would drop them, so the frame runs eagerly (logged once per code)
            _note_forward_ad(code)
            return None
        if _tf._ACTIVE[0] and _STATE.tf_modes and not _STATE.tf_off:
            # a TorchFunctionMode must see every call: a compiled graph would bypass it
            _note_torch_function_mode(code)
            return None
        if _DEFAULT_DEVICE_SET[0] and _STATE.default_device is not _t.cpu:
            # factories in the graph would be traced onto the cpu (``with ember.device("meta"):``)
            _note_eager(code, f"the default device is {_STATE.default_device}", _default_device_noted)
            return None
        hot = cache.hot
        me = id(self)
        if hot is not None and hot.owner_id == me and hot.guard(func, *args):
            return hot.fn
        mine = 0
        for e in cache.entries:
            if e.owner_id == me:
                mine += 1
                if e is not hot and e.guard(func, *args):
                    cache.hot = e
                    return e.fn
        if stance.stance != "default":
            return self._compile_under_stance(stance.stance, code, func, args, cache, mine)
        return self._compile(code, func, args, cache, mine)

    def _compile_under_stance(self, stance, code, func, args, cache, mine):
        """A cache miss while ``ember.compiler.set_stance(...)`` is in force (see stance.py)."""
        if stance == "eager_on_recompile":
            return None
        if stance == "fail_on_recompile":
            if not _holds_tensors(args):
                return None      # as PyTorch: only frames holding tensors count
            msg = (f"Detected recompile when ember.compile stance is 'fail_on_recompile'. filename: "
                   f"'{code.co_filename}', function name: '{code.co_name}', line number: {code.co_firstlineno}")
            if mine:
                last = [e for e in cache.entries if e.owner_id == id(self)][-1]
                msg += f"\n    triggered by the following guard failure(s):\n    - " \
                       f"{last.guard.guard_set.first_failure(func, args)}"
            raise RuntimeError(msg)
        # eager_then_compile / aot_eager_then_compile: the first call of the code is not compiled
        if not cache.called_once:
            cache.called_once = True
            if stance == "eager_then_compile":
                return None
            from .backends import lookup
            once = Compiler(lookup("aot_eager"), self.fullgraph, self.dynamic)
            return once._compile(code, func, args, CodeCache(code), 0)
        return self._compile(code, func, args, cache, mine)

    # ------------------------------------------------------------------ compiling
    def _compile(self, code, func, args, cache, mine):
        with gc_paused():
            if _callback.handler.start_callbacks or _callback.handler.end_callbacks:
                # ember._dynamo.on_compile_start/on_compile_end hooks (callback.py)
                with _callback.handler.install_callbacks(code, mine):
                    return self._compile_frame(code, func, args, cache, mine)
            return self._compile_frame(code, func, args, cache, mine)

    def _trace_views_static(self, code, func, args, cache, mine, where, e):
        """Inputs sharing memory were traced as memories of their own (view inputs given symbolic
        sizes) and the graph writes to one of them: trace again with view inputs static (their
        example values then share their bases' storage)."""
        cache.static_views = True
        counters["frames"] -= 1
        logs.get("recompiles").info("%s: %s; tracing again with view inputs static", where, e)
        return self._compile(code, func, args, cache, mine)

    def _compile_frame(self, code, func, args, cache, mine):
        counters["frames"] += 1
        where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        if mine:
            last = [e for e in cache.entries if e.owner_id == id(self)][-1]
            reason = last.guard.guard_set.first_failure(func, args)
            counters["recompiles"] += 1
            logs.get("recompiles").info("Recompiling %s: guard failed: %s", where, reason)
            if config.error_on_recompile:
                raise RecompileError(f"Recompiling function {code.co_name} in {code.co_filename}:"
                                     f"{code.co_firstlineno}\n    triggered by the following guard failure(s):"
                                     f"\n    - {reason}")
            if self.dynamic is None and config.automatic_dynamic_shapes:
                self._note_size_changes(last, func, args, cache, where)
            limit = config.recompile_limit if self.recompile_limit is None else self.recompile_limit
            # the limit counts the entries made for the same objects the frame's arguments are
            # guarded to be (PyTorch's rule): a block's forward called on each of 12 layers (a
            # graph break inside it) compiles once per layer, where counting every entry sent
            # layers 9-12 to eager. The total stays bounded by accumulated_recompile_limit.
            same = sum(1 for e in cache.entries if e.owner_id == id(self) and _same_instances(e, args))
            if same >= limit or mine >= config.accumulated_recompile_limit:
                if same < limit:
                    limit = config.accumulated_recompile_limit
                if config.fail_on_recompile_limit_hit:
                    raise FailOnRecompileLimitHit(f"Hard failure due to fail_on_recompile_limit_hit: {where} hit "
                                                 f"recompile_limit={limit}; last failed guard: {reason}")
                if self.fullgraph and self.recompile_limit is not None:
                    raise FailOnRecompileLimitHit(f"ember.compile: {where} hit recompile_limit={limit} "
                                                 f"with fullgraph=True; last failed guard: {reason}")
                if not cache.warned:
                    cache.warned = True
                    warnings.warn(f"ember.compile: {where} hit the recompile limit "
                                  f"({limit}); last failed guard: {reason}. "
                                  f"It runs eagerly from now on.", RecompileLimitExceeded, stacklevel=2)
                return None
        t0 = time.perf_counter()
        static_views = cache.static_views
        output = OutputGraph(code, func, len(args), self._dynamic_dims_fn(cache), static_views)
        output.guards.filter_fn = self.guard_filter_fn
        output.unspec_scalars = self._unspec_scalars(cache, args)
        output.unspec_sources = cache.unspec_sources if self.dynamic is not False else set()
        try:
            with preserve_rng(), _restore_grad_mode():
                ret = run_frame(output, code, func, args)
            fn, guard, info = output.compile(ret, self.backend, code.co_varnames[:len(args)])
        except AliasedDynamicView as e:
            return self._trace_views_static(code, func, args, cache, mine, where, e)
        except SkipFrame:
            counters["skipped"] += 1
            if not cache.entries:
                _eval_frame.mark_skip(code)
            return None
        except Unsupported as e:
            if e.break_index is None or e.no_break or self.fullgraph or self._error_on_break(e):
                return self._fallback(code, func, args, cache, output, str(e), where,
                                      error=self._error_on_break(e))
            # Graph break: trace again, stopping before the instruction that failed.
            reason = str(e)
            output = OutputGraph(code, func, len(args), self._dynamic_dims_fn(cache), static_views)
            output.guards.filter_fn = self.guard_filter_fn
            output.unspec_scalars = self._unspec_scalars(cache, args)
            output.unspec_sources = cache.unspec_sources if self.dynamic is not False else set()
            try:
                with preserve_rng(), _restore_grad_mode():
                    brk = run_frame(output, code, func, args, break_at=e.break_index, break_reason=reason)
                fn, guard, info = output.compile(brk, self.backend, code.co_varnames[:len(args)])
            except AliasedDynamicView as e2:
                return self._trace_views_static(code, func, args, cache, mine, where, e2)
            except Unsupported as e2:
                return self._fallback(code, func, args, cache, output, str(e2), where,
                                      error=self._error_on_break(e2))
            except (NotImplementedError, BackendCompilerFailed, UserError, ForbiddenInGraph):
                raise
            except Exception as e2:  # noqa: BLE001
                counters["internal_errors"] += 1
                if config.raise_on_unsupported:
                    raise
                import traceback
                return self._fallback(code, func, args, cache, output,
                                      f"internal error {type(e2).__name__}: {e2}\n{traceback.format_exc()}",
                                      where, internal=True)
            if getattr(e, "skip_rest", False):
                # ember._dynamo.step_unsupported(): the rest of the frame runs eagerly
                for rcode in output.resume_codes:
                    _eval_frame.mark_skip(rcode)
            counters["graph_breaks"] += 1
            fallback_reasons.append((where, "graph break: " + reason))
            logs.get("graph_breaks").info("Graph break in %s: %s", where, reason)
        except (NotImplementedError, BackendCompilerFailed, UserError, ForbiddenInGraph):
            raise
        except FullGraphError:
            raise
        except Exception as e:  # a bug in the translator must never break the user's program
            if isinstance(e, FullGraphError):
                raise
            counters["internal_errors"] += 1
            if config.raise_on_unsupported:
                raise
            import traceback
            reason = f"internal error {type(e).__name__}: {e}\n{traceback.format_exc()}"
            return self._fallback(code, func, args, cache, output, reason, where, internal=True)
        info["compile_time"] = time.perf_counter() - t0
        info["input_sizes"] = {s.expr(): tuple(t.shape) for s, t in zip(output.input_sources, output.input_values)}
        info["input_strides"] = _noncontiguous_strides(output)
        info["scalar_args"] = _scalar_args(args)
        info["numbers"] = dict(guard.guard_set.numbers)
        info["guards"] = str(guard.guard_set)
        info["code"] = code
        counters["compiled"] += 1
        cache.entries.append(CacheEntry(guard, fn, self, info))
        cache.hot = cache.entries[-1]
        self.graphs.append(info)
        if logs.get("guards").isEnabledFor(20):
            logs.get("guards").info("Guards for %s:\n%s", where, guard.guard_set)
        if logs.get("bytecode").isEnabledFor(20):
            import dis
            import io
            buf = io.StringIO()
            dis.dis(code, file=buf)
            logs.get("bytecode").info("Bytecode of %s:\n%s\nruns as:\n%s", where, buf.getvalue(), fn.source)
        return fn

    # ------------------------------------------------------------------ dynamic shapes
    def _dynamic_dims_fn(self, cache):
        """Which dims of a tensor input become ShapeEnv symbols: all of them with
        ``dynamic=True`` (parameters and module buffers excepted, as in PyTorch: a causal-mask
        buffer sliced by a symbolic length left its own size symbol in saved tensors that no
        backward input carried), none with ``dynamic=False``, and always those marked by
        ``mark_dynamic`` or found to change between calls (automatic dynamic, ``dynamic=None``
        only)."""
        from ..nn.parameter import Parameter
        from .source import AttrSource, GetItemSource
        mode, auto = self.dynamic, cache.auto_dynamic
        from .. import _compiler_config
        by_name = _compiler_config.dynamic_source_dims if _compiler_config.dynamic_sources else None

        def module_buffer(source):
            return isinstance(source, GetItemSource) and isinstance(source.base, AttrSource) \
                and source.base.attr == "_buffers"

        def dims(source, t):
            d = set(getattr(t, "_ember_dynamic_dims", ()))
            if mode is True and not isinstance(t, Parameter) and not module_buffer(source):
                d.update(range(t.ndim))
            elif mode is None:
                d.update(auto.get(source.expr(), ()))
            if by_name is not None:          # ember.compiler.config.dynamic_sources
                d.update(by_name(source, t.ndim))
            static = getattr(t, "_ember_static_dims", None)    # mark_static: never symbolic
            return d - static if static else d

        def strides(source, t):
            """Symbolic strides for a non-contiguous ``t`` even where no size is: with
            ``dynamic=True``, or once its strides changed between calls (automatic dynamic)."""
            if mode is True:
                return not isinstance(t, Parameter) and not module_buffer(source)
            return mode is None and source.expr() in cache.auto_strides
        dims.strides = strides
        return dims

    def _unspec_scalars(self, cache, args):
        """Argument slots whose int/float arguments are traced as unspecialized numbers
        (``UnspecFloatVariable``: a graph input where they meet a floating tensor, guarded only
        where something reads the value): every one with ``dynamic=True``, those seen to change
        between calls with automatic dynamic, none with ``dynamic=False``."""
        if self.dynamic is True:
            return set(_scalar_args(args))
        return cache.unspec_scalars if self.dynamic is None else set()

    def _note_size_changes(self, entry, func, args, cache, where):
        """Automatic dynamic: the tensor inputs of the failing entry whose sizes differ now (same
        rank) get those dims made symbolic in the recompile; int/float arguments whose value
        differs are traced unspecialized (a learning rate, a step count: before, each new value
        compiled again until the recompile limit sent the function to eager for good)."""
        for i, old in (entry.info.get("scalar_args") or {}).items():
            new = args[i] if i < len(args) else None
            if type(new) is type(old) and new != old and i not in cache.unspec_scalars:
                cache.unspec_scalars.add(i)
                logs.get("recompiles").info("%s: argument %d changed (%r -> %r): tracing it as a number "
                                            "that is not specialised", where, i, old, new)
        numbers = entry.info.get("numbers") or {}
        if numbers:
            ns = dict(entry.guard.guard_set.globals)
            ns["__func"] = func
            for i, a in enumerate(args):
                ns[f"a{i}"] = a
            for expr, old in numbers.items():
                if expr in cache.unspec_sources or re.fullmatch(r"a\d+", expr):
                    continue            # (arguments: unspec_scalars above)
                try:
                    new = eval(expr, ns)
                except Exception:  # noqa: BLE001 - gone or not readable: not a number change
                    continue
                if type(new) is type(old) and new != old:
                    cache.unspec_sources.add(expr)
                    logs.get("recompiles").info("%s: %s changed (%r -> %r): tracing it as a number that is "
                                                "not specialised", where, expr, old, new)
        self._note_tensor_size_changes(entry, func, args, cache, where, params=True)
        # and against this compiler's earlier entries (PyTorch keeps one record of the sizes each
        # input had): an input the last graph did not read, or entries per object (a resume
        # function in a loop over experts, one entry per expert), would otherwise be found
        # changed one entry at a time -- a recompile of every other entry for each. Parameters
        # are compared with the last entry only (other objects' may differ by design).
        for other in cache.entries:
            if other is not entry and other.owner_id == id(self):
                self._note_tensor_size_changes(other, func, args, cache, where, params=False)

    @staticmethod
    def _note_tensor_size_changes(entry, func, args, cache, where, params):
        """The tensor inputs ``entry`` was compiled for whose sizes differ now (same rank): those
        dims go into ``cache.auto_dynamic``."""
        sizes = entry.info.get("input_sizes") or {}
        if not sizes:
            return
        strides = entry.info.get("input_strides") or {}
        ns = dict(entry.guard.guard_set.globals)
        ns["__func"] = func
        for i, a in enumerate(args):
            ns[f"a{i}"] = a
        from ..nn.parameter import Parameter
        from ..tensor import Tensor
        for expr, shape in sizes.items():
            try:
                v = eval(expr, ns)
            except Exception:  # noqa: BLE001 - the input is gone or changed type: not a size change
                continue
            if not isinstance(v, Tensor) or v.ndim != len(shape) or (not params and isinstance(v, Parameter)):
                continue
            changed = {i for i, (a, b) in enumerate(zip(v.shape, shape)) if a != b}
            new = changed - set(cache.auto_dynamic.get(expr, ()))
            if new:
                cache.auto_dynamic.setdefault(expr, set()).update(new)
                logs.get("recompiles").info("%s: size of %s changed in dim(s) %s (%s -> %s): making them "
                                            "dynamic", where, expr, sorted(new), tuple(shape), tuple(v.shape))
            old = strides.get(expr)
            if old is not None and expr not in cache.auto_strides and tuple(v.stride()) != old:
                cache.auto_strides.add(expr)
                logs.get("recompiles").info("%s: strides of %s changed (%s -> %s): making them dynamic",
                                            where, expr, old, tuple(v.stride()))

    @staticmethod
    def _error_on_break(e):
        """``ember._dynamo.error_on_graph_break(True)`` is in force and ``e`` is a graph break the
        user's program makes (not the split ember makes at a call that switches the setting)."""
        return config.error_on_graph_break and not getattr(e, "config_patch_break", False)

    def _fallback(self, code, func, args, cache, output, reason, where, internal=False, error=False):
        counters["eager_fallback"] += 1
        fallback_reasons.append((where, reason))
        if self.fullgraph and not internal:
            raise FullGraphError(f"ember.compile(fullgraph=True): cannot capture {where} as one graph: {reason}")
        if error and not internal:
            raise FullGraphError(f"ember._dynamo.error_on_graph_break(True): graph break in {where}: {reason}")
        logger = logs.get("graph_breaks")
        logger.info("Running %s eagerly: %s", where, reason)
        if internal:
            logs.get("fallback").warning("ember.dynamo internal error in %s, running eagerly: %s", where, reason)
        if config.raise_on_unsupported:
            raise Unsupported(reason)
        try:
            guard = output.guards.compile(len(args))
        except Exception:
            _eval_frame.mark_skip(code)
            return None
        cache.entries.append(CacheEntry(guard, None, self, {
            "reason": reason, "code": code,
            "input_sizes": {s.expr(): tuple(t.shape) for s, t in zip(output.input_sources, output.input_values)},
            "input_strides": _noncontiguous_strides(output)}))
        cache.hot = cache.entries[-1]
        return None
