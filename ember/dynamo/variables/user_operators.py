"""Python operators on instances of user classes (``Vec(a) + Vec(b)``, ``2 * v``, ``v == w``,
``acc += v``), dispatched as CPython dispatches them, the user's dunder methods inlined.

Arithmetic: an in-place operator tries ``__iadd__`` first; then ``a.__add__(b)``, and if that
is missing or gives ``NotImplemented``, ``b.__radd__(a)`` -- the right operand first when its
class is a proper subclass of the left's that overrides the reflected method. Comparisons:
``a.__lt__(b)``, then the reflection ``b.__gt__(a)``; ``==``/``!=`` fall back to identity.
Neither side answering raises TypeError with CPython's message. Only Python-function dunders
are inlined; a C method (a ``int`` base, say) leaves the operator unsupported. A method read
from the class of an outside object is guarded to stay that method."""
from __future__ import annotations

import inspect
import operator
import types

from ..exc import Unsupported
from .constant import ConstantVariable

_NAMES = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
          operator.floordiv: "floordiv", operator.mod: "mod", operator.pow: "pow", operator.matmul: "matmul",
          operator.and_: "and", operator.or_: "or", operator.xor: "xor", operator.lshift: "lshift",
          operator.rshift: "rshift"}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "** or pow()",
            "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_COMPARE = {operator.eq: ("__eq__", "__eq__", "=="), operator.ne: ("__ne__", "__ne__", "!="),
            operator.lt: ("__lt__", "__gt__", "<"), operator.le: ("__le__", "__ge__", "<="),
            operator.gt: ("__gt__", "__lt__", ">"), operator.ge: ("__ge__", "__le__", ">=")}


def _user_class(v):
    """The class of ``v`` if it is an instance of a user class (made in the frame or outside)."""
    from .dict_objects import DictObjectVariable
    from .objects import NewObjectVariable, UserObjectVariable
    if isinstance(v, DictObjectVariable):
        return None                 # (a dict subclass: its own protocol, variables/dict_objects.py)
    if isinstance(v, NewObjectVariable):
        return v.cls
    if isinstance(v, UserObjectVariable):
        return type(v.obj)
    return None


def _method(tx, v, name):
    """The Python function ``type(v).<name>`` (guarded for an outside object), None if the class
    has no such attribute; Unsupported for one that is not a Python function."""
    cls = _user_class(v)
    if cls is None:
        return None
    fn = inspect.getattr_static(cls, name, None)
    if v.source is not None:
        g = tx.output.guards
        g.add(f"{g.ref(inspect.getattr_static)}(type({v.source.expr()}), {name!r}, None) is {g.ref(fn)}",
              f"{cls.__name__}.{name} unchanged")
    if fn is None or (fn is getattr(object, name, None)):
        return None                 # (object's own __eq__/__ne__...: the identity fallback below)
    if not isinstance(fn, types.FunctionType):
        raise Unsupported(f"{cls.__name__}.{name} is not a Python function")
    return fn


def _call(tx, fn, a, b):
    from .functions import UserFunctionVariable
    res = UserFunctionVariable(fn).call_function(tx, [a, b], {})
    return None if res.is_python_constant() and res.as_python_constant() is NotImplemented else res


def _type_name(v):
    cls = _user_class(v)
    return (cls or v.python_type()).__name__


def user_binary_op(tx, op, a, b):
    """``op(a, b)`` (``operator.add``, ``operator.iadd``, ``operator.lt`` ...) when either side is
    an instance of a user class; None when neither is."""
    from .builtin import INPLACE
    inplace_of = INPLACE.get(op)
    ca, cb = _user_class(a), _user_class(b)
    if ca is None and cb is None:
        return None
    from .tensor import TensorVariable
    if ca is None and isinstance(a, TensorVariable):
        raise Unsupported(f"operator {op.__name__} between a tensor and a {cb.__name__} object")
    if op in _COMPARE:
        return _compare(tx, op, a, b)
    base = inplace_of or op
    name = _NAMES.get(base)
    if name is None:
        raise Unsupported(f"operator {op.__name__} on a {(ca or cb).__name__} object")
    if inplace_of is not None and ca is not None:
        fn = _method(tx, a, f"__i{name}__")
        if fn is not None:
            res = _call(tx, fn, a, b)
            if res is not None:
                return res
    forward = _method(tx, a, f"__{name}__") if ca is not None else None
    reflected = _method(tx, b, f"__r{name}__") if cb is not None and cb is not ca else None
    if reflected is not None and ca is not None and issubclass(cb, ca) and \
            inspect.getattr_static(cb, f"__r{name}__") is not inspect.getattr_static(ca, f"__r{name}__", None):
        res = _call(tx, reflected, b, a)          # (a subclass's override goes first)
        if res is not None:
            return res
        reflected = None
    if forward is not None:
        res = _call(tx, forward, a, b)
        if res is not None:
            return res
    if reflected is not None:
        res = _call(tx, reflected, b, a)
        if res is not None:
            return res
    if ca is None and not a.is_python_constant():
        raise Unsupported(f"operator {op.__name__} between {a} and a {cb.__name__} object")
    from .exceptions import raise_observed
    sym = _SYMBOLS[name] + ("=" if inplace_of is not None and name != "pow" else "")
    raise_observed(tx, TypeError, f"unsupported operand type(s) for {sym}: {_type_name(a)!r} and {_type_name(b)!r}")


def _compare(tx, op, a, b):
    forward_name, reflected_name, sym = _COMPARE[op]
    ca, cb = _user_class(a), _user_class(b)
    order = [(a, forward_name, b), (b, reflected_name, a)]
    if ca is not None and cb is not None and cb is not ca and issubclass(cb, ca):
        order.reverse()           # (the right operand's subclass goes first)
    for x, name, y in order:
        fn = _method(tx, x, name)
        if fn is not None:
            res = _call(tx, fn, x, y)
            if res is not None:
                return res
    if op in (operator.eq, operator.ne):
        from ..symbolic_convert import _is
        return ConstantVariable(_is(a, b, tx) == (op is operator.eq))
    from .exceptions import raise_observed
    raise_observed(tx, TypeError, f"'{sym}' not supported between instances of {_type_name(a)!r} and "
                                  f"{_type_name(b)!r}")


_UNARY = {operator.neg: ("__neg__", "unary -"), operator.pos: ("__pos__", "unary +"), operator.invert: ("__invert__", "unary ~"),
          operator.abs: ("__abs__", "abs()")}


def user_unary_op(tx, op, a):
    """``-a``, ``+a``, ``~a``, ``abs(a)`` of an instance of a user class; None for anything else."""
    cls = _user_class(a)
    if cls is None or op not in _UNARY:
        return None
    name, sym = _UNARY[op]
    fn = _method(tx, a, name)
    if fn is None:
        from .exceptions import raise_observed
        raise_observed(tx, TypeError, f"bad operand type for {sym}: {cls.__name__!r}")
    from .functions import UserFunctionVariable
    return UserFunctionVariable(fn).call_function(tx, [a], {})


def user_truth(tx, v):
    """``bool(v)`` of an instance of a user class, as CPython decides it: its ``__bool__`` (which
    must return a bool), else ``__len__`` (non-zero; checked as ``len()`` checks it), else True."""
    cls = _user_class(v)
    fn = _method(tx, v, "__bool__")
    if fn is not None:
        from .functions import UserFunctionVariable
        res = UserFunctionVariable(fn).call_function(tx, [v], {})
        val = res.as_python_constant() if res.is_python_constant() else None
        if type(val) is not bool:
            if not res.is_python_constant():
                raise Unsupported(f"{cls.__name__}.__bool__ returned {res}, not a constant")
            from .exceptions import raise_observed
            raise_observed(tx, TypeError, f"__bool__ should return bool, returned {type(val).__name__}")
        return val
    if _method(tx, v, "__len__") is not None:
        from .builtin import _user_len
        return _user_len(tx, v).as_python_constant() != 0
    return True
