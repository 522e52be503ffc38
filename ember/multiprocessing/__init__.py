"""``ember.multiprocessing``: Python's ``multiprocessing`` that can carry ember tensors
(PyTorch's ``torch.multiprocessing``).

Everything of the standard module is re-exported. Importing this module registers reducers
with ``multiprocessing``'s pickler (the one its queues, pipes and process arguments use), so
tensors and parameters pass between processes although plain ``pickle`` refuses them (ember's
files go through ``ember.save``/``ember.load``, which never unpickle code):

* an ordinary tensor travels as a copy of its data (dtype, shape, ``requires_grad`` kept; not
  its autograd history -- as PyTorch, a non-leaf tensor that requires grad is refused, since
  its graph cannot follow it);
* a tensor whose memory is shared (``Tensor.share_memory_()``: its data moved into a named
  POSIX shared-memory block) travels as the block's name: the receiving process maps the same
  memory, so writes on either side are seen by the other (Hogwild-style training). Works
  under the ``fork``, ``spawn`` and ``forkserver`` start methods.

``spawn(fn, args, nprocs)`` runs ``fn(i, *args)`` in ``nprocs`` processes and re-raises a
child's exception in the parent, as ``torch.multiprocessing.spawn``. Sharing strategies are
accepted for compatibility (``file_descriptor`` / ``file_system``): ember always shares
through named shared memory.
"""
from __future__ import annotations

import multiprocessing as _mp
import multiprocessing.connection as _connection  # noqa: F401  (multiprocessing.connection.wait)
from multiprocessing import *  # noqa: F401,F403
from multiprocessing.reduction import ForkingPickler

import numpy as _np

from ._shared import shared_block, shared_name
from .spawn import ProcessContext, ProcessExitedException, ProcessRaisedException, SpawnContext, spawn, start_processes

__all__ = [n for n in _mp.__all__] + [
    "spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessRaisedException", "ProcessExitedException",
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies"]

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = "file_descriptor"


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return _strategy


def set_sharing_strategy(new_strategy):
    """Accepted for PyTorch compatibility; ember shares tensors through named shared memory
    whatever the strategy."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: unknown strategy {new_strategy!r} "
                         f"(expected one of {sorted(_STRATEGIES)})")
    _strategy = new_strategy


def _rebuild_tensor(cls, data, dtype_name, requires_grad):
    from .. import types as _types
    t = object.__new__(cls)      # as Tensor / Parameter build theirs: no __init__ runs
    t._data = data
    t.dtype = getattr(_types, dtype_name)
    t.device = _types.cpu
    t._vc = None
    if requires_grad:
        t._requires_grad = True
    return t


def _rebuild_shared(cls, name, shape, strides, offset, np_dtype, dtype_name, requires_grad):
    block = shared_block(name)
    data = _np.ndarray(shape, dtype=_np.dtype(np_dtype), buffer=block.buf, offset=offset, strides=strides)
    return _rebuild_tensor(cls, data, dtype_name, requires_grad)


def _reduce_tensor(t):
    from ..tensor import Tensor
    if t.device.type != "cpu":
        raise RuntimeError(f"ember.multiprocessing: only CPU tensors can be sent to another process "
                           f"(got one on {t.device})")
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
                           "autograd does not support crossing process boundaries.  If you just want to "
                           "transfer the data, call detach() on the tensor before serializing (e.g., putting "
                           "it on the queue).")
    cls = type(t) if isinstance(t, Tensor) else Tensor
    data = t._data
    where = shared_name(data)
    if where is not None:
        name, offset = where
        return _rebuild_shared, (cls, name, data.shape, data.strides, offset, data.dtype.str, t.dtype.name,
                                 t.requires_grad)
    return _rebuild_tensor, (cls, _np.array(data, copy=True), t.dtype.name, t.requires_grad)


def _register():
    from ..tensor import Tensor
    from ..nn.parameter import Parameter
    classes = [Tensor, Parameter]
    try:
        from ..nn.parameter import Buffer
        classes.append(Buffer)
    except ImportError:
        pass
    for cls in classes:
        ForkingPickler.register(cls, _reduce_tensor)


_register()


ENV_VAR_PARALLEL_START = "TORCH_MP_PARALLEL_START"   # read by start_processes in torch: start workers in parallel


def init_reductions():
    """Register the pickling reducers that send tensors (and Parameters, Buffers) through
    ``ember.multiprocessing`` queues in shared memory; done on import, idempotent."""
    _register()
