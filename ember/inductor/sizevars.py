"""Sizes and index arithmetic as sympy expressions.

Every size, stride and index in the loop IR is a sympy expression over
*size symbols* (``s0, s1, ...``: positive integers, always >= 2 because sizes
0 and 1 are specialised) and *loop variables* (``x0..``/``r0..``: integers in
``[0, range)``). Plain Python ints are turned into ``sympy.Integer``.

Integer division and modulo are the two custom functions below rather than
``floor(a/b)`` and ``Mod``: sympy's versions print as floating-point C and
simplify badly. All index values are non-negative, so C's truncating ``/``
and ``%`` are exact for them.

Why the simplifier matters: a reshape of contiguous data is an index
rewrite ``j = (flat // stride) % size``; with the loop variables' ranges the
simplifier proves most of those divisions away (``(x0*s1 + x1) // s1 -> x0``),
which is what lets the rewritten loads stay unit-stride and vectorise.
"""
from __future__ import annotations

import functools
from typing import Dict, Iterable, List, Sequence

import sympy
from sympy.printing.c import C99CodePrinter
from sympy.printing.str import StrPrinter


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative integer ``a`` and positive integer ``b``."""
    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if isinstance(a, FloorDiv):
            return FloorDiv(a.args[0], a.args[1] * b)
        return _exact_div(a, b)


class ModularIndexing(sympy.Function):
    """``(x // div) % mod`` for non-negative integer ``x``."""
    nargs = (3,)
    is_integer = True

    @classmethod
    def eval(cls, x, div, mod):
        if mod == 1 or x == 0:
            return sympy.Integer(0)
        if x.is_Integer and div.is_Integer and mod.is_Integer:
            return sympy.Integer((int(x) // int(div)) % int(mod))
        return None


def _exact_term_div(t, d):
    """``t / d`` for a monomial ``t`` when it is again a monomial with an integer
    coefficient, else None. Mul's own cancellation of powers does the work:
    no ``sympy.cancel`` (which dominated compile time)."""
    q = t / d
    c, rest = q.as_coeff_Mul()
    if not (c.is_Integer or (c.is_Rational and c.q == 1)):
        return None
    for f in sympy.Mul.make_args(rest):
        if f.is_Pow and not (f.exp.is_Integer and f.exp > 0):
            return None
        if not (f.is_Symbol or f.is_Pow or f.is_Integer or f.func in (FloorDiv, ModularIndexing)):
            return None
    return q


def _exact_div(a, d):
    """``a / d`` when every term of the sum ``a`` divides exactly, else None."""
    out = sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(a)):
        q = _exact_term_div(t, d)
        if q is None:
            return None
        out += q
    return out


def _is_poly_int(e) -> bool:
    """True when ``e`` is a polynomial with integer coefficients (no division left)."""
    e = sympy.expand(e)
    if e.is_Integer:
        return True
    if not e.is_polynomial() or not e.free_symbols:     # (a non-integer constant: Poly needs a symbol)
        return False
    try:
        return all(c.is_Integer for c in sympy.Poly(e, *sorted(e.free_symbols, key=str)).coeffs())
    except sympy.PolynomialError:
        return False


def sympify(v):
    if isinstance(v, sympy.Basic):
        return v
    if isinstance(v, (bool,)):
        return sympy.Integer(int(v))
    if isinstance(v, int):
        return sympy.Integer(v)
    try:  # numpy integers, SymInt-like objects with a sympy node
        node = getattr(v, "node", None)
        if node is not None:
            expr = getattr(node, "expr", None)
            if expr is not None:
                return expr
        return sympy.Integer(int(v))
    except TypeError as e:  # pragma: no cover - defensive
        raise TypeError(f"inductor: cannot use {v!r} as a size") from e


def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def loop_var(prefix: str, i: int) -> sympy.Symbol:
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def contiguous_strides(size: Sequence) -> List[sympy.Expr]:
    strides: List[sympy.Expr] = []
    acc = sympy.Integer(1)
    for s in reversed(list(size)):
        strides.append(acc)
        acc = acc * s
    return list(reversed(strides))


def product(xs: Iterable) -> sympy.Expr:
    out = sympy.Integer(1)
    for x in xs:
        out = out * x
    return out


def _nonneg(e) -> bool:
    """Provably ``e >= 0`` given every size symbol >= 2 (sizes 0/1 are specialised):
    substitute ``s = 2 + t`` and check every coefficient of the polynomial in ``t``."""
    e = sympy.expand(e)
    if e.is_Number:
        return bool(e >= 0)
    syms = sorted(e.free_symbols, key=str)
    if any(not s.is_positive for s in syms):  # a loop variable or other: unknown
        return False
    ts = [sympy.Symbol(f"_t{i}", nonnegative=True) for i in range(len(syms))]
    e2 = sympy.expand(e.subs({s: 2 + t for s, t in zip(syms, ts)}, simultaneous=True))
    if e2.is_Number:
        return bool(e2 >= 0)
    try:
        return all(bool(c >= 0) for c in sympy.Poly(e2, *ts).coeffs())
    except sympy.PolynomialError:
        return False


class SizeVarAllocator:
    """Owns the size symbols of one graph: their example values (hints), the
    simplifier with loop-variable ranges, and the guards a compiled graph
    relies on."""

    def __init__(self) -> None:
        self.var_to_val: Dict[sympy.Symbol, int] = {}
        self.guards: List[sympy.Expr] = []  # each must be == 0 at run time

    def new_symbol(self, hint: int) -> sympy.Symbol:
        s = size_symbol(f"s{len(self.var_to_val)}")
        self.var_to_val[s] = int(hint)
        return s

    def size_hint(self, expr) -> int:
        expr = sympify(expr)
        return int(expr.subs(self.var_to_val)) if expr.free_symbols else int(expr)

    def simplify(self, expr):
        return sympy.expand(sympify(expr))

    def statically_known_equals(self, a, b) -> bool:
        return sympy.expand(sympify(a) - sympify(b)) == 0

    def guard_equals(self, a, b):
        """Equality the compiled code relies on: proved statically, else checked
        against the hints and recorded as a run-time guard."""
        a, b = sympify(a), sympify(b)
        if self.statically_known_equals(a, b):
            return a
        if self.size_hint(a) != self.size_hint(b):
            raise AssertionError(f"inductor: sizes {a} and {b} differ ({self.size_hint(a)} vs {self.size_hint(b)})")
        self.guards.append(sympy.expand(a - b))
        return a

    # -- index simplification ------------------------------------------------
    def simplify_with_ranges(self, expr, var_ranges: Dict[sympy.Symbol, sympy.Expr]):
        """Remove divisions and modulos that the ranges prove redundant (memoised:
        the same view index is rebuilt by every analysis and codegen pass)."""
        expr = sympify(expr)
        if not expr.has(FloorDiv, ModularIndexing):
            return sympy.expand(expr)
        key = (expr, tuple(sorted(((k, sympify(v)) for k, v in var_ranges.items() if k in expr.free_symbols),
                                  key=lambda kv: kv[0].name)))
        memo = self.__dict__.setdefault("_memo", {})
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self._simplify_with_ranges(expr, var_ranges)
        return hit

    def _simplify_with_ranges(self, expr, var_ranges):
        expr = sympy.expand(expr)

        def visit(e):
            if not e.args:
                return e
            args = [visit(a) for a in e.args]
            if isinstance(e, FloorDiv):
                return _simplify_floordiv(sympy.expand(args[0]), args[1], var_ranges)
            if isinstance(e, ModularIndexing):
                return _simplify_modindex(sympy.expand(args[0]), args[1], args[2], var_ranges)
            return e.func(*args)

        return sympy.expand(visit(expr))


def _split_terms(a, d):
    """Split sum ``a`` into (terms divisible by ``d``, remainder terms)."""
    exact, rest = sympy.Integer(0), sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(a)):
        if _exact_term_div(t, d) is not None:
            exact += t
        else:
            rest += t
    return exact, rest


def _max_value(e, var_ranges):
    """Upper bound of a sum of non-negative terms, each ``coef * var`` with a
    non-negative size-polynomial coefficient, or None when not of that form."""
    total = sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(e)):
        if t.is_Number:
            if t < 0:
                return None
            total += t
            continue
        vars_in = [v for v in t.free_symbols if v in var_ranges]
        if len(vars_in) != 1:
            if not vars_in and _nonneg(t):
                total += t
                continue
            return None
        v = vars_in[0]
        coef = t / v
        if coef.has(v) or not _nonneg(coef):
            return None
        total += coef * (var_ranges[v] - 1)
    return total


def _simplify_floordiv(a, d, var_ranges):
    exact, rest = _split_terms(a, d)
    if exact != 0:
        mx = _max_value(rest, var_ranges)
        if mx is not None and _nonneg(d - 1 - mx):
            return _exact_div(exact, d)
        if mx is not None:
            return _exact_div(exact, d) + FloorDiv(rest, d)
    mx = _max_value(a, var_ranges)
    if mx is not None and _nonneg(d - 1 - mx):
        return sympy.Integer(0)
    return FloorDiv(a, d)


def _simplify_modindex(x, div, mod, var_ranges):
    # terms divisible by div*mod contribute nothing
    exact, rest = _split_terms(x, div * mod)
    x = rest
    if _max_value(x, var_ranges) is None:
        return ModularIndexing(exact + rest, div, mod)
    q = _simplify_floordiv(x, div, var_ranges)
    if isinstance(q, FloorDiv):
        mx = _max_value(x, var_ranges)
        if mx is not None and _nonneg(mod * div - 1 - mx):
            return q
        return ModularIndexing(x, div, mod)
    mx = _max_value(q, var_ranges)
    if mx is not None and _nonneg(mod - 1 - mx):
        return q
    return ModularIndexing(x, div, mod)


# -- printers -------------------------------------------------------------------
class CppIndexPrinter(C99CodePrinter):
    """Index expressions as int64 C++: exact integer ``/`` and ``%``, integer powers."""

    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) / ({self._print(e.args[1])}))"

    def _print_ModularIndexing(self, e):
        x, div, mod = e.args
        inner = self._print(x) if div == 1 else f"(({self._print(x)}) / ({self._print(div)}))"
        return f"(({inner}) % ({self._print(mod)}))"

    def _print_Pow(self, e):
        base, exp = e.args
        if exp.is_Integer and exp > 0:
            return "(" + "*".join([f"({self._print(base)})"] * int(exp)) + ")"
        raise NotImplementedError(f"inductor: non-integer power in an index: {e}")

    def _print_Integer(self, e):
        v = int(e)
        if abs(v) >= 2 ** 31:
            return f"{v}LL"
        return str(v)

    def _print_Symbol(self, e):
        return e.name

    def _print_Max(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"std::max<int64_t>({out}, {a})"
        return out

    def _print_Min(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"std::min<int64_t>({out}, {a})"
        return out

    def _print_Relational(self, e):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[e.rel_op]
        return f"({self._print(e.lhs)} {op} {self._print(e.rhs)})"

    def _print_And(self, e):
        return "(" + " && ".join(self._print(a) for a in e.args) + ")"

    def _print_Or(self, e):
        return "(" + " || ".join(self._print(a) for a in e.args) + ")"

    def _print_BooleanTrue(self, e):
        return "true"

    def _print_BooleanFalse(self, e):
        return "false"

    def _print_Mul(self, e):
        c, rest = e.as_coeff_Mul()
        if c == -1:
            return f"(-{self._print(rest)})"
        return super()._print_Mul(e)


class PyIndexPrinter(StrPrinter):
    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) // ({self._print(e.args[1])}))"

    def _print_ModularIndexing(self, e):
        x, div, mod = e.args
        return f"((({self._print(x)}) // ({self._print(div)})) % ({self._print(mod)}))"


_cpp = CppIndexPrinter()
_py = PyIndexPrinter()


@functools.lru_cache(maxsize=4096)
def _cexpr_cached(e):
    return _cpp.doprint(e)


def cexpr(e) -> str:
    return _cexpr_cached(sympify(e))


def pyexpr(e) -> str:
    return _py.doprint(sympify(e))
