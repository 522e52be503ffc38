"""``ember.distributed.rpc``: remote procedure calls between the processes of one job
(PyTorch's ``torch.distributed.rpc``).

``init_rpc(name, rank=, world_size=, rpc_backend_options=TensorPipeRpcBackendOptions(
init_method=...))`` connects the workers; ``rpc_sync``/``rpc_async`` run a function on
another worker and return its result / a Future; ``remote`` leaves the result there and
returns an ``RRef``; ``shutdown()`` leaves (gracefully: after every worker's calls are done).

Functions and arguments are pickled: the function must be importable by the callee (a
module-level function or builtin), and unpickling runs code, so only use RPC between
processes of the same job. Tensors travel as copies of their data (CPU only). An exception
in the called function is raised on the caller with its type and a message naming the
worker and carrying the remote traceback, as PyTorch.

Inside a distributed autograd context (``ember.distributed.autograd.context()``), ``rpc_sync`` /
``rpc_async`` calls are recorded so ``dist_autograd.backward`` runs through the callees.

Not supported (clear errors): dynamic groups (``world_size=None``), GPU device maps, autograd
through ``remote()`` / RRefs, and RRef reference counting (owners keep values until shutdown)."""
from . import functions  # noqa: F401
from .agent import WorkerInfo  # noqa: F401
from .api import (  # noqa: F401
    BackendType, RpcBackendOptions, TensorPipeRpcBackendOptions, get_rpc_timeout, get_worker_info, init_rpc, remote,
    rpc_async, rpc_sync, shutdown,
)
from .rref import RRef  # noqa: F401


def is_available():
    return True
