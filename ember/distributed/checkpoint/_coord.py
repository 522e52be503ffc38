"""Runs save/load as a sequence of steps that every rank takes together: each step runs
locally, then the ranks swap "ok" or their error, and if any failed every rank raises the same
``CheckpointException`` (so a failure on one rank never leaves the others waiting).

Without a process group (or with ``no_dist=True``) it is one rank and no communication. Plans
and errors travel with ``all_gather_object`` as plain JSON-able values (strings, lists, ints)."""
from __future__ import annotations

import builtins
import traceback

from .api import CheckpointException


class Coordinator:
    def __init__(self, process_group, no_dist, what):
        from .. import distributed_c10d as c10d
        self.what = what
        self.group = None
        self.rank, self.world = 0, 1
        if not no_dist and c10d.is_initialized():
            pg = c10d._group(process_group)
            if pg is None:
                raise RuntimeError(f"ember.distributed.checkpoint.{what}: this rank is not a member of the given "
                                   "process_group")
            self.group = process_group
            self.rank, self.world = pg.rank(), pg.size()
        elif process_group is not None and not no_dist:
            raise ValueError(f"ember.distributed.checkpoint.{what}: a process_group was given but the default "
                             "process group has not been initialized")

    def all_gather(self, obj):
        if self.world == 1:
            return [obj]
        from .. import distributed_c10d as c10d
        out = [None] * self.world
        c10d.all_gather_object(out, obj, group=self.group)
        return out

    def step(self, fn):
        """``fn()``'s value on this rank, or CheckpointException on every rank if it failed anywhere."""
        try:
            result, err, mine = fn(), None, None
        except Exception as e:  # noqa: BLE001 - gathered and re-raised below
            result, err = None, e
            mine = [type(e).__name__, str(e), traceback.format_exc()]
        statuses = self.all_gather(mine)
        failures = {}
        for r, s in enumerate(statuses):
            if s is None:
                continue
            if r == self.rank:
                failures[r] = (err, s[2])
            else:
                cls = getattr(builtins, s[0], None)
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    cls = RuntimeError
                failures[r] = (cls(s[1]), s[2])
        if failures:
            raise CheckpointException(f"ember.distributed.checkpoint.{self.what} failed on ranks {sorted(failures)}",
                                      failures)
        return result
