"""``torch.distributed.constants``: the default timeouts of process groups.

``default_pg_timeout`` (30 minutes) is what ``init_process_group`` / ``new_group`` use when no
``timeout`` is given (the same object as ``ember.distributed.default_pg_timeout``).
``default_pg_nccl_timeout`` is None: ember has no NCCL (torch built without it says the same)."""
from __future__ import annotations

from datetime import timedelta
from typing import Optional

from .distributed_c10d import default_pg_timeout

__all__ = ["default_pg_timeout", "default_pg_nccl_timeout"]

default_pg_nccl_timeout: Optional[timedelta] = None
