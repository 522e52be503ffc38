"""Knobs of the AOT stage (read at compile time)."""

#: Fraction of the save-everything activation memory the partitioner may keep
#: for the backward. 1.0: save every needed forward value (default partition);
#: below 1.0: the min-cut partitioner recomputes cheap values in the backward.
activation_memory_budget: float = 0.5

#: Trace with symbolic sizes (make the graphs valid for other input sizes).
dynamic: bool = False
