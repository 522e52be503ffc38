"""Builtins, ``operator`` and ``math`` functions, and Python operators on trackers."""
from __future__ import annotations

import builtins
import collections
import functools
import itertools
import math
import operator
import os
import types
import warnings

from ..exc import ObservedException, SkipFrame, Unsupported, graph_break, skip_frame, step_unsupported
from .base import VariableTracker
from .constant import ConstantVariable, fold_binary
from .environ import getenv_call
from .lists import BaseListVariable, DictVariable, IteratorVariable, LazyIteratorVariable, ListVariable, TupleVariable
from .logging_calls import _ROOT_FUNCTIONS, print_call, root_log_function, warn_call
from .sets import SetVariable, real_iterable, set_binary_op
from .tensor import TensorVariable
from . import sym_scalar
from .sym_scalar import SymScalarVariable

INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
           operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
           operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
           operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
           operator.irshift: operator.rshift, operator.imatmul: operator.matmul}


def _const_or_tensor(v):
    return isinstance(v, TensorVariable) or v.is_python_constant()


def binary_op(tx, op, a, b):
    """``op(a, b)`` for a Python operator function (operator.add, operator.iadd, operator.lt ...)."""
    from .exceptions import TracebackVariable
    from .object_id import ObjectIdVariable
    if isinstance(a, ObjectIdVariable) or isinstance(b, ObjectIdVariable):
        from .object_id import binary as _id_binary
        return _id_binary(tx, op, a, b)        # id() of an object made in the frame
    if isinstance(a, TracebackVariable) or isinstance(b, TracebackVariable):
        return TracebackVariable.binary(tx, op, a, b)
    if isinstance(a, SymScalarVariable) or isinstance(b, SymScalarVariable):
        return sym_scalar.binary(tx, op, a, b)      # a captured .item() (capture_scalar_outputs)
    from .user_operators import user_binary_op
    res = user_binary_op(tx, op, a, b)
    if res is not None:
        return res                                  # (an instance of a user class: its dunders)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if not (_const_or_tensor(a) and _const_or_tensor(b)):
            raise Unsupported(f"{op.__name__} between a tensor and {a if not _const_or_tensor(a) else b}")
        return tx.output.call_function(op, [a, b], {})
    if isinstance(a, SetVariable) or isinstance(b, SetVariable):
        res = set_binary_op(tx, op, a, b)
        if res is not None:
            return res
        raise Unsupported(f"operator {op.__name__} on {a} and {b}")
    if isinstance(a, DictVariable) and INPLACE.get(op, op) is operator.or_ and (
            op is operator.ior or isinstance(b, DictVariable)):
        # ``d | e`` (two dicts: a copy of d, updated) and ``d |= e`` (e: a dict or pairs)
        if op is operator.ior:
            a._check_mutable(tx)
            a.update_from(tx, b)
            return a
        new = a.copy()
        new.update_from(tx, b)
        return new
    if INPLACE.get(op, op) is operator.mod and isinstance(a, ConstantVariable) \
            and isinstance(a.value, (str, bytes)):
        return _percent_format(tx, op, a, b)
    if a.is_python_constant() and b.is_python_constant() and not isinstance(a, BaseListVariable) \
            and not isinstance(b, BaseListVariable) and not isinstance(a, DictVariable):
        return fold_binary(op, a.as_python_constant(), b.as_python_constant(), tx)
    base = INPLACE.get(op, op)
    # a constant tuple/list beside a container of trackers (``all_hidden = () ; all_hidden +
    # (x,)``): the constant's items as trackers, so the container rules below apply
    a, b = _as_container(a, b), _as_container(b, a)
    if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
        if base is operator.add and a.python_type() is list and b.python_type() is list:
            if op is operator.iadd:
                a._check_mutable(tx)
                a.items.extend(b.items)
                return a
            return ListVariable(a.items + b.items)
        if base is operator.add and issubclass(a.python_type(), tuple) and issubclass(b.python_type(), tuple):
            return TupleVariable(a.items + b.items)
        if op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
            if a.is_python_constant() and b.is_python_constant():
                return fold_binary(op, a.as_python_constant(), b.as_python_constant())
    if isinstance(a, BaseListVariable) and base is operator.add and op is operator.iadd \
            and a.python_type() is list:
        a._check_mutable(tx)
        a.items.extend(b.unpack(tx))
        return a
    if base is operator.mul and isinstance(b, BaseListVariable) and not isinstance(a, BaseListVariable):
        a, b = b, a            # ``n * [None]``
    if isinstance(a, BaseListVariable) and base is operator.mul and b.is_python_constant() \
            and _int_like(b.as_python_constant()):
        # (a symbolic size ``[None] * x.shape[0]`` is specialised: int() guards its value, and
        # another size recompiles, as torch.compile does; unsupported, the frame ran eagerly)
        items = a.items * int(b.as_python_constant())
        return ListVariable(items) if a.python_type() is list else TupleVariable(items)
    if isinstance(a, BaseListVariable) and op in (operator.eq, operator.ne) and b.is_python_constant():
        if a.is_python_constant():
            return fold_binary(op, a.as_python_constant(), b.as_python_constant())
    if op in (operator.eq, operator.ne) and hasattr(a, "module") and hasattr(b, "module"):
        return ConstantVariable((a.module is b.module) == (op is operator.eq))
    raise Unsupported(f"operator {op.__name__} on {a} and {b}")


def _percent_format(tx, op, a, b):
    """``'%d/%s' % (n, shape)``: printf-style formatting of a constant string, folded when every
    value is a constant. The tuple (or mapping) of values arrives as a container tracker, which the
    plain fold leaves out; a symbolic int in it is formatted as its value (``int()`` records the
    guard) as the call would print it, not as its symbol. Before, the whole frame ran eagerly."""
    from .constant import _specialised
    if not b.is_python_constant():
        raise Unsupported(f"operator {op.__name__} on {a} and {b} (a value that is not a constant)")
    vals = _specialised(b.as_python_constant())
    return fold_binary(operator.mod, a.value, vals, tx)


def _int_like(v):
    from ...fx.experimental.symbolic_shapes import SymInt
    return isinstance(v, (int, SymInt))


def _as_container(v, other):
    if isinstance(other, BaseListVariable) and isinstance(v, ConstantVariable) and \
            type(v.value) in (tuple, list):
        items = [ConstantVariable(i) for i in v.value]
        return TupleVariable(items) if type(v.value) is tuple else ListVariable(items)
    return v


def unary_op(tx, op, a):
    if isinstance(a, SymScalarVariable):
        return sym_scalar.unary(tx, op, a)
    if isinstance(a, TensorVariable):
        if op is operator.not_:
            raise Unsupported("`not tensor` depends on tensor data")
        return tx.output.call_function(op, [a], {})
    if op is operator.not_:
        return ConstantVariable(not a.truthy(tx))
    from .user_operators import user_unary_op
    res = user_unary_op(tx, op, a)
    if res is not None:
        return res                      # (an instance of a user class: its __neg__ ...)
    if a.is_python_constant():
        try:
            return ConstantVariable(op(a.as_python_constant()))
        except Exception as e:
            raise Unsupported(f"{op.__name__} raised {e}")
    raise Unsupported(f"{op.__name__} of {a}")


def _consts(args, keep_symbolic=False):
    """Argument values for folding a builtin; symbolic sizes are specialised (int()/bool(),
    which record a guard) unless the builtin is size arithmetic that keeps them symbolic."""
    vals = [a.as_python_constant() for a in args]
    if keep_symbolic:
        return vals
    from .constant import _specialised
    return [_specialised(v) for v in vals]     # (inside containers too: str(x.shape) printed s0)


# builtins that take a captured .item() (variables/sym_scalar.py) as any other value
_SYM_SCALAR_PASS = {isinstance, type, id, print, callable, list, tuple, getattr, hasattr, setattr, iter, len, sum}

def _divmod(a, b):
    """``divmod`` that also takes symbolic sizes (SymInt has ``//`` and ``%`` but no
    ``__divmod__``: ``divmod(x.shape[0], 2)`` raised TypeError once the size was dynamic)."""
    from ...fx.experimental.symbolic_shapes import SymInt
    if isinstance(a, SymInt) or isinstance(b, SymInt):
        if not all(isinstance(v, (SymInt, int)) for v in (a, b)):
            return divmod(a, b)       # the TypeError eager raises
        return a // b, a % b
    return divmod(a, b)


_divmod.__name__ = "divmod"

# builtins that handle SymInt sizes themselves (arithmetic, comparisons by guarded decisions)
_SYMBOLIC_SAFE = {max, min, abs, divmod, _divmod, pow, int, bool, float, operator.index}


class BuiltinVariable(VariableTracker):
    CLASS_CALLS = {list, tuple, dict, int, float, bool, str, range, enumerate, zip, reversed, slice,
                   map, filter, type, set, frozenset, itertools.chain, itertools.product, itertools.permutations,
                   itertools.combinations, itertools.combinations_with_replacement, itertools.pairwise,
                   itertools.zip_longest, itertools.islice, itertools.repeat, itertools.accumulate,
                   itertools.starmap, itertools.compress, itertools.takewhile, itertools.dropwhile,
                   itertools.count, itertools.cycle, operator.itemgetter, operator.attrgetter, collections.deque,
                   complex, bytes}
    _OPERATOR_BINARY = {getattr(operator, n) for n in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor",
        "lshift", "rshift", "lt", "le", "eq", "ne", "gt", "ge", "iadd", "isub", "imul", "itruediv",
        "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "ilshift", "irshift", "imatmul")}
    _OPERATOR_UNARY = {operator.neg, operator.pos, operator.invert, operator.not_, operator.abs,
                       operator.truth, operator.index}

    def __init__(self, fn):
        self.fn = fn

    @classmethod
    def supports(cls, value):
        if not callable(value):
            return False
        try:
            if value in cls.CLASS_CALLS or value in _HANDLERS:
                return True
            if value in cls._OPERATOR_BINARY or value in cls._OPERATOR_UNARY:
                return True
        except Exception:   # unhashable or a __hash__ that raises: not a builtin we know
            return False
        mod = getattr(value, "__module__", None)
        return callable(value) and mod == "math"

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def reconstruct(self, out):
        return out.ref(self.fn)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if any(isinstance(a, SymScalarVariable) for a in args) and fn not in _SYM_SCALAR_PASS and \
                fn not in self._OPERATOR_BINARY and fn not in self._OPERATOR_UNARY:
            return sym_scalar.call_builtin(tx, fn, args, kwargs)
        if fn in self._OPERATOR_BINARY and len(args) == 2 and not kwargs:
            return binary_op(tx, fn, args[0], args[1])
        if fn in self._OPERATOR_UNARY and len(args) == 1 and not kwargs:
            if fn is operator.truth:
                return ConstantVariable(args[0].truthy(tx))
            if fn is operator.abs:
                return _abs(tx, args, kwargs)
            if fn is operator.index and isinstance(args[0], SymScalarVariable):
                return sym_scalar.call_builtin(tx, fn, args, kwargs)
            return unary_op(tx, fn, args[0])
        h = _HANDLERS.get(fn)
        if h is not None:
            return h(tx, args, kwargs)
        if getattr(fn, "__module__", None) == "math":
            if all(a.is_python_constant() for a in args) and not kwargs:
                try:
                    return ConstantVariable(fn(*_consts(args)))
                except Exception as e:
                    raise Unsupported(f"math.{fn.__name__} raised {e}")
            raise Unsupported(f"math.{fn.__name__} on non-constants (tensor values would be read)")
        raise Unsupported(f"builtin {getattr(fn, '__name__', fn)}")

    def var_getattr(self, tx, name):
        if self.fn is itertools.chain and name == "from_iterable":
            return BuiltinVariable(_CHAIN_FROM_ITERABLE)
        attrs = _HANDLER_ATTRS.get(self.fn) if type(self.fn).__hash__ is not None else None
        if attrs is not None and name in attrs:      # ember._dynamo.comptime's shortcuts
            return BuiltinVariable(attrs[name])
        if name in ("__name__", "__qualname__", "__module__", "__doc__") and hasattr(self.fn, name):
            return ConstantVariable(getattr(self.fn, name))      # ``type(n).__name__``: fixed text
        raise Unsupported(f"attribute {name!r} of builtin {getattr(self.fn, '__name__', self.fn)}")

    def __repr__(self):
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"


def _all_const(args, kwargs=None):
    return all(a.is_python_constant() for a in args) and all(
        a.is_python_constant() for a in (kwargs or {}).values())


def _fold(fn):
    def h(tx, args, kwargs):
        if not _all_const(args, kwargs):
            raise Unsupported(f"{fn.__name__}() of non-constant arguments")
        try:
            res = fn(*_consts(args, fn in _SYMBOLIC_SAFE), **{k: v.as_python_constant() for k, v in kwargs.items()})
        except Exception as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"{fn.__name__}() raised {type(e).__name__}: {e}")
        from .builder import wrap_constant_result
        return wrap_constant_result(res)
    return h


def _len(tx, args, kwargs):
    (a,) = args
    if isinstance(a, TensorVariable):
        if a.example.ndim == 0:
            raise Unsupported("len() of a 0-d tensor")
        return ConstantVariable(a.example.shape[0])
    if isinstance(a, (BaseListVariable, DictVariable)):
        return ConstantVariable(len(a.items))
    if hasattr(a, "length"):
        return ConstantVariable(a.length(tx))
    if a.is_python_constant():
        return ConstantVariable(len(a.as_python_constant()))
    n = _user_len(tx, a)
    if n is not None:
        return n
    raise Unsupported(f"len() of {a}")


def _user_len(tx, a):
    """``len(obj)`` of an instance of a user class with a Python ``__len__``: inlined, its result
    checked as CPython checks it (an int, not negative). None: not such an object."""
    from .functions import UserFunctionVariable
    from .user_operators import _method, _user_class
    cls = _user_class(a)
    if cls is None or cls.__getattribute__ is not object.__getattribute__:
        return None
    fn = _method(tx, a, "__len__")
    if fn is None:
        return None
    n = UserFunctionVariable(fn).call_function(tx, [a], {})
    if not n.is_python_constant():
        raise Unsupported(f"{cls.__name__}.__len__ returned {n}, not a constant")
    val = _consts([n])[0]
    from .exceptions import raise_observed
    if not isinstance(val, int):
        raise_observed(tx, TypeError, f"{type(val).__name__!r} object cannot be interpreted as an integer")
    if val < 0:
        raise_observed(tx, ValueError, "__len__() should return >= 0")
    return ConstantVariable(int(val))


def _isinstance(tx, args, kwargs):
    obj, cls = args
    if not cls.is_python_constant():
        raise Unsupported("isinstance with a non-constant class")
    c = cls.as_python_constant()
    if isinstance(obj, TensorVariable) and isinstance(c, type) and \
            type(c).__instancecheck__ is not type.__instancecheck__:
        # a class whose metaclass decides membership (ember.FloatTensor tests the dtype, ABCs):
        # ask it about the example tensor (its dtype/device are guarded), not about the type
        return ConstantVariable(isinstance(obj.example, c))
    try:
        pt = obj.python_type()
    except Unsupported:
        raise Unsupported(f"isinstance of {obj}")
    try:
        return ConstantVariable(issubclass(pt, c))
    except TypeError as e:
        raise Unsupported(f"isinstance raised {e}")


def _range(tx, args, kwargs):
    return _fold(range)(tx, args, kwargs)


def _iter_items(tx, v):
    from .lists import _user_iterator
    it = _user_iterator(tx, v)          # (an instance of a user class: its __iter__/__getitem__)
    return (it if it is not None else v).unpack(tx)


def _lazy(v):
    """A generator, or something built on one: its items must be made when asked for. (Not an
    ``enumerate``/``zip`` over lists, which is lazy only to read its lists step by step: the
    helpers that take all items at once may take its items at once, as they do a list's.)"""
    from .lists import RebuildableLazyIteratorVariable
    return getattr(v, "lazy", False) and not isinstance(v, RebuildableLazyIteratorVariable)


def _as_iterator(tx, v):
    from .lists import iterator_of
    return iterator_of(tx, v)


def _live(v):
    """Whether iterating ``v`` must read it step by step: a list (a loop over ``enumerate(ys)``
    may append to ``ys``), a dict or one of its views (a loop may set a later value, or break
    the graph in a call that changes the dict), an iterator over one, or a rebuildable lazy iterator."""
    from .lists import (DictKeyIteratorVariable, DictViewVariable, ListIteratorVariable, OutsideListVariable,
                        RebuildableLazyIteratorVariable)
    from .dict_objects import DictObjectVariable
    return type(v) in (ListVariable, OutsideListVariable, DictVariable, DictViewVariable) or isinstance(
        v, (ListIteratorVariable, RebuildableLazyIteratorVariable, DictKeyIteratorVariable, DictObjectVariable))


def enumerate_of(it, start):
    """``enumerate`` over iterator tracker ``it``, item by item (lazy); rebuildable at a graph
    break when ``it`` is (``enumerate(<it there>, <count>)``)."""
    from .lists import RebuildableLazyIteratorVariable, rebuildable
    count = [start]

    def step(tx):
        v = it.next(tx)
        if v is None:
            return None
        count[0] += 1
        return TupleVariable([ConstantVariable(count[0] - 1), v])
    if rebuildable(it):
        return RebuildableLazyIteratorVariable(
            step, enumerate, lambda out: f"enumerate({out.materialize(it)}, {count[0]})")
    return LazyIteratorVariable(step, enumerate)


def zip_of(its, strict=False):
    """``zip`` over iterator trackers, item by item (lazy); rebuildable when they all are.
    ``strict``: when one runs out, CPython's checks and messages (the others are asked for one
    more item only if the first ran out)."""
    from .lists import RebuildableLazyIteratorVariable, rebuildable

    def step(tx):
        got = []
        for i, it in enumerate(its):    # in order: eager zip takes the earlier ones' items before it stops
            v = it.next(tx)
            if v is None:
                if strict:
                    _zip_strict_check(tx, its, i)
                return None
            got.append(v)
        return TupleVariable(got)
    if all(rebuildable(it) for it in its):
        flag = "strict=True" if strict else ""
        return RebuildableLazyIteratorVariable(
            step, zip, lambda out: f"zip({''.join(out.materialize(it) + ', ' for it in its)}{flag})")
    return LazyIteratorVariable(step, zip)


def _zip_strict_check(tx, its, i):
    """``zip(strict=True)`` whose iterator ``i`` ran out: raises as CPython's zip does."""
    from .exceptions import raise_observed

    def which(k):
        return f"argument{' ' if k == 1 else 's 1-'}{k}"
    if i:
        raise_observed(tx, ValueError, f"zip() argument {i + 1} is shorter than {which(i)}")
    for k in range(1, len(its)):
        if its[k].next(tx) is not None:
            raise_observed(tx, ValueError, f"zip() argument {k + 1} is longer than {which(k)}")


def _enumerate(tx, args, kwargs):
    from .lists import iterator_of
    start = kwargs["start"].as_python_constant() if "start" in kwargs else (
        args[1].as_python_constant() if len(args) > 1 else 0)
    if _lazy(args[0]) or _live(args[0]):
        return enumerate_of(iterator_of(tx, args[0]), start)
    items = _iter_items(tx, args[0])
    return IteratorVariable([TupleVariable([ConstantVariable(i + start), v]) for i, v in enumerate(items)])


def _zip(tx, args, kwargs):
    if set(kwargs) - {"strict"}:
        raise Unsupported("zip() with keyword arguments other than strict (the program raises TypeError)")
    strict = "strict" in kwargs
    if strict:
        if not kwargs["strict"].is_python_constant():
            raise Unsupported("zip(strict=...) with a value that is not a constant")
        strict = bool(kwargs["strict"].as_python_constant())
    if strict or any(_lazy(a) or _live(a) for a in args):
        # (strict: item by item, so that the loop body runs before the mismatch raises, as eagerly)
        return _zip_lazy(tx, args, strict)
    lists = [_iter_items(tx, a) for a in args]
    return IteratorVariable([TupleVariable(list(t)) for t in zip(*lists)])


def _zip_lazy(tx, args, strict=False):
    from .lists import iterator_of
    return zip_of([iterator_of(tx, a) for a in args], strict)


def _reversed(tx, args, kwargs):
    from .lists import OutsideListVariable, ReversedListIteratorVariable
    if len(args) == 1 and not kwargs and type(args[0]) in (ListVariable, OutsideListVariable):
        return ReversedListIteratorVariable(args[0])     # (read step by step, as a list's iterator)
    return IteratorVariable(list(reversed(_iter_items(tx, args[0]))))


def _list(tx, args, kwargs):
    return ListVariable(_iter_items(tx, args[0]) if args else [])


def _tuple(tx, args, kwargs):
    return TupleVariable(_iter_items(tx, args[0]) if args else [])


def _dict(tx, args, kwargs):
    from .dict_objects import DictObjectVariable
    items = {}
    if args:
        a = args[0]
        if isinstance(a, DictObjectVariable):
            a = a.as_dict_variable(tx)
        if isinstance(a, DictVariable):
            items.update(a.items)
        else:
            for kv in _iter_items(tx, a):
                k, v = kv.unpack(tx)
                items[k.as_python_constant()] = v
    for k, v in kwargs.items():
        items[k] = v
    return DictVariable(items)


def _sorted(tx, args, kwargs):
    from .lists import sort_items
    return ListVariable(sort_items(tx, _iter_items(tx, args[0]), kwargs))


def _minmax(pyfn):
    """``max``/``min`` over constants, folded; over any items (tensors too) with a ``key`` whose
    values are constants (``max(ts, key=lambda t: t.shape[0])``): the key is traced once per item
    in order, as Python calls it, and the item returned is the first one with the extreme key."""
    def h(tx, args, kwargs):
        unknown = set(kwargs) - {"key", "default"}
        if unknown or not args:
            raise Unsupported(f"{pyfn.__name__}() with arguments {sorted(unknown) or '(none)'}")
        if len(args) > 1 and "default" in kwargs:
            raise Unsupported(f"{pyfn.__name__}() with several arguments and default= (the program raises)")
        items = _iter_items(tx, args[0]) if len(args) == 1 else list(args)
        key = kwargs.get("key")
        if key is not None and key.is_python_constant() and key.as_python_constant() is None:
            key = None
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            from .exceptions import raise_from_real
            try:
                pyfn(())
            except ValueError as e:
                raise_from_real(tx, e, f"{pyfn.__name__}() of an empty sequence")
        keys = items if key is None else [key.call_function(tx, [i], {}) for i in items]
        from .lists import traced_comparisons, traced_key
        if traced_comparisons(keys):         # (instances of user classes: their __lt__/__gt__)
            return items[pyfn(range(len(items)), key=lambda i: traced_key(tx, keys[i]))]
        if not all(k.is_python_constant() and not isinstance(k, TensorVariable) for k in keys):
            raise Unsupported(f"{pyfn.__name__}() of tensors compares data")
        vals = _consts(keys)
        try:
            pick = pyfn(range(len(items)), key=vals.__getitem__)
        except TypeError as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"{pyfn.__name__}() raised TypeError: {e}")
        return items[pick] if key is not None else ConstantVariable(vals[pick])
    return h


def _sum(tx, args, kwargs):
    items = _iter_items(tx, args[0])
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    acc = start
    for i in items:
        acc = binary_op(tx, operator.add, acc, i)
    return acc


def _abs(tx, args, kwargs):
    (a,) = args
    if isinstance(a, TensorVariable):
        return tx.output.call_function(builtins.abs, [a], {})
    from .user_operators import user_unary_op
    res = user_unary_op(tx, operator.abs, a)
    if res is not None:
        return res
    return _fold(abs)(tx, args, kwargs)


def _anyall(pyfn):
    def h(tx, args, kwargs):
        if _lazy(args[0]):       # a generator is consumed up to the deciding item, as eagerly
            it = args[0]
            return ConstantVariable(pyfn(i.truthy(tx) for i in iter(lambda: it.next(tx), None)))
        items = _iter_items(tx, args[0])
        return ConstantVariable(pyfn(i.truthy(tx) for i in items))
    return h


def _scalar_cast(pyfn):
    def h(tx, args, kwargs):
        if args and isinstance(args[0], TensorVariable):
            if pyfn in (float, int) and len(args) == 1 and not kwargs and sym_scalar.capturing():
                # float(t) is float(t.item()): a captured item (config.capture_scalar_outputs)
                return sym_scalar.call_builtin(tx, pyfn, [sym_scalar.capture_item(tx, args[0], [], {})], {})
            raise Unsupported(f"{pyfn.__name__}(tensor) reads tensor data")
        if pyfn is bool and len(args) == 1:
            return ConstantVariable(args[0].truthy(tx))
        return _fold(pyfn)(tx, args, kwargs)
    return h


def _container_lacks(obj, name):
    """A list/tuple/dict/set tracker (whose ``var_getattr`` answers any name with a method
    tracker) whose type has no attribute ``name``."""
    if isinstance(obj, (BaseListVariable, DictVariable, SetVariable)):
        return not hasattr(obj.python_type(), name)
    return False


def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if _container_lacks(obj, name):
        if len(args) == 3:
            return args[2]
        from .exceptions import raise_observed
        raise_observed(tx, AttributeError, f"{obj.python_type().__name__!r} object has no attribute {name!r}")
    if len(args) == 3:
        try:
            return obj.var_getattr(tx, name)
        except ObservedException as e:
            if issubclass(e.exc.exc_type, AttributeError):
                return args[2]          # (the miss is guarded where it was found)
            raise
        except Unsupported:
            if _hasattr_static(obj, name, tx) is False:
                return args[2]
            raise
    return obj.var_getattr(tx, name)


def _module_hasattr(tx, obj, name):
    """``hasattr(module, name)`` for a module without a ``__getattr__``/``__getattribute__`` of its
    own: instance dict, class, parameters, buffers, submodules (guarded when it has a source)."""
    import inspect
    from ...nn.modules.module import Module
    m = obj.module
    cls = type(m)
    if cls.__getattr__ is not Module.__getattr__ or cls.__getattribute__ is not object.__getattribute__:
        return None
    d = m.__dict__
    found = name in d or any(name in d.get(s, {}) for s in ("_parameters", "_buffers", "_modules"))
    if not found:
        try:
            inspect.getattr_static(cls, name)
            found = True
        except AttributeError:
            pass
    if tx is not None and obj.source is not None:
        tx.output.guards.add(f"hasattr({obj.source.expr()}, {name!r}) is {found!r}",
                             f"{obj.source.expr()} {'has' if found else 'has no'} attribute {name!r}")
    return found


def _hasattr_static(obj, name, tx=None):
    import inspect
    from .objects import NewObjectVariable, NNModuleVariable
    if isinstance(obj, NewObjectVariable):
        return obj.has_attr(name)
    if isinstance(obj, NNModuleVariable):
        r = _module_hasattr(tx, obj, name)
        if r is not None:
            return r
    target = getattr(obj, "module", None) or getattr(obj, "obj", None)
    if target is None:
        if obj.is_python_constant():
            return hasattr(obj.as_python_constant(), name)
        return None
    try:
        inspect.getattr_static(target, name)
        return True
    except AttributeError:
        d = getattr(target, "__dict__", {})
        return any(name in d.get(s, {}) for s in ("_parameters", "_buffers", "_modules")) or None


def _user_object_has(tx, obj, name):
    """``hasattr`` on an outside user object, answered without reading the attribute's value (no
    guard on it, no graph input for a tensor): an instance-dict entry, or a plain class
    attribute/method, guarded present. None when reading is needed (descriptors, slots,
    misses -- these go through ``getattr``, which guards a miss)."""
    import inspect
    import types
    from .objects import UserObjectVariable, _static_missing
    if not isinstance(obj, UserObjectVariable) or obj.source is None:
        return None
    target, src = obj.obj, obj.source.expr()
    cls = type(target)
    if cls.__getattribute__ is not object.__getattribute__:
        return None
    g = tx.output.guards
    d = getattr(target, "__dict__", None)
    try:
        attr = inspect.getattr_static(cls, name)
    except AttributeError:
        attr = _NO_OBJECT
    if attr is not _NO_OBJECT and hasattr(type(attr), "__set__"):
        return None           # a data descriptor (property, slot) decides
    if d is not None and name in d:
        g.add(f"{name!r} in {src}.__dict__", f"{src} has attribute {name}")
        return True
    if attr is not _NO_OBJECT and (isinstance(attr, (types.FunctionType, int, float, str, bool, type(None)))):
        if d is not None:
            g.add(f"{name!r} not in {src}.__dict__", f"{name} is not an instance attribute")
        g.add(f"not {g.ref(_static_missing)}(type({src}), {name!r})", f"{cls.__name__} has attribute {name}")
        return True
    return None


def _hasattr(tx, args, kwargs):
    """``hasattr``: the attribute read as ``getattr`` would (an AttributeError raised while tracing
    -- guarded where the miss was found -- is False), else a static lookup."""
    from .objects import NewObjectVariable, NNModuleVariable
    obj, name = args[0], args[1].as_python_constant()
    if isinstance(obj, TensorVariable):
        return ConstantVariable(hasattr(obj.example, name))
    target = getattr(obj, "module", None)
    target = getattr(obj, "obj", None) if target is None else target
    if target is not None and (id(target), name) in tx.output.attr_overlay:
        # written or deleted by the frame: the static lookups below would see the entry state
        try:
            obj.var_getattr(tx, name)
            return ConstantVariable(True)
        except ObservedException as e:
            if issubclass(e.exc.exc_type, AttributeError):
                return ConstantVariable(False)
            raise
    if isinstance(obj, (BaseListVariable, DictVariable, SetVariable)):
        return ConstantVariable(not _container_lacks(obj, name))
    if isinstance(obj, (NewObjectVariable, NNModuleVariable)):
        r = _hasattr_static(obj, name, tx)
        if r is not None:
            return ConstantVariable(r)
    r = _user_object_has(tx, obj, name)
    if r is not None:
        return ConstantVariable(r)
    try:
        obj.var_getattr(tx, name)
        return ConstantVariable(True)
    except ObservedException as e:
        if issubclass(e.exc.exc_type, AttributeError):
            return ConstantVariable(False)
        raise
    except Unsupported:
        r = _hasattr_static(obj, name, tx)
        if r is None:
            raise Unsupported(f"hasattr on {obj}")
        return ConstantVariable(r)


def _iter(tx, args, kwargs):
    from .lists import iterator_of
    if len(args) == 2 and not kwargs:
        return call_iter_of(args[0], args[1])
    if len(args) != 1 or kwargs:
        raise Unsupported("iter() with these arguments (the program raises TypeError)")
    return iterator_of(tx, args[0])


def call_iter_of(fn, sentinel):
    """``iter(fn, sentinel)``, as CPython's callable iterator: each step calls ``fn()``; a result
    that is (or equals) ``sentinel``, or a StopIteration out of ``fn``, ends it for good. A graph
    break hands on a ``CallIter``."""
    from .resumable_iters import CallIter
    if not getattr(fn, "call_function", None):
        raise Unsupported(f"iter(v, sentinel) of {fn}: the program raises TypeError (v must be callable)")

    def step(tx):
        try:
            v = fn.call_function(tx, [], {})
        except ObservedException as e:
            if issubclass(e.exc.exc_type, StopIteration):
                return None
            raise
        a, b = _realized(v), _realized(sentinel)
        if not (a.is_python_constant() and b.is_python_constant()):
            raise Unsupported(f"iter(fn, sentinel) comparing {a} with the sentinel {b}")
        a, b = a.as_python_constant(), b.as_python_constant()
        return None if a is b or a == b else v

    def rebuild(out):
        return f"{out.ref(CallIter)}({out.materialize(fn)}, {out.materialize(sentinel)})"
    return _lazy_iterator(step, type(iter(int, 0)), lambda: [], rebuild)


def _next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorVariable):
        raise Unsupported("next() of a non-iterator")
    v = it.next(tx)
    if v is None:
        if len(args) > 1:
            return args[1]
        from .exceptions import raise_observed
        raise_observed(tx, StopIteration)
    return v


def _str_repr(pyfn):
    def h(tx, args, kwargs):
        from .exceptions import ExceptionVariable
        if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            return args[0].to_str(tx, "__str__" if pyfn is str else "__repr__")
        return _fold(pyfn)(tx, args, kwargs)
    return h


def _map(tx, args, kwargs):
    """Lazy, as Python's: each item is computed when the consumer asks for it (a loop body
    writing in place what ``fn`` reads next sees eager's values; computed at once, it did not).
    ``map(fn, *its)`` is ``starmap(fn, zip(*its))``: CPython's map takes from its iterators in
    order and stops at the first exhausted one, as zip does."""
    if kwargs or len(args) < 2:
        raise Unsupported("map() with these arguments (the program raises TypeError)")
    return starmap_of(args[0], _zip_lazy(tx, args[1:]), map)


def _starmap(tx, args, kwargs):
    """Lazy, as ``map``."""
    if kwargs or len(args) != 2:
        raise Unsupported("itertools.starmap() with these arguments (the program raises TypeError)")
    return starmap_of(args[0], _as_iterator(tx, args[1]), itertools.starmap)


def starmap_of(fn, it, py_type):
    """``fn(*item)`` for each item of iterator tracker ``it`` when the consumer asks for it (``map``
    over a zip, ``starmap``). A graph break hands on a ``resumable_iters.StarMap``."""
    from .resumable_iters import StarMap

    def step(tx):
        t = it.next(tx)
        return None if t is None else fn.call_function(tx, _realized(t).unpack(tx), {})

    def rebuild(out):
        return f"{out.ref(StarMap)}({out.materialize(fn)}, {out.materialize(it)}, {py_type is map})"
    return _lazy_iterator(step, py_type, lambda: [it], rebuild)


def _filter(tx, args, kwargs):
    """Lazy, as ``map``."""
    if kwargs or len(args) != 2:
        raise Unsupported("filter() with these arguments (the program raises TypeError)")
    return filter_of(args[0], _as_iterator(tx, args[1]))


def filter_of(fn, it):
    """The items of iterator tracker ``it`` for which ``fn`` (None: the item itself) is true, each
    tested when the consumer asks. A graph break hands on a ``resumable_iters.Filter``."""
    from .resumable_iters import Filter
    plain = fn.is_python_constant() and fn.as_python_constant() is None

    def step(tx):
        while True:
            v = it.next(tx)
            if v is None or (_realized(v).truthy(tx) if plain else fn.call_function(tx, [_realized(v)], {}).truthy(tx)):
                return v

    def rebuild(out):
        return f"{out.ref(Filter)}({'None' if plain else out.materialize(fn)}, {out.materialize(it)})"
    return _lazy_iterator(step, filter, lambda: [it], rebuild)


def _type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with 3 arguments")
    from .objects import ClassVariable
    t = args[0].python_type()
    if t in BuiltinVariable.CLASS_CALLS:
        return BuiltinVariable(t)
    return ClassVariable(t)


def _callable(tx, args, kwargs):
    from .functions import BaseUserFunctionVariable, UserMethodVariable
    from .objects import ClassVariable, EmberFunctionVariable, NNModuleVariable
    a = args[0]
    from .constant import ConstantMethodVariable
    from .lists import ContainerMethodVariable
    from .objects import PartialVariable
    from .tensor import TensorMethodVariable
    if isinstance(a, (BaseUserFunctionVariable, UserMethodVariable, BuiltinVariable, ClassVariable,
                      EmberFunctionVariable, NNModuleVariable, TensorMethodVariable, ContainerMethodVariable,
                      ConstantMethodVariable, PartialVariable)):
        return ConstantVariable(True)
    if isinstance(a, SetVariable):
        return ConstantVariable(False)
    if isinstance(a, (TensorVariable, BaseListVariable, DictVariable)) or a.is_python_constant():
        return ConstantVariable(callable(a.as_python_constant()) if a.is_python_constant() else False)
    raise Unsupported(f"callable({a})")


def _reduce(tx, args, kwargs):
    fn = args[0]
    items = _iter_items(tx, args[1])
    if len(args) > 2:
        acc = args[2]
    else:
        if not items:
            raise Unsupported("reduce() of empty sequence (the program raises)")
        acc, items = items[0], items[1:]
    for i in items:
        acc = fn.call_function(tx, [acc, i], {})
    return acc


def _chain(tx, args, kwargs):
    """``itertools.chain(*iterables)``: the items of each, materialised (they are trackers) --
    or, over a generator or a list (``_live``: the loop may grow the list it walks), item by
    item, each iterable's iterator made when the chain reaches it, as CPython's chain does."""
    if kwargs:
        raise Unsupported("itertools.chain() takes no keyword arguments")
    if any(_lazy(a) or _live(a) for a in args):
        return _chain_lazy(args)
    out = []
    for a in args:
        out.extend(_iter_items(tx, a))
    return IteratorVariable(out)


def _lazy_iterator(step, py_type, parts, rebuild):
    """A lazy iterator tracker that a graph break can rebuild (``rebuild(out)``) when every
    iterator or iterable in ``parts()`` can be (none is a generator)."""
    from .lists import RebuildableLazyIteratorVariable, rebuildable
    if all(rebuildable(p) for p in parts()):
        return RebuildableLazyIteratorVariable(step, py_type, rebuild)
    return LazyIteratorVariable(step, py_type)


def _realized(v):
    """``v``, or what it stands for if it is a resume function's argument not read yet."""
    realize = getattr(v, "realize", None)
    return realize() if realize is not None else v


def _chain_lazy(args, cur=None):
    """``itertools.chain`` item by item; ``cur``: the iterator it is in (a resumed chain's).
    A graph break hands on a ``resumable_iters.Chain`` in the same state."""
    from .resumable_iters import Chain
    args = list(args)
    state = {"k": 0, "cur": cur}

    def step(tx):
        while True:
            if state["cur"] is None:
                if state["k"] >= len(args):
                    return None
                state["cur"] = _as_iterator(tx, _realized(args[state["k"]]))
                state["k"] += 1
            v = state["cur"].next(tx)
            if v is not None:
                return v
            state["cur"] = None

    def parts():
        return ([state["cur"]] if state["cur"] is not None else []) + args[state["k"]:]

    def rebuild(out):       # (the iterables not reached yet stay iterables: iter() when reached)
        cur = "None" if state["cur"] is None else out.materialize(state["cur"])
        rest = "".join(out.materialize(a) + ", " for a in args[state["k"]:])
        return f"{out.ref(Chain)}({cur}, ({rest}))"
    return _lazy_iterator(step, itertools.chain, parts, rebuild)


def _pairwise_lazy(tx, it, old=None):
    """``itertools.pairwise`` over iterator tracker ``it``, one new item per step, as CPython's;
    ``old``: the last item taken (a resumed pairwise's). A break hands on a ``Pairwise``."""
    from .resumable_iters import Pairwise
    state = {"started": old is not None, "old": old}

    def step(tx):
        if not state["started"]:
            state["started"] = True
            state["old"] = it.next(tx)
        if state["old"] is None:
            return None
        new = it.next(tx)
        pair = None if new is None else TupleVariable([state["old"], new])
        state["old"] = new
        return pair

    def rebuild(out):
        if not state["started"]:
            return f"{out.ref(itertools.pairwise)}({out.materialize(it)})"
        if state["old"] is None:
            return "()"
        return f"{out.ref(Pairwise)}({out.materialize(it)}, {out.materialize(state['old'])})"
    return _lazy_iterator(step, itertools.pairwise, lambda: [it], rebuild)


def _zip_longest_lazy(its, fill, active=None):
    """``itertools.zip_longest`` over iterator trackers, step by step as CPython's: an exhausted
    iterator gives ``fill`` from then on; the round in which the last one runs out ends the
    iteration (the items that round took from the others are dropped). ``active``: which are
    not exhausted (a resumed one's). A break hands on a ``ZipLongest``."""
    from .resumable_iters import ZipLongest
    active = [True] * len(its) if active is None else list(active)

    def step(tx):
        if not any(active):
            return None
        got = []
        for k, it in enumerate(its):
            v = it.next(tx) if active[k] else None
            if v is None:
                if active[k]:
                    active[k] = False
                    if not any(active):
                        return None
                v = fill
            got.append(v)
        return TupleVariable(got)

    def rebuild(out):
        if not any(active):
            return "()"
        parts = "".join((out.materialize(it) if active[k] else "None") + ", " for k, it in enumerate(its))
        return f"{out.ref(ZipLongest)}(({parts}), {out.materialize(fill)})"
    return _lazy_iterator(step, itertools.zip_longest, lambda: its + [fill], rebuild)


def _chain_from_iterable(tx, args, kwargs):
    """``itertools.chain.from_iterable(iterables)``: over a generator or a list (``_live``: the
    loop may grow it) the outer iterable is read one iterable at a time, as CPython's chain
    reads it; otherwise its items are taken at the call."""
    if kwargs or len(args) != 1:
        raise Unsupported("chain.from_iterable() takes one argument")
    if _lazy(args[0]) or _live(args[0]):
        return chain_from_of(_as_iterator(tx, args[0]))
    return _chain(tx, _iter_items(tx, args[0]), {})


def chain_from_of(outer, cur=None):
    """``chain.from_iterable`` over iterator tracker ``outer``, item by item; ``cur``: the
    iterator it is in (a resumed one's). A graph break hands on a ``ChainFrom``."""
    from .resumable_iters import ChainFrom
    state = {"cur": cur}

    def step(tx):
        while True:
            if state["cur"] is None:
                nxt = outer.next(tx)
                if nxt is None:
                    return None
                state["cur"] = _as_iterator(tx, _realized(nxt))
            v = state["cur"].next(tx)
            if v is not None:
                return v
            state["cur"] = None

    def parts():
        return [outer] + ([state["cur"]] if state["cur"] is not None else [])

    def rebuild(out):
        cur = "None" if state["cur"] is None else out.materialize(state["cur"])
        return f"{out.ref(ChainFrom)}({cur}, {out.materialize(outer)})"
    return _lazy_iterator(step, itertools.chain, parts, rebuild)


_CHAIN_FROM_ITERABLE = itertools.chain.from_iterable


def _regroup(fn, n_iterables=None):
    """An ``itertools`` function that only regroups its iterables' items (product, combinations,
    permutations, pairwise, zip_longest, islice): the real function run over the items' trackers
    (they are plain Python objects to it), its other arguments constants."""
    def h(tx, args, kwargs):
        k = len(args) if n_iterables is None else n_iterables
        # islice, pairwise and zip_longest read their iterables step by step in Python (the
        # others take every item first): so must the trace, over a generator or a list
        if fn in (itertools.islice, itertools.pairwise, itertools.zip_longest) and \
                any(_lazy(a) or _live(a) for a in args[:k]):
            if fn is itertools.islice:
                return _islice_lazy(tx, args, kwargs)
            from .lists import iterator_of
            if fn is itertools.pairwise and len(args) == 1 and not kwargs:
                return _pairwise_lazy(tx, iterator_of(tx, args[0]))
            if fn is itertools.zip_longest and set(kwargs) <= {"fillvalue"}:
                return _zip_longest_lazy([iterator_of(tx, a) for a in args],
                                         kwargs.get("fillvalue", ConstantVariable(None)))
            raise Unsupported(f"itertools.{fn.__name__} with these arguments")
        iters = [_iter_items(tx, a) for a in args[:k]]
        rest = args[k:]
        if not all(a.is_python_constant() for a in rest) or \
                not all(v.is_python_constant() for name, v in kwargs.items() if name != "fillvalue"):
            raise Unsupported(f"itertools.{fn.__name__} with non-constant arguments")
        kw = {name: (v if name == "fillvalue" else v.as_python_constant()) for name, v in kwargs.items()}
        if fn is itertools.zip_longest and "fillvalue" not in kw:
            kw["fillvalue"] = ConstantVariable(None)
        try:
            out = list(fn(*iters, *_consts(rest), **kw))
        except (TypeError, ValueError) as e:
            raise Unsupported(f"itertools.{fn.__name__} raised {type(e).__name__}: {e} (the program raises)")
        return IteratorVariable([TupleVariable(list(t)) if isinstance(t, tuple) else t for t in out])
    return h


def _islice_lazy(tx, args, kwargs):
    """``islice(iterable, [start,] stop [, step])`` over a generator or a list."""
    from .lists import iterator_of
    if kwargs or not all(a.is_python_constant() for a in args[1:]):
        raise Unsupported("itertools.islice of a generator or list with non-constant arguments")
    sl = slice(*_consts(args[1:]))
    start, stop, stride = sl.start or 0, sl.stop, sl.step or 1
    if start < 0 or (stop is not None and stop < 0) or stride < 1:
        raise Unsupported("itertools.islice with negative arguments (the program raises)")
    return islice_of(iterator_of(tx, args[0]), 0, start if stop is None else min(start, stop), stop, stride)


def islice_of(it, cnt, nxt, stop, stride):
    """``islice`` over iterator tracker ``it``, stepped as CPython's islice steps (``islice(gen(),
    2)`` runs the generator to its second yield only, as eagerly; after its last item it consumes
    up to ``stop`` at the next step, then ends): ``cnt`` items taken so far, the next one given
    is item ``nxt``. A graph break hands on an ``ISlice`` in the same state."""
    from .resumable_iters import ISlice
    state = {"cnt": cnt, "next": nxt, "done": False}

    def step(tx):
        if state["done"]:
            return None
        while state["cnt"] < state["next"]:
            if it.next(tx) is None:
                state["done"] = True
                return None
            state["cnt"] += 1
        if stop is not None and state["cnt"] >= stop:
            state["done"] = True
            return None
        v = it.next(tx)
        if v is None:
            state["done"] = True
            return None
        state["cnt"] += 1
        state["next"] += stride
        if stop is not None and state["next"] > stop:
            state["next"] = stop
        return v

    def rebuild(out):
        if state["done"]:
            return "()"
        return (f"{out.ref(ISlice)}({out.materialize(it)}, {state['cnt']}, {state['next']}, "
                f"{stop}, {stride})")
    return _lazy_iterator(step, itertools.islice, lambda: [it], rebuild)


def _repeat(tx, args, kwargs):
    """``itertools.repeat(obj[, times])``: with a count, a list of the item; without, endless
    (``repeat_of``)."""
    if not 1 <= len(args) <= 2 or set(kwargs) - {"times"} or (len(args) == 2 and kwargs):
        raise Unsupported("itertools.repeat() with these arguments (the program raises TypeError)")
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        return repeat_of(args[0])
    if not times.is_python_constant() or type(_consts([times])[0]) is not int:
        raise Unsupported("itertools.repeat with a `times` that is not a constant int")
    return IteratorVariable([args[0]] * max(0, _consts([times])[0]))


def _endless(it):
    it.endless = True       # (taking every item -- list(), sorted() -- would not end: refused)
    return it


def repeat_of(obj):
    """``itertools.repeat(obj)``, endless. A graph break hands on a ``Repeat``."""
    from .resumable_iters import Repeat
    held = [obj]

    def step(tx):
        held[0] = _realized(held[0])    # (a resumed Repeat's object: read once)
        return held[0]
    return _endless(_lazy_iterator(step, itertools.repeat, lambda: held,
                                   lambda out: f"{out.ref(Repeat)}({out.materialize(held[0])})"))


def _count(tx, args, kwargs):
    """``itertools.count(start=0, step=1)`` over constant numbers: ``count_of``."""
    names = ("start", "step")
    if len(args) > 2 or set(kwargs) - set(names[len(args):]):
        raise Unsupported("itertools.count() with these arguments (the program raises TypeError)")
    given = dict(zip(names, args), **kwargs)
    vals = [given.get(n, ConstantVariable(d)) for n, d in zip(names, (0, 1))]
    if not all(v.is_python_constant() for v in vals):
        raise Unsupported("itertools.count with a start or step that is not a constant")
    start, step = _consts(vals)
    if not all(type(v) in (int, float) and (type(v) is int or math.isfinite(v)) for v in (start, step)):
        raise Unsupported(f"itertools.count({start!r}, {step!r}): only finite int and float arguments are modelled")
    return count_of(start, step)


def count_of(cur, step):
    """``itertools.count``, giving ``cur`` next: endless. Each item is ``cur`` then, and ``cur``
    grows by ``step`` (as CPython adds, item by item). A break hands on a ``Count``."""
    from .resumable_iters import Count
    state = {"cur": cur}

    def step_fn(tx):
        v = state["cur"]
        state["cur"] = v + step
        return ConstantVariable(v)
    return _endless(_lazy_iterator(step_fn, itertools.count, list,
                                   lambda out: f"{out.ref(Count)}({state['cur']!r}, {step!r})"))


def _cycle(tx, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("itertools.cycle() takes one positional argument (the program raises TypeError)")
    return cycle_of(_as_iterator(tx, args[0]), [], 0)


def cycle_of(it, saved, pos):
    """``itertools.cycle``: its first pass takes items from iterator tracker ``it`` when asked,
    keeping them (``saved``); once ``it`` runs out (None), it gives them again from ``pos``, for
    ever (it ends only if the first pass gave nothing). A break hands on a ``Cycle``."""
    from .resumable_iters import Cycle
    state = {"it": it, "pos": pos}
    saved = list(saved)

    def step(tx):
        if state["it"] is not None:
            v = state["it"].next(tx)
            if v is not None:
                saved.append(v)
                return v
            state["it"] = None
        if not saved:
            return None
        k = state["pos"]
        saved[k] = _realized(saved[k])     # (a resumed Cycle's items: read when reached)
        state["pos"] = (k + 1) % len(saved)
        return saved[k]

    def rebuild(out):
        cur = "None" if state["it"] is None else out.materialize(state["it"])
        items = "".join(out.materialize(v) + ", " for v in saved)
        return f"{out.ref(Cycle)}({cur}, [{items}], {state['pos']})"
    return _endless(_lazy_iterator(step, itertools.cycle, lambda: [] if state["it"] is None else [state["it"]],
                                   rebuild))


def _accumulate(tx, args, kwargs):
    """``itertools.accumulate(iterable[, func], *, initial=None)`` step by step, as CPython's: a
    running total of the items taken so far (``initial`` given first), ``func`` (default ``+``)
    called when the consumer asks for the next item -- a loop may grow the list it walks, or
    change what ``func`` reads. A graph break hands on an ``Accumulate``."""
    if not args or len(args) > 2 or set(kwargs) - {"func", "initial"} or (len(args) == 2 and "func" in kwargs):
        raise Unsupported("itertools.accumulate() with these arguments (the program raises TypeError)")
    func = args[1] if len(args) > 1 else kwargs.get("func")
    if func is not None and func.is_python_constant() and func.as_python_constant() is None:
        func = None
    initial = kwargs.get("initial")
    if initial is not None and initial.is_python_constant() and initial.as_python_constant() is None:
        initial = None
    return accumulate_of(_as_iterator(tx, args[0]), func, initial, initial is not None)


def accumulate_of(it, func, total, pending, has_total=None):
    """``accumulate`` over iterator tracker ``it``: ``total`` the running total (``has_total``:
    there is one; a first item becomes it), ``pending``: the total is given before any item is
    taken (``initial``)."""
    from .resumable_iters import Accumulate
    state = {"total": total, "has": pending if has_total is None else has_total, "pending": pending}

    def step(tx):
        if state["pending"]:
            state["pending"] = False
            return state["total"]
        v = it.next(tx)
        if v is None:
            return None
        if not state["has"]:
            state["total"], state["has"] = v, True
        elif func is None:
            state["total"] = binary_op(tx, operator.add, _realized(state["total"]), _realized(v))
        else:
            state["total"] = func.call_function(tx, [_realized(state["total"]), _realized(v)], {})
        return state["total"]

    def rebuild(out):
        total = out.materialize(state["total"]) if state["has"] else "None"
        fn = "None" if func is None else out.materialize(func)
        return f"{out.ref(Accumulate)}({out.materialize(it)}, {fn}, {total}, {state['has']}, {state['pending']})"
    return _lazy_iterator(step, itertools.accumulate, lambda: [it], rebuild)


def _compress(tx, args, kwargs):
    """``itertools.compress(data, selectors)`` step by step, as CPython's: a datum, then its
    selector, taken when the consumer asks (a loop may grow the lists). A break hands on a
    ``Compress``."""
    names = ("data", "selectors")
    if len(args) > 2 or set(kwargs) - set(names[len(args):]) or len(args) + len(kwargs) != 2:
        raise Unsupported("itertools.compress() with these arguments (the program raises TypeError)")
    data, sel = (list(args) + [kwargs[n] for n in names[len(args):]])
    return compress_of(_as_iterator(tx, data), _as_iterator(tx, sel))


def compress_of(data, sel):
    from .resumable_iters import Compress

    def step(tx):
        while True:
            d = data.next(tx)
            if d is None:
                return None
            s = sel.next(tx)
            if s is None:
                return None
            if _realized(s).truthy(tx):
                return d

    def rebuild(out):
        return f"{out.ref(Compress)}({out.materialize(data)}, {out.materialize(sel)})"
    return _lazy_iterator(step, itertools.compress, lambda: [data, sel], rebuild)


def _while(take):
    """``itertools.takewhile`` (``take``) or ``dropwhile`` step by step, as CPython's: the
    predicate is called on an item when the consumer asks for it, so a loop that grows the list
    or changes what the predicate reads sees eager's items. A break hands on a ``TakeWhile`` or
    ``DropWhile``."""
    name = "takewhile" if take else "dropwhile"

    def h(tx, args, kwargs):
        if kwargs or len(args) != 2:
            raise Unsupported(f"itertools.{name}() takes two positional arguments (the program raises TypeError)")
        return while_of(take, args[0], _as_iterator(tx, args[1]), False)
    return h


def while_of(take, pred, it, done):
    """``takewhile``/``dropwhile`` over iterator tracker ``it``; ``done``: takewhile has stopped
    (its predicate was false once), dropwhile has stopped dropping."""
    from .resumable_iters import DropWhile, TakeWhile
    state = {"done": done}

    def step(tx):
        if take and state["done"]:
            return None
        while True:
            v = it.next(tx)
            if v is None or (not take and state["done"]):
                return v
            keep = pred.call_function(tx, [_realized(v)], {}).truthy(tx)
            if take:
                if keep:
                    return v
                state["done"] = True
                return None
            if not keep:
                state["done"] = True
                return v

    def rebuild(out):
        if take and state["done"]:
            return "()"
        cls = TakeWhile if take else DropWhile
        return f"{out.ref(cls)}({out.materialize(pred)}, {out.materialize(it)}, {state['done']})"
    return _lazy_iterator(step, itertools.takewhile if take else itertools.dropwhile, lambda: [it], rebuild)


class GetterVariable(VariableTracker):
    """``operator.itemgetter(*keys)`` or ``attrgetter(*names)`` over constant keys: calling it
    indexes (reads the attributes, dotted paths included) of its argument as the C type does,
    a tuple for several keys."""

    def __init__(self, fn, keys, source=None):
        self.fn, self.keys, self.source = fn, tuple(keys), source

    def python_type(self):
        return self.fn

    def as_python_constant(self):
        return self.fn(*self.keys)

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            raise Unsupported(f"{self.fn.__name__} object called with these arguments (the program raises TypeError)")
        obj = args[0]
        if self.fn is operator.itemgetter:
            got = [tx.getitem(obj, ConstantVariable(k)) for k in self.keys]
        else:
            got = []
            for name in self.keys:
                v = obj
                for part in name.split("."):
                    v = tx._getattr(v, part)
                got.append(v)
        return got[0] if len(got) == 1 else TupleVariable(got)

    def reconstruct(self, out):
        if self.source is not None:
            return self.source.expr()
        return f"{out.ref(self.fn)}({', '.join(out.materialize(ConstantVariable(k)) for k in self.keys)})"

    def __repr__(self):
        return f"GetterVariable({self.fn.__name__}{self.keys!r})"


def _getter(fn):
    def h(tx, args, kwargs):
        if kwargs or not args or not all(a.is_python_constant() for a in args):
            raise Unsupported(f"operator.{fn.__name__} with these arguments")
        keys = _consts(args)
        if fn is operator.attrgetter and not all(type(k) is str for k in keys):
            raise Unsupported("operator.attrgetter of a non-string (the program raises TypeError)")
        return GetterVariable(fn, keys)
    return h


def _deques():
    from . import deques
    return deques


def _set(tx, args, kwargs):
    if kwargs or len(args) > 1:
        raise Unsupported("set() takes at most one positional argument")
    return SetVariable(set(real_iterable(tx, args[0])) if args else set())


def _frozenset(tx, args, kwargs):
    if kwargs or len(args) > 1:
        raise Unsupported("frozenset() takes at most one positional argument")
    return ConstantVariable(frozenset(real_iterable(tx, args[0])) if args else frozenset())


def _slice(tx, args, kwargs):
    return _fold(slice)(tx, args, kwargs)


def _getitem(tx, args, kwargs):
    return tx.getitem(args[0], args[1])


def _setattr(tx, args, kwargs):
    """``setattr(obj, name, value)`` with a constant name: ``obj.name = value``."""
    if kwargs or len(args) != 3 or not args[1].is_python_constant():
        raise Unsupported("setattr() with a name that is not a constant")
    name = args[1].as_python_constant()
    if type(name) is not str:
        from .exceptions import raise_observed
        raise_observed(tx, TypeError, f"attribute name must be string, not {type(name).__name__!r}")
    tx.store_attr(args[0], name, args[2])
    return ConstantVariable(None)


def _setitem(tx, args, kwargs):
    tx.setitem(args[0], args[1], args[2])
    return ConstantVariable(None)


_HANDLERS = {
    len: _len, isinstance: _isinstance, range: _range, enumerate: _enumerate, zip: _zip,
    reversed: _reversed, list: _list, tuple: _tuple, dict: _dict, sorted: _sorted,
    min: _minmax(min), max: _minmax(max), sum: _sum, abs: _abs, any: _anyall(any), all: _anyall(all),
    int: _scalar_cast(int), float: _scalar_cast(float), bool: _scalar_cast(bool), str: _str_repr(str),
    round: _fold(round), divmod: _fold(_divmod), pow: _fold(pow), getattr: _getattr, hasattr: _hasattr,
    setattr: _setattr, iter: _iter, next: _next, map: _map, filter: _filter, type: _type, print: print_call, callable: _callable,
    functools.reduce: _reduce, slice: _slice, operator.getitem: _getitem, operator.setitem: _setitem,
    issubclass: _fold(issubclass), repr: _str_repr(repr), hash: _fold(hash), chr: _fold(chr), ord: _fold(ord),
    itertools.product: _regroup(itertools.product), itertools.permutations: _regroup(itertools.permutations, 1),
    itertools.combinations: _regroup(itertools.combinations, 1),
    itertools.combinations_with_replacement: _regroup(itertools.combinations_with_replacement, 1),
    itertools.pairwise: _regroup(itertools.pairwise, 1), itertools.zip_longest: _regroup(itertools.zip_longest),
    itertools.islice: _regroup(itertools.islice, 1), itertools.repeat: _repeat,
    itertools.count: _count, itertools.cycle: _cycle,
    operator.itemgetter: _getter(operator.itemgetter), operator.attrgetter: _getter(operator.attrgetter),
    collections.deque: lambda tx, args, kwargs: _deques().make_deque(tx, args, kwargs),
    complex: _fold(complex), bytes: _fold(bytes),
    itertools.accumulate: _accumulate, itertools.starmap: _starmap, itertools.compress: _compress,
    itertools.takewhile: _while(True), itertools.dropwhile: _while(False),
    math.prod: _fold(math.prod), set: _set, frozenset: _frozenset, itertools.chain: _chain, _CHAIN_FROM_ITERABLE: _chain_from_iterable,
}
_HANDLERS[warnings.warn] = warn_call
_HANDLERS[os.getenv] = getenv_call


def _register_exc_info():
    import sys
    from .exceptions import exc_info_call, exception_call
    _HANDLERS[sys.exc_info] = exc_info_call
    if hasattr(sys, "exception"):
        _HANDLERS[sys.exception] = exception_call


_register_exc_info()


def _id(tx, args, kwargs):
    """``id(obj)`` of an object with a stable identity: one read from outside the frame (a
    tensor input, a module, a user object, a function, a class): a constant, guarded by
    ``id(<source>) == <value>`` (no reference kept: an object at the same address has that id).
    Objects made in the frame are new on every call: an ObjectIdVariable (variables/object_id.py)
    stands for their id (compared by tracker, rebuilt at run time, a break where the number is used)."""
    if len(args) != 1 or kwargs:
        raise Unsupported("id() takes one argument")
    a = args[0]
    obj = _NO_OBJECT
    if a.source is not None:
        if isinstance(a, TensorVariable):
            real = tx.output.input_value(a.source)
            obj = real if real is not None else _NO_OBJECT
        else:
            from .functions import UserFunctionVariable
            from .objects import ClassVariable, EmberFunctionVariable, NNModuleVariable, PythonModuleVariable, \
                UserObjectVariable
            holders = {NNModuleVariable: "module", PythonModuleVariable: "module", UserObjectVariable: "obj",
                       ClassVariable: "cls", UserFunctionVariable: "fn", EmberFunctionVariable: "fn"}
            attr = holders.get(type(a))
            if attr is not None:
                obj = getattr(a, attr)
    from .object_id import ObjectIdVariable, trackable
    if obj is _NO_OBJECT and trackable(a):
        return ObjectIdVariable(a)       # made in the frame: its id is known at run time only
    if obj is _NO_OBJECT or isinstance(a, ConstantVariable):
        raise Unsupported(f"id() of {a} (an object made in the frame, or a constant: its identity is not "
                          f"known while tracing)")
    tx.output.guards.add(f"id({a.source.expr()}) == {id(obj)}", f"{a.source.expr()} is the same object")
    return ConstantVariable(id(obj))


_NO_OBJECT = object()


def _dataclass_fields(tx, args, kwargs):
    """``dataclasses.fields(cls_or_obj)``: the class's fields (constants: the class is guarded)."""
    import dataclasses
    if len(args) != 1 or kwargs:
        raise Unsupported("dataclasses.fields() takes one argument")
    a = args[0]
    cls = a.as_python_constant() if a.is_python_constant() and isinstance(a.as_python_constant(), type) \
        else a.python_type()
    try:
        fs = dataclasses.fields(cls)
    except TypeError as e:
        from .exceptions import raise_observed
        raise_observed(tx, TypeError, str(e))
    return TupleVariable([ConstantVariable(f) for f in fs])


def _is_dataclass(tx, args, kwargs):
    import dataclasses
    a = args[0]
    if a.is_python_constant() and isinstance(a.as_python_constant(), type):
        return ConstantVariable(dataclasses.is_dataclass(a.as_python_constant()))
    return ConstantVariable(dataclasses.is_dataclass(a.python_type()))


def _register_dataclass_handlers():
    import dataclasses
    _HANDLERS[dataclasses.fields] = _dataclass_fields
    _HANDLERS[dataclasses.is_dataclass] = _is_dataclass
    _HANDLERS[id] = _id
    from .random_calls import register
    register(_HANDLERS)


_register_dataclass_handlers()


def _msg_of(args, kwargs):
    """The constant ``msg`` argument of graph_break/skip_frame/step_unsupported ('' if none)."""
    v = args[0] if args else kwargs.get("msg")
    return "" if v is None else str(v.as_python_constant()) if v.is_python_constant() else "<not a constant>"


def _graph_break(tx, args, kwargs):
    msg = _msg_of(args, kwargs)
    raise Unsupported("ember.dynamo.graph_break() called" + (f": {msg}" if msg else ""))


def _skip_frame(tx, args, kwargs):
    msg = _msg_of(args, kwargs)
    raise SkipFrame("skip_frame() called" + (f": {msg}" if msg else ""))


def _step_unsupported(tx, args, kwargs):
    msg = _msg_of(args, kwargs)
    e = Unsupported("step_unsupported() called" + (f": {msg}" if msg else ""))
    e.skip_rest = True          # convert_frame: the resume function runs eagerly
    raise e


_HANDLERS[graph_break] = _graph_break
_HANDLER_ATTRS = {}        # handled object -> {attribute: handled function} (comptime.print_graph)


def _fromkeys(tx, args, kwargs):
    """``dict.fromkeys(iterable, value=None)``: every key maps to the same ``value`` tracker (one
    object, as in Python: a list value appended to through one key shows under all)."""
    if kwargs or not 1 <= len(args) <= 2:
        raise Unsupported("dict.fromkeys with these arguments (the program raises TypeError)")
    d = DictVariable({})
    value = args[1] if len(args) > 1 else ConstantVariable(None)
    for k in _iter_items(tx, args[0]):
        d.items[d._key(k, tx)] = value
    return d


_HANDLERS[dict.fromkeys] = _fromkeys
_HANDLER_ATTRS[dict] = {"fromkeys": dict.fromkeys}


def _register_comptime():
    from ..comptime import register
    register(_HANDLERS, _HANDLER_ATTRS)
_HANDLERS[skip_frame] = _skip_frame
_HANDLERS[step_unsupported] = _step_unsupported
_HANDLERS.update({fn: root_log_function(fn) for fn in _ROOT_FUNCTIONS})
_register_comptime()
