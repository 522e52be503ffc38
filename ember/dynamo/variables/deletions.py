"""``del`` statements in traced code: ``DELETE_ATTR``, ``DELETE_DEREF`` and ``DELETE_GLOBAL``.

* ``del obj.name`` on an object made in the frame just drops the tracker's attribute (nothing
  outside can see it). On an object from outside the frame (a user object, an nn.Module --
  ``del self.cache`` in a forward -- or a Python module) the deletion is a side effect: it is
  recorded in ``OutputGraph.side_effects`` next to attribute writes and replayed after the graph
  ran, in program order with them (``delattr(obj, name)``), exactly where eager would have done
  it. The frame's later reads of the attribute see a ``DeletedVariable`` in
  ``OutputGraph.attr_overlay`` and raise AttributeError into the trace, as CPython does.
* ``del x`` of a cell variable/free variable empties the cell tracker; a later read raises
  UnboundLocalError (a cell of this code) or NameError (a free variable), CPython's messages.
  Cells of functions defined outside the frame are real objects whose emptying would be a side
  effect on a function that outlives the frame: that stays a graph break.
* ``del x`` of a global (``global x``) is recorded and replayed as ``del G[name]``; a later
  read in the frame raises NameError.

Whether the name exists when the deletion runs is decided while tracing and guarded (the
attribute/global present or absent), so a call where it differs recompiles rather than replaying
a deletion that eager would have refused.
"""
from __future__ import annotations

import inspect
import types

from ..exc import Unsupported
from .base import VariableTracker


class DeletedVariable(VariableTracker):
    """Marks ``(id(owner), name)`` in ``OutputGraph.attr_overlay`` (and a global's entry) as
    deleted by the frame: readers raise AttributeError/NameError instead of reading the value
    the object still has while tracing (the deletion only happens after the graph)."""

    def __repr__(self):
        return "DeletedVariable()"


def is_deleted(v) -> bool:
    return isinstance(v, DeletedVariable)


def _has_static(cls, name):
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return _NO_ATTR


_NO_ATTR = object()


def read_deleted_attr(tx, obj, name):
    """``obj.name`` after the frame deleted the instance attribute: the class attribute, if
    the class has one, would show through; that is not modelled (the guards of a class read
    assume the instance attribute is absent at entry, which it is not), so it is a graph break.
    Otherwise CPython raises AttributeError, raised into the trace."""
    cls = type(obj)
    if _has_static(cls, name) is not _NO_ATTR:
        raise Unsupported(f"reading {cls.__name__}.{name} after `del` of the instance attribute "
                          f"in the compiled frame (the class attribute would show through)")
    from ...nn.modules.module import Module
    if cls.__getattribute__ is not object.__getattribute__ or (
            _has_static(cls, "__getattr__") is not _NO_ATTR and not (
            isinstance(obj, Module) and cls.__getattr__ is Module.__getattr__)):
        raise Unsupported(f"reading {cls.__name__}.{name} after `del` in the compiled frame "
                          f"(its class has __getattr__/__getattribute__)")
    from .exceptions import raise_observed
    if isinstance(obj, types.ModuleType):
        raise_observed(tx, AttributeError, f"module {obj.__name__!r} has no attribute {name!r}")
    _attr_error(tx, cls.__name__, name)


def _attr_error(tx, owner_type_name, name):
    from .exceptions import raise_observed
    raise_observed(tx, AttributeError, f"{owner_type_name!r} object has no attribute {name!r}")


def delete_attr(tx, obj, name):
    """``del obj.name`` (the DELETE_ATTR bytecode)."""
    from .dict_objects import DictObjectVariable
    from .exceptions import ExceptionVariable
    from .objects import NewObjectVariable, NNModuleVariable, PythonModuleVariable, UserObjectVariable
    out = tx.output
    if isinstance(obj, DictObjectVariable) and obj.source is not None:
        raise Unsupported(f"`del .{name}` on a {obj.cls.__name__} (dict subclass) from outside the compiled frame "
                          f"(writes to outside dict-subclass objects are not replayed)")
    if isinstance(obj, NewObjectVariable):
        cls = obj.cls
        if cls.__delattr__ is not object.__delattr__:
            raise Unsupported(f"`del .{name}` on a {cls.__name__} (custom __delattr__)")
        attr = _has_static(cls, name)
        if attr is not _NO_ATTR and hasattr(type(attr), "__delete__"):
            raise Unsupported(f"`del` of descriptor {cls.__name__}.{name}")
        if getattr(getattr(cls, "__dataclass_params__", None), "frozen", False):
            raise Unsupported(f"`del .{name}` on frozen dataclass {cls.__name__} (the program raises)")
        if name not in obj.attrs:
            _attr_error(tx, cls.__name__, name)
        del obj.attrs[name]
        return
    if isinstance(obj, ExceptionVariable) and obj.source is None:
        if name not in obj.attrs:
            raise Unsupported(f"`del .{name}` on an exception raised while tracing")
        del obj.attrs[name]
        return
    from .tensor import TensorVariable
    if isinstance(obj, TensorVariable) and name == "grad" and obj.source is not None:
        # ``del p.grad`` is ``p.grad = None`` (Tensor's grad deleter): replayed after the graph
        target = out.input_value(obj.source)
        if target is None:
            raise Unsupported("`del .grad` on a tensor that is not a graph input")
        from .constant import ConstantVariable
        out.record_setattr(obj, target, "grad", ConstantVariable(None))
        return
    if obj.source is None:
        raise Unsupported(f"`del .{name}` on {obj} (an object with no source)")
    src = obj.source.expr()
    g = out.guards
    if isinstance(obj, NNModuleVariable):
        target = obj.module
        cls = type(target)
        from ...nn.modules.module import Module
        if cls.__delattr__ is not Module.__delattr__:
            raise Unsupported(f"`del .{name}` on a {cls.__name__} (custom __delattr__)")
        d = target.__dict__
        if any(name in d.get(s, {}) for s in ("_parameters", "_buffers", "_modules")):
            raise Unsupported(f"`del .{name}` of a parameter/buffer/submodule of {cls.__name__} in the "
                              f"compiled frame")
        for s in ("_parameters", "_buffers", "_modules"):
            g.add(f"{name!r} not in {src}.{s}", f"{name} is not in {src}.{s}")
    elif isinstance(obj, UserObjectVariable):
        target = obj.obj
        cls = type(target)
        if cls.__delattr__ is not object.__delattr__ or getattr(target, "__dict__", None) is None:
            raise Unsupported(f"`del .{name}` on a {cls.__name__} (custom __delattr__ or __slots__)")
    elif isinstance(obj, PythonModuleVariable) and type(obj.module) is types.ModuleType:
        target = obj.module
        cls = types.ModuleType
    else:
        raise Unsupported(f"`del .{name}` on {obj}")
    attr = _has_static(cls, name)
    if attr is not _NO_ATTR and hasattr(type(attr), "__delete__"):
        raise Unsupported(f"`del` of descriptor {cls.__name__}.{name}")
    key = (id(target), name)
    written = out.attr_overlay.get(key)
    if is_deleted(written):
        _missing_on_delete(tx, target, name)
    if written is None:
        # the attribute as the object has it when the call starts (guarded)
        if name in target.__dict__:
            g.add(f"{name!r} in {src}.__dict__", f"{src} has attribute {name}")
        else:
            g.add(f"{name!r} not in {src}.__dict__", f"{src} has no attribute {name}")
            _missing_on_delete(tx, target, name)
    out.attr_overlay[key] = DeletedVariable()
    out.side_effects.append(("delattr", obj, name))


def _missing_on_delete(tx, target, name):
    from .exceptions import raise_observed
    if isinstance(target, types.ModuleType):
        raise_observed(tx, AttributeError, f"'module' object has no attribute {name!r}")
    _attr_error(tx, type(target).__name__, name)


def _unbound_cell(tx, name):
    from .exceptions import raise_observed
    if name in tx.code.co_cellvars:
        raise_observed(tx, UnboundLocalError,
                       f"cannot access local variable {name!r} where it is not associated with a value")
    raise_observed(tx, NameError, f"cannot access free variable {name!r} where it is not associated "
                                  f"with a value in enclosing scope", name=name)


def load_cell(tx, name):
    """LOAD_DEREF: the cell's contents; an empty cell raises as CPython does."""
    from .functions import CellVariable
    cell = tx.locals.get(name)
    if not isinstance(cell, CellVariable):
        raise Unsupported(f"free variable {name!r}: no cell")
    v = cell.contents
    if v is None:
        _unbound_cell(tx, name)
    return v


def delete_deref(tx, name):
    """``del x`` of a cell or free variable (the DELETE_DEREF bytecode)."""
    from .functions import CellVariable
    cell = tx.locals.get(name)
    if not isinstance(cell, CellVariable):
        raise Unsupported(f"DELETE_DEREF of {name!r} without a cell")
    if cell.real:
        raise Unsupported(f"`del {name}`: emptying a closure cell of a function defined outside the compiled "
                          f"frame (side effect)")
    if cell.contents is None:
        _unbound_cell(tx, name)
    cell._contents = None
    cell._loader = None


def delete_global(tx, name):
    """``global x; del x`` (the DELETE_GLOBAL bytecode): replayed after the graph."""
    from .exceptions import raise_observed
    if tx.globals_source is not None:
        raise Unsupported(f"deleting global {name!r} of another module")
    out = tx.output
    key = (id(tx.f_globals), name)
    written = out.attr_overlay.get(key)
    if written is None:
        present = name in tx.f_globals
        out.guards.add(f"{name!r} {'in' if present else 'not in'} G",
                       f"global {name} is {'defined' if present else 'not defined'}")
    else:
        present = not is_deleted(written)
    if not present:
        raise_observed(tx, NameError, f"name {name!r} is not defined", name=name)
    out.attr_overlay[key] = DeletedVariable()
    out.side_effects.append(("delglobal", "G", name))


def read_deleted_global(tx, name):
    """A global the frame deleted, read again: a builtin of that name would show through (not
    modelled: graph break); otherwise NameError."""
    b = tx.f_globals.get("__builtins__", __builtins__)
    bd = b if isinstance(b, dict) else b.__dict__
    if name in bd:
        raise Unsupported(f"reading {name!r} after `del` of the global in the compiled frame (the builtin "
                          f"would show through)")
    from .exceptions import raise_observed
    raise_observed(tx, NameError, f"name {name!r} is not defined", name=name)
