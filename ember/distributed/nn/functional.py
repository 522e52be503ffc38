"""Differentiable collectives (PyTorch's ``torch.distributed.nn.functional``).

Each collective is an autograd ``Function`` whose backward is the collective that moves
gradients back the way the data came (the adjoint of the forward's data movement):

===================  ==========================================================
forward              backward (run by every rank of the group, in the same order)
===================  ==========================================================
``all_reduce``       ``all_reduce`` of the gradients with the same op
``all_gather``       reduce-scatter: rank g gets the sum of every rank's grad[g]
``reduce_scatter``   ``all_gather`` of the output gradient
``broadcast``        ``reduce`` (sum) onto ``src``; zeros on the other ranks
``reduce``           ``broadcast`` of ``dst``'s gradient
``gather``           ``scatter`` of ``dst``'s gradients
``scatter``          ``gather`` onto ``src`` (zeros elsewhere)
``all_to_all``       ``all_to_all`` of the gradients (sizes of the inputs)
``all_to_all_single`` ``all_to_all_single`` with the split sizes swapped
===================  ==========================================================

Because the backward is itself a collective, every rank of the group must run backward
through the same collectives in the same order, or the ranks wait on each other until the
group's timeout. The forwards never modify their inputs (they work on copies), as PyTorch.
"""
from __future__ import annotations

import warnings

from ..distributed_c10d import ReduceOp, _pg, group
from .. import distributed_c10d as c10d
from ...autograd.function import Function

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast", "gather", "reduce",
           "reduce_scatter", "scatter"]


def _deprecated(name, suggestion):
    warnings.warn(f"torch.distributed.nn.functional.{name} is deprecated, use {suggestion} instead.",
                  category=FutureWarning, stacklevel=3)


def _member(grp, what):
    """The group, failing clearly when this rank is not part of it (PyTorch's collectives
    would return None here and the Function would then fail obscurely)."""
    if _pg(grp, what) is None:
        raise RuntimeError(f"ember.distributed.nn.functional.{what}: this rank is not a member of the group")
    return grp


def _size(grp):
    return c10d.get_world_size(grp)


def _rank(grp):
    return c10d.get_rank(grp)


# ---------------------------------------------------------------------------- the Functions
class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, grp, tensor):
        ctx.op, ctx.group = op, grp
        out = tensor.clone().contiguous()
        c10d.all_reduce(out, op=op, group=grp)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None, _AllReduce.apply(ctx.op, ctx.group, grad)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, grp, tensor):
        ctx.src, ctx.group, ctx.rank = src, grp, c10d.get_rank()
        out = tensor.clone().contiguous()
        c10d.broadcast(out, src, group=grp)
        return out

    @staticmethod
    def backward(ctx, grad):
        from ... import zeros_like
        gx = _Reduce.apply(ctx.src, ReduceOp.SUM, ctx.group, grad)
        return None, None, (gx if ctx.src == ctx.rank else zeros_like(gx))


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, grp, tensor):
        ctx.dst, ctx.group = dst, grp
        out = tensor.clone().contiguous()
        c10d.reduce(out, dst, op=op, group=grp)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, _Broadcast.apply(ctx.dst, ctx.group, grad)


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, grp, tensor):
        from ... import zeros_like
        ctx.dst, ctx.group = dst, grp
        outs = [zeros_like(tensor) for _ in range(_size(grp))]
        tensor = tensor.contiguous()
        is_dst = c10d.get_rank() == dst
        c10d.gather(tensor, outs if is_dst else None, dst, group=grp)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        return None, None, _Scatter.apply(ctx.dst, ctx.group, *grads)


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, grp, *tensors):
        from ... import zeros_like
        ctx.src, ctx.group = src, grp
        for i, t in enumerate(tensors):
            if tuple(t.shape) != tuple(tensors[0].shape):
                raise RuntimeError(f"ember.distributed.nn.functional.scatter: tensors[{i}] has shape "
                                   f"{list(t.shape)}, expected {list(tensors[0].shape)} like tensors[0]")
        out = zeros_like(tensors[0])
        is_src = c10d.get_rank() == src
        c10d.scatter(out, [t.contiguous() for t in tensors] if is_src else None, src, group=grp)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (None, None) + _Gather.apply(ctx.src, ctx.group, grad)


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, grp, output, *inputs):
        ctx.group = grp
        out = output.contiguous()
        c10d.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=grp)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (None, None, None) + _AllGather.apply(ctx.group, grad)


class _AllGather(Function):
    @staticmethod
    def forward(ctx, grp, tensor):
        from ... import empty_like
        ctx.group = grp
        tensor = tensor.contiguous()
        outs = [empty_like(tensor) for _ in range(_size(grp))]
        c10d.all_gather(outs, tensor, group=grp)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        from ... import empty_like
        me = _rank(ctx.group)
        gx = empty_like(grads[me])
        return None, _ReduceScatter.apply(ReduceOp.SUM, ctx.group, gx, *grads)


class _AllGatherBase(Function):
    @staticmethod
    def forward(ctx, output, tensor, grp):
        ctx.group = grp
        ctx.in_shape = tuple(tensor.shape)
        c10d.all_gather_into_tensor(output, tensor.contiguous(), group=grp)
        return output

    @staticmethod
    def backward(ctx, grad):
        from ... import empty
        gx = empty(list(ctx.in_shape), dtype=grad.dtype)
        c10d.reduce_scatter_tensor(gx, grad.contiguous(), ReduceOp.SUM, group=ctx.group)
        return None, gx, None


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, grp, out_list, *tensors):
        ctx.group = grp
        ctx.in_shapes = [tuple(t.shape) for t in tensors]
        c10d.all_to_all(out_list, [t.contiguous() for t in tensors], group=grp)
        return tuple(out_list)

    @staticmethod
    def backward(ctx, *grads):
        from ... import empty
        bufs = [empty(list(s), dtype=grads[0].dtype) for s in ctx.in_shapes]
        return (None, None) + _AllToAll.apply(ctx.group, bufs, *grads)


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, grp, output, output_split_sizes, input_split_sizes, tensor):
        ctx.group = grp
        ctx.in_shape = tuple(tensor.shape)
        ctx.splits = (input_split_sizes, output_split_sizes)     # swapped for the way back
        c10d.all_to_all_single(output, tensor.contiguous(), output_split_sizes, input_split_sizes, group=grp)
        return output

    @staticmethod
    def backward(ctx, grad):
        from ... import empty
        buf = empty(list(ctx.in_shape), dtype=grad.dtype)
        out_splits, in_splits = ctx.splits
        return (None, None, None, None,
                _AllToAllSingle.apply(ctx.group, buf, out_splits, in_splits, grad.contiguous()))


# ---------------------------------------------------------------------------- public API
def broadcast(tensor, src, group=group.WORLD):
    """``src``'s tensor on every rank; the gradient flows back summed onto ``src``."""
    _deprecated("broadcast", "torch.distributed._functional_collectives.broadcast")
    return _Broadcast.apply(src, _member(group, "broadcast"), tensor)


def gather(tensor, dst=0, group=group.WORLD):
    """Tuple of every rank's tensor on ``dst`` (zeros elsewhere)."""
    return _Gather.apply(dst, _member(group, "gather"), tensor)


def scatter(tensors, src=0, group=group.WORLD):
    """``src``'s ``tensors[rank]`` on each rank. Every rank passes a list of tensors of the
    output's shape (non-source ranks' values are not read; PyTorch asks the same)."""
    return _Scatter.apply(src, _member(group, "scatter"), *tensors)


def reduce(tensor, dst, op=ReduceOp.SUM, group=group.WORLD):
    """The reduction on ``dst``; other ranks get back a copy of their input, as PyTorch's."""
    return _Reduce.apply(dst, op, _member(group, "reduce"), tensor)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=group.WORLD):
    _deprecated("reduce_scatter", "torch.distributed._functional_collectives.reduce_scatter_single")
    return _ReduceScatter.apply(op, _member(group, "reduce_scatter"), output, *input_list)


def all_gather(tensor, group=group.WORLD):
    """Tuple of every rank's tensor."""
    _deprecated("all_gather", "torch.distributed._functional_collectives.all_gather_single")
    return _AllGather.apply(_member(group, "all_gather"), tensor)


def _all_gather_base(output_tensor, input_tensor, group=group.WORLD):
    """Every rank's tensor concatenated into ``output_tensor`` (backward: reduce-scatter of the
    gradient; PyTorch's gloo raises there, ember computes it)."""
    return _AllGatherBase.apply(output_tensor, input_tensor, _member(group, "_all_gather_base"))


def all_to_all(output_tensor_list, input_tensor_list, group=group.WORLD):
    return _AllToAll.apply(_member(group, "all_to_all"), output_tensor_list, *input_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=group.WORLD):
    _deprecated("all_to_all_single", "torch.distributed._functional_collectives.all_to_all_single")
    return _AllToAllSingle.apply(_member(group, "all_to_all_single"), output, output_split_sizes,
                                 input_split_sizes, input)


def all_reduce(tensor, op=ReduceOp.SUM, group=group.WORLD):
    """The reduction on every rank (bitwise the same everywhere)."""
    _deprecated("all_reduce", "torch.distributed._functional_collectives.all_reduce")
    return _AllReduce.apply(op, _member(group, "all_reduce"), tensor)
