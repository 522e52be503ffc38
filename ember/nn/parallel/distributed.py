"""``DistributedDataParallel``: one model replica per process; gradients averaged across the
process group during ``backward`` (PyTorch's ``torch.nn.parallel.DistributedDataParallel``).

How the gradients are synchronised
----------------------------------
The reduction is an ``ember.distributed.Reducer`` (``ddp.reducer``): each parameter that
requires grad gets a post-accumulate-grad hook (ember's autograd runs it after the parameter's
``.grad`` received this backward's contribution). ``forward`` (in grad mode, outside
``no_sync``) arms it; every hook marks its parameter ready, and a bucket whose parameters are
all ready is launched -- buckets strictly in index order, so the collectives are the same on
every rank whatever order the hooks fire in: its gradients are packed into a flat buffer,
divided by the world size and all-reduced in the background while the backward goes on
(ember's all-reduce folds in rank order and hands every rank the same bytes, so replicas stay
identical). Buckets are per dtype, in parameter order, at most ``bucket_cap_mb`` each. When the
last bucket is launched the averaged gradients are written back. ``ddp.logger`` /
``ddp._get_ddp_logging_data()`` give torch's usage log.

Gradients are averaged exactly once per armed forward: a second backward through the same
graph (``retain_graph=True``) accumulates locally without another all-reduce.

``find_unused_parameters=True``: ``forward`` walks the autograd graph of its outputs and marks
the parameters it cannot reach ready at once (their slot in the buffer is zeros); a used-map is
all-reduced with the gradients, and a parameter unused on every rank keeps ``grad`` untouched
(None stays None), one used elsewhere receives the averaged gradient, as PyTorch. Without it,
a parameter that gets no gradient leaves the reduction unfinished, and the next ``forward``
raises PyTorch's "Expected to have finished reduction in the prior iteration" error.

``register_comm_hook(state, hook)`` replaces each bucket's averaging all-reduce by the hook
(``ember.distributed.algorithms.ddp_comm_hooks.default_hooks``). ``ember.compile`` over a DDP
module works (the hooks fire from the compiled backward's gradient accumulation).

Uneven inputs: ``with ddp.join():`` (``ember.distributed.algorithms.join``): a rank that runs
out of batches keeps answering the other ranks' collectives (zero gradients into their
all-reduce, the buffer broadcasts, the used-parameter map) until every rank is done; then
all ranks copy the model of a rank that joined last. ``divide_by_initial_world_size=False``
averages each iteration's gradients over the ranks still working.

Not implemented (clear errors): ``device_mesh``, ``mixed_precision``;
``device_ids`` must be None (CPU modules, as PyTorch requires for them). ``static_graph`` and
``gradient_as_bucket_view`` are accepted: gradients are always written back in place.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..modules.module import Module
from ...distributed.algorithms.join import Join, JoinHook, Joinable, _JoinConfig

__all__ = ["DistributedDataParallel"]

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates "
    "that your module has parameters that were not used in producing loss. You can enable unused parameter "
    "detection by passing the keyword argument `find_unused_parameters=True` to "
    "`torch.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs participate "
    "in calculating loss. \nIf you already have done the above, then the distributed data parallel module wasn't "
    "able to locate the output tensors in the return value of your module's `forward` function. Please include "
    "the loss function and the structure of the return value of `forward` of your module when reporting this "
    "issue (e.g. list, dict, iterable).\nParameter indices which did not receive grad for rank {rank}: {idx}\n"
    "(parameters: {names})")


def _tensors_in(obj, out):
    from ...tensor import Tensor
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors_in(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors_in(v, out)
    elif hasattr(obj, "__dataclass_fields__"):
        for k in obj.__dataclass_fields__:
            _tensors_in(getattr(obj, k), out)
    return out


def _reachable_leaves(outputs):
    """ids of the leaf tensors the autograd graphs of ``outputs`` accumulate into."""
    from ...autograd.graph import AccumulateGrad, gradient_edge
    seen, leaves, stack = set(), set(), []
    for t in _tensors_in(outputs, []):
        e = gradient_edge(t) if t.requires_grad else None
        if e is not None:
            stack.append(e[0])
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
            continue
        for e in node.next_edges:
            if e is not None:
                stack.append(e[0])
    return leaves


class GradBucket:
    """What a comm hook receives: one bucket's flat gradient buffer and its parameters."""

    def __init__(self, index, buffer, params, is_last):
        self._index, self._buffer, self._params, self._last = index, buffer, params, is_last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, tensor):
        self._buffer._data[...] = tensor._data

    def parameters(self):
        return list(self._params)

    def gradients(self):
        out, off = [], 0
        for p in self._params:
            n = p.numel()
            out.append(self._buffer[off:off + n].view(p.shape))
            off += n
        return out

    def is_last(self):
        return self._last


class _DDPJoinHook(JoinHook):
    """What a rank that ran out of inputs does while others still train: the collectives of
    one DDP iteration with zeros for its data (``main_hook``), then the final model sync."""

    def __init__(self, ddp, divide_by_initial_world_size):
        if not isinstance(ddp, DistributedDataParallel):
            raise AssertionError(f"DDP join hook requires passing in a DistributedDataParallel instance as the "
                                 f"state, got {type(ddp).__name__}")
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self):
        ddp = self.ddp
        if ddp._syncs_buffers():
            ddp._broadcast_coalesced(ddp._buffers_to_sync, ddp._common_rank(False))
        should_sync = ddp._global_requires_sync(joined=True)
        ddp.require_forward_param_sync = should_sync
        if should_sync:
            ddp._shadow_reduce()

    def post_hook(self, is_last_joiner):
        ddp = self.ddp
        ignored = set(getattr(ddp.module, "_ddp_params_and_buffers_to_ignore", ()))
        ddp._broadcast_coalesced([p for n, p in ddp.module.named_parameters() if n not in ignored]
                                 + (ddp._buffers_to_sync if ddp.broadcast_buffers else []),
                                 ddp._common_rank(is_last_joiner))


class DistributedDataParallel(Module, Joinable):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None):
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()
        self._divide_by_initial_world_size = True
        self._join_active = None      # this iteration's "still working" all-reduce (join contexts)
        from ... import distributed as dist
        if not dist.is_initialized():
            raise ValueError("Default process group has not been initialized, please make sure to call "
                             "init_process_group.")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        if process_group is not None and device_mesh is not None:
            raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
        if device_mesh is not None:
            raise NotImplementedError("DistributedDataParallel(device_mesh=...): ember has no DeviceMesh; pass "
                                      "process_group")
        if mixed_precision is not None:
            raise NotImplementedError("DistributedDataParallel(mixed_precision=...) is not implemented in ember")
        params = [p for p in module.parameters()]
        if not any(p.requires_grad for p in params):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        devices = {p.device for p in params}
        if any(d.type != "cpu" for d in devices):
            raise RuntimeError(f"DistributedDataParallel: ember's process groups carry CPU tensors only; the module "
                               f"has parameters on {sorted(str(d) for d in devices)}")
        if device_ids is not None or output_device is not None:
            raise ValueError(f"DistributedDataParallel device_ids and output_device arguments only work with "
                             f"single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                             f"{device_ids}, output_device {output_device}, and module parameters "
                             f"{{device(type='cpu')}}.")
        self.module = module
        self.device_ids = None
        self.output_device = None
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        ignored = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        self._named_params = [(n, p) for n, p in module.named_parameters() if p.requires_grad and n not in ignored]
        self._buffers_to_sync = [b for n, b in module.named_buffers() if n not in ignored and b is not None]
        self._world = dist.get_world_size(self.process_group)
        self._check_same_model(dist)
        if init_sync:
            self._broadcast_coalesced([p for _, p in module.named_parameters() if _ not in ignored]
                                      + self._buffers_to_sync)
        # the gradient reduction: ember.distributed.Reducer over DDP's buckets (per dtype, in
        # parameter order, at most bucket_cap_mb each -- the buckets _shadow_reduce mirrors)
        from ...distributed._reducer import Logger, Reducer
        plist = [p for _, p in self._named_params]
        idx = self._buckets([p._data for p in plist])
        self.reducer = Reducer(plist, idx, [self.bucket_bytes_cap] * len(idx), self.process_group,
                               bucket_bytes_cap=self.bucket_bytes_cap, find_unused_parameters=find_unused_parameters,
                               gradient_as_bucket_view=gradient_as_bucket_view,
                               param_to_name_mapping={i: n for i, (n, _) in enumerate(self._named_params)})
        self.reducer._divisor = self._grad_divisor
        self.logger = Logger(self.reducer)
        from ..modules.compat import SyncBatchNorm
        self.logger.set_construction_data_and_log(type(module).__name__, [], None, broadcast_buffers,
                                                  any(isinstance(m, SyncBatchNorm) for m in module.modules()),
                                                  static_graph)

    # ------------------------------------------------------------------ construction helpers
    def _check_same_model(self, dist):
        mine = [(n, tuple(p.shape), str(p.dtype)) for n, p in self.module.named_parameters()]
        everyone = [None] * self._world
        dist.all_gather_object(everyone, mine, group=self.process_group)
        ranks = dist.get_process_group_ranks(self.process_group)
        for r, theirs in zip(ranks, everyone):
            if theirs != everyone[0]:
                if len(theirs) != len(everyone[0]):
                    raise RuntimeError(f"DDP expects same model across all ranks, but Rank {r} has {len(theirs)} "
                                       f"params, while rank {ranks[0]} has inconsistent {len(everyone[0])} params.")
                for (n0, s0, d0), (n1, s1, d1) in zip(everyone[0], theirs):
                    if (n0, s0, d0) != (n1, s1, d1):
                        raise RuntimeError(f"DDP expects same model across all ranks, but rank {r} has parameter "
                                           f"{n1} of shape {list(s1)} and dtype {d1} where rank {ranks[0]} has "
                                           f"{n0} of shape {list(s0)} and dtype {d0}.")

    def _buckets(self, arrays):
        """Index lists of ``arrays`` grouped by dtype, each group at most the bucket cap in
        bytes (a single larger array gets a bucket of its own)."""
        by_dtype = {}
        for i, a in enumerate(arrays):
            by_dtype.setdefault(str(a.dtype), []).append(i)
        out = []
        for idx in by_dtype.values():
            cur, size = [], 0
            for i in idx:
                nb = arrays[i].nbytes
                if cur and size + nb > self.bucket_bytes_cap:
                    out.append(cur)
                    cur, size = [], 0
                cur.append(i)
                size += nb
            if cur:
                out.append(cur)
        return out

    def _flat(self, arrays, idx, dtype):
        from ... import empty
        n = sum(arrays[i].size for i in idx)
        flat = empty(n, dtype=dtype)
        if n:
            flat._data[...] = np.concatenate([np.asarray(arrays[i]).reshape(-1) for i in idx])
        return flat

    def _broadcast_coalesced(self, tensors, src_group_rank=0):
        """Group rank ``src_group_rank``'s values of ``tensors`` everywhere, one broadcast per
        bucket."""
        from ... import distributed as dist
        if self._world == 1 or not tensors:
            return
        src = dist.get_process_group_ranks(self.process_group)[src_group_rank]
        arrays = [t._data for t in tensors]
        for idx in self._buckets(arrays):
            flat = self._flat(arrays, idx, tensors[idx[0]].dtype)
            dist.broadcast(flat, src=src, group=self.process_group)
            off = 0
            for i in idx:
                t = tensors[i]
                k = t._data.size
                t._data[...] = flat._data[off:off + k].reshape(t._data.shape)
                t._bump_version()
                off += k

    # ------------------------------------------------------------------ gradient reduction
    def _grad_divisor(self):
        """What each bucket's gradients are divided by before the all-reduce: the world size, or
        (a join context with divide_by_initial_world_size=False) the ranks still working."""
        div = self._world
        if self._join_active is not None and not self._divide_by_initial_world_size:
            self._join_active.wait()        # average over the ranks still working
            div = int(self._join_active.result()[0].item())
        return div

    def _get_ddp_logging_data(self):
        """DDP's usage log (torch's): construction data and the last iteration's statistics."""
        data = self.logger._get_ddp_logging_data()
        return {**data.strs_map, **data.ints_map}

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        from ... import distributed as dist, is_grad_enabled
        red = self.reducer
        if red._armed and red._ready - red._unused:
            # the last backward did not produce every expected gradient
            missing = sorted(set(range(len(self._named_params))) - red._ready)
            red._reset_state()
            raise RuntimeError(_UNFINISHED.format(rank=dist.get_rank(), idx=" ".join(map(str, missing)),
                                                  names=", ".join(self._named_params[i][0] for i in missing)))
        if red._iterations and not red._armed and red._t.get("backward_compute_time_end"):
            self.logger.set_runtime_stats_and_log()       # the previous iteration's statistics
        red.prepare_for_forward()
        self._join_active = Join.notify_join_context(self)
        if self._syncs_buffers():
            # in a join context rank 0 may have joined already (stale buffers): the highest working rank sends
            self._broadcast_coalesced(self._buffers_to_sync,
                                      self._common_rank(True) if self._join_config.enable else 0)
        if self._join_config.enable:
            self._global_requires_sync(joined=False)
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            red._reset_state()
            red.prepare_for_backward(_tensors_in(out, []))
        else:
            red._reset_state()
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate gradients locally; the first
        backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ------------------------------------------------------------------ uneven inputs (join)
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """Context manager for ranks with different numbers of batches (see the module doc)."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        from ... import device
        return device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    def _syncs_buffers(self):
        return bool(self.broadcast_buffers and self.require_forward_param_sync and self._buffers_to_sync)

    def _common_rank(self, candidate):
        """The highest group rank among those passing ``candidate=True`` (each rank passes its
        own truth), agreed through one all-reduce."""
        from ... import distributed as dist, tensor, int64
        me = dist.get_rank(self.process_group)
        t = tensor([me if candidate else -1], dtype=int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.process_group)
        if t.item() < 0:
            raise ValueError("BUG! Expected rank_cond to be true for at least one process. This indicates a bug in "
                             "ember's DistributedDataParallel join.")
        return int(t.item())

    def _global_requires_sync(self, joined):
        """Whether any working rank's backward will all-reduce gradients this iteration (a
        joined rank must then join those all-reduces)."""
        from ... import distributed as dist, is_grad_enabled, tensor, float32
        mine = 0.0 if joined or not (self.require_backward_grad_sync and is_grad_enabled()) else 1.0
        t = tensor([mine], dtype=float32)
        dist.all_reduce(t, group=self.process_group)
        return t.item() != 0

    def _run_comm_hook(self, index, flat, params, is_last):
        """The registered comm hook on one bucket, waited for: the bucket's new contents."""
        state, hook = self.reducer._comm_hook
        fut = hook(state, GradBucket(index, flat, params, is_last))
        return fut.wait() if hasattr(fut, "wait") else fut

    def _shadow_reduce(self):
        """The gradient all-reduces of one backward (per bucket, or through the comm hook) and
        the used-parameter map, with zeros: what a joined rank contributes."""
        from ... import distributed as dist, zeros, int32
        params = [p for _, p in self._named_params]
        arrays = [np.zeros(p._data.shape, p._data.dtype) for p in params]
        buckets = self._buckets(arrays)
        for bi, idx in enumerate(buckets):
            flat = self._flat(arrays, idx, params[idx[0]].dtype)
            if self.reducer._comm_hook is not None:
                self._run_comm_hook(bi, flat, [params[i] for i in idx], bi == len(buckets) - 1)
            elif self._world > 1:
                dist.all_reduce(flat, group=self.process_group)
        if self.find_unused_parameters and self._world > 1:
            dist.all_reduce(zeros(len(params), dtype=int32), group=self.process_group)

    def register_comm_hook(self, state, hook):
        """Replace the averaging all-reduce of each gradient bucket by ``hook(state, bucket)``
        returning a future whose value is the bucket's new contents (PyTorch's contract:
        ``bucket.buffer()`` is the *sum-to-be*, not yet divided by the world size). Call it
        once, before the first backward."""
        self.reducer._register_comm_hook(state, hook)

    def _set_static_graph(self):
        self.static_graph = True
        self.reducer._set_static_graph()
        self.logger._set_static_graph()

    def __getstate__(self):
        raise RuntimeError("DistributedDataParallel cannot be pickled: pickle its .module instead")
