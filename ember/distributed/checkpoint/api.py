"""``CheckpointException``: what ``save``/``load`` raise when a step fails on any rank (as torch,
a ``BaseException`` carrying every failed rank's error, raised on all ranks so none hangs)."""
from __future__ import annotations

__all__ = ["CheckpointException"]


class CheckpointException(BaseException):
    """``failures``: {rank: (exception, traceback text)}. On the failing rank the exception is
    the original; other ranks get one of the same builtin type with the same message."""

    def __init__(self, msg, failures):
        super().__init__(msg, failures)
        self._failures = failures

    @property
    def failures(self):
        return self._failures

    def __str__(self):
        text = f"CheckpointException ranks:{self._failures.keys()}\n"
        for rank, (exc, tb) in self._failures.items():
            head = "Traceback (most recent call last):\n"
            text += f"Traceback (most recent call last): (RANK {rank})\n{tb[len(head):] if tb.startswith(head) else tb}"
        return text
