"""``id(obj)`` of an object made inside the compiled frame.

Such an object is new on every call, so the number is only known at run time; baking the
traced value in would be a silent wrong answer. ``id()`` returns an ``ObjectIdVariable`` that
stands for "the id of that object" instead:

* ``id(a) == id(b)`` / ``!=`` between two of them is decided while tracing: trackers of the
  kinds accepted here stand for exactly one object each (one tracker per object made in the
  frame, rebuilt as one object where it leaves the frame), so the ids are equal exactly when
  the trackers are the same. (Python only promises distinct ids for objects whose lifetimes
  overlap; for an object already freed either answer is allowed.)
* ``bool(id(o))`` is True (CPython's ids are addresses, never 0).
* Where the id leaves the frame (returned, handed to a resume function at a graph break) it is
  rebuilt as ``id(<the rebuilt object>)``: the object the program goes on with, so a later
  comparison with ``id(o)`` outside agrees.
* Any use of the number itself (arithmetic, ordering, printing, formatting, hashing, as a
  dict key, comparison with a plain int) stops the trace with that reason; the graph breaks
  and Python computes it.

Only trackers with a one-object identity qualify: objects of user classes, lists, dicts,
sets, exceptions and functions made in the frame. Tuples and frozensets (CPython may share
or intern them: ``id(()) == id(())``) and tensors made in the frame (an in-place op returns
the same tensor under a new tracker) keep the graph break."""
from __future__ import annotations

import operator

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def trackable(v) -> bool:
    """Whether ``v`` (with no source) stands for exactly one object made in the frame."""
    from .exceptions import ExceptionVariable
    from .functions import NestedFunctionVariable
    from .lists import DictVariable, ListVariable
    from .objects import NewObjectVariable
    from .sets import SetVariable
    if v.source is not None:
        return False
    if isinstance(v, (NewObjectVariable, ExceptionVariable, NestedFunctionVariable, DictVariable)):
        return True
    if isinstance(v, ListVariable):
        return v.python_type() is list
    if isinstance(v, SetVariable):
        return v.python_type() is set
    return False


class ObjectIdVariable(VariableTracker):
    """``id(target)`` for a ``target`` made in the frame (see the module docstring)."""

    def __init__(self, target):
        self.target = target

    def python_type(self):
        return int

    def truthy(self, tx):
        return True

    def as_python_constant(self):
        raise Unsupported(f"the value of id() of an object made in the compiled frame ({self.target}) is only "
                          f"known at run time, and it is used by value here")

    def var_getattr(self, tx, name):
        raise Unsupported(f"attribute {name!r} of id() of an object made in the compiled frame (its value is "
                          f"only known at run time)")

    def call_method(self, tx, name, args, kwargs):
        if name in ("__eq__", "__ne__") and len(args) == 1 and not kwargs:
            return binary(tx, operator.eq if name == "__eq__" else operator.ne, self, args[0])
        self.var_getattr(tx, name)

    def reconstruct(self, out):
        return f"id({out.materialize(self.target)})"

    def __repr__(self):
        return f"ObjectIdVariable({self.target})"


def binary(tx, op, a, b):
    """``op(a, b)`` where one side is an ``ObjectIdVariable``."""
    if op in (operator.eq, operator.ne) and isinstance(a, ObjectIdVariable) and isinstance(b, ObjectIdVariable):
        same = a.target is b.target
        return ConstantVariable(same if op is operator.eq else not same)
    other = b if isinstance(a, ObjectIdVariable) else a
    raise Unsupported(f"{op.__name__} on id() of an object made in the compiled frame and {other} (the id's value "
                      f"is only known at run time)")
