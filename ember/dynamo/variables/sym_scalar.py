"""Captured ``.item()`` values (``ember.dynamo.config.capture_scalar_outputs``).

Eager ``t.item()`` turns one tensor element into a Python ``float``/``int``/``bool``. Without the
flag that read breaks the graph. With it, the value stays in the graph as a *symbolic scalar*:
a ``SymScalarVariable`` holding a 0-d tensor node computed from ``t`` (``t.detach()``, reshaped
to 0-d, converted to float64 / int64 / bool -- or cloned when it already is one -- so it holds
the exact value the Python number holds, is not changed by later in-place ops on ``t``, and no
gradient flows through it, as none flows through a Python number).

It is the same kind of value as an unspecialized float argument (``OutputGraph.add_scalar_input``),
except that a graph node makes it instead of a graph input:

* with tensors (``t * s``, ``x.clamp(max=s)``, ``ember.where(m, x, s)``) the 0-d node is first
  converted to the dtype eager would convert the Python number to -- the promotion of the
  tensors with a *Python scalar* of that kind (``types.result_type_from``), so a float32 tensor
  times an item of a float64 tensor stays float32, an int64 tensor times a float item is float32
  -- and the op then runs with the 0-d tensor in the scalar's place (same dtype, same values);
* with other numbers (``s - 1.0``, ``s * 2``, ``-s``, ``s ** 2``, ``s > 0``) the result is a new
  symbolic scalar whose Python type follows Python's rules (int / int is a float, bool + bool
  an int), computed in float64 / int64 as Python computes it;
* ``ember.full(size, s)``, ``ember.tensor(s)``, ``full_like``/``new_full`` build the tensor
  from the 0-d node (expand + copy) with the dtype/device eager chooses for a Python number,
  ``ember.tensor([s, 1.0, n])`` (nested lists too) stacks 0-d nodes of the list's dtype;
  ``x[i] = s``, ``masked_fill``, ``fill_`` convert it to ``x``'s dtype, as eager does;
* ``float(s)``, ``int(s)`` of an int/bool, ``bool(s)``, ``abs(s)`` stay symbolic, and so do
  ``float(t)`` / ``int(t)`` of a one-element tensor (``t.item()`` converted); arithmetic with a
  symbolic size (``s * x.shape[0]`` under dynamic shapes) keeps the size's graph node.

Float16/bfloat16 tensors: eager computes ``t + number`` with the number in float32 math, which
no 0-d operand reproduces (the op casts a 0-d tensor of any dtype to float16 first): such an op
breaks the graph.

Where Python needs the concrete value -- a branch, ``int()`` of a float, a size, an index,
``range()``, a format -- the trace raises ``Unsupported``, which breaks the graph at that
instruction; where no break can be made there (an f-string, a subscript) it breaks at the
``.item()`` call instead (``origin``: the root frame's instruction index). Past a break, in a
returned value or in an outside object, the scalar is rebuilt as ``<graph output>.item()``:
the real Python number.

Not covered (clear graph breaks): an integer item used as a size or index (that needs an
unbacked SymInt, ``capture_dynamic_output_shape_ops``); divisions whose divisor is a symbolic
scalar in Python arithmetic, and integer tensor division/modulo by one (eager raises
ZeroDivisionError for zero, a graph cannot); ``**`` with a symbolic or negative exponent in
Python arithmetic (the result's type or an exception depends on the value); complex items.
Integer arithmetic is int64 (Python ints do not overflow; an int64 item's arithmetic can), and
``float ** int`` gives inf where Python raises OverflowError."""
from __future__ import annotations

import operator

from ... import types as _t
from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .tensor import TensorVariable

# the 0-d dtype that holds a Python number of each type exactly
_CANON = {float: _t.float64, int: _t.int64, bool: _t.bool_}
_PLACEHOLDER = {float: 1.0, int: 1, bool: True}
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _fail(msg, *vals):
    """Unsupported for a use of symbolic scalars, carrying the instruction where the frame can
    break instead when the failing one cannot (the first ``.item()`` call among ``vals``)."""
    e = Unsupported(msg)
    for v in vals:
        if isinstance(v, SymScalarVariable) and v.origin is not None:
            e.item_origin = v.origin
            break
    return e


class SymScalarVariable(VariableTracker):
    """A Python number computed by the graph: ``tensor`` is its 0-d node (dtype ``_CANON[py_type]``).

    ``origin`` is the root frame's instruction index of the ``.item()`` call it comes from
    (None when no break can be made there): see the module docstring."""

    def __init__(self, tensor: TensorVariable, py_type, origin=None):
        self.tensor = tensor
        self.py_type = py_type
        self.origin = origin
        self._casts = {}     # (dtype, device) -> TensorVariable of the converted node

    def python_type(self):
        return self.py_type

    def is_python_constant(self):
        return False

    def as_python_constant(self):
        raise _fail(f"the value of a captured .item() ({self.py_type.__name__}) is needed as a Python "
                    f"constant (capture_scalar_outputs keeps it symbolic: a graph break)", self)

    def truthy(self, tx):
        raise _fail(f"data-dependent control flow: the truth value of a captured .item() "
                    f"({self.py_type.__name__}) is needed (a graph break)", self)

    def unpack(self, tx):
        raise _fail(f"iterating over a captured .item() ({self.py_type.__name__})", self)

    def var_getattr(self, tx, name):
        raise _fail(f"attribute {name!r} of a captured .item() ({self.py_type.__name__}) is not traced", self)

    def call_method(self, tx, name, args, kwargs):
        raise _fail(f"method {name}() of a captured .item() ({self.py_type.__name__}) is not traced", self)

    def reconstruct(self, out):
        # the graph returns the 0-d node; .item() of a float64/int64/bool tensor is a float/int/bool
        return f"{out.tensor_output(self.tensor)}.item()"

    def as_tensor(self, out, dtype, device=None):
        """The 0-d node converted to ``dtype`` (and ``device``): what an op receives in place of
        the Python number it would convert to that dtype."""
        ex = self.tensor.example
        device = ex.device if device is None else device
        if dtype == ex.dtype and device == ex.device:
            return self.tensor
        key = (dtype, str(device))
        hit = self._casts.get(key)
        if hit is None:
            kw = {"dtype": ConstantVariable(dtype)}
            if device != ex.device:
                kw["device"] = ConstantVariable(device)
            hit = self._casts[key] = out.call_method("to", [self.tensor], kw)
        return hit

    def __repr__(self):
        return f"SymScalarVariable({self.py_type.__name__}, {self.tensor.node.name})"


def capturing() -> bool:
    """Whether ``.item()`` is captured (``ember.dynamo.config.capture_scalar_outputs``)."""
    from .. import config
    return bool(config.capture_scalar_outputs)


def _origin(tx):
    """The root frame's current instruction (the ``.item()`` call, or the call of the inlined
    function making it) if a graph break can be made there."""
    from ..symbolic_convert import BREAKABLE
    root = tx.root
    if root.handling:
        return None
    i = root.ip - 1
    if 0 <= i < len(root.instructions) and root.instructions[i].opname in BREAKABLE:
        return i
    return None


def capture_item(tx, tv, args, kwargs):
    """``tv.item()`` as a symbolic scalar (the flag is on)."""
    if args or kwargs:
        raise Unsupported("Tensor.item() takes no arguments (the program raises)")
    ex = tv.example
    from ...fx.experimental.symbolic_shapes import SymInt
    if any(isinstance(n, SymInt) for n in ex.shape):
        raise Unsupported("Tensor.item() of a tensor with symbolic sizes is not captured (its element "
                          "count is only known at run time)")
    n = 1
    for d in ex.shape:
        n *= int(d)
    if n != 1:
        raise Unsupported(f"Tensor.item() of a tensor with {n} elements (the program raises)")
    cat = ex.dtype.category
    if cat not in (0, 1, 2):
        raise Unsupported(f"Tensor.item() of a {ex.dtype} tensor is not captured (capture_scalar_outputs "
                          f"covers floating, integral and bool dtypes)")
    py = (bool, int, float)[cat]
    out = tx.output
    node = out.call_method("detach", [tv], {})
    if ex.ndim:
        node = out.call_method("reshape", [node, ConstantVariable(())], {})
    if ex.dtype != _CANON[py]:
        node = out.call_method("to", [node], {"dtype": ConstantVariable(_CANON[py])})
    else:
        # a copy: detach/reshape are views of ``t``, and a later in-place op on ``t`` must not
        # change the number (eager's Python float was read before it)
        node = out.call_method("clone", [node], {})
    origin = _origin(tx)
    if origin is not None:
        out.item_origins.append(origin)
    return SymScalarVariable(node, py, origin)


# ---------------------------------------------------------------------------- Python arithmetic
_SYM = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
        operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.and_: "&",
        operator.or_: "|", operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>",
        operator.matmul: "@", operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=",
        operator.gt: ">", operator.ge: ">="}
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
            operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
            operator.irshift: operator.rshift, operator.imatmul: operator.matmul}
_COMPARE = {operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge}


def _operand(tx, v, a, b):
    """(Python type, tracker or constant) of one operand of scalar arithmetic."""
    from ..output_graph import UnspecFloatVariable
    if isinstance(v, SymScalarVariable):
        return v.py_type, v
    if isinstance(v, UnspecFloatVariable) and not v._guarded and type(v.raw) in (int, float):
        return type(v.raw), v
    from ...fx.experimental.symbolic_shapes import SymInt
    if isinstance(v, ConstantVariable) and isinstance(v.value, SymInt):
        return int, v.value      # a symbolic size: the graph computes it (a sym_size node)
    if isinstance(v, ConstantVariable) and type(v.value) in (bool, int, float):
        c = v.value
        if type(c) is int and not _INT64[0] <= c <= _INT64[1]:
            raise _fail(f"the int constant {c} does not fit the int64 a captured .item() is computed in", a, b)
        return type(c), c
    raise _fail(f"arithmetic between a captured .item() and {v}", a, b)


def _promote(ta, tb):
    """Python's result type of ``+ - * // %`` between numbers of types ``ta``, ``tb``."""
    if float in (ta, tb):
        return float
    return int


def binary(tx, op, a, b):
    """``op(a, b)`` where ``a`` or ``b`` is a symbolic scalar (called from ``builtin.binary_op``)."""
    out = tx.output
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        # a tensor op: OutputGraph._call converts the scalar (call_with_scalars)
        return out.call_function(op, [a, b], {})
    base = _INPLACE.get(op, op)     # (numbers are immutable: s += 1 is s = s + 1)
    sym = _SYM.get(base)
    if sym is None:
        raise _fail(f"operator {getattr(op, '__name__', op)} on a captured .item()", a, b)
    ta, va = _operand(tx, a, a, b)
    tb, vb = _operand(tx, b, a, b)
    if base in _COMPARE:
        res_t, compute = bool, _promote(ta, tb)
    elif sym in ("+", "-", "*"):
        res_t = compute = _promote(ta, tb)
    elif sym in ("/", "//", "%"):
        if not isinstance(vb, (int, float)):
            raise _fail(f"'{sym}' by a captured .item() in Python arithmetic (eager raises ZeroDivisionError "
                        f"for 0, a graph cannot): a graph break", a, b)
        if vb == 0:
            raise _fail(f"'{sym}' by zero (the program raises ZeroDivisionError)", a, b)
        res_t = float if sym == "/" else _promote(ta, tb)
        compute = float if sym == "/" else res_t
    elif sym == "**":
        if not isinstance(vb, (int, float)) or vb < 0 or (type(vb) is float and not vb.is_integer()):
            raise _fail("'**' with a symbolic, negative or fractional exponent on a captured .item() (the "
                        "result's type, or an exception, depends on the value): a graph break", a, b)
        res_t = compute = _promote(ta, tb)
    elif sym in ("&", "|", "^"):
        if float in (ta, tb):
            raise _fail(f"'{sym}' on a float (the program raises TypeError)", a, b)
        res_t = compute = bool if ta is bool and tb is bool else int
    else:
        raise _fail(f"operator '{sym}' on a captured .item() is not traced (a graph break)", a, b)
    dt = _CANON[compute]
    args = [_as_node(out, v, dt) for v in (va, vb)]
    node = out.call_function(base, args, {})
    if node.example.dtype != _CANON[res_t]:
        node = out.call_method("to", [node], {"dtype": ConstantVariable(_CANON[res_t])})
    return SymScalarVariable(node, res_t, _first_origin(a, b))


def _first_origin(*vals):
    for v in vals:
        if isinstance(v, SymScalarVariable) and v.origin is not None:
            return v.origin
    return None


def _as_node(out, v, dtype):
    """A scalar-arithmetic operand: symbolic ones as 0-d ``dtype`` nodes, constants as they are
    (a Python number beside a 0-d tensor of its category or higher keeps the tensor's dtype)."""
    from ..output_graph import UnspecFloatVariable
    if isinstance(v, SymScalarVariable):
        return v.as_tensor(out, dtype)
    if isinstance(v, UnspecFloatVariable):
        return out.add_scalar_input(v, dtype)
    return ConstantVariable(v)      # (a SymInt too: OutputGraph._call passes it as a size node)


def unary(tx, op, a):
    """``-s``, ``+s``, ``~s``, ``abs(s)`` of a symbolic scalar (``not s`` needs its value)."""
    out = tx.output
    t = a.py_type
    if op in (operator.neg, operator.pos, abs):
        res_t = int if t is bool else t
    elif op is operator.invert:
        if t is float:
            raise _fail("'~' on a float (the program raises TypeError)", a)
        res_t = int
    else:
        raise _fail(f"{getattr(op, '__name__', op)} of a captured .item() needs its value", a)
    node = a.as_tensor(out, _CANON[res_t])
    if op is operator.pos:
        return SymScalarVariable(node, res_t, a.origin)
    if op is abs:
        return SymScalarVariable(out.call_method("abs", [node], {}), res_t, a.origin)
    return SymScalarVariable(out.call_function(op, [node], {}), res_t, a.origin)


def call_builtin(tx, fn, args, kwargs):
    """A builtin called with a symbolic scalar: ``float(s)``, ``int(s)`` of an int/bool,
    ``bool(s)``, ``abs(s)`` stay symbolic; anything else needs the value (a graph break)."""
    out = tx.output
    if len(args) == 1 and not kwargs and isinstance(args[0], SymScalarVariable):
        s = args[0]
        if fn is float:
            return SymScalarVariable(s.as_tensor(out, _t.float64), float, s.origin)
        if fn is int and s.py_type is not float:
            return SymScalarVariable(s.as_tensor(out, _t.int64), int, s.origin)
        if fn is bool:
            return SymScalarVariable(out.call_function(operator.ne, [s.tensor, ConstantVariable(0)], {}),
                                     bool, s.origin)
        if fn is abs or fn is operator.abs:
            return unary(tx, abs, s)
    if fn in (max, min) and len(args) >= 2 and not kwargs:
        return _max_min(tx, fn, args)
    name = getattr(fn, "__name__", fn)
    hint = " (used as a size or index it would need an unbacked SymInt: capture_dynamic_output_shape_ops " \
           "is not supported)" if name in ("range", "int", "index") else ""
    raise _fail(f"{name}() of a captured .item() needs its concrete value{hint}: a graph break",
                *list(args) + list(kwargs.values()))


def _max_min(tx, fn, args):
    """``max(a, b, ...)`` / ``min(...)`` with a symbolic scalar among the numbers, kept
    symbolic when Python's answer has one type whatever the values: all operands ints (bools
    count as ints only if not all are bools) or all floats. Python keeps the first extreme value
    (``b`` replaces ``a`` only if ``b > a``; with NaN ``max(nan, 1)`` is nan, ``max(1, nan)`` is 1),
    so each step is ``where(b > a, b, a)`` -- exactly that, NaN included."""
    out = tx.output
    ops = [_operand(tx, v, *args[:2]) for v in args]
    types = {t for t, _ in ops}
    if types <= {bool}:
        res_t = bool
    elif types <= {int, bool} and bool not in types:
        res_t = int
    elif types == {float}:
        res_t = float
    else:
        raise _fail(f"{fn.__name__}() of a captured .item() and numbers of other types (the result's type "
                    f"depends on the values): a graph break", *args)
    dt = _CANON[res_t]
    from ... import where
    cmp = operator.gt if fn is max else operator.lt
    acc = None                  # a node, or a Python number while only constants were seen
    for _, v in ops:
        if acc is None:
            acc = v if not isinstance(v, VariableTracker) else _as_node(out, v, dt)
        elif not isinstance(v, VariableTracker) and not isinstance(acc, VariableTracker):
            acc = v if cmp(v, acc) else acc           # constants: Python's own step
        else:
            b = v if not isinstance(v, VariableTracker) else _as_node(out, v, dt)
            a = acc if isinstance(acc, VariableTracker) else ConstantVariable(acc)
            bb = b if isinstance(b, VariableTracker) else ConstantVariable(b)
            if isinstance(a, ConstantVariable):     # (a tensor operand first: the op is a tensor op)
                cond = out.call_function(operator.lt if cmp is operator.gt else operator.gt, [a, bb], {})
            else:
                cond = out.call_function(cmp, [bb, a], {})
            acc = out.call_function(where, [cond, bb, a], {})
    if not isinstance(acc, VariableTracker):
        return ConstantVariable(acc)
    if acc.example.dtype != dt:
        acc = out.call_method("to", [acc], {"dtype": ConstantVariable(dt)})
    return SymScalarVariable(acc, res_t, _first_origin(*args))


# ---------------------------------------------------------------------------- ops with scalar args
_BINARY_OPS = {"add", "sub", "mul", "truediv", "div", "floordiv", "floor_divide", "mod", "remainder", "pow",
               "rsub", "true_divide", "subtract", "multiply", "divide", "eq", "ne", "lt", "le", "gt", "ge",
               "fmod", "and", "or", "xor", "bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "minimum",
               "greater", "greater_equal", "less", "less_equal", "not_equal", "float_power", "copysign",
               "atan2", "hypot", "fmax", "fmin", "nextafter", "xlogy", "logaddexp"}
_INT_DIVISION = {"floordiv", "floor_divide", "mod", "remainder", "fmod"}
_CLAMP = {"clamp", "clip", "clamp_", "clip_", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_"}
# ops converting the number to the tensor's own dtype (``x[i] = s`` is operator.setitem)
_SELF_DTYPE = {"masked_fill", "masked_fill_", "fill_", "fill", "index_fill", "index_fill_", "setitem"}
_BUILD = {"full", "full_like", "new_full", "tensor", "as_tensor", "scalar_tensor"}


_ALIAS = {"_full_entry": "full"}    # ember.full's function


def _op_name(target):
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return _ALIAS.get(name, name)


def _binary_base(name):
    n = name.strip("_")
    if n in _BINARY_OPS:
        return n
    if n[:1] in ("r", "i") and n[1:] in _BINARY_OPS:
        return n[1:]
    return None


def _has_sym(v):
    from .lists import BaseListVariable
    if isinstance(v, SymScalarVariable):
        return True
    if isinstance(v, BaseListVariable):
        return any(_has_sym(i) for i in v.items)
    return False


def has_sym_scalars(args, kwargs):
    return any(_has_sym(a) for a in list(args) + list(kwargs.values()))


def call_with_scalars(out, kind, target, runner, args, kwargs, returns_none):
    """An ember operator called with symbolic scalars (from ``OutputGraph._call``).

    The scalars are replaced by their 0-d nodes converted to the dtype eager converts the
    Python number to; the op is first run on the example values with a Python number of the
    same type, and the result's dtype and rank must match what the rewritten call gives (a
    check that the 0-d tensor is taken exactly as the number would be)."""
    name = _op_name(target)
    syms = [v for v in list(args) + list(kwargs.values()) if isinstance(v, SymScalarVariable)]
    nested = [v for v in list(args) + list(kwargs.values()) if _has_sym(v) and not isinstance(v, SymScalarVariable)]
    if nested and name in ("tensor", "as_tensor") and len(nested) == 1 and args and args[0] is nested[0]:
        return _build_nested(out, kind, target, runner, name, args, kwargs)
    if nested:
        raise _fail(f"{name}() got a captured .item() inside a list/tuple argument (not traced: a graph break)",
                    *syms, *[i for v in nested for i in getattr(v, "items", [])])
    base = _binary_base(name)
    strip = name.strip("_")
    if name in _BUILD:
        return _build(out, kind, target, runner, name, args, kwargs)
    if name == "setitem" and (len(args) != 3 or _has_sym(args[1])):
        raise _fail("a captured .item() used as an index (it would need an unbacked SymInt: "
                    "capture_dynamic_output_shape_ops is not supported): a graph break", *syms)
    if base is None and strip not in _CLAMP and name not in _CLAMP and strip != "where" \
            and name not in _SELF_DTYPE:
        raise _fail(f"{name}() got a captured .item() as an argument; ember does not pass a symbolic scalar "
                    f"to this operator (as a size or an index it would need an unbacked SymInt: "
                    f"capture_dynamic_output_shape_ops is not supported): a graph break", *syms)
    if base in ("add", "sub") and isinstance(kwargs.get("alpha"), SymScalarVariable):
        return _alpha_call(out, kind, target, runner, name, args, kwargs, returns_none)
    if base is not None and any(k not in ("other", "input", "exponent", "self") for k, v in kwargs.items()
                                if isinstance(v, SymScalarVariable)):
        raise _fail(f"{name}() got a captured .item() as a keyword argument other than the operand "
                    f"(not traced: a graph break)", *syms)
    expected = _expected(out, runner, name, args, kwargs)
    tensors = [v for v in list(args) + list(kwargs.values()) if isinstance(v, TensorVariable)]
    if not tensors:
        raise _fail(f"{name}() of captured .item() values without a tensor operand (not traced: a graph "
                    f"break)", *syms)
    device = tensors[0].example.device
    if name in _SELF_DTYPE:
        dtype = tensors[0].example.dtype
    else:
        dims = [t.example.dtype for t in tensors if t.example.ndim]
        zero = [t.example.dtype for t in tensors if not t.example.ndim]
        nums = [_PLACEHOLDER[v.py_type] if isinstance(v, SymScalarVariable) else v.value
                for v in list(args) + list(kwargs.values())
                if isinstance(v, SymScalarVariable) or (isinstance(v, ConstantVariable)
                                                       and type(v.value) in (bool, int, float))]
        ci = 0 if kind == "call_function" else 1
        if strip == "where" and len(args) > ci and isinstance(args[ci], TensorVariable):
            # (the condition does not take part in promotion)
            cond = args[ci]
            dims = [t.example.dtype for t in tensors if t.example.ndim and t is not cond]
            zero = [t.example.dtype for t in tensors if not t.example.ndim and t is not cond]
        dtype = _t.result_type_from(dims, zero, nums)
        int_div = base in _INT_DIVISION or (base in ("div", "divide") and "rounding_mode" in kwargs)
        if int_div and dtype.category < 2:
            raise _fail(f"integer {name}() by a captured .item() (eager raises ZeroDivisionError for 0, a graph "
                        f"cannot): a graph break", *syms)
        if dtype in (_t.float16, _t.bfloat16):
            # eager takes the Python number into the op's float32 math (``x * s``: float32(x) *
            # float32(s), rounded once to float16). A 0-d tensor of any dtype is cast to float16
            # by the op first (a tensor operand: torch does the same), 1 ulp off in about half
            # the elements (session 50; a float64 0-d had been assumed to keep its precision)
            # A bool item (0 or 1: exact in any float dtype) keeps the float64 0-d beside a float16
            # tensor with dimensions (the result stays float16; beside 0-d ones only they promote).
            if any(isinstance(v, SymScalarVariable) and v.py_type is not bool
                   for v in list(args) + list(kwargs.values())):
                raise _fail(f"{name}() of a {dtype} tensor with a captured .item() (a 0-d tensor operand would "
                            f"be rounded to {dtype} first; not traced: a graph break)", *syms)
            if not dims or _t.result_type_from(dims, [], []) != dtype:
                raise _fail(f"{name}() of a {dtype} 0-d tensor with a captured .item() (not traced: a graph "
                            f"break)", *syms)
            dtype = _t.float64
        if base in ("pow", "float_power") and dtype.category < 2:
            raise _fail(f"integer {name}() with a captured .item() (eager raises for a negative exponent): a "
                        f"graph break", *syms)

    def sub(v):
        return v.as_tensor(out, dtype, device) if isinstance(v, SymScalarVariable) else v
    res = out._call(kind, target, runner, [sub(a) for a in args], {k: sub(v) for k, v in kwargs.items()},
                    returns_none)
    _check_same(name, expected, res, syms)
    return res


def _alpha_call(out, kind, target, runner, name, args, kwargs, returns_none):
    """``add/sub(x, y, alpha=s)`` (and ``x.add_(y, alpha=s)``) with a captured item as ``alpha``:
    ``x + y * s`` as eager computes it -- ``y`` in the result's dtype times ``alpha`` converted
    to that dtype, then the add -- so the rewrite rounds exactly as eager for float32/float64
    (and integer dtypes with an int alpha). Other dtypes, or ``y`` a number, break."""
    alpha = kwargs["alpha"]
    rest = {k: v for k, v in kwargs.items() if k != "alpha"}
    pos = list(args)
    if len(pos) >= 2:
        other, where = pos[1], 1
    elif "other" in rest:
        other, where = rest["other"], "other"
    else:
        raise _fail(f"{name}(alpha=<captured .item()>) without an operand", alpha)
    if not isinstance(other, TensorVariable) or _has_sym(pos[0]):
        raise _fail(f"{name}(alpha=<captured .item()>) with a non-tensor operand (not traced: a graph break)",
                    alpha)
    from ...tensor import Tensor
    plain = _expected(out, runner, name, args, rest)         # the result without alpha: its dtype
    if not isinstance(plain, Tensor):
        raise _fail(f"{name}() did not make a tensor", alpha)
    dt = plain.dtype
    ok = dt in (_t.float32, _t.float64) or (dt.category == 1 and alpha.py_type is not float)
    if not ok:
        raise _fail(f"{name}(alpha=<captured .item()>) of a {dt} result (eager scales in another precision, "
                    f"or refuses the alpha): a graph break", alpha)
    y = other if other.example.dtype == dt else out.call_method("to", [other], {"dtype": ConstantVariable(dt)})
    scaled = out.call_function(operator.mul, [y, alpha.as_tensor(out, dt, plain.device)], {})
    if where == 1:
        pos[1] = scaled
    else:
        rest["other"] = scaled
    res = out._call(kind, target, runner, pos, rest, returns_none)
    _check_same(name, plain, res, [alpha])
    return res


def _examples(out, args, kwargs):
    from .lists import BaseListVariable

    def ex(v):
        if isinstance(v, SymScalarVariable):
            return _PLACEHOLDER[v.py_type]
        if isinstance(v, BaseListVariable) and _has_sym(v):
            items = [ex(i) for i in v.items]
            return items if v.python_type() is list else tuple(items)
        return out._map(v, True)
    return [ex(a) for a in args], {k: ex(v) for k, v in kwargs.items()}


def _leaves(v):
    from .lists import BaseListVariable
    if isinstance(v, BaseListVariable):
        return [x for i in v.items for x in _leaves(i)]
    return [v]


def _build_nested(out, kind, target, runner, name, args, kwargs):
    """``ember.tensor([s, 1.0, t])`` (nested lists too) with captured items among the numbers:
    each number as a 0-d node of the dtype eager picks for the whole list, stacked level by
    level (a new tensor, as eager makes)."""
    from ... import stack as _stack
    from .lists import BaseListVariable, ListVariable
    leaves = _leaves(args[0])
    syms = [v for v in leaves if isinstance(v, SymScalarVariable)]
    if any(not isinstance(v, SymScalarVariable) and not (isinstance(v, ConstantVariable)
                                                        and type(v.value) in (bool, int, float)) for v in leaves):
        raise _fail(f"{name}() of a list holding captured .item() values and other than numbers (not traced: "
                    f"a graph break)", *syms)
    rg = kwargs.get("requires_grad")
    if rg is not None and (not rg.is_python_constant() or rg.as_python_constant()):
        raise _fail(f"{name}(..., requires_grad=True) would make a new autograd leaf inside the graph", *syms)
    expected = _expected(out, runner, name, args, kwargs)
    from ...tensor import Tensor
    if not isinstance(expected, Tensor):
        raise _fail(f"{name}() did not make a tensor", *syms)
    dt, dev = expected.dtype, expected.device

    def build(v):
        if isinstance(v, BaseListVariable):
            if not v.items:
                raise _fail(f"{name}() of a list with an empty sublist and captured .item() values", *syms)
            return out.call_function(_stack, [ListVariable([build(i) for i in v.items])], {})
        if isinstance(v, SymScalarVariable):
            return v.as_tensor(out, dt, dev)
        return out.call_function(_scalar_const, [v], {"dtype": ConstantVariable(dt), "device": ConstantVariable(dev)})
    res = build(args[0])
    _check_same(name, expected, res, syms, strides=True)
    return res


def _scalar_const(value, dtype, device):
    """A 0-d tensor holding a Python number (a constant of a list given to ``ember.tensor``)."""
    from ... import tensor as _mk
    return _mk(value, dtype=dtype, device=device)


_scalar_const.__module__ = "ember.dynamo.variables.sym_scalar"


def _expected(out, runner, name, args, kwargs):
    """The op's result on the example values with Python numbers in the scalars' places."""
    from ..exc import Unsupported as _U
    a, k = _examples(out, args, kwargs)
    try:
        return out.examples.run(runner, a, k)
    except _U as e:
        raise _fail(f"{name}() with a Python number in place of the captured .item() fails: {e}",
                    *[v for v in list(args) + list(kwargs.values()) if isinstance(v, SymScalarVariable)])


def _check_same(name, expected, res, syms, strides=False):
    from ...tensor import Tensor
    got = res.example if isinstance(res, TensorVariable) else None
    if isinstance(expected, Tensor) and got is not None and expected.dtype == got.dtype \
            and expected.ndim == got.ndim and (not strides or tuple(expected.stride()) == tuple(got.stride())):
        return
    if expected is None and isinstance(res, ConstantVariable) and res.value is None:
        return      # x[i] = s: nothing returned
    # (the nodes made so far go with this trace: a break retraces the frame up to here)
    raise _fail(f"{name}() with a captured .item() as a 0-d tensor does not give what it gives with a "
                f"Python number (not traced: a graph break)", *syms)


def _build(out, kind, target, runner, name, args, kwargs):
    """``full``/``full_like``/``new_full``/``tensor``/``as_tensor``/``scalar_tensor`` with a
    symbolic fill value: the 0-d node converted to the dtype/device eager picks for the Python
    number, expanded to the size and copied (a new tensor, as eager makes)."""
    syms = [v for v in list(args) + list(kwargs.values()) if isinstance(v, SymScalarVariable)]
    if name in ("tensor", "as_tensor", "scalar_tensor"):
        fill = args[0] if args else kwargs.get("data", kwargs.get("s"))
    elif name == "new_full":   # (a method: args[0] is the tensor)
        fill = args[2] if len(args) > 2 else kwargs.get("fill_value")
    else:   # full(size, fill_value) / full_like(input, fill_value)
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
    others = [v for i, v in enumerate(list(args) + list(kwargs.values())) if v is not fill]
    if not isinstance(fill, SymScalarVariable) or any(_has_sym(v) for v in others):
        raise _fail(f"{name}() got a captured .item() as a size or other non-value argument (an unbacked "
                    f"SymInt: capture_dynamic_output_shape_ops is not supported): a graph break", *syms)
    rg = kwargs.get("requires_grad")
    if rg is not None and (not rg.is_python_constant() or rg.as_python_constant()):
        raise _fail(f"{name}(..., requires_grad=True) would make a new autograd leaf inside the graph", *syms)
    expected = _expected(out, runner, name, args, kwargs)
    from ...tensor import Tensor
    if not isinstance(expected, Tensor):
        raise _fail(f"{name}() did not make a tensor", *syms)
    node = fill.as_tensor(out, expected.dtype, expected.device)
    if expected.ndim:
        if name == "full_like":
            node = out.call_method("expand_as", [node, args[0]], {})
        else:
            i = 0 if name == "full" else 1
            size = args[i] if len(args) > i else kwargs.get("size")
            node = out.call_method("expand", [node, size], {})
        res = out.call_method("contiguous", [node], {})
    else:
        res = out.call_method("clone", [node], {})
    _check_same(name, expected, res, syms, strides=True)
    return res
