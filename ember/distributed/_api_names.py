"""torch.distributed's small public names: ``QueueEmptyError`` (a store queue had nothing to
pop) and the ``GroupName`` / ``RankType`` annotations."""
from __future__ import annotations

import typing

__all__ = ["QueueEmptyError", "GroupName", "RankType"]


class QueueEmptyError(RuntimeError):
    """A store queue was empty when an item was popped from it. torch derives it from
    DistStoreError; ember's DistStoreError (like DistError) is RuntimeError itself, so
    handlers of store errors catch it here too."""


GroupName = typing.NewType("GroupName", str)


def __getattr__(name):
    if name == "RankType":                 # int | SymInt; SymInt comes with ember.fx's shapes
        import ember
        return typing.Union[int, ember.SymInt]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
