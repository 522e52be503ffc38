"""``Reducer``: DDP's gradient bucket reducer (torch.distributed.Reducer), and its ``Logger``.

What it does. ``Reducer(params, bucket_indices, per_bucket_size_limits, process_group, ...)``
puts a post-accumulate-grad hook on every parameter that requires grad. ``prepare_for_backward
(outputs)`` arms it for one backward (with ``find_unused_parameters`` it walks the outputs'
autograd graph and marks the parameters it cannot reach ready at once). Each hook marks its
parameter ready; a bucket whose parameters are all ready is *launched* -- buckets strictly in
index order, so every rank issues the same collectives in the same order whatever order the
hooks fire in: its gradients are packed into a flat buffer (a ``GradBucket``) and reduced by the
registered comm hook, or by default divided by the group size and all-reduced (asynchronously:
the backward goes on meanwhile). When the last bucket is launched the reducer waits for every
bucket and writes the averaged gradients back into ``param.grad`` (with
``find_unused_parameters``, the used-parameter map is all-reduced too: a parameter no rank used
keeps ``grad`` as it was, one used elsewhere gets the average).

``_compute_bucket_assignment_by_size(tensors, bucket_size_limits, ...)`` is torch's bucketing:
per dtype, tensors are added to the open bucket until its bytes reach the current limit (the
list's entries in turn, the last repeating); buckets sorted by their smallest tensor index
unless ``tensor_indices`` gives the order.

``Logger(reducer)``: DDP's usage log -- construction data (module, world, buckets, dtypes) and
per-iteration runtime stats (forward/backward compute and communication times, in ns) that
``_get_ddp_logging_data()`` returns as ``strs_map`` / ``ints_map``.

``ember.nn.parallel.DistributedDataParallel`` reduces through a Reducer (``ddp.reducer``, with
DDP's own buckets: per dtype in parameter order, which ``join``'s shadow all-reduces mirror) and
logs through a Logger (``ddp.logger``, ``ddp._get_ddp_logging_data()``).
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional

import numpy as np

__all__ = ["Reducer", "Logger", "DDPLoggingData", "_compute_bucket_assignment_by_size",
           "_register_comm_hook", "_register_builtin_comm_hook", "_DEFAULT_FIRST_BUCKET_BYTES"]

_DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024
_DEFAULT_BUCKET_BYTES_CAP = 25 * 1024 * 1024

_UNFINISHED = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
               "indicates that your module has parameters that were not used in producing loss. You can enable "
               "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
               "`torch.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs "
               "participate in calculating loss. \nParameter indices which did not receive grad for rank {rank}: "
               "{idx}")


def _compute_bucket_assignment_by_size(tensors, bucket_size_limits, expect_sparse_gradient=(),
                                       tensor_indices=()):
    """(bucket_indices, per_bucket_size_limits): see the module doc."""
    from ..tensor import Tensor
    limits = [int(x) for x in bucket_size_limits]
    if not limits:
        raise RuntimeError("Expected at least one bucket size limit")
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"_compute_bucket_assignment_by_size: expected tensors, got {type(t).__name__}")
    sparse = list(expect_sparse_gradient)
    if sparse and len(sparse) != len(tensors):
        raise RuntimeError("Expected expect_sparse_gradient to have the same length as tensors")
    # tensors are taken in their order; ``tensor_indices[i]`` is what bucket lists record for tensor i
    names = list(tensor_indices) if tensor_indices else list(range(len(tensors)))
    if len(names) != len(tensors):
        raise RuntimeError("Expected tensor_indices to have the same length as tensors")
    done, open_ = [], {}          # open_: dtype -> [indices, bytes, limit position, position of its first]
    for at, t in enumerate(tensors):
        if sparse and sparse[at]:
            done.append(([names[at]], limits[0], at))
            continue
        key = str(t.dtype)
        b = open_.setdefault(key, [[], 0, 0, at])
        if not b[0]:
            b[3] = at
        b[0].append(names[at])
        b[1] += t.numel() * t.element_size()
        lim = limits[min(b[2], len(limits) - 1)]
        if b[1] >= lim:
            done.append((b[0], lim, b[3]))
            open_[key] = [[], 0, b[2] + 1, None]
    # the buckets still open, newest dtype first (the order torch's hash map of open buckets gives)
    done += [(b[0], limits[min(b[2], len(limits) - 1)], b[3]) for b in reversed(list(open_.values())) if b[0]]
    if not tensor_indices:
        # buckets in the order they become ready (the tensors' order is the order of use)
        done.sort(key=lambda e: min(e[0]))
    return [list(e[0]) for e in done], [e[1] for e in done]


def _reachable_leaves(outputs):
    from ..nn.parallel.distributed import _reachable_leaves as reach
    return reach(outputs)


class _Bucket:
    __slots__ = ("indices", "limit", "pending", "flat", "work", "future", "launched")

    def __init__(self, indices, limit):
        self.indices, self.limit = list(indices), limit
        self.pending = 0
        self.flat = self.work = self.future = None
        self.launched = False


class Reducer:
    def __init__(self, params, bucket_indices, per_bucket_size_limits, process_group,
                 expect_sparse_gradients=None, bucket_bytes_cap=_DEFAULT_BUCKET_BYTES_CAP,
                 find_unused_parameters=False, gradient_as_bucket_view=False, param_to_name_mapping=None,
                 first_bucket_bytes_cap=_DEFAULT_FIRST_BUCKET_BYTES, skip_all_reduce_unused_params=False,
                 use_python_reducer=False, bucket_bytes_cap_list=None, batched_grad_copy=False):
        from ..tensor import Tensor
        self._params = list(params)
        if not self._params:
            raise RuntimeError("Expected at least one parameter.")
        for p in self._params:
            if not isinstance(p, Tensor):
                raise TypeError(f"Reducer: params must be tensors, got {type(p).__name__}")
        if any(p.is_sparse for p in self._params if hasattr(p, "is_sparse")) or \
                (expect_sparse_gradients and any(expect_sparse_gradients)):
            raise NotImplementedError("ember.distributed.Reducer: sparse gradients are not supported")
        if len(per_bucket_size_limits) != len(bucket_indices):
            raise RuntimeError("Expected bucket_indices and per_bucket_size_limits to have the same length")
        seen = set()
        for idx in bucket_indices:
            for i in idx:
                if not 0 <= i < len(self._params):
                    raise RuntimeError(f"Reducer: bucket index {i} out of range for {len(self._params)} parameters")
                if i in seen:
                    raise RuntimeError(f"Reducer: parameter {i} appears in more than one bucket")
                seen.add(i)
            if len({str(self._params[i].dtype) for i in idx}) > 1:
                raise RuntimeError("Reducer: all parameters of a bucket must have the same dtype")
        self.process_group = process_group
        self.bucket_bytes_cap = int(bucket_bytes_cap)
        self.first_bucket_bytes_cap = int(first_bucket_bytes_cap)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.skip_all_reduce_unused_params = bool(skip_all_reduce_unused_params)
        self._names = dict(param_to_name_mapping or {})
        self._set_buckets(bucket_indices, per_bucket_size_limits)
        self._comm_hook = None
        self._comm_hook_name = None
        self._divisor = None          # DDP under join: what to divide by (the ranks still working)
        self._logger = None
        self._static_graph = False
        self._sample_rate = 100
        self._armed = False
        self._finalized = True
        self._ready = set()
        self._unused = set()
        self._ready_order: List[int] = []
        self._rebuilt_order: Optional[List[int]] = None
        self._has_rebuilt = False
        self._iterations = 0
        self._buckets_reduced = 0
        self._stats = [0] * len(self._params)
        self._used_map = None
        self._t = {}
        self._handles = [p.register_post_accumulate_grad_hook(self._make_hook(i))
                         for i, p in enumerate(self._params) if p.requires_grad]

    # ------------------------------------------------------------------ buckets
    def _set_buckets(self, bucket_indices, limits):
        self._buckets = [_Bucket(idx, lim) for idx, lim in zip(bucket_indices, limits)]
        self._bucket_of = {}
        for b, bucket in enumerate(self._buckets):
            for i in bucket.indices:
                self._bucket_of[i] = b

    def _world(self):
        from . import distributed_c10d as c10d
        return c10d.get_world_size(self.process_group)

    def _grad_arrays(self, idx):
        out = []
        for i in idx:
            p = self._params[i]
            out.append(np.asarray(p.grad._data) if p.grad is not None else np.zeros(p._data.shape, p._data.dtype))
        return out

    def _flat(self, idx):
        from .. import empty
        arrays = self._grad_arrays(idx)
        n = sum(a.size for a in arrays)
        flat = empty(n, dtype=self._params[idx[0]].dtype) if idx else empty(0)
        if n:
            flat._data[...] = np.concatenate([a.reshape(-1) for a in arrays])
        return flat

    def _grad_bucket(self, b, flat):
        from ..nn.parallel.distributed import GradBucket
        bucket = self._buckets[b]
        return GradBucket(b, flat, [self._params[i] for i in bucket.indices], b == len(self._buckets) - 1)

    # ------------------------------------------------------------------ iteration protocol
    def prepare_for_forward(self):
        """Start of an iteration (counts it; times the forward)."""
        self._iterations += 1
        self._t = {"forward_compute_time_start": time.time_ns()}

    def prepare_for_backward(self, output):
        """Arm the reducer for the backward of ``output`` (a tensor or a list of them)."""
        from .. import distributed as dist
        self._check_reducer_finalized()
        now = time.time_ns()
        if "forward_compute_time_start" in self._t:
            self._t["forward_compute_time"] = now - self._t["forward_compute_time_start"]
        self._t["backward_compute_time_start"] = now
        self._armed, self._finalized = True, False
        self._ready, self._ready_order = set(), []
        self._stats = [0] * len(self._params)
        for bucket in self._buckets:
            bucket.pending = len(bucket.indices)
            bucket.flat = bucket.work = bucket.future = None
            bucket.launched = False
        self._next_bucket = 0
        self._buckets_reduced = 0
        self._unused = set()
        self._rank = dist.get_rank(self.process_group) if dist.is_initialized() or \
            getattr(self.process_group, "_standalone", False) else 0
        if self.find_unused_parameters:
            reach = _reachable_leaves(output if isinstance(output, (list, tuple)) else [output])
            self._unused = {i for i, p in enumerate(self._params) if id(p) not in reach}
            for i in sorted(self._unused):
                self._mark_ready(i)
        for i, p in enumerate(self._params):
            if not p.requires_grad and i not in self._ready:
                self._mark_ready(i)           # no hook will fire for it

    def _make_hook(self, i):
        def hook(param):
            if not self._armed:
                return
            if i in self._ready:
                raise RuntimeError(f"Expected to mark a variable ready only once. This error is caused by one of "
                                   f"the following reasons: 1) Use of a module parameter outside the `forward` "
                                   f"function. 2) Reused parameters in multiple reentrant backward passes. "
                                   f"Parameter at index {i} with name {self._names.get(i, '')} has been marked "
                                   f"as ready twice.")
            self._stats[i] = time.time_ns() - self._t.get("backward_compute_time_start", time.time_ns())
            self._ready_order.append(i)
            self._mark_ready(i)
        return hook

    def _mark_ready(self, i):
        self._ready.add(i)
        b = self._bucket_of.get(i)
        if b is not None:
            self._buckets[b].pending -= 1
            while self._next_bucket < len(self._buckets) and self._buckets[self._next_bucket].pending == 0:
                self._launch(self._next_bucket)
                self._next_bucket += 1
        if self._next_bucket == len(self._buckets) and len(self._ready) == len(self._params) and self._armed:
            self._finalize()

    def _launch(self, b):
        from .. import distributed as dist
        bucket = self._buckets[b]
        if "backward_comm_time_start" not in self._t:
            self._t["backward_comm_time_start"] = time.time_ns()
        flat = self._flat(bucket.indices)
        bucket.flat = flat
        if self._comm_hook is not None:
            state, hook = self._comm_hook
            bucket.future = hook(state, self._grad_bucket(b, flat))
        elif self._world() > 1:
            n = self._divisor() if self._divisor is not None else self._world()
            flat._data /= np.asarray(n, dtype=flat._data.dtype) if flat.dtype.is_floating_point else n
            bucket.work = dist.all_reduce(flat, group=self.process_group, async_op=True)
        bucket.launched = True
        self._buckets_reduced += 1

    def _finalize(self):
        from .. import distributed as dist, int32, tensor, zeros_like
        self._armed = False
        self._t["backward_compute_time_end"] = time.time_ns()
        results = []
        for bucket in self._buckets:
            out = bucket.flat
            if bucket.future is not None:
                res = bucket.future.wait() if hasattr(bucket.future, "wait") else bucket.future
                if isinstance(res, (list, tuple)):
                    res = res[0]
                if tuple(res.shape) != tuple(out.shape):
                    raise RuntimeError(f"Reducer: the comm hook returned a tensor of shape {list(res.shape)} for a "
                                       f"bucket of shape {list(out.shape)}")
                out = res
            elif bucket.work is not None:
                bucket.work.wait()
            results.append(out)
        self._t["backward_comm_time_end"] = time.time_ns()
        used = np.array([0 if i in self._unused else 1 for i in range(len(self._params))], dtype=np.int32)
        if self.find_unused_parameters:
            m = tensor(used.tolist(), dtype=int32)
            if self._world() > 1:
                dist.all_reduce(m, group=self.process_group)
            used = m._data
        self._used_map = used
        for bucket, flat in zip(self._buckets, results):
            off = 0
            for i in bucket.indices:
                p = self._params[i]
                k = p.numel()
                vals = np.asarray(flat._data[off:off + k]).reshape(p._data.shape)
                off += k
                if self.find_unused_parameters and used[i] == 0:
                    continue              # no rank used it: grad stays as it was
                if p.grad is None or not getattr(p.grad._data.flags, "writeable", True):
                    g = zeros_like(p)
                    g._data[...] = vals
                    p.grad = g
                else:
                    p.grad._data[...] = vals
                    p.grad._bump_version()
        if self._rebuilt_order is None and self._ready_order:
            self._rebuilt_order = list(self._ready_order)
        self._finalized = True

    # ------------------------------------------------------------------ queries and knobs
    def get_backward_stats(self) -> List[int]:
        """Per parameter: ns from the start of the backward until its gradient was ready."""
        return list(self._stats)

    def _get_local_used_map(self):
        """Per parameter, on how many ranks it was used in the last iteration (all-reduced with
        ``find_unused_parameters``; 1/0 of this rank otherwise)."""
        from .. import int32, tensor
        if self._used_map is None:
            return tensor([0] * len(self._params), dtype=int32)
        return tensor(self._used_map.tolist(), dtype=int32)

    def _check_reducer_finalized(self):
        if self._armed and not self._finalized and self._ready - self._unused:
            missing = sorted(set(range(len(self._params))) - self._ready)
            raise RuntimeError(_UNFINISHED.format(rank=getattr(self, "_rank", 0), idx=" ".join(map(str, missing))))

    def _rebuild_buckets(self) -> bool:
        """After the first iteration, re-bucket the parameters in the order their gradients
        became ready (first bucket capped at ``first_bucket_bytes_cap``); True when rebuilt."""
        if self._has_rebuilt or not self._rebuilt_order or (self.find_unused_parameters and not self._static_graph):
            return False
        order = self._rebuilt_order + [i for i in range(len(self._params)) if i not in set(self._rebuilt_order)]
        idx, limits = _compute_bucket_assignment_by_size(
            self._params, [self.first_bucket_bytes_cap, self.bucket_bytes_cap], tensor_indices=order)
        self._set_buckets(idx, limits)
        self._has_rebuilt = True
        return True

    def _push_all_rebuilt_params(self):
        self._rebuilt_order = list(range(len(self._params)))

    def _get_zeros_like_grad_buckets(self):
        from .. import zeros
        out = []
        for b, bucket in enumerate(self._buckets):
            n = sum(self._params[i].numel() for i in bucket.indices)
            out.append(self._grad_bucket(b, zeros(n, dtype=self._params[bucket.indices[0]].dtype)))
        return out

    def _run_comm_hook(self, grad_bucket):
        """The registered comm hook on ``grad_bucket`` (the default: its average over the group),
        as a future."""
        from .. import distributed as dist
        if self._comm_hook is not None:
            state, hook = self._comm_hook
            return hook(state, grad_bucket)
        buf = grad_bucket.buffer()
        n = self._world()
        buf._data /= np.asarray(n, dtype=buf._data.dtype) if buf.dtype.is_floating_point else n
        return dist.all_reduce(buf, group=self.process_group, async_op=True).get_future()

    def _run_allreduce_hook(self, grad_bucket):
        from .. import distributed as dist
        return dist.all_reduce(grad_bucket.buffer(), group=self.process_group, async_op=True).get_future()

    def _set_static_graph(self):
        self._static_graph = True

    def _set_ddp_runtime_logging_sample_rate(self, sample_rate):
        if int(sample_rate) < 1:
            raise RuntimeError("DDP runtime logging sample rate should be equal or greater than 1")
        self._sample_rate = int(sample_rate)

    def set_logger(self, logger):
        self._logger = logger

    def _remove_autograd_hooks(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _reset_state(self):
        """Disarm: a backward now accumulates locally (``no_sync``, a forward without grad)."""
        self._armed, self._finalized = False, True
        self._ready, self._unused = set(), set()

    def _update_process_group(self, new_process_group):
        self._check_reducer_finalized()
        self.process_group = new_process_group

    def _register_comm_hook(self, state, hook, name=None):
        if self._comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got {type(hook).__name__}")
        self._comm_hook = (state, hook)
        self._comm_hook_name = name or getattr(hook, "__qualname__", type(hook).__name__)
        if self._logger is not None:
            self._logger._set_comm_hook_name(self._comm_hook_name)


def _register_comm_hook(reducer, state, comm_hook):
    """torch.distributed._register_comm_hook: ``comm_hook(state, bucket) -> Future`` replaces the
    reducer's averaging all-reduce of each bucket."""
    reducer._register_comm_hook(state, comm_hook)


def _register_builtin_comm_hook(reducer, comm_hook_type):
    """torch.distributed._register_builtin_comm_hook: ALLREDUCE (sum, not divided) or FP16_COMPRESS."""
    from ._c10d_extras import BuiltinCommHookType
    from .algorithms.ddp_comm_hooks import default_hooks
    if comm_hook_type == BuiltinCommHookType.ALLREDUCE:
        reducer._register_comm_hook(None, lambda st, b: reducer._run_allreduce_hook(b), "builtin_allreduce")
    elif comm_hook_type == BuiltinCommHookType.FP16_COMPRESS:
        pg = reducer.process_group
        reducer._register_comm_hook(pg, default_hooks.fp16_compress_hook, "builtin_fp16_compress")
    else:
        raise ValueError(f"_register_builtin_comm_hook: unknown comm hook type {comm_hook_type!r}")


# ---------------------------------------------------------------------------- Logger
class DDPLoggingData:
    """What ``Logger._get_ddp_logging_data()`` returns: ``strs_map`` and ``ints_map``."""

    def __init__(self, strs_map=None, ints_map=None):
        self.strs_map: Dict[str, str] = dict(strs_map or {})
        self.ints_map: Dict[str, int] = dict(ints_map or {})

    def __repr__(self):
        return f"DDPLoggingData(strs_map={self.strs_map}, ints_map={self.ints_map})"


_DTYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                "int64": "long int", "int32": "int"}


class Logger:
    """torch.distributed.Logger: DDP's usage and runtime-statistics log for one Reducer."""

    def __init__(self, reducer):
        if not isinstance(reducer, Reducer):
            raise TypeError(f"Logger: expected a Reducer, got {type(reducer).__name__}")
        self._reducer = reducer
        self._strs: Dict[str, str] = {}
        self._ints: Dict[str, int] = {}
        reducer.set_logger(self)

    def set_construction_data_and_log(self, module_name, device_ids, output_device, broadcast_buffers,
                                      has_sync_bn, static_graph):
        from . import distributed_c10d as c10d
        r = self._reducer
        pg = r.process_group
        params = r._params
        dtypes = []
        for p in params:
            n = _DTYPE_NAMES.get(str(p.dtype).split(".")[-1], str(p.dtype).split(".")[-1])
            if n not in dtypes:
                dtypes.append(n)
        sizes = [sum(params[i].numel() * params[i].element_size() for i in b.indices) for b in r._buckets]
        env = os.environ
        self._strs.update({
            "module_name": str(module_name), "device_ids": ", ".join(str(d) for d in (device_ids or [])),
            "backend_name": pg.name() if pg is not None else "gloo", "dtypes": ", ".join(dtypes),
            "bucket_sizes": ", ".join(str(s) for s in sizes),
            "master_addr": env.get("MASTER_ADDR", "N/A"), "master_port": env.get("MASTER_PORT", "N/A"),
            "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES", "N/A"),
            "gloo_socket_ifname": env.get("GLOO_SOCKET_IFNAME", "N/A"),
            "gloo_device_transport": env.get("GLOO_DEVICE_TRANSPORT", "N/A"),
            "torch_distributed_debug": env.get("TORCH_DISTRIBUTED_DEBUG", "N/A"),
        })
        self._ints.update({
            "output_device": -1 if output_device is None else int(output_device),
            "broadcast_buffers": int(bool(broadcast_buffers)), "has_sync_bn": int(bool(has_sync_bn)),
            "world_size": c10d.get_world_size(pg), "rank": c10d.get_rank(pg),
            "iteration": 0, "bucket_cap_bytes": r.bucket_bytes_cap,
            "find_unused_parameters": int(r.find_unused_parameters),
            "gradient_as_bucket_view": int(r.gradient_as_bucket_view),
            "num_parameter_tensors": len(params),
            "total_parameter_size_bytes": sum(p.numel() * p.element_size() for p in params),
            "is_multi_device_module": 0, "gloo_num_threads": 2,
        })
        if static_graph:
            self._ints["static_graph"] = 1

    def set_runtime_stats_and_log(self):
        """This iteration's statistics (call after its backward): times in ns, the order the
        gradients became ready, unused parameters, buckets reduced."""
        r = self._reducer
        t = r._t
        self._ints["iteration"] = r._iterations
        self._ints["num_buckets_reduced"] = r._buckets_reduced
        self._ints["has_rebuilt_buckets"] = int(r._has_rebuilt)
        self._ints["unused_parameter_size"] = sum(r._params[i].numel() * r._params[i].element_size()
                                                  for i in r._unused)
        self._strs["prev_iteration_grad_ready_order_indices"] = ", ".join(str(i) for i in r._ready_order)
        n = max(r._iterations, 1)
        for name, start, end in (("forward_compute_time", "forward_compute_time_start", None),
                                 ("backward_compute_time", "backward_compute_time_start", "backward_compute_time_end"),
                                 ("backward_comm_time", "backward_comm_time_start", "backward_comm_time_end")):
            if start not in t:
                continue
            took = t.get(name) if end is None else (t[end] - t[start] if end in t else None)
            if took is None:
                continue
            self._ints[start] = t[start]
            if end is not None:
                self._ints[end] = t[end]
            self._ints[name] = int(took)
            prev = self._ints.get("avg_" + name, 0)
            self._ints["avg_" + name] = int(prev + (took - prev) / n)
        if "backward_comm_time_start" in t and "backward_compute_time_end" in t:
            overlap = max(0, t["backward_compute_time_end"] - t["backward_comm_time_start"])
            self._ints["backward_compute_comm_overlap_time"] = overlap
            prev = self._ints.get("avg_backward_compute_comm_overlap_time", 0)
            self._ints["avg_backward_compute_comm_overlap_time"] = int(prev + (overlap - prev) / n)

    def set_error_and_log(self, error):
        self._ints["has_error"] = 1
        self._strs["error"] = str(error)

    def _get_ddp_logging_data(self) -> DDPLoggingData:
        return DDPLoggingData(self._strs, self._ints)

    def _set_comm_hook_name(self, comm_hook):
        self._strs["comm_hook"] = str(comm_hook)

    def _set_uneven_input_join(self):
        self._ints["join_uneven_inputs"] = 1

    def _set_static_graph(self):
        self._ints["static_graph"] = 1
