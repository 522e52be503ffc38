"""The functional collectives as operators: ``ember.ops._c10d_functional.{all_reduce,
all_gather_into_tensor, reduce_scatter_tensor}`` (torch's ``torch.ops._c10d_functional``).

Why operators. A compiled graph can only hold what the dispatcher knows. Defined as custom ops
(``ember.library``), each collective has a fake implementation (the output's shape from the
input's: what dynamo, aot and inductor run while tracing) and a kernel that runs the collective
through ember's transport (``distributed_c10d``) on a private copy of its input -- so traced
DTensor code (``tensor/_collectives.py`` when a tracing mode is active) records them as graph
nodes, which aot keeps, and inductor calls as extern kernels between its own.

Groups are named as torch names them in these ops: a string, ``_get_process_group_name(pg)``
(ember numbers its groups: "0" is the world). Every op takes the group size too where torch's
does, and checks it.

Gradients (as torch's ``_c10d_functional_autograd``): all_reduce ("sum") -> all_reduce of the
gradient; all_gather_into_tensor -> reduce_scatter_tensor ("sum"); reduce_scatter_tensor ("sum")
-> all_gather_into_tensor; other reductions raise torch's error at backward.
"""
from __future__ import annotations

from ..library import custom_op
from ..tensor import Tensor

_REDUCE = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


def group_from_name(group_name: str):
    """The ProcessGroup ``group_name`` (``_get_process_group_name``'s answer) names."""
    from . import distributed_c10d as c10d
    w = c10d._world()
    if group_name == "0" or group_name == c10d._get_process_group_name(c10d.GroupMember.WORLD):
        return c10d.GroupMember.WORLD
    for pg in w.groups:
        if c10d._get_process_group_name(pg) == group_name:
            return pg
    raise ValueError(f"Could not resolve the process group registered under the name {group_name}")


def group_name_of(pg) -> str:
    from . import distributed_c10d as c10d
    return c10d._get_process_group_name(pg)


def _op(reduce_op: str):
    from .distributed_c10d import ReduceOp
    r = reduce_op.lower()
    if r not in _REDUCE:
        raise ValueError(f"Unrecognized reduce_op: {reduce_op}")
    return getattr(ReduceOp, r.upper())


def _check_size(pg, group_size, what):
    if pg.size() != group_size:
        raise RuntimeError(f"_c10d_functional.{what}: group_size {group_size} does not match the size "
                           f"{pg.size()} of process group {group_name_of(pg)}")


@custom_op("_c10d_functional::all_reduce", mutates_args=())
def all_reduce(input: Tensor, reduce_op: str, group_name: str) -> Tensor:
    from . import distributed_c10d as c10d
    from .tensor import _collectives as C
    pg = group_from_name(group_name)
    out = input.detach().clone().contiguous()
    C._record(C.ALL_REDUCE)
    c10d.all_reduce(out, _op(reduce_op), group=pg)
    return out


@all_reduce.register_fake
def _(input, reduce_op, group_name):
    _op(reduce_op)
    return input.new_empty(tuple(input.shape))


@custom_op("_c10d_functional::all_gather_into_tensor", mutates_args=())
def all_gather_into_tensor(input: Tensor, group_size: int, group_name: str) -> Tensor:
    """Every rank's ``input`` stacked along dim 0 (a 0-d input gives a (group_size,) result)."""
    from .. import empty
    from . import distributed_c10d as c10d
    from .tensor import _collectives as C
    pg = group_from_name(group_name)
    _check_size(pg, group_size, "all_gather_into_tensor")
    shape = (group_size * input.shape[0],) + tuple(input.shape[1:]) if input.ndim else (group_size,)
    out = empty(shape, dtype=input.dtype)
    C._record(C.ALL_GATHER)
    c10d.all_gather_into_tensor(out, input.detach().clone().contiguous(), group=pg)
    return out


@all_gather_into_tensor.register_fake
def _(input, group_size, group_name):
    shape = (group_size * input.shape[0],) + tuple(input.shape[1:]) if input.ndim else (group_size,)
    return input.new_empty(shape)


@custom_op("_c10d_functional::reduce_scatter_tensor", mutates_args=())
def reduce_scatter_tensor(input: Tensor, reduce_op: str, group_size: int, group_name: str) -> Tensor:
    """The reduction over the group of ``input``, of which this rank keeps its dim-0 chunk."""
    from .. import empty
    from . import distributed_c10d as c10d
    from .tensor import _collectives as C
    pg = group_from_name(group_name)
    _check_size(pg, group_size, "reduce_scatter_tensor")
    _scatter_shape(input, group_size)
    out = empty(_scatter_shape(input, group_size), dtype=input.dtype)
    C._record(C.REDUCE_SCATTER)
    c10d.reduce_scatter_tensor(out, input.detach().clone().contiguous(), _op(reduce_op), group=pg)
    return out


def _scatter_shape(input, group_size):
    if input.ndim == 0 or input.shape[0] % group_size:
        raise RuntimeError(f"_c10d_functional.reduce_scatter_tensor: input dimension 0 "
                           f"({input.shape[0] if input.ndim else 0}) must be a multiple of group_size {group_size}")
    return (input.shape[0] // group_size,) + tuple(input.shape[1:])


@reduce_scatter_tensor.register_fake
def _(input, reduce_op, group_size, group_name):
    _op(reduce_op)
    return input.new_empty(_scatter_shape(input, group_size))


# ---------------------------------------------------------------------------- gradients
def _save_args(ctx, inputs, output):
    ctx.args = inputs[1:]


def _all_reduce_bwd(ctx, grad):
    reduce_op, group_name = ctx.args
    if reduce_op.lower() != "sum":
        raise RuntimeError(f"all_reduce backward only supports 'sum' reduction, got '{reduce_op}'")
    return all_reduce(grad.contiguous(), "sum", group_name), None, None


def _all_gather_bwd(ctx, grad):
    group_size, group_name = ctx.args
    return reduce_scatter_tensor(grad.contiguous(), "sum", group_size, group_name), None, None


def _reduce_scatter_bwd(ctx, grad):
    reduce_op, group_size, group_name = ctx.args
    if reduce_op.lower() != "sum":
        raise RuntimeError(f"reduce_scatter_tensor backward only supports 'sum' reduction, got '{reduce_op}'")
    return all_gather_into_tensor(grad.contiguous(), group_size, group_name), None, None, None


all_reduce.register_autograd(_all_reduce_bwd, setup_context=_save_args)
all_gather_into_tensor.register_autograd(_all_gather_bwd, setup_context=_save_args)
reduce_scatter_tensor.register_autograd(_reduce_scatter_bwd, setup_context=_save_args)

__all__ = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "group_from_name", "group_name_of"]
