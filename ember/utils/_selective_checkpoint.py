"""Selective activation checkpointing (SAC): ``torch.utils.checkpoint``'s op-level policy.

Plain checkpointing recomputes every op of the region in the backward. With
``context_fn=functools.partial(create_selective_checkpoint_contexts, policy)`` a policy says,
op by op, which outputs to keep from the forward instead (an expensive matmul, say), so the
recomputation skips those ops and hands out the kept outputs.

How: ``create_selective_checkpoint_contexts`` returns two dispatch modes sharing one store.
The *caching* mode runs around the checkpointed forward: every op runs, the policy is asked
about it (after it ran: ``ctx.op_output`` holds its result), and the store gets, per op and per
call index of that op, either the op's outputs (detached aliases, with their version, to catch
later in-place writes) or a "recompute" marker. The *cached* mode runs around the
recomputation: it walks the same ops in the same order, runs the marked ones and returns the
kept outputs of the others without running them. Each kept output is handed out once: a
second backward through the same region is an error, as in PyTorch.

Both modes sit below autograd (ember's dispatch-mode stack), so autograd records the same
graph in the recomputation whether an op ran or its output came from the store.
"""
from __future__ import annotations

import enum
from collections import defaultdict
from typing import Any, Dict

from ..tensor import Tensor
from ._python_dispatch import TorchDispatchMode

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext", "create_selective_checkpoint_contexts",
           "SAC_IGNORED_OPS"]


class CheckpointPolicy(enum.Enum):
    """What SAC does with one op's output: ``*_SAVE`` keeps it from the forward, ``*_RECOMPUTE``
    runs the op again in the backward. ``MUST_*`` and ``PREFER_*`` act alike eagerly (``PREFER``
    lets a compiler decide otherwise). ``*_CPU_OFFLOAD`` keeps the output like ``*_SAVE``: ember's
    tensors already live in host memory."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


_KEEP = frozenset((CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE, CheckpointPolicy.MUST_CPU_OFFLOAD,
                   CheckpointPolicy.PREFER_CPU_OFFLOAD))


class SelectiveCheckpointContext:
    """What the policy function is told besides the op and its arguments. The policy is asked
    during the forward only (the recomputation replays its answers), so ``is_recompute`` is
    always False, as in PyTorch 2.13; ``op_output`` is the op's result."""

    def __init__(self, *, is_recompute, op_output=None):
        self.is_recompute = is_recompute
        self.op_output = op_output


def _policy_from_bool(b):
    """A policy may answer True/False (older API): True keeps the output."""
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


def _ignored_ops():
    """Ops SAC passes through without a store entry: the checkpoint machinery itself makes a
    different number of them in the forward and in the recomputation."""
    from ..ops._aten_namespace import aten
    out = set()
    for name in ("detach", "alias"):
        try:
            out.add(getattr(aten, name).default)
        except (AttributeError, KeyError):
            pass
    return out


class _LazyIgnored:
    """``SAC_IGNORED_OPS``, built on first use (the op tables load after this module)."""

    def __init__(self):
        self._ops = None

    def _get(self):
        if self._ops is None:
            self._ops = _ignored_ops()
        return self._ops

    def __contains__(self, op):
        return op in self._get()

    def __iter__(self):
        return iter(self._get())

    def __len__(self):
        return len(self._get())

    def __repr__(self):
        return repr(self._get())


SAC_IGNORED_OPS = _LazyIgnored()

_RECOMPUTE = object()     # store entry: the op runs again in the recomputation
_CONSUMED = object()      # store entry: its kept output was handed out already

_MISMATCH = ("This can happen if the operations in the checkpointed region are nondeterministic or depend on "
             "global state that changed between forward and backward.")


def _map(fn, cls, out):
    """``out`` with ``fn`` applied to each ``cls`` instance in it (nested lists and tuples)."""
    if isinstance(out, cls):
        return fn(out)
    if isinstance(out, (list, tuple)):
        return type(out)(_map(fn, cls, o) for o in out)
    return out


class _Kept:
    """One kept output with its version at the time it was kept."""
    __slots__ = ("value", "version")

    def __init__(self, value):
        self.value = value
        self.version = value._version

    def get(self, allow_mutation):
        if not allow_mutation and self.value._version != self.version:
            raise RuntimeError("Tensor cached during selective activation checkpoint has been mutated")
        return self.value


def _keep(t):
    # a detached alias: shares data and version counter with the forward's output, carries no graph
    return _Kept(t.detach())


class _CachingMode(TorchDispatchMode):
    """Around the checkpointed forward: runs every op, records the policy's answer."""

    def __init__(self, policy_fn, storage):
        super().__init__()
        self.policy_fn = policy_fn
        self.storage = storage
        self.counts: Dict[Any, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        key = func
        idx = self.counts[key]
        self.counts[key] += 1
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out), func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)
        if not isinstance(policy, CheckpointPolicy):
            raise TypeError(f"selective checkpoint: the policy function must return a CheckpointPolicy (or a bool) "
                            f"for {func}, got {policy!r}")
        self.storage[key][idx] = _map(_keep, Tensor, out) if policy in _KEEP else _RECOMPUTE
        return out


class _CachedMode(TorchDispatchMode):
    """Around the recomputation: replays the forward's answers, op by op."""

    def __init__(self, storage, allow_cache_entry_mutation):
        super().__init__()
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation
        self.counts: Dict[Any, int] = defaultdict(int)

    def __enter__(self):
        self.counts.clear()       # each recomputation walks the ops from the start
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        key = func
        idx = self.counts[key]
        self.counts[key] += 1
        per_op = self.storage.get(key)
        if per_op is None:
            raise RuntimeError(f"{func} encountered during backward but not found in storage. {_MISMATCH}")
        entry = per_op.get(idx)
        if entry is None:
            raise RuntimeError(f"{func} invocation index {idx} encountered during backward but not found in "
                               f"storage. {_MISMATCH}")
        if entry is _CONSUMED:
            raise RuntimeError("Trying to backward an extra time. You are only allowed to backward once on any "
                               "region computed under selective activation checkpoint.")
        if entry is _RECOMPUTE:
            return func(*args, **kwargs)
        per_op[idx] = _CONSUMED
        return _map(lambda k: k.get(self.allow_cache_entry_mutation), _Kept, entry)


def _is_overload(op) -> bool:
    from ..ops._aten_namespace import OpOverload, PythonOverload
    from ..library._custom_op import CustomOpDef
    return isinstance(op, (OpOverload, PythonOverload, CustomOpDef))


def _is_packet(op) -> bool:
    from ..ops._aten_namespace import OpOverloadPacket, _PythonPacket
    return isinstance(op, (OpOverloadPacket, _PythonPacket))


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The ``context_fn`` pair for ``checkpoint(..., use_reentrant=False, context_fn=...)``.

    ``policy_fn_or_list``: ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`` (or bool),
    or a list of op overloads (``ember.ops.aten.mm.default``) to keep, all others recomputed.
    ``allow_cache_entry_mutation``: allow kept outputs to be written in place between forward
    and backward (by default that is an error: the recomputation would use the changed values).
    """
    if isinstance(policy_fn_or_list, list):
        ops = list(policy_fn_or_list)
        for op in ops:
            if not _is_overload(op):
                extra = ("Please update the OpOverloadPacket to a specific OpOverload.For example, if you have "
                         "`torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`.") if _is_packet(op) else ""
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} of type {type(op)}. "
                                 f"{extra}")

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in ops else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    if not isinstance(allow_cache_entry_mutation, bool):
        raise TypeError(f"create_selective_checkpoint_contexts(): allow_cache_entry_mutation must be a bool, got "
                        f"{type(allow_cache_entry_mutation).__name__}")
    storage: Dict[Any, Dict[int, Any]] = defaultdict(dict)
    return _CachingMode(policy_fn, storage), _CachedMode(storage, allow_cache_entry_mutation)

