"""A custom operator (``ember.library.custom_op``) called in a frame: one opaque graph node.

Its implementation is arbitrary Python (numpy, I/O): never traced into. The node's
target is the op object; its example value comes from the op's fake implementation
(the example run dispatches to it, as to any op's meta function), and aot later
traces it the same way.

Two kinds of call are not captured, each a graph break whose reason names the op, so
the call runs eagerly with exact eager semantics (``fullgraph=True`` raises instead):

* no ``register_fake``: without it nothing can say what the call returns without
  running it (torch raises at compile time; ember's rule is to run it eagerly and say so);
* a mutating op (``mutates_args``): a graph is functional, and writes the graph cannot
  see would be lost or reordered; ember does not functionalize custom ops.
"""
from __future__ import annotations

from ..exc import Unsupported
from .base import VariableTracker


class CustomOpVariable(VariableTracker):
    def __init__(self, op, source=None):
        self.op = op
        self.source = source

    def python_type(self):
        return type(self.op)

    def as_python_constant(self):
        return self.op

    def call_function(self, tx, args, kwargs):
        op = self.op
        if op._schema.mutated:
            raise Unsupported(f"custom op {op._qualname} mutates its argument(s) "
                              f"{', '.join(op._schema.mutated)} (mutates_args): ember.compile does not capture "
                              f"mutating custom ops, so the call runs eagerly")
        if op._fake is None:
            from ...library._record import missing_fake_message
            raise Unsupported(f"custom op {op._qualname}: {missing_fake_message(op)} Until then the call runs "
                              f"eagerly")
        return tx.output.call_function(op, list(args), kwargs)

    def var_getattr(self, tx, name):
        if name == "default":           # torch's overload spelling: the op itself
            return self
        return super().var_getattr(tx, name)

    def reconstruct(self, out):
        return out.ref(self.op)

    def __repr__(self):
        return f"CustomOpVariable({self.op._qualname})"
