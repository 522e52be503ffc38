"""``ValueRanges``: the closed interval a size expression can take.

Why: a ShapeEnv knows more than each symbol's example value -- every backed
size is >= 2, ``constrain_range`` narrows a symbol, a guard ``Eq(s0, 5)`` pins
it. :func:`bound_expr` pushes those intervals through an expression (sums,
products, floor division, min/max, mod, integer powers) so callers can ask
"can this index ever be negative?" without guarding.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

__all__ = ["ValueRanges", "ValueRangeError", "bound_expr"]


class ValueRangeError(ValueError):
    """A value or a requested range falls outside what is allowed."""


def _sympy():
    from .symbolic_shapes import sympy

    return sympy


class ValueRanges:
    """The interval ``[lower, upper]`` (sympy numbers; ``oo`` for unbounded)."""

    __slots__ = ("lower", "upper")

    def __init__(self, lower: Any, upper: Any) -> None:
        sp = _sympy()
        self.lower = sp.sympify(lower)
        self.upper = sp.sympify(upper)
        if (self.lower > self.upper) is sp.true:
            raise ValueRangeError(f"Invalid ranges [{self.lower}:{self.upper}]")

    @classmethod
    def unknown(cls) -> "ValueRanges":
        sp = _sympy()
        return cls(-sp.oo, sp.oo)

    def is_singleton(self) -> bool:
        return self.lower == self.upper

    def __contains__(self, x: Any) -> bool:
        sp = _sympy()
        x = sp.sympify(x)
        return bool(self.lower <= x) and bool(x <= self.upper)

    def __and__(self, other: "ValueRanges") -> "ValueRanges":
        sp = _sympy()
        return ValueRanges(sp.Max(self.lower, other.lower), sp.Min(self.upper, other.upper))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ValueRanges) and self.lower == other.lower and self.upper == other.upper

    def __hash__(self) -> int:
        return hash((self.lower, self.upper))

    def __repr__(self) -> str:
        return f"VR[{self.lower}, {self.upper}]"


def _corners(a: ValueRanges, b: ValueRanges, fn: Callable[[Any, Any], Any]) -> ValueRanges:
    sp = _sympy()
    vals = []
    for x in (a.lower, a.upper):
        for y in (b.lower, b.upper):
            v = fn(x, y)
            if v is sp.nan:
                return ValueRanges.unknown()
            vals.append(v)
    return ValueRanges(sp.Min(*vals), sp.Max(*vals))


def bound_expr(expr: Any, ranges: Dict[Any, ValueRanges]) -> ValueRanges:
    """The range of sympy ``expr`` when each free symbol ``s`` lies in
    ``ranges[s]`` (a symbol without an entry is unbounded). Sound but not
    always tight (a symbol appearing twice is treated as independent)."""
    sp = _sympy()
    expr = sp.sympify(expr)
    if expr.is_Number:
        return ValueRanges(expr, expr)
    if expr in (sp.true, sp.false):
        v = sp.Integer(int(bool(expr)))
        return ValueRanges(v, v)
    if expr.is_Symbol:
        return ranges.get(expr, ValueRanges.unknown())
    args = [bound_expr(a, ranges) for a in expr.args]
    if expr.is_Add:
        lo = sum((a.lower for a in args), sp.Integer(0))
        hi = sum((a.upper for a in args), sp.Integer(0))
        return ValueRanges(lo, hi)
    if expr.is_Mul:
        out = args[0]
        for a in args[1:]:
            out = _corners(out, a, lambda x, y: x * y if not ((x == 0 and y.is_infinite) or (y == 0 and x.is_infinite)) else sp.Integer(0))
        return out
    if expr.is_Pow and expr.exp.is_Integer and int(expr.exp) >= 0:
        base = args[0]
        n = int(expr.exp)
        if n == 0:
            return ValueRanges(1, 1)
        if n % 2 == 1 or base.lower >= 0:
            return ValueRanges(base.lower ** n, base.upper ** n)
        if base.upper <= 0:
            return ValueRanges(base.upper ** n, base.lower ** n)
        return ValueRanges(0, sp.Max(base.lower ** n, base.upper ** n))
    if isinstance(expr, sp.floor):
        return ValueRanges(sp.floor(args[0].lower), sp.floor(args[0].upper))
    if isinstance(expr, sp.ceiling):
        return ValueRanges(sp.ceiling(args[0].lower), sp.ceiling(args[0].upper))
    if isinstance(expr, sp.Max):
        return ValueRanges(sp.Max(*[a.lower for a in args]), sp.Max(*[a.upper for a in args]))
    if isinstance(expr, sp.Min):
        return ValueRanges(sp.Min(*[a.lower for a in args]), sp.Min(*[a.upper for a in args]))
    if isinstance(expr, sp.Mod):
        a, b = args
        if b.lower > 0 and a.lower >= 0:
            if a.upper < b.lower:
                return a
            return ValueRanges(0, b.upper - 1)
    return ValueRanges.unknown()
