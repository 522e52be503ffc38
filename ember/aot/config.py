"""Knobs of the AOT stage (read at compile time)."""

#: Fraction of the save-everything activation memory the partitioner may keep
#: for the backward. None (default): the min-cut partitioner, which saves as
#: few bytes as it can by recomputing cheap values in the backward; 1.0: save
#: every needed forward value (default partition, no recomputation); a value in
#: [0, 1): min-cut, and a warning when even that exceeds the budget.
activation_memory_budget = None

#: Trace with symbolic sizes (make the graphs valid for other input sizes).
dynamic: bool = False

#: Raise instead of falling back to per-shape compilation when a dynamo graph with symbolic
#: sizes cannot be traced with dynamo's ShapeEnv (for debugging; the fallback is always correct).
debug_dynamic: bool = False

#: Merge repeated pure expressions of the traced graphs before partitioning (ember.fx.passes.cse):
#: a derivative formula that recomputes its forward's statistics (batch norm's backward: the
#: mean and variance of its input) traces them again; merged, the forward computes them once.
cse: bool = True
