"""``ember.distributed.algorithms``: DDP communication hooks (``ddp_comm_hooks``) and the
``Join`` context manager for uneven inputs (``join``)."""
from .join import Join, JoinHook, Joinable  # noqa: F401
