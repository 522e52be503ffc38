"""``KinetoStepTracker``: one global step count fed by several requesters.

The profiler's ``step()`` and optimizers' step hooks may both report steps; counting each
report would double the count. Each requester keeps its own count and the global step is the
largest of them, so it moves only when some requester gets ahead.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Dict

__all__ = ["KinetoStepTracker"]


class KinetoStepTracker:
    _current_step = 0
    _step_dict: Dict[str, int] = defaultdict(int)

    @classmethod
    def init_step_count(cls, requester: str):
        """Start ``requester`` at the current global step."""
        cls._step_dict[requester] = cls._current_step

    @classmethod
    def erase_step_count(cls, requester: str) -> bool:
        """Forget ``requester``; whether it was known."""
        return cls._step_dict.pop(requester, None) is not None

    @classmethod
    def increment_step(cls, requester: str) -> int:
        """One more step for ``requester``; returns the global step (warns when it jumps by more
        than one: requesters out of step)."""
        if requester not in cls._step_dict:
            cls.init_step_count(requester)
        cls._step_dict[requester] += 1
        new_step = max(cls._step_dict.values())
        if new_step > cls._current_step:
            if new_step - cls._current_step > 1:
                warnings.warn(f"Profiler step count has increased more than 1 - current_step = {cls._current_step} "
                              f"step dict =  {cls._step_dict}", stacklevel=2)
            cls._current_step = new_step
        return cls._current_step

    @classmethod
    def current_step(cls) -> int:
        return cls._current_step
