"""``ember.utils.deterministic``: torch's module-level switch ``fill_uninitialized_memory`` (whether
``empty()`` fills its memory with a known value when deterministic algorithms are on).

ember records the switch (True by default, as torch) so code that saves and restores it runs;
ember's ``empty()`` does not consult it: its memory comes from numpy uninitialised either way.
"""
import sys
import types

_fill = [True]


class _Deterministic(types.ModuleType):
    @property
    def fill_uninitialized_memory(self):
        """Whether to fill uninitialised memory when ``use_deterministic_algorithms(True)``."""
        return _fill[0]

    @fill_uninitialized_memory.setter
    def fill_uninitialized_memory(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"fill_uninitialized_memory must be a bool, got {type(mode).__name__}")
        _fill[0] = mode


sys.modules[__name__].__class__ = _Deterministic
