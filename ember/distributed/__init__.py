"""``ember.distributed``: process groups and collectives on CPU tensors across processes
(PyTorch's ``torch.distributed`` with the ``gloo`` backend).

What works
----------
* ``init_process_group(backend="gloo", init_method=None|"env://"|"tcp://host:port"|"file:///path",
  timeout=, world_size=, rank=, store=)``, ``is_initialized``, ``get_rank``, ``get_world_size``,
  ``get_backend`` (always ``"gloo"``), ``destroy_process_group``, ``new_group(ranks)`` (every
  rank calls it, in the same order; a non-member gets ``GroupMember.NON_GROUP_MEMBER`` and its
  collectives on that group return None, as PyTorch), ``barrier``, ``monitored_barrier``.
* Collectives, in place on CPU tensors, any dtype (bool, ints, float16/bfloat16/32/64,
  complex): ``all_reduce``, ``reduce``, ``broadcast``, ``all_gather``,
  ``all_gather_into_tensor``, ``gather``, ``scatter``, ``reduce_scatter``,
  ``reduce_scatter_tensor``, ``all_to_all``, ``all_to_all_single``; ``ReduceOp`` SUM, PRODUCT,
  MIN, MAX, AVG (integers: truncating division), BAND/BOR/BXOR (integers and bool only).
  ``async_op=True`` returns a ``Work`` (``wait()``, ``is_completed()``, ``get_future()``); the
  operation runs on the group's worker thread, in call order.
* Point to point: ``send``/``recv`` (``src=None``: any rank; returns the sender),
  ``isend``/``irecv``, ``batch_isend_irecv``, tags.
* Objects (pickled; unpickling runs code, so only between ranks you trust):
  ``broadcast_object_list``, ``all_gather_object``, ``gather_object``, ``scatter_object_list``.
* ``ember.distributed.algorithms.ddp_comm_hooks.default_hooks`` for
  ``DistributedDataParallel.register_comm_hook`` (DDP itself is ``ember.nn.parallel``).
* Also: ``all_reduce_coalesced``, ``all_gather_coalesced``, ``all_gather_single``,
  ``reduce_scatter_single``, ``send_object_list``/``recv_object_list``, ``new_subgroups``,
  ``new_subgroups_by_enumeration``, ``split_group`` (ember splits CPU groups, which PyTorch
  refuses), debug levels, the ``*Options`` structs, backend queries, ``breakpoint``,
  ``rendezvous``/``register_rendezvous_handler`` (custom ``init_method`` schemes).
* ``ember.distributed.nn``: collectives autograd differentiates through;
  ``ember.distributed._functional_collectives``: non-mutating collectives returning
  ``AsyncCollectiveTensor``; ``ember.distributed.algorithms.join``: ``Join`` for uneven inputs
  (``DistributedDataParallel.join``); ``ember.distributed.rpc``: remote calls and RRefs.
* ``DeviceMesh`` / ``init_device_mesh`` (``ember.distributed.device_mesh``): ranks as an n-d
  mesh with a group per dimension; checkpoints: ``ember.distributed.checkpoint``.
* Stores: ``TCPStore``, ``FileStore``, ``HashStore``, ``PrefixStore`` with ``set / get / add /
  wait / check / compare_set / delete_key / num_keys``.

Transport and its cost
----------------------
Rendezvous goes through a store (for ``env://`` / ``tcp://``, a ``TCPStore`` served by rank
0). Then every pair of ranks opens one TCP connection (a full mesh: ``n(n-1)/2`` sockets,
fine for the handful of processes one machine runs); each connection has a reader thread
that files incoming messages by operation, so concurrent operations never mix.

* Reductions (``all_reduce``, ``reduce``) go through a star: every rank sends its tensor to
  the root (group rank 0, or ``dst``), which combines them **in group-rank order** and (for
  ``all_reduce``) sends the result back. Every rank gets bitwise the same result, equal to a
  sequential fold in rank order -- the property DDP needs so replicas never drift. Cost: the
  root receives and sends ``(n-1)`` full tensors (a ring moves ``2(n-1)/n`` per rank): the
  root's link is the bottleneck for large tensors and many ranks, and latency is two hops.
* ``reduce_scatter``: chunk g of every rank goes straight to rank g, which folds them in rank
  order. ``all_gather``, ``gather``, ``scatter``, ``all_to_all``, ``broadcast``: direct
  sends between the ranks concerned (one hop).

Errors and limits
-----------------
* Before ``init_process_group``: ``ValueError("Default process group has not been initialized,
  please make sure to call init_process_group.")`` as PyTorch.
* Mismatched shapes/dtypes across ranks: the rank that sees it raises ``RuntimeError`` naming
  the ranks and shapes, and tells the others, which raise too (no hang).
* An operation waiting longer than the group's ``timeout`` raises ``RuntimeError`` naming the
  operation and the ranks it was waiting for; a peer that exits or crashes makes its waiters
  fail at once.
* CPU tensors only: backend ``"nccl"`` raises a clear ``RuntimeError`` (ember has no NCCL);
  ``"mpi"``/``"ucc"`` likewise. ``ReduceOp.PREMUL_SUM`` raises NotImplementedError.
* ``send`` returns once the data is handed to the kernel (the peer's reader drains it), so
  it never blocks on the matching ``recv``.
"""
from __future__ import annotations

from .distributed_c10d import (  # noqa: F401
    Backend, GroupMember, P2POp, ProcessGroup, ReduceOp, Work, _all_gather_base, _reduce_scatter_base,
    all_gather, all_gather_into_tensor, all_gather_object, all_reduce, all_to_all, all_to_all_single, barrier,
    batch_isend_irecv, broadcast, broadcast_object_list, default_pg_timeout, destroy_process_group, gather,
    gather_object, get_backend, get_global_rank, get_group_rank, get_process_group_ranks, get_rank, get_world_size,
    group, init_process_group, irecv, is_available, is_gloo_available, is_initialized, is_mpi_available,
    is_nccl_available, is_torchelastic_launched, is_ucc_available, isend, monitored_barrier, new_group, recv,
    reduce, reduce_op, reduce_scatter, reduce_scatter_tensor, scatter, scatter_object_list, send,
)
from ._c10d_extras import (  # noqa: F401
    AllToAllOptions, AllreduceCoalescedOptions, AllreduceOptions, BackendConfig, BarrierOptions, BroadcastOptions,
    BuiltinCommHookType, DebugLevel, GatherOptions, ReduceOptions, ReduceScatterOptions, ScatterOptions,
    all_gather_coalesced, all_gather_single, all_reduce_coalesced, breakpoint, get_backend_config, get_debug_level,
    get_default_backend_for_device, get_node_local_rank, get_pg_count, is_backend_available, is_xccl_available,
    new_subgroups, new_subgroups_by_enumeration, recv_object_list, reduce_scatter_single, send_object_list,
    set_debug_level, set_debug_level_from_env, split_group, supports_complex,
)
from .rendezvous import register_rendezvous_handler, rendezvous  # noqa: F401
from ._transport import DistTimeoutError  # noqa: F401
from .device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore  # noqa: F401
from ._api_names import GroupName, QueueEmptyError, shrink_group  # noqa: F401,E402
from .distributed_c10d import record_comm  # noqa: F401,E402
from ._process_group_gloo import ProcessGroupGloo  # noqa: F401,E402
from ._reducer import (  # noqa: F401,E402
    _DEFAULT_FIRST_BUCKET_BYTES, Logger, Reducer, _compute_bucket_assignment_by_size, _register_builtin_comm_hook,
    _register_comm_hook,
)



_LAZY_SUBMODULES = ("algorithms", "nn", "rpc", "_functional_collectives", "autograd", "config", "constants",
                    "c10d_logger", "logging_handlers", "remote_device")


def __getattr__(name):
    # DDP's GradBucket: imported on first use, ember.nn.parallel imports this package
    if name == "GradBucket":
        from ..nn.parallel.distributed import GradBucket
        return GradBucket
    if name == "RankType":            # int | SymInt (see _api_names)
        from . import _api_names
        return _api_names.RankType
    if name in _LAZY_SUBMODULES:      # dist.nn, dist.rpc, ... without importing them by hand, as torch
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'ember.distributed' has no attribute {name!r}")


DistError = RuntimeError
DistBackendError = RuntimeError
DistStoreError = RuntimeError
DistNetworkError = RuntimeError
