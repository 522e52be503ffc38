"""Functional collectives (PyTorch's ``torch.distributed._functional_collectives``): they
never modify their input; they return a new tensor holding the result.

The collective is started on the group's worker thread and the result comes back at once as
an ``AsyncCollectiveTensor``: a tensor subclass that waits for the collective the first time
anything looks at it (any ember op, ``.numpy()``, even code reading its data directly), so it
can be used like a plain tensor while communication overlaps with the caller's work.
``wait_tensor(t)`` / ``t.wait()`` wait explicitly and give the plain tensor.

Gradients (PyTorch 2.13 registers them for these ops): ``all_reduce`` ("sum") backward is
``all_reduce`` of the gradient, ``all_gather_single`` backward a reduce-scatter ("sum"),
``reduce_scatter_single`` ("sum") backward an all-gather, ``all_to_all_single`` backward the
same with split sizes swapped; other reductions raise PyTorch's error at backward. When the
input needs a gradient the collective runs at once (the autograd graph needs its result);
``broadcast`` and the coalesced variants give results detached from the graph.

``group`` can be a ProcessGroup, a list of global ranks (an existing group with exactly those
ranks, or the whole world), a list of rank lists (this rank's list), a 1-d DeviceMesh or
(DeviceMesh, dim). Group names (strings) are not supported: ember's groups have none.
"""
from __future__ import annotations

import warnings

from . import distributed_c10d as c10d
from .distributed_c10d import ReduceOp
from ..autograd.function import Function
from ..tensor import Tensor

__all__ = ["AsyncCollectiveTensor", "all_gather_into_tensor_coalesced", "all_gather_single",
           "all_gather_single_autograd", "all_gather_tensor", "all_gather_tensor_autograd", "all_reduce",
           "all_reduce_coalesced", "all_to_all_single", "all_to_all_single_autograd", "broadcast", "permute_tensor",
           "reduce_scatter_single", "reduce_scatter_single_autograd", "reduce_scatter_tensor",
           "reduce_scatter_tensor_autograd", "reduce_scatter_tensor_coalesced", "wait_tensor"]

_OPS = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "product": ReduceOp.PRODUCT, "min": ReduceOp.MIN,
        "max": ReduceOp.MAX, "band": ReduceOp.BAND, "bor": ReduceOp.BOR, "bxor": ReduceOp.BXOR}


# ---------------------------------------------------------------------------- the result tensor
_slot = Tensor._data       # the slot holding a tensor's numpy array


class AsyncCollectiveTensor(Tensor):
    """A collective's result that may still be arriving; see the module doc."""

    _work = None

    def _get_data(self):
        work = self.__dict__.get("_work")
        if work is not None:
            work.wait()
            self.__dict__["_work"] = None
        return _slot.__get__(self)

    def _set_data(self, value):
        _slot.__set__(self, value)

    _data = property(_get_data, _set_data)

    def trigger_wait(self):
        """Wait for the collective; the result as a plain tensor."""
        self._get_data()
        from .._torch_function import DisableTorchFunctionSubclass
        with DisableTorchFunctionSubclass():
            return self.as_subclass(Tensor) if hasattr(self, "as_subclass") else self
    wait = trigger_wait

    def completed(self):
        work = self.__dict__.get("_work")
        return work is None or work.is_completed()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from .._torch_function import DisableTorchFunctionSubclass
        kwargs = kwargs or {}
        _wait_all(args)
        _wait_all(kwargs.values())
        with DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    def __repr__(self):
        return f"AsyncCollectiveTensor({self.trigger_wait()!r})"

    def numpy(self, *, force=False):
        return self.trigger_wait().numpy(force=force) if force else self.trigger_wait().numpy()

    def tolist(self):
        return self.trigger_wait().tolist()


def _wait_all(values):
    for v in values:
        if isinstance(v, AsyncCollectiveTensor):
            v._get_data()
        elif isinstance(v, (list, tuple)):
            _wait_all(v)


def _wrap(t, work=None):
    from .._torch_function import DisableTorchFunctionSubclass
    with DisableTorchFunctionSubclass():
        out = t.as_subclass(AsyncCollectiveTensor)
    out.__dict__["_work"] = work
    return out


def wait_tensor(tensor):
    """Wait for ``tensor``'s collective (a no-op for a plain tensor); the plain tensor."""
    if isinstance(tensor, AsyncCollectiveTensor):
        return tensor.trigger_wait()
    return tensor


# ---------------------------------------------------------------------------- groups and ops
def _resolve_group(group, tag=""):
    """The ProcessGroup a functional collective runs on."""
    from .device_mesh import DeviceMesh
    w = c10d._world()
    if isinstance(group, c10d.ProcessGroup):
        return group
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise AssertionError("Only 1D mesh is supported, pass in (DeviceMesh, int) together if mesh > 1D")
        return group.get_group()
    if isinstance(group, tuple):
        if len(group) == 2 and isinstance(group[0], DeviceMesh) and isinstance(group[1], int):
            return group[0].get_group(group[1])
        raise ValueError("Invalid tuple for group must be (DeviceMesh, int)")
    if isinstance(group, list) and group:
        if isinstance(group[0], list):
            size = None
            mine = None
            for ranks in group:
                if size is not None and size != len(ranks):
                    raise ValueError(f"group sizes must be identical found {size} and {len(ranks)}")
                size = len(ranks)
                if w.rank in ranks:
                    mine = ranks
            if mine is None:
                raise ValueError(f"ember.distributed._functional_collectives: rank {w.rank} is in none of the "
                                 f"groups {group}")
            group = mine
        ranks = sorted(int(r) for r in group)
        if ranks == list(range(w.world_size)):
            return c10d.GroupMember.WORLD
        for pg in w.groups:
            if pg.ranks == ranks:
                return pg
        raise ValueError(f"ember.distributed._functional_collectives: no process group with ranks {ranks}: create "
                         f"it first with new_group({ranks}) (on every rank), then pass it or its ranks")
    if isinstance(group, str):
        raise NotImplementedError("ember.distributed._functional_collectives: groups by name are not supported; "
                                  "pass the ProcessGroup")
    raise ValueError("Invalid type for group, must be one of List, Processgroup, DeviceMesh or (DeviceMesh, int).")


def _op(reduceOp):
    if not isinstance(reduceOp, str) or reduceOp.lower() not in _OPS:
        raise ValueError(f"ember.distributed._functional_collectives: reduceOp must be one of {sorted(_OPS)} (a "
                         f"string), got {reduceOp!r}")
    return reduceOp.lower()


def _needs_grad(t):
    from .. import is_grad_enabled
    return is_grad_enabled() and t.requires_grad


def _fresh(t):
    """A private contiguous copy of ``t``'s values for the collective to work on."""
    return t.detach().clone().contiguous()


def _empty(shape, like):
    from .. import empty
    return empty(list(shape), dtype=like.dtype)


# ---------------------------------------------------------------------------- differentiable kernels
class _AllReduce(Function):
    @staticmethod
    def forward(ctx, t, op, pg):
        ctx.op, ctx.pg = op, pg
        out = _fresh(t)
        c10d.all_reduce(out, _OPS[op], group=pg)
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.op != "sum":
            raise RuntimeError(f"all_reduce backward only supports 'sum' reduction, got '{ctx.op}'")
        return _AllReduce.apply(g, "sum", ctx.pg), None, None


class _AllGather(Function):
    @staticmethod
    def forward(ctx, t, pg):
        ctx.pg = pg
        n = pg.size()
        out = _empty((n * t.shape[0],) + tuple(t.shape[1:]) if t.ndim else (n,), t)
        c10d.all_gather_into_tensor(out, _fresh(t), group=pg)
        return out

    @staticmethod
    def backward(ctx, g):
        return _ReduceScatter.apply(g, "sum", ctx.pg), None


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, t, op, pg):
        ctx.op, ctx.pg = op, pg
        out = _empty((t.shape[0] // pg.size(),) + tuple(t.shape[1:]), t)
        c10d.reduce_scatter_tensor(out, _fresh(t), _OPS[op], group=pg)
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.op != "sum":
            raise RuntimeError(f"reduce_scatter_tensor backward only supports 'sum' reduction, got '{ctx.op}'")
        return _AllGather.apply(g, ctx.pg), None, None


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, t, out_splits, in_splits, pg):
        ctx.splits, ctx.pg = (out_splits, in_splits), pg
        out = _empty((sum(out_splits),) + tuple(t.shape[1:]), t)
        c10d.all_to_all_single(out, _fresh(t), out_splits, in_splits, group=pg)
        return out

    @staticmethod
    def backward(ctx, g):
        out_splits, in_splits = ctx.splits
        return _AllToAll.apply(g.contiguous(), in_splits, out_splits, ctx.pg), None, None, None


def _traced(t):
    from .tensor._collectives import _traced as traced
    return traced(t)


def _graph_ops():
    """Under tracing (ember.compile) the collectives are the ``_c10d_functional`` ops: graph nodes
    whose kernels run through the transport when the graph runs (their results are plain
    tensors: a compiled graph waits for each collective)."""
    from . import _c10d_functional_ops
    return _c10d_functional_ops


def _run(kernel, t, args, start):
    """Differentiable and synchronous when ``t`` needs a gradient, else started in the
    background (``start(pg_args) -> (out, work)``)."""
    if _needs_grad(t):
        return _wrap(kernel.apply(t, *args))
    out, work = start()
    return _wrap(out, work)


# ---------------------------------------------------------------------------- public API
def all_reduce(self, reduceOp, group, tag=""):
    """The reduction of ``self`` over the group, in a new tensor."""
    op, pg = _op(reduceOp), _resolve_group(group, tag)
    if _traced(self):
        ops = _graph_ops()
        return ops.all_reduce(self.contiguous(), op, ops.group_name_of(pg))

    def start():
        out = _fresh(self)
        return out, c10d.all_reduce(out, _OPS[op], group=pg, async_op=True)
    return _run(_AllReduce, self, (op, pg), start)


def all_gather_single(self, gather_dim, group, tag=""):
    """Every rank's ``self`` concatenated along ``gather_dim``."""
    pg = _resolve_group(group, tag)
    n = pg.size()

    def start():
        out = _empty((n * self.shape[0],) + tuple(self.shape[1:]) if self.ndim else (n,), self)
        return out, c10d.all_gather_into_tensor(out, _fresh(self), group=pg, async_op=True)
    if _traced(self):
        ops = _graph_ops()
        res = ops.all_gather_into_tensor(self.contiguous(), n, ops.group_name_of(pg))
    else:
        res = _run(_AllGather, self, (pg,), start)
    if gather_dim != 0:
        from .. import cat
        res = cat(res.chunk(n), dim=gather_dim)
    return res


def reduce_scatter_single(self, reduceOp, scatter_dim, group, tag=""):
    """Reduce ``self`` over the group; this rank keeps its chunk along ``scatter_dim``."""
    op, pg = _op(reduceOp), _resolve_group(group, tag)
    n = pg.size()
    if self.size(scatter_dim) % n != 0:
        raise AssertionError(f"input dimension 0 ({self.size(0)} must be a multiple of group_size {n})")
    if scatter_dim != 0:
        from .. import cat
        self = cat(self.chunk(n, dim=scatter_dim), dim=0)

    def start():
        out = _empty((self.shape[0] // n,) + tuple(self.shape[1:]), self)
        return out, c10d.reduce_scatter_tensor(out, _fresh(self), _OPS[op], group=pg, async_op=True)
    if _traced(self):
        ops = _graph_ops()
        return ops.reduce_scatter_tensor(self.contiguous(), op, n, ops.group_name_of(pg))
    return _run(_ReduceScatter, self, (op, pg), start)


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):
    """Rows ``input_split_sizes[g]`` of ``self`` go to group rank g; rows from rank g land
    in ``output_split_sizes[g]`` rows of the result (even splits when both are None)."""
    for name, sizes in (("output_split_sizes", output_split_sizes), ("input_split_sizes", input_split_sizes)):
        if sizes is not None and not all(isinstance(s, int) for s in sizes):
            raise AssertionError(f"All {name} must be int or SymInt, got {sizes}")
    pg = _resolve_group(group, tag)
    n = pg.size()
    if output_split_sizes is None or input_split_sizes is None:
        if not (output_split_sizes is None and input_split_sizes is None):
            raise AssertionError("output_split_sizes and input_split_sizes must either be specified together or "
                                 "both set to None")
        output_split_sizes = input_split_sizes = [self.shape[0] // n] * n
    outs, ins = list(output_split_sizes), list(input_split_sizes)

    def start():
        out = _empty((sum(outs),) + tuple(self.shape[1:]), self)
        return out, c10d.all_to_all_single(out, _fresh(self), outs, ins, group=pg, async_op=True)
    return _run(_AllToAll, self, (outs, ins, pg), start)


def broadcast(self, src, group, tag=""):
    """Global rank ``src``'s ``self`` on every rank (no gradient: as PyTorch registers none)."""
    pg = _resolve_group(group, tag)
    out = _fresh(self)
    return _wrap(out, c10d.broadcast(out, src, group=pg, async_op=True))


def permute_tensor(self, src_dst, group, tag=""):
    """Group rank m's ``self`` goes to group rank ``src_dst[m]``."""
    pg = _resolve_group(group, tag)
    n, me = pg.size(), pg.rank()
    outs, ins = [0] * n, [0] * n
    for src, dst in enumerate(src_dst):
        if src == me:
            ins[dst] = self.numel()
        if dst == me:
            outs[src] = self.numel()
    return all_to_all_single(self, outs, ins, pg, tag)


def all_reduce_coalesced(self, reduceOp, group, tag=""):
    """``all_reduce`` of each tensor of the list (results detached from autograd)."""
    op, pg = _op(reduceOp), _resolve_group(group, tag)
    res = []
    for t in self:
        out = _fresh(t)
        res.append(_wrap(out, c10d.all_reduce(out, _OPS[op], group=pg, async_op=True)))
    return res


def all_gather_into_tensor_coalesced(self, group, tag=""):
    """``all_gather_single(t, 0, group)`` of each tensor of the list."""
    pg = _resolve_group(group, tag)
    n = pg.size()
    res = []
    for t in self:
        out = _empty((n * t.shape[0],) + tuple(t.shape[1:]) if t.ndim else (n,), t)
        res.append(_wrap(out, c10d.all_gather_into_tensor(out, _fresh(t), group=pg, async_op=True)))
    return res


def reduce_scatter_tensor_coalesced(inputs, reduceOp, scatter_dim, group, tag=""):
    """``reduce_scatter_single(inputs[i], reduceOp, scatter_dim[i], group)`` for each i."""
    if len(scatter_dim) != len(inputs):
        raise AssertionError(f"Length of scatter_dim ({len(scatter_dim)}) must equal length of inputs "
                             f"({len(inputs)})")
    with _no_grad():
        return [reduce_scatter_single(t, reduceOp, d, group, tag) for t, d in zip(inputs, scatter_dim)]


def _no_grad():
    from .. import no_grad
    return no_grad()


def _deprecated(name, instead):
    warnings.warn(f"`torch.distributed._functional_collectives.{name}` is deprecated. Please use "
                  f"`torch.distributed._functional_collectives.{instead}` instead.", FutureWarning, stacklevel=3)


def all_gather_single_autograd(self, gather_dim, group, tag=""):
    return all_gather_single(self, gather_dim, group, tag)


def reduce_scatter_single_autograd(self, reduceOp, scatter_dim, group, tag=""):
    return reduce_scatter_single(self, reduceOp, scatter_dim, group, tag)


def all_to_all_single_autograd(self, output_split_sizes, input_split_sizes, group, tag=""):
    return all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag)


def all_gather_tensor(self, gather_dim, group, tag=""):
    _deprecated("all_gather_tensor", "all_gather_single")
    return all_gather_single(self, gather_dim, group, tag)


def all_gather_tensor_autograd(self, gather_dim, group, tag=""):
    _deprecated("all_gather_tensor_autograd", "all_gather_single_autograd")
    return all_gather_single(self, gather_dim, group, tag)


def reduce_scatter_tensor(self, reduceOp, scatter_dim, group, tag=""):
    _deprecated("reduce_scatter_tensor", "reduce_scatter_single")
    return reduce_scatter_single(self, reduceOp, scatter_dim, group, tag)


def reduce_scatter_tensor_autograd(self, reduceOp, scatter_dim, group, tag=""):
    _deprecated("reduce_scatter_tensor_autograd", "reduce_scatter_single_autograd")
    return reduce_scatter_single(self, reduceOp, scatter_dim, group, tag)
