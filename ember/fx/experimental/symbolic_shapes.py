"""Symbolic shapes: sizes that are sympy expressions, and the guards tracing relied on.

A :class:`ShapeEnv` hands out :class:`SymInt` sizes. A SymInt behaves like an
``int`` in meta functions written in plain Python (``a + b``, ``n * m``,
``n // 2``, ``max(a, b)``, ``a == b``) and builds a sympy expression as it goes.
When Python needs a *decision* about a size (``if a == b:``, ``bool(n > 1)``,
``int(n)``, ``range(n)``), the ShapeEnv answers with the concrete example
value the symbol was created from (its *hint*) and records the assumption as a
**guard** (``Eq(s0, s1)``, ``s0 > 1``, ``Eq(s2, 5)``). The trace is valid for
every set of sizes that satisfies all the guards; :meth:`ShapeEnv.evaluate_guards`
checks that for new concrete sizes, and dynamo turns the same guards into
Python code.

Conventions, like PyTorch's:

* sizes 0 and 1 are **specialised**: they stay plain ints (broadcasting and
  squeezing behave differently for them), so every symbol is >= 2. Relations
  implied by that (``s0 > 1``, ``s0*s1 >= 4``, ``Eq(s0, s0)``) are decided
  statically and produce no guard;
* **duck sizing**: two input sizes with the same example value share one
  symbol by default (``duck_shape=True``), with the equality of their sources
  part of the guards;
* expressions are simplified by sympy on construction; an expression that
  folds to an integer becomes a plain ``int`` again.
"""
from __future__ import annotations

import builtins
import dataclasses
import enum
import math
import operator
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .value_ranges import ValueRangeError, ValueRanges, bound_expr



def _lazy_sympy():
    """``sympy``, imported on first attribute access (``importlib.util.LazyLoader``).

    Importing sympy costs 0.2-0.4 s, and a static-shape compile -- above all a warm one,
    whose kernels and wrapper come from the inductor's graph cache -- never builds a
    symbolic size. The lazy module is registered in ``sys.modules``, so every later
    ``import sympy`` (the inductor's modules) shares it and nothing loads until a symbol
    or expression is actually made."""
    import importlib.util
    import sys
    mod = sys.modules.get("sympy")
    if mod is not None:
        return mod
    spec = importlib.util.find_spec("sympy")
    if spec is None or spec.loader is None:
        raise ImportError("ember's symbolic shapes need sympy (pip install sympy)")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sympy"] = mod
    spec.loader.exec_module(mod)
    return mod


sympy = _lazy_sympy()

__all__ = ["ShapeEnv", "SymInt", "SymBool", "GuardOnDataDependentSymNode", "is_symbolic",
           "guard_int", "hint_int", "sym_max", "sym_min", "FloorDiv",
           "DimDynamic", "StatelessSymbolicContext", "StatefulSymbolicContext", "ValueRanges",
           "ValueRangeError", "statically_known_true", "statically_known_false", "guard_or_false",
           "guard_or_true", "guard_size_oblivious", "guard_bool", "guard_float", "expect_true",
           "has_free_symbols", "free_symbols", "free_unbacked_symbols", "is_concrete_int",
           "is_concrete_bool", "sym_eq", "constrain_range", "has_hint", "RuntimeAssert"]


class GuardOnDataDependentSymNode(RuntimeError):
    """A decision about a size with no example value to decide it by."""


def is_symbolic(x: Any) -> bool:
    return isinstance(x, (SymInt, SymBool))


def _sympify(x: Any) -> sympy.Expr:
    if isinstance(x, SymInt):
        return x.expr
    if isinstance(x, bool):
        return sympy.true if x else sympy.false
    if isinstance(x, int):
        return sympy.Integer(x)
    if hasattr(x, "__index__"):
        return sympy.Integer(operator.index(x))
    raise TypeError(f"cannot use {type(x).__name__} {x!r} in a symbolic size expression")


def FloorDiv(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """Integer floor division of size expressions (exact division folds).

    sympy cancels common factors of products on construction (``4*s0/4`` is
    ``s0``), so no ``simplify`` (which costs up to 100s of ms) is needed."""
    q = a / b
    if q.is_integer:
        return q
    return sympy.floor(q)


class SymInt:
    """An integer size backed by a sympy expression over a ShapeEnv's symbols."""

    __slots__ = ("expr", "env")

    def __init__(self, expr: sympy.Expr, env: "ShapeEnv"):
        self.expr = expr
        self.env = env

    # -- construction helpers ----------------------------------------------
    def _wrap(self, expr):
        return self.env._wrap_int(expr)

    def _bin(self, other, fn, reverse=False):
        if isinstance(other, float):
            # sizes mixed with floats (scale factors): decide the size now
            return fn(other, float(self)) if reverse else fn(float(self), other)
        if not isinstance(other, (int, SymInt)) and not hasattr(other, "__index__"):
            return NotImplemented
        a, b = self.expr, _sympify(other)
        return self._wrap(fn(b, a) if reverse else fn(a, b))

    def __add__(self, o): return self._bin(o, operator.add)
    def __radd__(self, o): return self._bin(o, operator.add, True)
    def __sub__(self, o): return self._bin(o, operator.sub)
    def __rsub__(self, o): return self._bin(o, operator.sub, True)
    def __mul__(self, o): return self._bin(o, operator.mul)
    def __rmul__(self, o): return self._bin(o, operator.mul, True)
    def __floordiv__(self, o): return self._bin(o, FloorDiv)
    def __rfloordiv__(self, o): return self._bin(o, FloorDiv, True)
    def __mod__(self, o): return self._bin(o, sympy.Mod)
    def __rmod__(self, o): return self._bin(o, sympy.Mod, True)

    def __pow__(self, o):
        if isinstance(o, int) and o >= 0:
            return self._wrap(self.expr ** o)
        return float(self) ** o

    def __truediv__(self, o):
        return float(self) / o

    def __rtruediv__(self, o):
        return o / float(self)

    def __neg__(self):
        return self._wrap(-self.expr)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._wrap(sympy.Abs(self.expr))

    # -- comparisons build SymBools --------------------------------------------
    def _cmp(self, other, rel):
        if isinstance(other, float):
            return rel(float(self), other)
        if not isinstance(other, (int, SymInt)) and not hasattr(other, "__index__"):
            return NotImplemented
        return self.env._wrap_bool(rel(self.expr, _sympify(other)))

    def __eq__(self, o):
        if not isinstance(o, (int, SymInt, float)) and not hasattr(o, "__index__"):
            return False
        return self._cmp(o, sympy.Eq)

    def __ne__(self, o):
        if not isinstance(o, (int, SymInt, float)) and not hasattr(o, "__index__"):
            return True
        return self._cmp(o, sympy.Ne)

    def __lt__(self, o): return self._cmp(o, sympy.Lt)
    def __le__(self, o): return self._cmp(o, sympy.Le)
    def __gt__(self, o): return self._cmp(o, sympy.Gt)
    def __ge__(self, o): return self._cmp(o, sympy.Ge)

    def __hash__(self):
        return hash(self.expr)

    # -- leaving the symbolic world: specialise (and guard) ------------------
    def __int__(self):
        return self.env.guard_int(self.expr)

    __index__ = __int__

    def __float__(self):
        return float(int(self))

    def __bool__(self):
        return bool(self.env.evaluate_expr(sympy.Ne(self.expr, 0)))

    def __round__(self, ndigits=None):
        return int(self)

    def __trunc__(self):
        return int(self)

    def __repr__(self):
        return str(self.expr)

    __str__ = __repr__

    def __format__(self, spec):
        return format(str(self), spec)

    @property
    def node(self):
        return self

    def hint(self) -> int:
        return self.env.hint(self.expr)

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        """A size as a tensor operand of an operator (``g / n`` in a mean's backward, ``t * s0``):
        ember's override protocol hands the call here, and the size becomes a 0-d int64 tensor
        computed from it (``ones(n).sum()``: exact, and it promotes like a Python int), so a
        trace keeps it symbolic instead of failing or baking in its value."""
        op = getattr(func, "_ember_op", None)
        if op is None:
            return NotImplemented
        args = list(args)
        device = next((a.device for a in args if hasattr(a, "_data") and hasattr(a, "device")), None)
        changed = False
        for i in op.tensor_pos:
            if isinstance(args[i], SymInt):
                args[i] = _size_tensor(args[i], device)
                changed = True
        if not changed:
            return NotImplemented
        from ..proxy import _normalize_op_args
        a, k = _normalize_op_args(op, tuple(args), dict(kwargs or {}))
        return func(*a, **k)


def signed_parts(n):
    """``(pos, neg)`` with ``n == pos - neg`` and both provably non-negative (ints or SymInts):
    the positive and the negative terms of a size expression. A size made a tensor value counts
    a range (``ones(n).sum()``), which is 0 for a negative ``n``: ``x * (s0 - s1)`` with s0 < s1
    gave 0 compiled. With a term of unknown sign, the sign of ``n`` itself, guarded."""
    if type(n) is int:
        return (n, 0) if n >= 0 else (0, -n)
    e = sympy.expand(n.expr)
    if e.is_nonnegative:
        return n, 0
    pos, neg = sympy.Integer(0), sympy.Integer(0)
    for term in sympy.Add.make_args(e):
        c, mono = term.as_coeff_Mul()
        if not (mono.is_nonnegative or mono == 1):
            # a term of unknown sign (``floor((s3 - s1) / 2)``): the sign of the whole, decided
            # by the example sizes and guarded (another sign recompiles)
            return (n, 0) if bool(n >= 0) else (0, -n)
        if c >= 0:
            pos += c * mono
        else:
            neg += -c * mono
    return n.env._wrap_int(pos), n.env._wrap_int(neg)


def _size_tensor(n, device):
    from ... import types as _t
    from ...ops import api
    pos, neg = signed_parts(n)
    t = api.ones(pos, dtype=_t.int64, device=device).sum()
    return t if type(neg) is int and neg == 0 else t - api.ones(neg, dtype=_t.int64, device=device).sum()


class SymBool:
    """A relation between sizes; ``bool()`` decides it by the hints and records a guard."""

    __slots__ = ("expr", "env")

    def __init__(self, expr, env):
        self.expr = expr
        self.env = env

    def __bool__(self):
        return bool(self.env.evaluate_expr(self.expr))

    def __and__(self, o):
        return self.env._wrap_bool(sympy.And(self.expr, _sympify(o)))

    def __or__(self, o):
        return self.env._wrap_bool(sympy.Or(self.expr, _sympify(o)))

    def __invert__(self):
        return self.env._wrap_bool(sympy.Not(self.expr))

    def __repr__(self):
        return str(self.expr)


def guard_int(x: Any) -> int:
    """``int(x)`` for an int or a SymInt (specialising the SymInt with a guard)."""
    return int(x)


def hint_int(x: Any) -> int:
    """The example value of a size, without adding a guard."""
    if isinstance(x, SymInt):
        return x.hint()
    return int(x)


def sym_max(a, b):
    """``max`` of two sizes; stays symbolic (``Max``) instead of guarding on the order."""
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        env = a.env if isinstance(a, SymInt) else b.env
        return env._wrap_int(sympy.Max(_sympify(a), _sympify(b)))
    return builtins.max(a, b)


def sym_min(a, b):
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        env = a.env if isinstance(a, SymInt) else b.env
        return env._wrap_int(sympy.Min(_sympify(a), _sympify(b)))
    return builtins.min(a, b)


@dataclasses.dataclass(frozen=True)
class RuntimeAssert:
    """A condition on sizes checked when the graph runs rather than guarded
    on at compile time (``ShapeEnv.deferred_runtime_asserts``; the pass
    ``ember.fx.passes.runtime_assert.insert_deferred_runtime_asserts`` puts
    them into a graph)."""

    expr: Any
    msg: str = dataclasses.field(repr=False)
    stack: Any = dataclasses.field(default=None, repr=False)


class ShapeEnv:
    """Owns the size symbols of one trace, their example values and the guards.

    ``prefer_deferred_runtime_asserts_over_guards``: :meth:`defer_runtime_assert`
    records its condition for the graph to check at run time instead of
    guarding on it."""

    def __init__(self, *, duck_shape: bool = True, specialize_zero_one: bool = True,
                 prefer_deferred_runtime_asserts_over_guards: bool = False):
        self.duck_shape = duck_shape
        self.specialize_zero_one = specialize_zero_one
        self.prefer_deferred_runtime_asserts_over_guards = prefer_deferred_runtime_asserts_over_guards
        #: symbol (or None: no particular one) -> conditions to check at run time; ember's
        #: symbols are all backed (input sizes), so every entry is under None
        self.deferred_runtime_asserts: Dict[Any, List[RuntimeAssert]] = {}
        self.var_to_val: Dict[sympy.Symbol, int] = {}
        self.var_to_sources: Dict[sympy.Symbol, List[str]] = {}
        self.val_to_var: Dict[int, sympy.Symbol] = {}
        self.guards: List[sympy.Basic] = []
        self._guard_set = set()
        self._shifted: Dict[sympy.Symbol, sympy.Expr] = {}   # s -> t + 2 with t >= 0
        #: symbol -> ValueRanges it may take (>= 2 for a backed size; narrowed by
        #: constrain_range and by guards pinning or bounding a single symbol)
        self.var_to_range: Dict[sympy.Symbol, Any] = {}
        self._narrowed = False      # some range is tighter than the default

    # -- symbols ----------------------------------------------------------------
    def create_symbol(self, value: int, source: Optional[str] = None, dynamic_dim: Any = None) -> Any:
        """A size for an input dimension with example value ``value`` (an int stays an int for 0 and 1).

        Unlike torch (which returns the bare sympy symbol and needs
        :meth:`create_symintnode`), this returns the :class:`SymInt` directly.
        ``dynamic_dim`` (a :class:`DimDynamic`): ``DUCK`` (default, or the
        ShapeEnv's ``duck_shape``) shares one symbol among equal example values,
        ``DYNAMIC`` always makes a fresh symbol, ``STATIC`` returns the int."""
        value = int(value)
        if value < 0:
            raise ValueError(f"ShapeEnv.create_symbol: a size must be >= 0, got {value}")
        if dynamic_dim is not None and not isinstance(dynamic_dim, DimDynamic):
            raise TypeError(f"ShapeEnv.create_symbol: dynamic_dim must be a DimDynamic, got {dynamic_dim!r}")
        if dynamic_dim is DimDynamic.STATIC:
            return value
        if dynamic_dim is DimDynamic.UNBACKED:
            raise NotImplementedError("ember ShapeEnv: unbacked symbols (DimDynamic.UNBACKED) are not supported")
        if self.specialize_zero_one and value in (0, 1):
            return value
        duck = self.duck_shape if dynamic_dim in (None, DimDynamic.DUCK) else False
        if dynamic_dim is DimDynamic.DUCK:
            duck = True
        if duck and value in self.val_to_var:
            sym = self.val_to_var[value]
        else:
            sym = sympy.Symbol(f"s{len(self.var_to_val)}", integer=True, positive=True)
            self.var_to_val[sym] = value
            self.var_to_sources[sym] = []
            self._shifted[sym] = sympy.Symbol(f"_t{len(self.var_to_val)}", integer=True,
                                              nonnegative=True) + 2
            self.var_to_range[sym] = ValueRanges(2 if self.specialize_zero_one else 0, sympy.oo)
            if duck and value not in self.val_to_var:
                self.val_to_var[value] = sym
        if source is not None:
            self.var_to_sources[sym].append(source)
        return SymInt(sym, self)

    def create_symbolic_sizes(self, sizes: Sequence[int], source: Optional[str] = None,
                              dynamic_dims: Optional[Iterable[int]] = None,
                              symbolic_context: Any = None) -> Tuple[Any, ...]:
        """Symbols for the dimensions in ``dynamic_dims`` (all by default); the rest stay ints.
        A :class:`StatelessSymbolicContext` gives each dimension its own :class:`DimDynamic`."""
        dyn = set(range(len(sizes))) if dynamic_dims is None else set(dynamic_dims)
        kinds: List[Any] = [None] * len(sizes)
        if symbolic_context is not None:
            if not isinstance(symbolic_context, StatelessSymbolicContext):
                raise TypeError("ShapeEnv.create_symbolic_sizes: symbolic_context must be a "
                                f"StatelessSymbolicContext, got {type(symbolic_context).__name__}")
            if len(symbolic_context.dynamic_sizes) != len(sizes):
                raise ValueError(f"ShapeEnv.create_symbolic_sizes: symbolic_context has "
                                 f"{len(symbolic_context.dynamic_sizes)} dynamic_sizes for {len(sizes)} dims")
            kinds = list(symbolic_context.dynamic_sizes)
        out = []
        for i, n in enumerate(sizes):
            if i in dyn:
                src = f"{source}.size()[{i}]" if source else None
                # (export swaps in its own create_symbol(value, source): pass the
                # DimDynamic only when a context asked for one)
                out.append(self.create_symbol(n, src) if kinds[i] is None
                           else self.create_symbol(n, src, dynamic_dim=kinds[i]))
            else:
                out.append(int(n))
        return tuple(out)

    @property
    def symbols(self) -> List[sympy.Symbol]:
        return list(self.var_to_val)

    # -- wrapping ---------------------------------------------------------------------
    def _wrap_int(self, expr):
        expr = sympy.expand(expr) if expr.is_Add or expr.is_Mul else expr
        if expr.is_Integer:
            return int(expr)
        if expr.is_number:
            # sympy may leave numeric pieces unevaluated (Max(1, 2))
            val = expr.doit()
            if val.is_Integer:
                return int(val)
            raise TypeError(f"size expression {expr} is not an integer")
        return SymInt(expr, self)

    def _wrap_bool(self, expr):
        if expr in (sympy.true, sympy.false):
            return bool(expr)
        static = self._static_truth(expr)
        if static is not None:
            return static
        return SymBool(expr, self)

    # -- deciding -----------------------------------------------------------------------
    def hint(self, expr) -> Any:
        if isinstance(expr, SymInt):
            expr = expr.expr
        val = sympy.sympify(expr).xreplace({k: sympy.Integer(v) for k, v in self.var_to_val.items()})
        if not (val.is_Integer or val in (sympy.true, sympy.false)):
            val = val.doit()
        if val.is_Integer:
            return int(val)
        if val in (sympy.true, sympy.false):
            return bool(val)
        if val.is_number:
            return val
        raise GuardOnDataDependentSymNode(f"no example value to decide {expr}")

    _REL_TESTS: Dict[Any, Any] = {}     # filled on first use (sympy is imported lazily)

    @classmethod
    def _rel_tests(cls):
        if not cls._REL_TESTS:
            cls._REL_TESTS.update({
                sympy.Eq: lambda d: d.is_zero,
                sympy.Ne: lambda d: None if d.is_zero is None else not d.is_zero,
                sympy.Lt: lambda d: d.is_negative,
                sympy.Le: lambda d: d.is_nonpositive,
                sympy.Gt: lambda d: d.is_positive,
                sympy.Ge: lambda d: d.is_nonnegative,
            })
        return cls._REL_TESTS

    def _static_truth(self, expr) -> Optional[bool]:
        """True/False when ``expr`` holds for every size >= 2, None when it depends.

        Uses sympy's assumption system on ``lhs - rhs`` with every symbol
        rewritten as ``t + 2`` (t >= 0): cheap, and enough for the relations
        meta functions ask (``Eq(s0, 1)``, ``s0*s1 > 0``, ``Eq(s0, s0)``).

        A relation already guarded (or whose negation is) is decided too: the trace only
        covers sizes that pass its guards. ``x.narrow(1, 1, 3)`` checks ``4 <= s1`` (a
        guard), and its slice's ``min(4, s1)`` is then 4: the size is 3, not ``Min(4, s1) - 1``
        (a size no input carries, which sent the backward to the fx Interpreter)."""
        if self._guard_set:
            if expr in self._guard_set:
                return True
            if sympy.Not(expr) in self._guard_set:
                return False
        test = self._rel_tests().get(type(expr))
        if test is None:
            if isinstance(expr, sympy.Not):
                inner = self._static_truth(expr.args[0])
                return None if inner is None else not inner
            return None
        d = (expr.lhs - expr.rhs).xreplace(self._shifted)
        d = sympy.expand(d)
        r = test(d)
        if r is None and self._narrowed:
            r = self._range_truth(expr)
        return None if r is None else bool(r)

    def _range_truth(self, expr) -> Optional[bool]:
        # Decide lhs - rhs <relation> 0 from the symbols' ranges (only once some range was
        # narrowed below the default [2, oo]: the common case stays one sympy assumption query).
        vr = bound_expr(expr.lhs - expr.rhs, self.var_to_range)
        lo, hi = vr.lower, vr.upper
        zero = sympy.Integer(0)
        if isinstance(expr, sympy.Eq):
            if lo == hi == zero:
                return True
            return False if (lo > zero) == sympy.true or (hi < zero) == sympy.true else None
        if isinstance(expr, sympy.Ne):
            inner = self._range_truth(sympy.Eq(expr.lhs, expr.rhs, evaluate=False))
            return None if inner is None else not inner
        yes_no = {sympy.Lt: (hi < zero, lo >= zero), sympy.Le: (hi <= zero, lo > zero),
                  sympy.Gt: (lo > zero, hi <= zero), sympy.Ge: (lo >= zero, hi < zero)}[type(expr)]
        if yes_no[0] == sympy.true:
            return True
        if yes_no[1] == sympy.true:
            return False
        return None

    def evaluate_expr(self, expr) -> bool:
        """Decide a relation by the hints; record it (or its negation) as a guard."""
        if expr in (sympy.true, sympy.false):
            return bool(expr)
        static = self._static_truth(expr)
        if static is not None:
            return static
        val = self.hint(expr)
        if not isinstance(val, bool):
            val = bool(val)
        self._add_guard(expr if val else sympy.Not(expr))
        return val

    def defer_runtime_assert(self, orig_expr: Any, msg: str, fx_node: Any = None) -> bool:
        """Require ``orig_expr`` (a sympy relation or SymBool) to hold. Decided
        statically when it can be; otherwise guarded on like :meth:`evaluate_expr`,
        or -- with ``prefer_deferred_runtime_asserts_over_guards`` -- recorded in
        ``deferred_runtime_asserts`` for the graph to check at run time (True is
        returned: the trace goes on assuming it)."""
        if isinstance(orig_expr, SymBool):
            expr = orig_expr.expr
        elif hasattr(orig_expr, "free_symbols"):
            expr = orig_expr
        else:
            expr = _sympify(orig_expr)
        if expr in (sympy.true, sympy.false):
            return bool(expr)
        static = self._static_truth(expr)
        if static is not None:
            return static
        if not self.prefer_deferred_runtime_asserts_over_guards:
            return self.evaluate_expr(expr)
        ras = self.deferred_runtime_asserts.setdefault(None, [])
        if all(ra.expr != expr for ra in ras):
            ras.append(RuntimeAssert(expr, msg))
        return True

    def guard_int(self, expr) -> int:
        val = self.hint(expr)
        if not isinstance(val, int):
            raise TypeError(f"size expression {expr} has non-integer value {val}")
        self._add_guard(sympy.Eq(expr, val))
        return val

    def _add_guard(self, g):
        if g is sympy.true:
            return
        if g in self._guard_set:
            return
        self._guard_set.add(g)
        self.guards.append(g)
        self._narrow_range(g)

    def _narrow_range(self, g) -> None:
        # A guard relating one symbol to a constant (Eq(s0, 5), s0 > 3) narrows its range.
        if not isinstance(g, (sympy.Eq, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge)):
            return
        lhs, rhs = g.lhs, g.rhs
        if rhs.is_Symbol and lhs.is_Integer:
            lhs, rhs = rhs, lhs
            g = {sympy.Lt: sympy.Gt, sympy.Le: sympy.Ge, sympy.Gt: sympy.Lt, sympy.Ge: sympy.Le}.get(type(g), type(g))(lhs, rhs)
        if not (lhs.is_Symbol and rhs.is_Integer and lhs in self.var_to_range):
            return
        c = int(rhs)
        lo, hi = {sympy.Eq: (c, sympy.oo), sympy.Lt: (-sympy.oo, c - 1), sympy.Le: (-sympy.oo, c),
                  sympy.Gt: (c + 1, sympy.oo), sympy.Ge: (c, sympy.oo)}[type(g)]
        if isinstance(g, sympy.Eq):
            hi = c
        try:
            self.var_to_range[lhs] = self.var_to_range[lhs] & ValueRanges(lo, hi)
            self._narrowed = True
        except ValueRangeError:
            pass   # contradicts an explicit constraint; evaluate_guards will reject it

    # -- torch's ShapeEnv API on top of the above ------------------------------------------
    def create_symintnode(self, sym: Any, *, hint: Any = None, source: Optional[str] = None) -> Any:
        """A SymInt for sympy expression ``sym`` (an int when it is a number).
        ``hint`` must agree with the example values when given."""
        expr = sympy.sympify(sym)
        if hint is not None and not isinstance(hint, SymInt) and not expr.free_symbols - set(self.var_to_val):
            actual = self.hint(expr)
            if actual != int(hint):
                raise ValueError(f"ShapeEnv.create_symintnode: hint {hint} disagrees with {expr} = {actual}")
        if expr.free_symbols - set(self.var_to_val):
            unknown = ", ".join(sorted(map(str, expr.free_symbols - set(self.var_to_val))))
            raise NotImplementedError(f"ember ShapeEnv.create_symintnode: symbols {unknown} were not created by "
                                      "this ShapeEnv (unbacked symbols are not supported)")
        if source is not None:
            for s in expr.free_symbols:
                self.var_to_sources[s].append(source)
        return self._wrap_int(expr)

    def bound_sympy(self, expr: Any, size_oblivious: bool = False) -> "ValueRanges":
        """The :class:`ValueRanges` sympy ``expr`` can take under this ShapeEnv's
        symbol ranges (see :attr:`var_to_range`)."""
        if isinstance(expr, SymInt):
            expr = expr.expr
        return bound_expr(expr, self.var_to_range)

    def constrain_symbol_range(self, sym: Any, compiler_min: Optional[int], compiler_max: Optional[int]) -> None:
        """Intersect ``sym``'s range with ``[compiler_min, compiler_max]``
        (None: unbounded); ValueRangeError if its example value falls outside."""
        if sym not in self.var_to_range:
            raise KeyError(f"ShapeEnv.constrain_symbol_range: {sym} is not a symbol of this ShapeEnv")
        lo = -sympy.oo if compiler_min is None else compiler_min
        hi = sympy.oo if compiler_max is None else compiler_max
        val = self.var_to_val[sym]
        if not (sympy.sympify(lo) <= val) or not (val <= sympy.sympify(hi)):
            raise ValueRangeError(f"Invalid value {val} for range [{lo}:{hi}]")
        self.var_to_range[sym] = self.var_to_range[sym] & ValueRanges(lo, hi)
        self._narrowed = True

    # -- using the guards ---------------------------------------------------------------
    def simplify(self, expr):
        if isinstance(expr, SymInt):
            expr = expr.expr
        return sympy.simplify(expr)

    def evaluate_guards(self, values: Dict[Any, int]) -> bool:
        """Do concrete sizes satisfy every guard? ``values`` maps symbols (or their
        names, or their sources) to ints; every symbol must be given."""
        env = {}
        by_name = {str(s): s for s in self.var_to_val}
        by_source = {src: s for s, srcs in self.var_to_sources.items() for src in srcs}
        for k, v in values.items():
            sym = k if isinstance(k, sympy.Symbol) else by_name.get(k) or by_source.get(k)
            if sym is None:
                raise KeyError(f"ShapeEnv.evaluate_guards: unknown symbol or source {k!r}")
            v = int(v)
            if sym in env and env[sym] != v:
                return False   # duck-sized sources disagree
            env[sym] = v
        missing = [s for s in self.var_to_val if s not in env]
        if missing:
            raise KeyError(f"ShapeEnv.evaluate_guards: no value for {', '.join(map(str, missing))}")
        for s, v in env.items():
            if self.specialize_zero_one and v in (0, 1):
                return False
        for g in self.guards:
            if not bool(g.xreplace({k: sympy.Integer(v) for k, v in env.items()})):
                return False
        return True

    def format_guards(self) -> List[str]:
        return [str(g) for g in self.guards]

    def __repr__(self):
        syms = ", ".join(f"{s}={v}" for s, v in self.var_to_val.items())
        return f"ShapeEnv({syms}; guards=[{', '.join(self.format_guards())}])"


# -- torch.fx.experimental.symbolic_shapes' public helpers -----------------------------------
# They accept plain Python values as well as SymInt/SymBool, so meta functions can call them
# without first asking whether a size is symbolic.



class DimDynamic(enum.Enum):
    """How a dimension gets its size when a tensor is made symbolic."""

    DYNAMIC = 0
    DUCK = 1
    STATIC = 2
    UNBACKED = 3
    INFER_STRIDE = 4


@dataclasses.dataclass(frozen=True)
class StatelessSymbolicContext:
    """Per-dimension :class:`DimDynamic` choices for one tensor (consumed by
    :meth:`ShapeEnv.create_symbolic_sizes`)."""

    dynamic_sizes: List[DimDynamic]
    dynamic_strides: Optional[List[DimDynamic]] = None
    constraint_sizes: Optional[List[Any]] = None
    constraint_strides: Optional[List[Any]] = None
    view_base_context: Optional[Any] = None

    def __post_init__(self):
        bad = [d for d in self.dynamic_sizes if not isinstance(d, DimDynamic)]
        if bad:
            raise TypeError(f"StatelessSymbolicContext: dynamic_sizes must hold DimDynamic values, got {bad[0]!r}")


@dataclasses.dataclass(frozen=True)
class StatefulSymbolicContext(StatelessSymbolicContext):
    """A :class:`StatelessSymbolicContext` that also remembers the symbols
    already made for a tensor's sizes (``tensor_source`` -> symbols), so
    re-fakeifying the same input reuses them."""

    tensor_source: Any = None
    shape_env_to_source_to_symbol_cache: Dict[int, Dict[str, Any]] = dataclasses.field(default_factory=dict)


def _check_bool_like(name: str, x: Any) -> None:
    if not isinstance(x, (bool, SymBool)):
        raise TypeError(f"{name}: expected a bool or SymBool, got {type(x).__name__}")


def statically_known_true(x: Any) -> bool:
    """True only if ``x`` holds for every size the trace allows, decided
    without adding a guard (a plain bool is returned as is)."""
    if isinstance(x, SymBool):
        return x.env._static_truth(x.expr) is True
    _check_bool_like("statically_known_true", x)
    return x


def statically_known_false(x: Any) -> bool:
    """True only if ``x`` is false for every size the trace allows (no guard added)."""
    if isinstance(x, SymBool):
        return x.env._static_truth(x.expr) is False
    _check_bool_like("statically_known_false", x)
    return not x


def guard_bool(x: Any) -> bool:
    """``bool(x)``, guarding a SymBool on its example value."""
    return bool(x)


def guard_float(x: Any) -> float:
    """``float(x)``, specialising a symbolic size with a guard."""
    if isinstance(x, SymInt):
        return float(guard_int(x))
    return float(x)


def _guard_or(x: Any, default: bool, name: str) -> bool:
    _check_bool_like(name, x)
    if isinstance(x, SymBool):
        try:
            return bool(x.env.evaluate_expr(x.expr))
        except GuardOnDataDependentSymNode:
            return default
    return x


def guard_or_false(x: Any) -> bool:
    """``bool(x)`` (guarding on the example values); False where there is no
    example value to decide by."""
    return _guard_or(x, False, "guard_or_false")


def guard_or_true(x: Any) -> bool:
    """``bool(x)`` (guarding on the example values); True where there is no
    example value to decide by."""
    return _guard_or(x, True, "guard_or_true")


def guard_size_oblivious(expr: Any) -> bool:
    """``bool(expr)`` deciding as if every size were >= 2; ember's sizes are
    all backed and >= 2, so this is a guarded evaluation."""
    _check_bool_like("guard_size_oblivious", expr)
    return bool(expr)


def expect_true(a: Any, skip: int = 0) -> bool:
    """Assert-like: ``a`` must hold; returns it as a bool (guarding a SymBool)."""
    _check_bool_like("expect_true", a)
    return bool(a)


def has_hint(a: Any) -> bool:
    """Whether ``a`` has an example value (every ember size has one)."""
    if isinstance(a, (SymInt, SymBool)):
        try:
            a.env.hint(a.expr)
            return True
        except GuardOnDataDependentSymNode:
            return False
    return True


def _collect_symbols(val: Any, out: Dict[Any, None]) -> None:
    if isinstance(val, (SymInt, SymBool)):
        for s in sorted(val.expr.free_symbols, key=str):
            out.setdefault(s, None)
    elif isinstance(val, (bool, int, float, str, type(None))):
        return
    elif isinstance(val, (list, tuple)):
        for v in val:
            _collect_symbols(v, out)
    elif isinstance(val, dict):
        for v in val.values():
            _collect_symbols(v, out)
    elif type(val).__module__.startswith("sympy") and isinstance(val, sympy.Basic):
        for s in sorted(val.free_symbols, key=str):
            out.setdefault(s, None)
    elif hasattr(val, "shape") and hasattr(val, "dtype"):
        _collect_symbols(tuple(val.shape), out)
        stride = getattr(val, "stride", None)
        if callable(stride):
            try:
                _collect_symbols(tuple(stride()), out)
            except Exception:
                pass


def free_symbols(val: Any) -> set:
    """The sympy symbols ``val`` depends on: a SymInt/SymBool/sympy
    expression, a tensor's sizes and strides, or containers of these
    (plain numbers have none)."""
    out: Dict[Any, None] = {}
    _collect_symbols(val, out)
    return set(out)


def has_free_symbols(val: Any) -> bool:
    """Whether ``val`` depends on any symbol (see :func:`free_symbols`)."""
    return bool(free_symbols(val))


def free_unbacked_symbols(val: Any) -> set:
    """The data-dependent (unbacked, ``u``-prefixed) symbols among
    :func:`free_symbols`; ember's ShapeEnv never makes any, but graphs
    imported with them may carry them."""
    return {s for s in free_symbols(val) if str(s).startswith(("u", "zuf"))}


def is_concrete_int(a: Any) -> bool:
    """Whether ``a`` is an int, or a SymInt that is a known constant."""
    if isinstance(a, int):
        return True
    if isinstance(a, SymInt):
        return bool(a.expr.is_Integer)
    raise TypeError(f"is_concrete_int: expected an int or SymInt, got {type(a).__name__}")


def is_concrete_bool(a: Any) -> bool:
    """Whether ``a`` is a bool, or a SymBool that is a known constant."""
    if isinstance(a, bool):
        return True
    if isinstance(a, SymBool):
        return a.expr in (sympy.true, sympy.false)
    raise TypeError(f"is_concrete_bool: expected a bool or SymBool, got {type(a).__name__}")


def sym_eq(x: Any, y: Any) -> Any:
    """``x == y`` that compares lists/tuples elementwise (False on a length
    mismatch) without deciding symbolic entries: the result may be a SymBool."""
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        if len(x) != len(y):
            return False
        parts = [sym_eq(a, b) for a, b in zip(x, y)]
        symbolic = [p for p in parts if isinstance(p, SymBool)]
        if any(p is False for p in parts):
            return False
        if not symbolic:
            return True
        return symbolic[0].env._wrap_bool(sympy.And(*[p.expr for p in symbolic]))
    if isinstance(x, (tuple, list)) or isinstance(y, (tuple, list)):
        raise TypeError(f"sym_eq: cannot compare {type(x).__name__} with {type(y).__name__}")
    return x == y


def constrain_range(a: Any, *, min: Optional[int], max: Optional[int] = None) -> None:
    """Require ``min <= a <= max`` (None: unbounded). An int is checked; a
    SymInt's symbol has its range narrowed (see :meth:`ShapeEnv.bound_sympy`).
    ValueRangeError (a ValueError) when the value lies outside."""
    lo = -sympy.oo if min is None else min
    hi = sympy.oo if max is None else max
    if isinstance(a, SymInt):
        if not a.expr.is_Symbol:
            raise NotImplementedError(f"constrain_range: only a SymInt that is a single symbol can be constrained, got {a.expr}")
        a.env.constrain_symbol_range(a.expr, min, max)
        return
    if isinstance(a, bool) or not isinstance(a, int):
        raise TypeError(f"constrain_range: a must be an int or SymInt, got {type(a).__name__}")
    if not (sympy.sympify(lo) <= a and a <= sympy.sympify(hi)):
        raise ValueRangeError(f"Invalid value {a} for range [{lo}:{hi}]")
