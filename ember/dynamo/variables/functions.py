"""Functions to inline: user functions, closures made while tracing, bound methods, cells."""
from __future__ import annotations

import copy
import enum
import types

from ..exc import Unsupported
from ..source import AttrSource, ClosureSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable


class CellVariable(VariableTracker):
    """A closure cell. ``real`` cells belong to functions that exist outside the frame: writing
    one (``nonlocal n; n += 1``) is a side effect on an object that outlives the frame, recorded
    in ``OutputGraph.side_effects`` and replayed after the graph (``<cell>.cell_contents = v``)
    like a global or attribute write. ``cell_obj_expr`` is where the call finds the cell object
    (through the function's source, so a function guarded by its code alone finds its own cell);
    a real cell without one cannot be written."""

    def __init__(self, contents=None, real=False, loader=None, cell_obj_expr=None):
        self._contents = contents
        self.real = real
        self._loader = loader   # lazily wraps a real cell's contents (so guards only cover what is read)
        self.cell_obj_expr = cell_obj_expr

    @property
    def contents(self):
        if self._contents is None and self._loader is not None:
            self._contents = self._loader()
            self._loader = None
        return self._contents

    @staticmethod
    def for_real_cell(tx, cell, loader, cell_obj_expr):
        """The frame's one tracker of an outside function's closure cell ``cell``."""
        known = tx.output.real_cells.get(id(cell))
        if known is not None:
            cv = known[1]
            if cv.cell_obj_expr is None:
                cv.cell_obj_expr = cell_obj_expr
            elif cell_obj_expr is not None and cell_obj_expr != cv.cell_obj_expr:
                # reached through two functions (guarded by code, they could close over different
                # cells on a later call): they share the tracker only while they share the cell
                tx.output.guards.add(f"{cell_obj_expr} is {cv.cell_obj_expr}",
                                     f"{cell_obj_expr} is the cell {cv.cell_obj_expr}")
            return cv
        cv = CellVariable(real=True, loader=loader, cell_obj_expr=cell_obj_expr)
        tx.output.real_cells[id(cell)] = (cell, cv)
        return cv

    def set(self, value, tx=None):
        if self.real:
            if self.cell_obj_expr is None or tx is None:
                raise Unsupported("assigning a nonlocal of a function defined outside the compiled frame "
                                  "that is not reachable from the frame's arguments (side effect)")
            tx.output.side_effects.append(("cell", self, value))
        self._contents = value
        self._loader = None


class BaseUserFunctionVariable(VariableTracker):
    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)


class UserFunctionVariable(BaseUserFunctionVariable):
    """A Python function object that exists outside the frame (guarded by identity)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return types.FunctionType

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        if self.fn in (copy.copy, copy.deepcopy) and args and isinstance(args[0], ConstantVariable) \
                and _copy_is_identity(getattr(args[0], "raw", None) if hasattr(args[0], "raw") else args[0].value):
            # a copy of an immutable constant is the constant (dataclasses.asdict/astuple deep-copy
            # every field value; inlined, deepcopy's ``id(x)`` of a constant broke the graph)
            return args[0]
        from .user_ctx import GeneratorContextVariable, is_contextmanager_function
        if is_contextmanager_function(self.fn):
            # a @contextlib.contextmanager function (or method): the generator runs when a with
            # block enters the manager (user_ctx.py), not now
            src = AttrSource(self.source, "__wrapped__") if self.source is not None else None
            return GeneratorContextVariable(UserFunctionVariable(self.fn.__wrapped__, src), args, kwargs)
        return tx.inline_call(self, args, kwargs)

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def get_defaults(self, tx):
        from .builder import wrap
        d = self.fn.__defaults__ or ()
        ds = [wrap(tx, v, GetItemSource(AttrSource(self.source, "__defaults__"), i) if self.source else None)
              for i, v in enumerate(d)]
        kd = self.fn.__kwdefaults__ or {}
        kds = {k: wrap(tx, v, GetItemSource(AttrSource(self.source, "__kwdefaults__"), k) if self.source else None)
               for k, v in kd.items()}
        return ds, kds

    def get_closure(self, tx):
        from .builder import wrap
        cells = self.fn.__closure__ or ()
        out = []
        for i, (name, cell) in enumerate(zip(self.fn.__code__.co_freevars, cells)):
            src = ClosureSource(self.source, i, name) if self.source is not None else None

            def load(cell=cell, src=src, name=name):
                try:
                    v = cell.cell_contents
                except ValueError:
                    raise Unsupported(f"free variable {name!r} referenced before assignment")
                return wrap(tx, v, src)
            obj = f"{self.source.expr()}.__closure__[{i}]" if self.source is not None else None
            out.append(CellVariable.for_real_cell(tx, cell, load, obj))
        return out

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        raise Unsupported(f"function attribute {name}")

    def __repr__(self):
        return f"UserFunctionVariable({self.fn.__qualname__})"


def _copy_is_identity(v) -> bool:
    """``copy.copy(v)`` and ``copy.deepcopy(v)`` return ``v`` itself (atomic values, tuples of them)."""
    if type(v) in (int, float, bool, str, bytes, complex, type(None), range, slice, type, types.FunctionType) \
            or isinstance(v, enum.Enum):
        return True
    if type(v) in (tuple, frozenset):
        return all(_copy_is_identity(x) for x in v)
    return False


class NestedFunctionVariable(BaseUserFunctionVariable):
    """A function created by MAKE_FUNCTION while tracing (closures, lambdas, comprehensions)."""

    def __init__(self, code, f_globals, globals_source, name, defaults=None, kwdefaults=None,
                 closure=None):
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.name = name
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure

    def python_type(self):
        return types.FunctionType

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def get_defaults(self, tx):
        ds = list(self.defaults.items) if self.defaults is not None else []
        kds = dict(self.kwdefaults.items) if self.kwdefaults is not None else {}
        return ds, kds

    def get_closure(self, tx):
        return list(self.closure.items) if self.closure is not None else []

    def var_getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(self.code.co_name)
        raise Unsupported(f"attribute {name} of a nested function")

    def __repr__(self):
        return f"NestedFunctionVariable({self.code.co_name})"


class UserMethodVariable(VariableTracker):
    """A function bound to ``obj`` (a tracker): calling it inlines ``fn(obj, *args)``."""

    def __init__(self, fn_var, obj):
        self.fn_var = fn_var
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        return self.fn_var.call_function(tx, [self.obj] + list(args), kwargs)

    def __repr__(self):
        return f"UserMethodVariable({self.fn_var}, {self.obj})"


def bind_args(code, args, kwargs, defaults, kwdefaults):
    """Bind trackers to the code's parameters the way CPython does (positional, keyword,
    defaults, *args, **kwargs). Returns {name: tracker} for every argument slot."""
    from .lists import DictVariable, TupleVariable
    co_flags = code.co_flags
    nargs = code.co_argcount
    nposonly = code.co_posonlyargcount
    nkw = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nargs]
    kw_names = names[nargs:nargs + nkw]
    idx = nargs + nkw
    varargs_name = names[idx] if co_flags & 0x04 else None
    if varargs_name:
        idx += 1
    varkw_name = names[idx] if co_flags & 0x08 else None
    bound = {}
    args = list(args)
    for name, val in zip(pos_names, args):
        bound[name] = val
    extra = args[nargs:]
    if extra:
        if varargs_name is None:
            raise Unsupported(f"{code.co_name}() takes {nargs} positional arguments but {len(args)} were given")
    if varargs_name:
        bound[varargs_name] = TupleVariable(extra)
    varkw = {}
    for k, v in kwargs.items():
        if k in pos_names[nposonly:] or k in kw_names:
            if k in bound:
                raise Unsupported(f"{code.co_name}() got multiple values for argument {k!r}")
            bound[k] = v
        elif varkw_name:
            varkw[k] = v
        else:
            raise Unsupported(f"{code.co_name}() got an unexpected keyword argument {k!r}")
    if varkw_name:
        bound[varkw_name] = DictVariable(varkw)
    ndef = len(defaults)
    for i, name in enumerate(pos_names):
        if name not in bound:
            j = i - (nargs - ndef)
            if j < 0:
                raise Unsupported(f"{code.co_name}() missing required argument {name!r}")
            bound[name] = defaults[j]
    for name in kw_names:
        if name not in bound:
            if name not in kwdefaults:
                raise Unsupported(f"{code.co_name}() missing keyword-only argument {name!r}")
            bound[name] = kwdefaults[name]
    return bound


class ConstantResultFunctionVariable(VariableTracker):
    """A function marked with ``ember.compiler.assume_constant_result``: called while tracing,
    on the constant values of its arguments, and its result used as a constant (unguarded).
    (The pattern of every call folded while tracing: numpy_fold.py specialises the hooks.)"""

    def __init__(self, fn, source=None):
        self.fn, self.source = fn, source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def label(self):
        return f"{getattr(self.fn, '__qualname__', self.fn)} (assume_constant_result)"

    def values(self, args, kwargs):
        """The Python values to call with."""
        return [a.as_python_constant() for a in args], {k: v.as_python_constant() for k, v in kwargs.items()}

    def call(self, pos, kw):
        return self.fn(*pos, **kw)

    def result(self, res):
        from .builder import wrap_constant_result
        return wrap_constant_result(res)

    def call_function(self, tx, args, kwargs):
        from .tensor import TensorVariable
        vals = list(args) + list(kwargs.values())
        if any(isinstance(a, TensorVariable) or not a.is_python_constant() for a in vals):
            raise Unsupported(f"{self.label()} called with a tensor or another non-constant argument (its "
                              f"value is only known when the graph runs)")
        pos, kw = self.values(args, kwargs)
        try:
            res = self.call(pos, kw)
        except Exception as e:
            raise Unsupported(f"{self.label()} raised {type(e).__name__}: {e} (the program raises)")
        return self.result(res)
