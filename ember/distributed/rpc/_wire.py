"""How RPC payloads cross processes: pickle, with tensors by value and RRefs by identity.

Tensors travel as a copy of their data (never as a shared-memory name: the peer may be on
another host). An RRef travels as (owner, id); the receiving process rebuilds the handle of
its own agent, so the owner gets its owner RRef back and everyone else a user RRef.
Unpickling runs code: RPC is only for processes of one job that trust each other, as
PyTorch's RPC."""
from __future__ import annotations

import copyreg
import io
import pickle

import numpy as np


def _rebuild_tensor(cls, data, dtype_name, requires_grad):
    from ...multiprocessing import _rebuild_tensor as rebuild
    return rebuild(cls, data, dtype_name, requires_grad)


def _reduce_tensor(t):
    if t.device.type != "cpu":
        raise RuntimeError(f"ember.distributed.rpc: only CPU tensors can be sent (got one on {t.device})")
    return _rebuild_tensor, (type(t), np.array(t._data, copy=True), t.dtype.name, bool(t.requires_grad and
                                                                                      t.grad_fn is None))


def _table():
    from ...tensor import Tensor
    from ...nn.parameter import Parameter
    from .rref import RRef, _reduce_rref
    table = copyreg.dispatch_table.copy()
    for cls in (Tensor, Parameter):
        table[cls] = _reduce_tensor
    try:
        from ...nn.parameter import Buffer
        table[Buffer] = _reduce_tensor
    except ImportError:
        pass
    table[RRef] = _reduce_rref
    return table


_TABLE = None


def dumps(obj):
    global _TABLE
    if _TABLE is None:
        _TABLE = _table()
    buf = io.BytesIO()
    p = pickle.Pickler(buf, pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = _TABLE
    p.dump(obj)
    return buf.getvalue()


def loads(data):
    return pickle.loads(bytes(data))
