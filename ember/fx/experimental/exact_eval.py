"""Size expressions and size guards as Python functions that compute them *exactly*.

Why not ``sympy.lambdify(syms, e, modules="math")``: sympy keeps ``(n + 2) // 3`` as
``floor(n/3 + 2/3)``, which lambdify writes as float arithmetic, and ``7/3 + 2/3`` is
``2.9999999999999996``: the floor comes out one short. That made silent wrong answers in three
places that evaluate sizes at run time: a dynamo size guard (a ceil_mode pooling graph compiled
for H=6 was reused at H=7 and returned a row too many), an int a compiled frame returns
(``(x.shape[-1] + 2) // 3``) and a dynamic graph's saved sizes (a backward of the wrong size).

``exact_function(syms, e)`` prints ``e`` as integer Python: ``floor(p/q)`` as ``(p) // (q)`` of
its integer numerator and denominator, ``ceiling`` likewise, relations as comparison operators,
``And``/``Or``/``Not``, ``Max``/``Min``, ``Mod`` as ``%``. Whatever it cannot print that way (a
rational left outside a floor, a function Python lacks) is evaluated by sympy on integers,
exactly, at a higher cost per call. The printed function is also checked against sympy on a few
probe values before it is used.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .symbolic_shapes import sympy


class _Unprintable(Exception):
    pass


def _printer():
    from sympy.printing.str import StrPrinter

    class IntPrinter(StrPrinter):
        """Integer-exact Python source of a size expression or relation."""

        def _floor_parts(self, arg):
            num, den = sympy.fraction(sympy.together(arg))
            if not (num.is_integer and den.is_integer and den.is_positive):
                raise _Unprintable(str(arg))
            return self._print(num), self._print(den)

        def _print_floor(self, e):
            num, den = self._floor_parts(e.args[0])
            return f"(({num}) // ({den}))"

        def _print_ceiling(self, e):
            num, den = self._floor_parts(e.args[0])
            return f"(-((-({num})) // ({den})))"

        def _print_Rational(self, e):
            if e.q != 1:
                raise _Unprintable(str(e))       # a true division: floats
            return str(e.p)

        def _print_Pow(self, e, rational=False):
            if not (e.exp.is_Integer and e.exp >= 0):
                raise _Unprintable(str(e))
            return f"(({self._print(e.base)}) ** {int(e.exp)})"

        def _print_Mod(self, e):
            return f"(({self._print(e.args[0])}) % ({self._print(e.args[1])}))"

        def _print_Max(self, e):
            return "max(" + ", ".join(self._print(a) for a in e.args) + ")"

        def _print_Min(self, e):
            return "min(" + ", ".join(self._print(a) for a in e.args) + ")"

        def _print_Relational(self, e):
            op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[e.rel_op]
            return f"(({self._print(e.lhs)}) {op} ({self._print(e.rhs)}))"

        def _print_And(self, e):
            return "(" + " and ".join(self._print(a) for a in e.args) + ")"

        def _print_Or(self, e):
            return "(" + " or ".join(self._print(a) for a in e.args) + ")"

        def _print_Not(self, e):
            return f"(not {self._print(e.args[0])})"

        def _print_BooleanTrue(self, e):
            return "True"

        def _print_BooleanFalse(self, e):
            return "False"

        def _print_Function(self, e):
            raise _Unprintable(str(e))

    return IntPrinter()


_PRINTER = None


def _exact(syms, e):
    def run(*vals):
        r = e.xreplace({s: sympy.Integer(int(v)) for s, v in zip(syms, vals)})
        return bool(r) if isinstance(r, sympy.logic.boolalg.Boolean) else int(r)
    return run


def exact_function(syms: Sequence[Any], e) -> Callable[..., Any]:
    """A function of the symbols' integer values returning ``e`` (an int, or a bool for a
    relation) exactly. See the module docstring."""
    global _PRINTER
    syms = list(syms)
    exact = _exact(syms, e)
    if not all(str(s).isidentifier() for s in syms):
        return exact
    if _PRINTER is None:
        _PRINTER = _printer()
    try:
        src = _PRINTER.doprint(e)
    except _Unprintable:
        return exact
    is_bool = isinstance(e, sympy.logic.boolalg.Boolean)
    wrap = "bool" if is_bool else "int"
    try:
        fn = eval(f"lambda {', '.join(str(s) for s in syms)}: {wrap}({src})",  # noqa: S307 - our printer's source
                  {"max": max, "min": min, "int": int, "bool": bool})
        for k in range(3):      # probe values: a name or operator the printer got wrong fails here
            probe = [2 + 5 * k + 3 * i for i in range(len(syms))]
            if fn(*probe) != exact(*probe):
                return exact
    except Exception:  # noqa: BLE001 - whatever the printed code cannot evaluate, sympy can
        return exact
    return fn

