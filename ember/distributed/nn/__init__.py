"""``ember.distributed.nn``: collectives that autograd can differentiate through
(PyTorch's ``torch.distributed.nn``); see ``functional`` for the backward of each."""
from . import functional  # noqa: F401
from .functional import (  # noqa: F401
    all_gather, all_reduce, all_to_all, all_to_all_single, broadcast, gather, reduce, reduce_scatter, scatter,
)
from ..distributed_c10d import ReduceOp, group  # noqa: F401
from ...autograd.function import Function  # noqa: F401
