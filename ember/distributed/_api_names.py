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


SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """A new group without ``ranks_to_exclude`` (after a rank failure), in PyTorch only on
    backends that can shrink a live communicator (NCCL). ember's backend is gloo's kind,
    which cannot: the arguments are checked as PyTorch checks them, then PyTorch's gloo
    answer -- a TypeError -- is raised. (Re-forming a group from the survivors with
    ``new_group`` works.)"""
    from .distributed_c10d import _get_default_group, _get_process_group_name, get_world_size
    if not isinstance(ranks_to_exclude, list):
        raise TypeError(f"ranks_to_exclude must be a list, but got {type(ranks_to_exclude).__name__}. Example: "
                        f"[1, 3, 5] to exclude ranks 1, 3, and 5.")
    if not ranks_to_exclude:
        raise ValueError("ranks_to_exclude cannot be empty. To shrink a group, you must specify at least one rank to "
                         "exclude. Example: [failed_rank_id]")
    if isinstance(shrink_flags, bool) or not isinstance(shrink_flags, int) or \
            shrink_flags not in (SHRINK_DEFAULT, SHRINK_ABORT):
        raise ValueError(f"Invalid shrink_flags value: {shrink_flags}. Must be one of: SHRINK_DEFAULT "
                         f"({SHRINK_DEFAULT}) or SHRINK_ABORT ({SHRINK_ABORT}). Use SHRINK_ABORT to abort ongoing "
                         f"operations before shrinking.")
    target = group if group is not None else _get_default_group()
    size = get_world_size(target)
    if size <= 1:
        raise ValueError(f"Cannot shrink a process group with size {size}. Group must have at least 2 ranks to "
                         f"support shrinking.")
    raise TypeError(f"Process group backend for '{_get_process_group_name(target)}' does not support shrinking "
                    f"operations.")


__all__ += ["shrink_group"]
