"""Python constants (numbers, strings, None, dtypes, devices, slices, ranges ...)."""
from __future__ import annotations

import operator

from ..exc import Unsupported
from .base import VariableTracker

_LITERAL = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis))


class ConstantVariable(VariableTracker):
    def __init__(self, value, source=None):
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def truthy(self, tx):
        return bool(self.value)

    def unpack(self, tx):
        v = self.value
        if isinstance(v, (str, bytes, range, tuple, frozenset)):
            return [ConstantVariable(x) for x in v]
        raise Unsupported(f"iterating over constant {type(v).__name__}")

    def var_getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"constant {type(self.value).__name__} has no attribute {name}")
        if callable(attr):
            return ConstantMethodVariable(self, name)
        return ConstantVariable(attr)

    def call_method(self, tx, name, args, kwargs):
        return ConstantMethodVariable(self, name).call_function(tx, args, kwargs)

    def reconstruct(self, out):
        if _has_symbolic(self.value):
            from ...fx.experimental.symbolic_shapes import SymInt
            if type(self.value) is SymInt:
                expr = out.sym_int_expr(self.value)
                if expr is not None:
                    return expr
            # leaving the graph as a Python value: specialise (int()/bool() records the guard)
            return ConstantVariable(_concrete(self.value)).reconstruct(out)
        if type(self.value) in _LITERAL and not (isinstance(self.value, float) and self.value != self.value):
            r = repr(self.value)
            if type(self.value) is float and r in ("inf", "-inf"):
                return out.ref(self.value)
            return r
        return out.ref(self.value)

    def __repr__(self):
        return f"ConstantVariable({self.value!r})"


def _has_symbolic(v):
    from ...fx.experimental.symbolic_shapes import is_symbolic
    if type(v) is slice:
        return any(_has_symbolic(x) for x in (v.start, v.stop, v.step))
    if isinstance(v, (tuple, list)):      # (a Size too: ``print(y.shape)`` of a symbolic size printed s0)
        return any(_has_symbolic(x) for x in v)
    return is_symbolic(v)


def _concrete(v):
    from ...fx.experimental.symbolic_shapes import SymBool, SymInt
    if isinstance(v, SymInt):
        return int(v)
    if isinstance(v, SymBool):
        return bool(v)
    if type(v) is slice:
        return slice(_concrete(v.start), _concrete(v.stop), _concrete(v.step))
    if isinstance(v, (tuple, list)):
        items = [_concrete(x) for x in v]
        return type(v)(*items) if hasattr(type(v), "_fields") else type(v)(items)   # (a namedtuple)
    return v


# Methods of constants that are pure functions of their arguments.
_PURE_TYPES = (int, float, bool, str, bytes, complex, tuple, range, slice, frozenset)


class ConstantMethodVariable(VariableTracker):
    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        v = self.obj.value
        if not isinstance(v, _PURE_TYPES) and not _is_ember_meta(v) and not _is_numpy_immutable(v):
            raise Unsupported(f"method {self.name} of {type(v).__name__} constant")
        args = [_constant_iterable(tx, a) for a in args]      # "".join(genexpr) gets its items
        if not all(a.is_python_constant() for a in list(args) + list(kwargs.values())):
            raise Unsupported(f"{type(v).__name__}.{self.name} with non-constant arguments")
        try:
            res = getattr(v, self.name)(*[_specialised(a.as_python_constant()) for a in args],
                                        **{k: _specialised(a.as_python_constant()) for k, a in kwargs.items()})
        except Exception as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"{type(v).__name__}.{self.name} raised {type(e).__name__}: {e}")
        from .builder import wrap_constant_result
        return wrap_constant_result(res)


def _specialised(v):
    """``v`` with symbolic ints/bools as their values (``int()``/``bool()`` record the guard): a
    constant's method is Python's own, and ``'{}'.format(n)`` of an int argument traced as a
    symbolic size printed the symbol (``s0``) where the call prints the number."""
    from ...fx.experimental.symbolic_shapes import SymBool, SymInt
    if isinstance(v, SymInt):
        return int(v)
    if isinstance(v, SymBool):
        return bool(v)
    if isinstance(v, (list, tuple)) and any(isinstance(x, (SymInt, SymBool, list, tuple, dict)) for x in v):
        items = [_specialised(x) for x in v]
        return type(v)(*items) if hasattr(type(v), "_fields") else type(v)(items)   # (a namedtuple)
    if isinstance(v, dict) and any(isinstance(x, (SymInt, SymBool, list, tuple, dict)) for x in v.values()):
        return {k: _specialised(x) for k, x in v.items()}
    return v


def _constant_iterable(tx, a):
    """An iterator over constants (a generator expression's items) as a list constant."""
    from .lists import IteratorVariable
    if getattr(a, "lazy", False):
        a = IteratorVariable(a.unpack(tx))     # (consumed whole by the caller anyway: "".join)
    if isinstance(a, IteratorVariable) and all(i.is_python_constant() for i in a.items[a.pos:]):
        return ConstantVariable([i.as_python_constant() for i in a.unpack(tx)])
    return a


def _is_numpy_immutable(v):
    import numpy as np
    return isinstance(v, (np.generic, np.dtype, np.finfo, np.iinfo)) and not isinstance(v, np.object_)


def _is_ember_meta(v):
    from ... import types as _t
    return isinstance(v, (_t.dtype, _t.device, _t.Size))


class NullVariable(VariableTracker):
    """The NULL CPython pushes under a callable (PUSH_NULL / LOAD_GLOBAL with low bit)."""

    def __repr__(self):
        return "NULL"


class UndefinedVariable(VariableTracker):
    """An unbound local (LOAD_FAST_AND_CLEAR in inlined comprehensions, 3.12+)."""

    def __repr__(self):
        return "UNDEFINED"


def fold_binary(op, a, b, tx=None):
    try:
        return ConstantVariable(op(a, b))
    except Exception as e:
        from .exceptions import raise_from_real
        raise_from_real(tx, e, f"constant {getattr(op, '__name__', op)} raised {type(e).__name__}: {e}")


COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
           ">": operator.gt, ">=": operator.ge}
