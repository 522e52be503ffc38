"""Guards: the assumptions a compiled entry was traced under, as one Python function.

Each guard is a boolean expression over sources (``source.py``). A cache entry
owns one generated function ``__guard(__func, a0, a1, ...)`` that ``and``s
them all, in the order they were installed (so a type check always precedes
attribute reads that rely on it). Any exception inside a guard counts as a
failure. On failure the expressions are re-evaluated one by one, only to name
the failing guard in the ``recompiles`` log.

Guards are installed eagerly, when an outside value is first wrapped: that
over-guards a little (a recompile more) but never misses an assumption."""
from __future__ import annotations

import builtins
import re

from .._state import STATE
from ..tensor import Tensor, _data_ptr
from .. import types as _t


class GuardSet:
    def __init__(self, func):
        self.exprs: list[str] = []
        self.reasons: list[str] = []
        self._seen: set[str] = set()
        self.globals: dict = {"__cstrides": _cstrides, "__roots_differ": _roots_differ, "__memory_sharing": _memory_sharing, "G": func.__globals__, "B": _builtins_dict(func), "STATE": STATE,
                              "_t": _t, "__builtins__": builtins}
        self._n = 0
        self.numbers: dict = {}   # source expr -> int/float value guarded equal (automatic dynamic)
        self.add("__func.__globals__ is G", "the function's globals dict")

    # ------------------------------------------------------------------ building
    def ref(self, obj) -> str:
        """A name under which ``obj`` is visible to the guard function."""
        for k, v in self.globals.items():
            if v is obj and k.startswith("o"):
                return k
        self._n += 1
        name = f"o{self._n}"
        self.globals[name] = obj
        return name

    def add(self, expr: str, reason: str = ""):
        if expr in self._seen:
            return
        self._seen.add(expr)
        self.exprs.append(expr)
        self.reasons.append(reason or expr)

    def id_match(self, source, obj):
        self.add(f"{source.expr()} is {self.ref(obj)}", f"{source.expr()} is the same object")

    def type_match(self, source, obj):
        self.add(f"type({source.expr()}) is {self.ref(type(obj))}",
                 f"type({source.expr()}) is {type(obj).__qualname__}")

    def constant_match(self, source, value):
        e = source.expr()
        if type(value) in (int, float):
            self.numbers[e] = value
        if value is None or value is True or value is False or value is Ellipsis:
            self.add(f"{e} is {value!r}")
        elif type(value) is float and (value == 0.0 or value != value or value in (float("inf"), float("-inf"))):
            self.add(f"type({e}) is float and {e}.hex() == {value.hex()!r}", f"{e} == {value!r}")
        elif type(value) in (int, float, str, bytes, complex):
            self.add(f"type({e}) is {type(value).__name__} and {e} == {value!r}")
        else:
            self.add(f"type({e}) is {self.ref(type(value))} and {e} == {self.ref(value)}",
                     f"{e} == {value!r}")

    def len_match(self, source, n):
        self.add(f"len({source.expr()}) == {n}")

    def dict_keys_match(self, source, keys):
        self.add(f"list({source.expr()}.keys()) == {self.ref(list(keys))}",
                 f"{source.expr()} has keys {list(keys)!r}")

    def tensor_match(self, source, t: Tensor):
        e = source.expr()
        d = t._data
        # the source is evaluated once (``__t``): an optimizer's state tensors sit behind two
        # dict lookups, and a step has a few hundred tensor inputs
        self.add(
            f"type(__t := {e}) is {self.ref(type(t))} and __t.dtype is {self.ref(t.dtype)} and "
            f"((__v := __t.device) is {(dv := self.ref(t.device))} or __v == {dv}) and "
            f"(__d := __t._data).shape == {tuple(d.shape)!r} and "
            f"__d.strides == {tuple(d.strides)!r} and __t._requires_grad is {bool(t.requires_grad)!r}",
            f"{e} is a {type(t).__name__}(dtype={t.dtype}, device={t.device}, shape={tuple(d.shape)}, "
            f"strides={t.stride()}, requires_grad={t.requires_grad})")

    def dynamic_tensor_match(self, source, t: Tensor, dyn: set):
        """Like ``tensor_match`` for a C-contiguous input whose dims ``dyn`` are ShapeEnv symbols:
        rank and the static sizes are checked here, contiguity stands in for the strides, and
        the symbolic sizes are checked by the ShapeEnv guards (``shape_env_guards``)."""
        e = source.expr()
        shape = tuple(t._data.shape)
        static = " and ".join(f"{e}._data.shape[{i}] == {n}" for i, n in enumerate(shape) if i not in dyn)
        self.add(
            f"type({e}) is {self.ref(type(t))} and {e}.dtype is {self.ref(t.dtype)} and "
            f"{e}.device == {self.ref(t.device)} and {e}._data.ndim == {len(shape)} and "
            + (f"{static} and " if static else "") +
            f"{e}._data.strides == __cstrides({e}._data) and {e}.requires_grad is {bool(t.requires_grad)!r}",
            f"{e} is a {type(t).__name__}(dtype={t.dtype}, device={t.device}, shape="
            f"{tuple('*' if i in dyn else n for i, n in enumerate(shape))}, contiguous, "
            f"requires_grad={t.requires_grad})")

    def unaliased_view(self, source, others):
        """A view input given symbolic sizes was traced as memory of its own: it must share no
        memory with the other tensor arguments ``others`` (sources) at the next call either."""
        if others:
            e = source.expr()
            self.add(f"__roots_differ({e}, {', '.join(o.expr() for o in others)})",
                     f"{e} shares no memory with {', '.join(o.expr() for o in others)}")

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
        self.add(f"__memory_sharing({', '.join(srcs)}) == {key!r}",
                 f"tensor inputs share memory as when traced ({what})")

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
                                        f"{env.var_to_val[sym]})")
            for other in srcs[1:]:
                self.add(f"{other} == {srcs[0]}", f"{other} == {srcs[0]} (duck-sized: {sym})")
        for g in env.guards:
            syms = sorted(g.free_symbols, key=str)
            if any(s not in first for s in syms):
                raise RuntimeError(f"ember.dynamo: shape guard {g} uses a symbol with no source")
            fn = sympy.lambdify(syms, g, modules="math")
            name = self.ref(fn)
            args = ", ".join(first[s] for s in syms)
            desc = str(g.xreplace({s: sympy.Symbol(first[s].replace("._data.shape[", ".size()["))
                                   for s in syms}))
            self.add(f"{name}({args})", f"size guard {g}: {desc}")

    def global_state(self):
        self.add(f"STATE.grad_enabled is {bool(STATE.grad_enabled)!r}", "grad mode unchanged")
        # an ember.autocast region: the trace holds its casts (the dispatcher made them while
        # tracing), so the entry serves calls in the same region state only
        if STATE.autocast is None:
            self.add("STATE.autocast is None", "no autocast region")
        else:
            self.add(f"STATE.autocast == {self.ref(dict(STATE.autocast))}",
                     f"autocast region {{{', '.join(f'{k}: {v}' for k, v in STATE.autocast.items())}}}")
        self.add(f"_t.get_default_dtype() is {self.ref(_t.get_default_dtype())}", "default dtype unchanged")

    # ------------------------------------------------------------------ compiling
    def compile(self, nargs: int):
        self.shape_env_guards(getattr(self, "shape_env", None))
        params = ", ".join(["__func"] + [f"a{i}" for i in range(nargs)])
        body = _hoisted_body(self.exprs)
        src = (f"def __guard({params}):\n"
               f"    try:\n"
               f"{body}"
               f"        return True\n"
               f"    except Exception:\n"
               f"        return False\n")
        ns = dict(self.globals)
        exec(compile(src, "<ember.dynamo guards>", "exec"), ns)
        fn = ns["__guard"]
        fn.source = src
        fn.guard_set = self
        return fn

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
# attribute reads and constant subscripts. Found with a regex over the expressions' text (the
# ``ast`` round trip cost 50 ms for an optimizer's 333 checks, a sixth of its warm compile).
_CHAIN = re.compile(r"(?<![\w.'\"])(?:__func|a\d+|[GB]|o\d+)"
                    r"(?:\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\]*')\])+")
_ROOT = re.compile(r"__func|a\d+|[GB]|o\d+")
_STEP = re.compile(r"\.[A-Za-z_]\w*|\[(?:-?\d+|'[^'\\]*')\]")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_SELF_IS = re.compile(r"(__s\d+) is \1")


def _chains(expr: str):
    """(start, prefixes) of each chain in ``expr`` outside string literals; prefixes[k] is the
    chain up to its k+1-th step. A trailing ``.name(`` is a method call, not a read."""
    strings = [m.span() for m in _STRING.finditer(expr)] if ("'" in expr or '"' in expr) else ()
    for m in _CHAIN.finditer(expr):
        start, end = m.span()
        if any(lo < start < hi for lo, hi in strings):
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
