"""The ``ProcessGroup`` methods of PyTorch's C++ API (``pg.allreduce(tensors, opts)``,
``pg.broadcast(tensor, root)``, ...): each starts the collective in the background and
returns its ``Work``; the ``*Options`` structs carry the reduction op and the root, which is
a rank *of the group* (not a global rank). Options' ``timeout`` is not applied: the group's
timeout is."""
from __future__ import annotations


def _one(tensors, what):
    """PyTorch passes one tensor per device in a list; ember's groups have one device (CPU)."""
    from ..tensor import Tensor
    if isinstance(tensors, Tensor):
        return tensors
    tensors = list(tensors)
    if len(tensors) != 1:
        raise ValueError(f"ProcessGroup.{what}: expected a list of exactly one tensor (one per device; ember has "
                         f"one CPU device), got {len(tensors)}")
    return tensors[0]


def _op_of(opts, op, default):
    if op is not None:
        return op
    return getattr(opts, "reduceOp", default) if opts is not None else default


class ProcessGroupOps:
    """Mixed into ``ProcessGroup``."""

    def allreduce(self, tensors, opts=None, op=None):
        from . import distributed_c10d as c10d
        from ._c10d_extras import AllreduceOptions
        if isinstance(opts, (int, c10d.ReduceOp.RedOpType)) and not isinstance(opts, AllreduceOptions):
            opts, op = None, opts          # pg.allreduce(tensor, ReduceOp.MAX)
        return c10d.all_reduce(_one(tensors, "allreduce"), _op_of(opts, op, c10d.ReduceOp.SUM), group=self,
                               async_op=True)

    def allreduce_coalesced(self, tensors, opts=None):
        from . import distributed_c10d as c10d
        from ._c10d_extras import all_reduce_coalesced
        fut = all_reduce_coalesced(list(tensors), _op_of(opts, None, c10d.ReduceOp.SUM), group=self,
                                   async_op=True)
        return _FutureWork(fut)

    def broadcast(self, tensors, opts=None):
        from . import distributed_c10d as c10d
        root = opts if isinstance(opts, int) else getattr(opts, "rootRank", 0) if opts is not None else 0
        return c10d.broadcast(_one(tensors, "broadcast"), group=self, async_op=True, group_src=int(root))

    def reduce(self, tensors, opts=None, op=None):
        from . import distributed_c10d as c10d
        if isinstance(opts, int):
            root, reduce_op = opts, (op if op is not None else c10d.ReduceOp.SUM)
        else:
            root = getattr(opts, "rootRank", 0) if opts is not None else 0
            reduce_op = _op_of(opts, op, c10d.ReduceOp.SUM)
        return c10d.reduce(_one(tensors, "reduce"), op=reduce_op, group=self, async_op=True, group_dst=int(root))

    def allgather(self, output_tensors, input_tensors, opts=None):
        from . import distributed_c10d as c10d
        from ..tensor import Tensor
        outs = output_tensors if output_tensors and isinstance(output_tensors[0], Tensor) else \
            _one(output_tensors, "allgather")
        return c10d.all_gather(list(outs), _one(input_tensors, "allgather"), group=self, async_op=True)

    def gather(self, output_tensors, input_tensors, opts=None):
        from . import distributed_c10d as c10d
        root = int(getattr(opts, "rootRank", 0) if opts is not None else 0)
        outs = list(_one(output_tensors, "gather")) if self.rank() == root else None
        return c10d.gather(_one(input_tensors, "gather"), outs, group=self, async_op=True, group_dst=root)

    def scatter(self, output_tensors, input_tensors, opts=None):
        from . import distributed_c10d as c10d
        root = int(getattr(opts, "rootRank", 0) if opts is not None else 0)
        ins = list(_one(input_tensors, "scatter")) if self.rank() == root else None
        return c10d.scatter(_one(output_tensors, "scatter"), ins, group=self, async_op=True, group_src=root)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        from . import distributed_c10d as c10d
        return c10d.reduce_scatter(_one(output_tensors, "reduce_scatter"), list(_one(input_tensors, "reduce_scatter")),
                                   op=_op_of(opts, None, c10d.ReduceOp.SUM), group=self, async_op=True)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        from . import distributed_c10d as c10d
        return c10d.all_to_all_single(output, input, list(output_split_sizes) or None,
                                      list(input_split_sizes) or None, group=self, async_op=True)

    def barrier(self, opts=None):
        from . import distributed_c10d as c10d
        return c10d.barrier(group=self, async_op=True)

    def send(self, tensors, dstRank, tag=0):  # noqa: N803 - PyTorch's argument names
        from . import distributed_c10d as c10d
        c10d.send(_one(tensors, "send"), group=self, tag=tag, group_dst=int(dstRank))
        return c10d._done_work()

    def recv(self, tensors, srcRank, tag=0):  # noqa: N803
        from . import distributed_c10d as c10d
        return c10d.irecv(_one(tensors, "recv"), group=self, tag=tag, group_src=int(srcRank))


class _FutureWork:
    """A Work over a coalesced collective's future."""

    def __init__(self, fut):
        self._fut = fut

    def wait(self, timeout=None):
        self._fut.wait()
        return True

    def is_completed(self):
        return self._fut.done()

    def result(self):
        return self._fut.wait()

    def get_future(self):
        return self._fut
