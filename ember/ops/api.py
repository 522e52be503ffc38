"""The public op namespace.

Registry bindings are attached here by ``ember.ops.registry.register`` (one
per op record); hand-written entry points that only normalise arguments
(``zeros(2, 3)`` vs ``zeros((2, 3))``) live in the op-family modules and are
exported here too. ``ember`` re-exports everything public from this module.
"""
