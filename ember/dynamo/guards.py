"""Guards: the assumptions a compiled entry was traced under, as one Python function.

Each guard is a boolean expression over sources (``source.py``). A cache entry
owns one generated function ``__guard(__func, a0, a1, ...)`` that ``and``s
them all, in the order they were installed (so a type check always precedes
attribute reads that rely on it). Any exception inside a guard counts as a
failure. On failure the expressions are re-evaluated one by one, only to name
the failing guard in the ``recompiles`` log.

Guards are installed eagerly, when an outside value is first wrapped: that
over-guards a little (a recompile more) but never misses an assumption.

The checks that dominate (session 34) run in C where ``ember._C._guards`` is
built (ember/_C/guards.c; Python expressions stand in where it is not): a
tensor's check is one ``TensorGuard`` call (type, dtype, device, requires_grad,
and shape/strides read off the numpy array's header), a dict's keys one
``keys_are``, the "no two inputs share memory" check one ``roots_distinct``.
Measured per guard call, in CPU instructions (callgrind; the shared machine
makes wall time useless), for the guard that passes on the hot path:

    program                          guards  session 33  Python fallback  C fast path
    f(a, b) = a * b + 1 (2 tensors)       6       9,257            8,982        6,486
    nn.Sequential(Linear, ReLU, Linear)  41      36,466           35,444       28,684
    compiled AdamW step, 40 params      335     978,260          890,078      463,696

(about 4 instructions a nanosecond here: AdamW ~245 -> ~115 us, the MLP ~9 ->
~7 us, the two-tensor function ~2.3 -> ~1.6 us; a TensorGuard call is ~400
instructions against ~1,700 for the expression. The fallback column is this
module without the extension: ``state[p]`` reads hoisted, the default dtype
read without a call.) What is left is the checks
on Python objects (module hooks, dict types, optimizer options) and the
reads of each source (``.grad``, ``state[p]``), one bytecode sequence each."""
from __future__ import annotations

import bisect
import builtins
import re
import sys

import numpy as _np

from .._C import _load_guards
from .._state import STATE
from ..tensor import Tensor, _data_ptr
from .. import types as _t
from ..runtime import code_cache as _code_cache

# the C tensor check (ember/_C/guards.c), None where it is not built: Python expressions then
_CGUARDS = _load_guards()
_ndarray = _np.ndarray


def _py_keys_are(d, keys) -> bool:
    """``list(d.keys()) == list(keys)`` (what ``_guards.keys_are`` does in C)."""
    return list(d.keys()) == list(keys)


def _py_roots_distinct(*ts) -> bool:
    """No two of ``ts`` share a memory root (what ``_guards.roots_distinct`` does in C)."""
    return len({id(memory_root(t)) for t in ts}) == len(ts)


_keys_are = _CGUARDS.keys_are if _CGUARDS is not None else _py_keys_are
_roots_distinct = _CGUARDS.roots_distinct if _CGUARDS is not None else _py_roots_distinct

_NO_VALUE = object()


class GuardFilterEntry:
    """One guard as a ``guard_filter_fn`` sees it (``ember.compile(options={"guard_filter_fn": f})``,
    torch's ``GuardFilterEntry``): ``name`` is the source expression it checks (``a0`` is the
    first argument, ``a0.fc.weight`` an attribute of it, ``G['x']`` a global, empty for the
    global state), ``guard_type`` what it checks (``TENSOR_MATCH``, ``ID_MATCH``,
    ``TYPE_MATCH``, ``EQUALS_MATCH``, ``LENGTH_CHECK``, ``DICT_KEYS_MATCH``, ``SHAPE_ENV``,
    ``NO_TENSOR_ALIASING``, ``GLOBAL_STATE``, ``DEFAULT_DTYPE``, ``GLOBALS_DICT``,
    ``HASATTR``, ``DICT_CONTAINS``, ``GUARD`` for other checks), ``value`` (with
    ``has_value``) what it compares to, ``is_global`` whether it reads a global or builtin,
    ``orig_guard`` the check's Python expression and reason, ``nn_module`` the class of the
    ``nn.Module`` whose attribute it checks (or that it is), None otherwise, and
    ``is_parameter`` whether it is the tensor check of a ``Parameter``."""

    __slots__ = ("name", "has_value", "value", "guard_type", "derived_guard_types", "is_global",
                 "orig_guard", "nn_module", "is_parameter")

    def __init__(self, name, has_value, value, guard_type, is_global, orig_guard, nn_module, is_parameter):
        self.name, self.has_value, self.value = name, has_value, value
        self.guard_type, self.derived_guard_types, self.is_global = guard_type, (), is_global
        self.orig_guard, self.nn_module, self.is_parameter = orig_guard, nn_module, is_parameter

    def __repr__(self):
        return f"GuardFilterEntry(name={self.name!r}, guard_type={self.guard_type!r}, is_global={self.is_global})"


class GuardSet:
    def __init__(self, func):
        self.exprs: list[str] = []
        self.reasons: list[str] = []
        self._seen: set[str] = set()
        self.globals: dict = {"__cstrides": _cstrides, "__roots_differ": _roots_differ, "__memory_sharing": _memory_sharing,
                              "__keys_are": _keys_are, "__roots_distinct": _roots_distinct,
                              "G": func.__globals__, "B": _builtins_dict(func), "STATE": STATE,
                              "_t": _t, "__builtins__": builtins}
        self._n = 0
        self._ref_names: dict = {}   # id(obj) -> its "oN" name (an optimizer step refers to ~700 objects)
        self.numbers: dict = {}   # source expr -> int/float value guarded equal (automatic dynamic)
        self.meta: list = []      # per expr: (guard_type, name, value) for guard_filter_fn
        self.module_sources: dict = {}   # source expr of each nn.Module read -> its class
        # frame argument index -> the int it was, where it picked a member of a ModuleList /
        # Sequential (``self.experts[e]``): entries for other values are for other modules, which
        # the recompile limit counts apart (convert_frame._same_instances)
        self.selectors: dict = {}
        self.param_sources: set = set()  # source exprs of the Parameters guarded
        self.filter_fn = None     # ember.compile(options={"guard_filter_fn": ...})
        self._tensor_guards: dict = {}   # TensorGuard key -> its global's name (shared by equal checks)
        self.add("__func.__globals__ is G", "the function's globals dict", kind="GLOBALS_DICT", name="G")

    # ------------------------------------------------------------------ building
    def ref(self, obj) -> str:
        """A name under which ``obj`` is visible to the guard function."""
        name = self._ref_names.get(id(obj))     # (alive: ``globals`` holds it)
        if name is not None:
            return name
        self._n += 1
        name = f"o{self._n}"
        self.globals[name] = obj
        self._ref_names[id(obj)] = name
        return name

    def add(self, expr: str, reason: str = "", *, kind: str = None, name: str = None, value=_NO_VALUE):
        """Add the check ``expr``. ``kind``/``name``/``value`` describe it to a
        ``guard_filter_fn`` (a guard type as torch names them, the source expression it checks,
        the value it compares with); left out, they are read off the expression."""
        if expr in self._seen:
            return
        self._seen.add(expr)
        self.exprs.append(expr)
        self.reasons.append(reason or expr)
        self.meta.append((kind, name, value))

    def id_match(self, source, obj):
        self.add(f"{source.expr()} is {self.ref(obj)}", f"{source.expr()} is the same object",
                 kind="ID_MATCH", name=source.expr(), value=obj)

    def type_match(self, source, obj):
        self.add(f"type({source.expr()}) is {self.ref(type(obj))}",
                 f"type({source.expr()}) is {type(obj).__qualname__}", kind="TYPE_MATCH", name=source.expr(),
                 value=type(obj))

    def constant_match(self, source, value):
        e = source.expr()
        if type(value) in (int, float):
            self.numbers[e] = value
        m = dict(kind="EQUALS_MATCH", name=e, value=value)
        if value is None or value is True or value is False or value is Ellipsis:
            self.add(f"{e} is {value!r}", **m)
        elif type(value) is float and (value == 0.0 or value != value or value in (float("inf"), float("-inf"))):
            self.add(f"type({e}) is float and {e}.hex() == {value.hex()!r}", f"{e} == {value!r}", **m)
        elif type(value) in (int, float, str, bytes, complex):
            self.add(f"type({e}) is {type(value).__name__} and {e} == {value!r}", **m)
        else:
            self.add(f"type({e}) is {self.ref(type(value))} and {e} == {self.ref(value)}",
                     f"{e} == {value!r}", **m)

    def len_match(self, source, n):
        self.add(f"len({source.expr()}) == {n}", kind="LENGTH_CHECK", name=source.expr(), value=n)

    def dict_keys_match(self, source, keys):
        e = source.expr()
        # C (guards.c): the keys compared where they lie, no list made (~0.1 us)
        check = f"__keys_are({e}, {self.ref(tuple(keys))})" if _CGUARDS is not None else \
            f"list({e}.keys()) == {self.ref(list(keys))}"
        self.add(check, f"{e} has keys {list(keys)!r}", kind="DICT_KEYS_MATCH", name=e, value=list(keys))

    def _tensor_guard(self, t: Tensor, shape: tuple, strides, rg_attr: str) -> str:
        """The name of a C ``TensorGuard`` (ember/_C/guards.c) checking a tensor like ``t`` (its
        type, dtype, device, ``shape`` -- None for a symbolic size --, ``strides`` -- None for
        C-contiguous -- and requires_grad read as ``rg_attr``); one per distinct check."""
        key = (type(t), t.dtype, t.device, rg_attr, bool(t.requires_grad), shape, strides)
        try:
            name = self._tensor_guards.get(key)
        except TypeError:        # (an unhashable device or dtype: no sharing)
            key, name = None, None
        if name is None:
            g = _CGUARDS.TensorGuard(type(t), t.dtype, t.device, rg_attr, bool(t.requires_grad), shape,
                                     strides, t._data.itemsize)
            self._n += 1
            name = f"o{self._n}"
            self.globals[name] = g
            if key is not None:
                self._tensor_guards[key] = name
        return name

    def tensor_match(self, source, t: Tensor):
        e = source.expr()
        d = t._data
        reason = (f"{e} is a {type(t).__name__}(dtype={t.dtype}, device={t.device}, shape={tuple(d.shape)}, "
                  f"strides={t.stride()}, requires_grad={t.requires_grad})")
        if _CGUARDS is not None and type(d) is _ndarray:
            # one C call (guards.c): ~0.4 us a tensor less than the expression below
            self.add(f"{self._tensor_guard(t, tuple(d.shape), tuple(d.strides), '_requires_grad')}({e})",
                     reason, kind="TENSOR_MATCH", name=e)
        else:
            # the source is evaluated once (``__t``): an optimizer's state tensors sit behind two
            # dict lookups, and a step has a few hundred tensor inputs
            self.add(
                f"type(__t := {e}) is {self.ref(type(t))} and __t.dtype is {self.ref(t.dtype)} and "
                f"((__v := __t.device) is {(dv := self.ref(t.device))} or __v == {dv}) and "
                f"(__d := __t._data).shape == {tuple(d.shape)!r} and "
                f"__d.strides == {tuple(d.strides)!r} and __t._requires_grad is {bool(t.requires_grad)!r}",
                reason, kind="TENSOR_MATCH", name=e)
        if getattr(t, "_is_param", False):
            self.param_sources.add(e)

    def dynamic_tensor_match(self, source, t: Tensor, dyn: set):
        """Like ``tensor_match`` for a C-contiguous input whose dims ``dyn`` are ShapeEnv symbols:
        rank and the static sizes are checked here, contiguity stands in for the strides, and
        the symbolic sizes are checked by the ShapeEnv guards (``shape_env_guards``)."""
        e = source.expr()
        shape = tuple(t._data.shape)
        reason = (f"{e} is a {type(t).__name__}(dtype={t.dtype}, device={t.device}, shape="
                  f"{tuple('*' if i in dyn else n for i, n in enumerate(shape))}, contiguous, "
                  f"requires_grad={t.requires_grad})")
        if _CGUARDS is not None and type(t._data) is _ndarray:
            g = self._tensor_guard(t, tuple(None if i in dyn else n for i, n in enumerate(shape)), None,
                                   "requires_grad")
            self.add(f"{g}({e})", reason, kind="TENSOR_MATCH", name=e)
            return
        static = " and ".join(f"{e}._data.shape[{i}] == {n}" for i, n in enumerate(shape) if i not in dyn)
        self.add(
            f"type({e}) is {self.ref(type(t))} and {e}.dtype is {self.ref(t.dtype)} and "
            f"{e}.device == {self.ref(t.device)} and {e}._data.ndim == {len(shape)} and "
            + (f"{static} and " if static else "") +
            f"{e}._data.strides == __cstrides({e}._data) and {e}.requires_grad is {bool(t.requires_grad)!r}",
            reason, kind="TENSOR_MATCH", name=e)

    def offset_residue_match(self, source, t: Tensor):
        """An input traced with symbolic sizes has memory of its own in the trace, starting at
        its storage offset's residue (``fake_tensor.offset_residue``): later inputs must have
        the same residue, or a dtype view the trace allowed could be misaligned (eager raises)."""
        from ..fx.fake_tensor import offset_residue
        m, r = offset_residue(t)
        if m > 1:
            e = source.expr()
            self.add(f"{e}.storage_offset() % {m} == {r}",
                     f"{e}'s storage offset is {r} modulo {m} elements (dtype views depend on it)",
                     kind="TENSOR_MATCH", name=e)

    def strided_dynamic_tensor_match(self, source, t: Tensor, dyn: set, sym_strides: set):
        """Like ``dynamic_tensor_match`` for an input that is not C-contiguous, traced with
        symbolic strides in ``sym_strides`` (and sizes in ``dyn``): rank, the static sizes and
        the static strides are checked here; the symbols, by the ShapeEnv guards, which read
        them off ``.stride()`` as they read sizes off ``.size()``."""
        e = source.expr()
        d = t._data
        isz = d.itemsize
        shape, strides = tuple(d.shape), tuple(s // isz for s in d.strides)
        reason = (f"{e} is a {type(t).__name__}(dtype={t.dtype}, device={t.device}, shape="
                  f"{tuple('*' if i in dyn else n for i, n in enumerate(shape))}, strides="
                  f"{tuple('*' if i in sym_strides else n for i, n in enumerate(strides))}, "
                  f"requires_grad={t.requires_grad})")
        static = "".join(f" and __d.shape[{i}] == {n}" for i, n in enumerate(shape) if i not in dyn)
        static += "".join(f" and __d.strides[{i}] == {n * isz}" for i, n in enumerate(strides)
                          if i not in sym_strides)
        self.add(
            f"type(__t := {e}) is {self.ref(type(t))} and __t.dtype is {self.ref(t.dtype)} and "
            f"((__v := __t.device) is {(dv := self.ref(t.device))} or __v == {dv}) and "
            f"(__d := __t._data).ndim == {len(shape)}{static} and __t._requires_grad is {bool(t.requires_grad)!r}",
            reason, kind="TENSOR_MATCH", name=e)

    def unaliased_view(self, source, others):
        """A view input given symbolic sizes was traced as memory of its own: it must share no
        memory with the other tensor arguments ``others`` (sources) at the next call either."""
        if others:
            e = source.expr()
            self.add(f"__roots_differ({e}, {', '.join(o.expr() for o in others)})",
                     f"{e} shares no memory with {', '.join(o.expr() for o in others)}",
                     kind="NO_TENSOR_ALIASING", name=e)

    def memory_sharing(self, sources, values):
        """The tensor inputs (``sources``, their trace-time ``values``) share memory at the next
        call exactly as they did when the graph was traced: which of them have one memory root.
        For graphs that write to an input, whose compiled code assumed that sharing."""
        srcs = [s.expr() for s, v in zip(sources, values) if isinstance(v, Tensor)]
        if len(srcs) < 2:
            return
        key = _memory_sharing(*(v for v in values if isinstance(v, Tensor)))
        shared = sorted({k for k in key if key.count(k) > 1})
        what = "; ".join(" and ".join(s for s, k in zip(srcs, key) if k == g) + " share memory"
                         for g in shared) or "no two of them share memory"
        # the common case, none shares: one C call (``roots_distinct``) where the extension is built
        check = f"__roots_distinct({', '.join(srcs)})" if key == tuple(range(len(srcs))) and \
            _CGUARDS is not None else f"__memory_sharing({', '.join(srcs)}) == {key!r}"
        self.add(check,
                 f"tensor inputs share memory as when traced ({what})", kind="NO_TENSOR_ALIASING", name=srcs[0])

    def shape_env_guards(self, env):
        """The ShapeEnv's assumptions as guards over the sources of its symbols: every symbol's
        sources agree (duck sizing), its value is not 0 or 1 (those are specialised), and every
        recorded relation holds for the call's sizes. Added last, after the tensor checks."""
        if env is None or not env.var_to_val:
            return
        import sympy
        first = {}
        for sym, srcs in env.var_to_sources.items():
            if not srcs:
                continue
            # the ShapeEnv names sources "a0.size()[i]"; reading the array's shape is cheaper
            srcs = [x.replace(".size()[", "._data.shape[") for x in srcs]
            first[sym] = srcs[0]
            self.add(f"{srcs[0]} >= 2", f"{srcs[0]} is not specialised to 0/1 (a symbolic size, was "
                                        f"{env.var_to_val[sym]})", kind="SHAPE_ENV", name=srcs[0])
            for other in srcs[1:]:
                self.add(f"{other} == {srcs[0]}", f"{other} == {srcs[0]} (duck-sized: {sym})",
                         kind="SHAPE_ENV", name=other)
        for g in env.guards:
            syms = sorted(g.free_symbols, key=str)
            if any(s not in first for s in syms):
                raise RuntimeError(f"ember.dynamo: shape guard {g} uses a symbol with no source")
            from ..fx.experimental.exact_eval import exact_function
            fn = exact_function(syms, g)     # (lambdify's floats got floor(7/3 + 2/3) wrong)
            name = self.ref(fn)
            args = ", ".join(first[s] for s in syms)
            desc = str(g.xreplace({s: sympy.Symbol(first[s].replace("._data.shape[", ".size()["))
                                   for s in syms}))
            self.add(f"{name}({args})", f"size guard {g}: {desc}", kind="SHAPE_ENV", name=first[syms[0]] if syms else "")

    def global_state(self):
        gs = dict(kind="GLOBAL_STATE", name="")
        self.add(f"STATE.grad_enabled is {bool(STATE.grad_enabled)!r}", "grad mode unchanged", **gs)
        # an ember.autocast region: the trace holds its casts (the dispatcher made them while
        # tracing), so the entry serves calls in the same region state only
        if STATE.autocast is None:
            self.add("STATE.autocast is None", "no autocast region", **gs)
        else:
            self.add(f"STATE.autocast == {self.ref(dict(STATE.autocast))}",
                     f"autocast region {{{', '.join(f'{k}: {v}' for k, v in STATE.autocast.items())}}}", **gs)
        # (read where set_default_dtype keeps it: a function call is ~0.1 us of each call's guard)
        self.add(f"_t._default_float[0] is {self.ref(_t.get_default_dtype())}", "default dtype unchanged",
                 kind="DEFAULT_DTYPE", name="")

    # ------------------------------------------------------------------ compiling
    def compile(self, nargs: int):
        self.shape_env_guards(getattr(self, "shape_env", None))
        if self.filter_fn is not None:
            self._apply_filter()
        params = ", ".join(["__func"] + [f"a{i}" for i in range(nargs)])
        body = _hoisted_body(self.exprs)
        src = (f"def __guard({params}):\n"
               f"    try:\n"
               f"{body}"
               f"        return True\n"
               f"    except Exception:\n"
               f"        return False\n")
        ns = dict(self.globals)
        exec(_code_cache.compile_source(src, "<ember.dynamo guards>"), ns)   # (a warm compile reads it back)
        fn = ns["__guard"]
        fn.source = src
        fn.guard_set = self
        return fn

    def filter_entries(self):
        """The guards as ``GuardFilterEntry`` objects, in order (see ``_apply_filter``)."""
        out = []
        for expr, reason, (kind, name, value) in zip(self.exprs, self.reasons, self.meta):
            if name is None:
                m = _CHAIN.search(expr)
                name = m.group(0) if m else ""
            if kind is None:
                kind = _infer_kind(expr)
            out.append(GuardFilterEntry(name, value is not _NO_VALUE, None if value is _NO_VALUE else value,
                                        kind, self._is_global(name), (expr, reason),
                                        self._module_of(name),
                                        kind == "TENSOR_MATCH" and name in self.param_sources))
        return out

    def _is_global(self, name: str) -> bool:
        """Whether ``name`` reads a global or builtin: of the frame's function (``G[...]``,
        ``B[...]``) or of an inlined function's module (a guard global holding that module's dict)."""
        if name.startswith(("G[", "B[")):
            return True
        m = re.match(r"o\d+(?=\[)", name)
        d = self.globals.get(m.group(0)) if m else None
        if not isinstance(d, dict):
            return False
        mod = sys.modules.get(d.get("__name__", None) if "__builtins__" in d or "__name__" in d else None)
        return d is builtins.__dict__ or (mod is not None and getattr(mod, "__dict__", None) is d)

    def _module_of(self, name: str):
        """The class of the nn.Module at ``name`` or the nearest module above it in its chain."""
        best = None
        for src, cls in self.module_sources.items():
            if (name == src or name.startswith(src + ".") or name.startswith(src + "[")) and \
                    (best is None or len(src) > len(best[0])):
                best = (src, cls)
        return None if best is None else best[1]

    def _apply_filter(self):
        """Keep the guards the user's ``guard_filter_fn`` keeps (torch's contract: it gets the
        list of entries and returns one bool per entry; False drops that guard). Unsafe by
        design -- a dropped guard lets the entry run on inputs it was not traced for."""
        entries = self.filter_entries()
        keep = self.filter_fn(entries)
        keep = list(keep) if keep is not None else None
        if keep is None or len(keep) != len(entries):
            from .._user_errors import UserError
            raise UserError(f"guard_filter_fn must return a list of {len(entries)} bools (one per guard "
                             f"entry), got {keep if keep is None else f'{len(keep)} values'}")
        self.exprs = [e for e, k in zip(self.exprs, keep) if k]
        self.reasons = [r for r, k in zip(self.reasons, keep) if k]
        self.meta = [m for m, k in zip(self.meta, keep) if k]
        self.filter_fn = None        # (applied once: compile may be called again on a fallback)

    def first_failure(self, func, args):
        """The reason of the first failing guard (for the recompiles log)."""
        ns = dict(self.globals)
        ns["__func"] = func
        for i, a in enumerate(args):
            ns[f"a{i}"] = a
        for e, r in zip(self.exprs, self.reasons):
            try:
                ok = eval(e, ns)
            except Exception as ex:  # noqa: BLE001 - a guard that raises has failed
                return f"{r} (raised {type(ex).__name__})"
            if not ok:
                return r
        return "none (all guards pass)"

    def __str__(self):
        return "\n".join(self.reasons)


# ------------------------------------------------------------------ common sources, read once
# An optimizer step's guard checks a few hundred tensors behind the same chains of reads
# (``a0.param_groups[0]['params'][7].grad``, then its ``.device``, its state dict...): written
# as one ``and`` of the expressions, every check re-walked its chain from ``a0`` (56 KB of
# guard, 136 us per call for 40 parameters). The body is a sequence of checks instead, and a
# chain of attribute reads and constant subscripts that several checks share is read once,
# into a local, just before the first check that uses it. A read moved ahead of the check that
# would have short-circuited it can only raise, which fails the guard as that check would have.
# This assumes no check reads a chain on one side of an ``or`` only (none of the checks
# installed here do): such a chain, read early and raising, would fail a guard that should
# pass -- a recompile, never a wrong answer.


# A chain: an argument, the function (``__func``) or a guard global (``G``, ``B``, ``oN``), then
# attribute reads and constant subscripts (a literal, or a guard global: an optimizer's ``state``
# is keyed by its Parameters, ``a0.state[o20]``, read five times a parameter). Found with a regex over the expressions' text (the
# ``ast`` round trip cost 50 ms for an optimizer's 333 checks, a sixth of its warm compile).
_CHAIN = re.compile(r"(?<![\w.'\"])(?:__func|a\d+|[GB]|o\d+)"
                    r"(?:\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\]*'|o\d+)\])+")
_ROOT = re.compile(r"__func|a\d+|[GB]|o\d+")
_STEP = re.compile(r"\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\]*'|o\d+)\]")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_SELF_IS = re.compile(r"(__s\d+) is \1")


def _chains(expr: str):
    """(start, prefixes) of each chain in ``expr`` outside string literals; prefixes[k] is the
    chain up to its k+1-th step. A trailing ``.name(`` is a method call, not a read."""
    los, his = [], []        # string literals' spans, in order (a dict-keys guard has dozens)
    if "'" in expr or '"' in expr:
        for m in _STRING.finditer(expr):
            los.append(m.start())
            his.append(m.end())
    for m in _CHAIN.finditer(expr):
        start, end = m.span()
        k = bisect.bisect_left(los, start) - 1      # the last literal opening before the chain
        if k >= 0 and start < his[k]:
            continue
        root_end = _ROOT.match(expr, start).end()
        ends = [st.end() for st in _STEP.finditer(expr, root_end, end)]
        if end < len(expr) and expr[end] == "(" and expr[ends[-1] - 1] != "]":
            ends.pop()                # ``x.keys(``: the call's receiver is the chain
        if ends:
            yield start, [expr[start:e] for e in ends]


def _hoisted_body(exprs: list) -> str:
    found = [list(_chains(e)) for e in exprs]
    counts: dict = {}
    for chains in found:
        for _, prefixes in chains:
            for p in prefixes:
                counts[p] = counts.get(p, 0) + 1
    names: dict = {}
    lines = []

    def local(prefixes, k):
        """The local holding prefixes[k], assigned (after its own shared prefix) on first use."""
        p = prefixes[k]
        if p not in names:
            j = next((i for i in range(k - 1, -1, -1) if counts[prefixes[i]] > 1), None)
            read = p if j is None else local(prefixes, j) + p[len(prefixes[j]):]
            names[p] = f"__s{len(names)}"
            lines.append(f"        {names[p]} = {read}\n")
        return names[p]

    for e, chains in zip(exprs, found):
        out, pos = [], 0
        for start, prefixes in chains:
            k = next((i for i in range(len(prefixes) - 1, -1, -1) if counts[prefixes[i]] > 1), None)
            if k is None:
                continue
            out.append(e[pos:start])
            out.append(local(prefixes, k))
            pos = start + len(prefixes[k])
        e = "".join(out) + e[pos:]
        if _SELF_IS.fullmatch(e):
            continue   # two spellings of one read (``x is x`` once read): the read above is the check
        lines.append(f"        if not ({e}):\n            return False\n")
    return "".join(lines)


def memory_root(t):
    """The tensor at the end of ``t``'s ``_base`` chain (``t`` itself when it is no view): two
    tensors share memory only if they have the same root."""
    while t._base is not None:
        t = t._base
    return t


def _roots_differ(t, *others):
    r = memory_root(t)
    return all(memory_root(o) is not r for o in others if isinstance(o, Tensor))


def _memory_sharing(*ts):
    """For each tensor, the number of the first of ``ts`` with its memory root: (0, 1, 0) says
    the third shares memory with the first (a view of it, or both views of one tensor). Where
    some share, also where each starts relative to the first of its group (in bytes): a graph
    traced for ``(c, c[:])`` reads its second input as the first's memory, which is wrong for
    ``(b[0:5], b[5:10])``, two views of one tensor too."""
    ids = [id(t) if t._base is None else id(memory_root(t)) for t in ts]
    if len(set(ids)) == len(ids):           # the common case: no two share (one pass, ~0.1 us each)
        return tuple(range(len(ids)))
    first, out = {}, []
    for i in ids:
        out.append(first.setdefault(i, len(out)))
    return tuple(out) + tuple(_data_ptr(t._data) - _data_ptr(ts[g]._data) for t, g in zip(ts, out))


def _cstrides(d):
    """C-contiguous byte strides of array ``d``'s shape (what numpy gives a fresh array)."""
    out, acc = [], d.itemsize
    for n in reversed(d.shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _builtins_dict(func):
    b = func.__globals__.get("__builtins__", builtins)
    return b if isinstance(b, dict) else b.__dict__


def _infer_kind(expr: str) -> str:
    """A torch-style guard type for a check added without one (from the expression's shape)."""
    if expr.startswith("type(") and " is " in expr and " and " not in expr:
        return "TYPE_MATCH"
    if re.fullmatch(r"[\w.\[\]'\"]+ is o\d+", expr) or expr.startswith("id("):
        return "ID_MATCH"
    if expr.startswith("hasattr(") or "getattr_static" in expr or "_static_missing" in expr:
        return "HASATTR"
    if " in " in expr and "__dict__" in expr:
        return "DICT_CONTAINS"
    if expr.startswith("len("):
        return "LENGTH_CHECK"
    if "keys" in expr:
        return "DICT_KEYS_MATCH"
    return "GUARD"
