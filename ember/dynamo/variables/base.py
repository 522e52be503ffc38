"""VariableTracker: the symbolic value the translator keeps for every Python value.

A tracker knows what it stands for (a constant, a tensor node in the graph,
a list of other trackers, a function to inline, ...) and, for values read from
outside the frame, its ``source`` (where to find it again at run time). Every
operation the translator cannot model raises ``Unsupported``; the frame then
runs eagerly."""
from __future__ import annotations

from ..exc import Unsupported


class VariableTracker:
    source = None

    def python_type(self):
        raise Unsupported(f"python_type of {type(self).__name__}")

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
            return True
        except Unsupported:
            return False

    def as_python_constant(self):
        raise Unsupported(f"{self} is not a Python constant")

    def truthy(self, tx) -> bool:
        raise Unsupported(f"truth value of {self}")

    def unpack(self, tx):
        """The items, for iteration and unpacking."""
        raise Unsupported(f"iterating over {self}")

    def var_getattr(self, tx, name):
        raise Unsupported(f"attribute {name!r} of {self}")

    def call_function(self, tx, args, kwargs):
        raise Unsupported(f"calling {self}")

    def call_method(self, tx, name, args, kwargs):
        raise Unsupported(f"method {name}() of {self}")

    def reconstruct(self, out) -> str:
        """A Python expression that rebuilds this value after the graph ran (see OutputGraph)."""
        if self.source is not None:
            return self.source.expr()
        raise Unsupported(f"cannot return/reconstruct {self}")

    def __repr__(self):
        return f"{type(self).__name__}()"
