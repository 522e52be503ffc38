"""``random.random()``, ``random.randint(a, b)``, ``random.uniform(a, b)``, ``random.randrange(...)``
and ``random.choice(numbers)`` inside a compiled frame, as torch.compile does: the compiled code
draws the values from Python's ``random`` state itself, before its graph runs and in the
order the frame makes them, so the sequence of draws -- and what the program sees after the
call -- is eager's. A drawn value enters the graph as an input (a 0-d tensor where it meets a
floating tensor in pointwise arithmetic); used by value -- a branch, a comparison, a size, a
format -- it would have to be known while tracing, which it is not: that stops the trace
(graph break, or the frame runs eagerly), never a specialised value.

While tracing, a copy of the random state gives the example values (the real state is not
moved). If the graph raises and the frame re-runs eagerly, the state is put back first."""
from __future__ import annotations

import random

from ..exc import Unsupported


def _random_value_class():
    from ..output_graph import UnspecFloatVariable

    class RandomValueVariable(UnspecFloatVariable):
        """A number drawn from Python's ``random`` by the compiled code (or computed from such numbers
        by ``+ - * /``, see ``symbolic_convert._float_arith``): its source is the drawn value's
        expression; never guarded (guards run before the values are drawn)."""

        is_random = True

        @property
        def value(self):
            raise Unsupported("a number drawn from Python's random module is used by value (a branch, a "
                              "comparison, a size, a conversion): it is only known when the compiled code runs")

        @value.setter
        def value(self, v):
            self._raw = v

        def __repr__(self):
            return f"RandomValueVariable({self._raw!r})"
    return RandomValueVariable


_CLS = None


def random_value_variable(*args):
    global _CLS
    if _CLS is None:
        _CLS = _random_value_class()
    return _CLS(*args)


def is_random_value(v):
    return getattr(v, "is_random", False) is True


class _DrawSource:
    def __init__(self, i):
        self.i = i

    def expr(self):
        return f"__rand[{self.i}]"

    def name(self):
        return f"rand{self.i}"

    def __eq__(self, other):
        return type(self) is type(other) and self.i == other.i

    def __hash__(self):
        return hash(("rand", self.i))


def _draw(name):
    def h(tx, args, kwargs):
        from .constant import ConstantVariable
        from .tensor import TensorVariable
        vals = list(args) + list(kwargs.values())
        if any(isinstance(a, TensorVariable) or is_random_value(a) or not a.is_python_constant() for a in vals):
            raise Unsupported(f"random.{name} with arguments that are not constants")
        pos = [a.as_python_constant() for a in args]
        kw = {k: v.as_python_constant() for k, v in kwargs.items()}
        out = tx.output
        if out.trace_random is None:
            out.trace_random = random.Random()
            out.trace_random.setstate(random.getstate())
        try:
            value = getattr(out.trace_random, name)(*pos, **kw)
        except (ValueError, TypeError, IndexError) as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"random.{name} raised {type(e).__name__}: {e}")
        if type(value) not in (int, float):
            raise Unsupported(f"random.{name} drew a {type(value).__name__} (only numbers are drawn by the "
                              f"compiled code)")
        i = len(out.random_calls)
        out.random_calls.append((getattr(random, name), pos, kw))
        del ConstantVariable
        return random_value_variable(value, _DrawSource(i), out, f"rand{i}")
    return h


def register(handlers):
    for name in ("random", "randint", "uniform", "randrange", "choice"):
        handlers[getattr(random, name)] = _draw(name)
