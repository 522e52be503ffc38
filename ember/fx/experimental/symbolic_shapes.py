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
import math
import operator
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple



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
           "guard_int", "hint_int", "sym_max", "sym_min", "FloorDiv"]


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


def _size_tensor(n, device):
    from ... import types as _t
    from ...ops import api
    return api.ones(n, dtype=_t.int64, device=device).sum()


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


class ShapeEnv:
    """Owns the size symbols of one trace, their example values and the guards."""

    def __init__(self, *, duck_shape: bool = True, specialize_zero_one: bool = True):
        self.duck_shape = duck_shape
        self.specialize_zero_one = specialize_zero_one
        self.var_to_val: Dict[sympy.Symbol, int] = {}
        self.var_to_sources: Dict[sympy.Symbol, List[str]] = {}
        self.val_to_var: Dict[int, sympy.Symbol] = {}
        self.guards: List[sympy.Basic] = []
        self._guard_set = set()
        self._shifted: Dict[sympy.Symbol, sympy.Expr] = {}   # s -> t + 2 with t >= 0

    # -- symbols ----------------------------------------------------------------
    def create_symbol(self, value: int, source: Optional[str] = None) -> Any:
        """A size for an input dimension with example value ``value`` (an int stays an int for 0 and 1)."""
        value = int(value)
        if value < 0:
            raise ValueError(f"ShapeEnv.create_symbol: a size must be >= 0, got {value}")
        if self.specialize_zero_one and value in (0, 1):
            return value
        if self.duck_shape and value in self.val_to_var:
            sym = self.val_to_var[value]
        else:
            sym = sympy.Symbol(f"s{len(self.var_to_val)}", integer=True, positive=True)
            self.var_to_val[sym] = value
            self.var_to_sources[sym] = []
            self._shifted[sym] = sympy.Symbol(f"_t{len(self.var_to_val)}", integer=True,
                                              nonnegative=True) + 2
            if self.duck_shape:
                self.val_to_var[value] = sym
        if source is not None:
            self.var_to_sources[sym].append(source)
        return SymInt(sym, self)

    def create_symbolic_sizes(self, sizes: Sequence[int], source: Optional[str] = None,
                              dynamic_dims: Optional[Iterable[int]] = None) -> Tuple[Any, ...]:
        """Symbols for the dimensions in ``dynamic_dims`` (all by default); the rest stay ints."""
        dyn = set(range(len(sizes))) if dynamic_dims is None else set(dynamic_dims)
        out = []
        for i, n in enumerate(sizes):
            if i in dyn:
                out.append(self.create_symbol(n, f"{source}.size()[{i}]" if source else None))
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
        return None if r is None else bool(r)

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
