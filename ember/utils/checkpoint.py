"""Activation checkpointing: run a function without keeping its intermediate activations and
recompute them during backward. Gradients equal the un-checkpointed ones.

* ``use_reentrant=False`` (recommended): the forward runs under saved-tensor hooks that store a
  placeholder (and the tensor's shape, dtype and device) per saved tensor; the first time a
  backward pass needs one, the function is run again (same inputs, RNG state and autocast
  regions) and the recomputed tensors are handed out instead -- once per backward pass, each
  tensor once. The recomputation stops as soon as it has every tensor (``early_stop``), and
  what it saved must match the forward (``determinism_check``; else ``CheckpointError``, with
  op logs of both runs under ``debug=True``). The inputs are saved as saved tensors, so nested
  checkpoints recompute their enclosing region first. ``context_fn`` gives contexts for the
  forward and the recomputation: ``create_selective_checkpoint_contexts`` keeps chosen ops'
  outputs instead of recomputing them (``_selective_checkpoint.py``). Works with
  ``ember.autograd.grad`` and with inputs that do not require grad.
* ``use_reentrant=True``: ``CheckpointFunction``, a custom ``Function`` that runs the function
  under ``no_grad`` and, in its backward, re-runs it under ``enable_grad`` and calls ``backward``
  on the recomputation (so not under ``autograd.grad`` or ``backward(inputs=...)``).

Under ``ember.compile``, ``checkpoint(..., use_reentrant=False)`` (and ``checkpoint_sequential``
with it) is captured into the graph: dynamo inlines the function and tags its nodes, and aot's
partitioner saves only the region's inputs and recomputes the rest in the compiled backward
(random draws excepted: they are saved). See ``ember/dynamo/variables/checkpoint.py``. Where the
region cannot be captured whole (``use_reentrant=True``, ``context_fn``, a graph break or a side
effect inside it) the checkpoint call is a graph break, and the checkpointed function (its
forward and its recomputation) runs here with the frame hook off: compiled, the first run saved
the compiled graph's tensors and the eager recomputation others (a ``CheckpointError``).
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import warnings
import weakref
from typing import Any, Iterable, List, Tuple

from .._state import STATE
from ..autograd.function import Function
from ..tensor import Tensor
from ._selective_checkpoint import (SAC_IGNORED_OPS, CheckpointPolicy, SelectiveCheckpointContext,
                                    create_selective_checkpoint_contexts)

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction", "check_backward_validity",
           "detach_variable", "get_device_states", "set_device_states", "noop_context_fn",
           "set_checkpoint_early_stop", "DefaultDeviceType", "set_checkpoint_debug_enabled", "CheckpointPolicy",
           "SelectiveCheckpointContext", "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS",
           "GraphExecGroup"]

_DEFAULT_DETERMINISM_MODE = "default"
_checkpoint_debug_enabled = None        # set_checkpoint_debug_enabled: overrides ``debug=`` when not None
_enable_checkpoint_early_stop = None    # set_checkpoint_early_stop: overrides ``early_stop=`` when not None


class CheckpointError(RuntimeError):
    """The recomputation of a checkpointed region did not save what its forward saved."""


_TIP = """
Tip: To see a more detailed error message, either pass `debug=True` to
`ember.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with ember.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint-debug mode globally.
"""


# ---------------------------------------------------------------------- global switches
@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Within the block, ``checkpoint`` behaves as if passed ``debug=enabled`` (``None``: each
    call's own ``debug`` argument decides)."""
    global _checkpoint_debug_enabled
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_checkpoint_debug_enabled(): enabled must be a bool or None, got "
                        f"{type(enabled).__name__}")
    prev = _checkpoint_debug_enabled
    _checkpoint_debug_enabled = enabled
    try:
        yield
    finally:
        _checkpoint_debug_enabled = prev


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Whether the non-reentrant checkpoints made within the block stop recomputing as soon as
    every tensor the backward needs is recomputed (default: they do). Read when the forward
    runs, so the backward may run outside the block."""
    global _enable_checkpoint_early_stop
    if not isinstance(enable, bool):
        raise TypeError(f"set_checkpoint_early_stop(): enable must be a bool, got {type(enable).__name__}")
    prev = _enable_checkpoint_early_stop
    _enable_checkpoint_early_stop = enable
    try:
        yield
    finally:
        _enable_checkpoint_early_stop = prev


def noop_context_fn():
    """The default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


# ---------------------------------------------------------------------- small public helpers
def detach_variable(inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """Each tensor of ``inputs`` detached, keeping its ``requires_grad`` (the recomputation's
    fresh leaves); other values as they are."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            d = inp.detach()
            d.requires_grad = inp.requires_grad
            out.append(d)
        else:
            out.append(inp)
    return tuple(out)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    """Warn when no tensor of ``inputs`` requires grad: a reentrant checkpoint then gives none."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


class DefaultDeviceType:
    """The device type whose RNG state a checkpoint preserves when no input lives on a device
    other than the cpu: the current accelerator's type, or 'cpu' without one, unless set."""

    _default_device_type = None

    @staticmethod
    def set_device_type(device: str = "cuda") -> None:
        if not isinstance(device, str):
            raise TypeError(f"DefaultDeviceType.set_device_type(): device must be a str, got {type(device).__name__}")
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type() -> str:
        if not DefaultDeviceType._default_device_type:
            from .. import accelerator
            acc = accelerator.current_accelerator(True)
            DefaultDeviceType._default_device_type = acc.type if acc is not None else "cpu"
        return DefaultDeviceType._default_device_type


def _tensors(obj):
    """The tensors in ``obj`` (nested lists, tuples and dict values)."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _rng_state():
    from ..random import default_generator
    return default_generator.get_state()


def _set_rng_state(state):
    from ..random import default_generator
    default_generator.set_state(state)


def get_device_states(*args) -> Tuple[List[int], List[Tensor]]:
    """(device ids, RNG states) of the non-cpu devices the tensors in ``args`` live on. ember's
    random ops draw from its one generator on every device, so each state is that generator's."""
    ids = [t.get_device() for t in _tensors(args) if t.device.type not in ("cpu", "meta")]
    return ids, [_rng_state() for _ in ids]


def set_device_states(devices, states, *, device_type=None) -> None:
    """Restore what ``get_device_states`` returned (ember: the one generator's state)."""
    if device_type is None:
        device_type = DefaultDeviceType.get_device_type()
    if device_type == "meta":
        return
    devices, states = list(devices), list(states)
    if len(devices) != len(states):
        raise ValueError(f"set_device_states(): got {len(devices)} devices but {len(states)} states")
    for state in states:
        if not isinstance(state, Tensor):
            raise TypeError(f"set_device_states(): each state must be a uint8 Tensor (from get_device_states), "
                            f"got {type(state).__name__}")
        _set_rng_state(state)


class GraphExecGroup:
    """Backward calls inside one ``with GraphExecGroup():`` share the recomputation of each
    non-reentrant checkpoint they reach (it runs once, not once per call). The calls must then
    use different saved activations."""

    _current = None

    def __enter__(self):
        if GraphExecGroup._current is not None:
            raise RuntimeError(f"GraphExecGroup contexts cannot be nested. Already inside group "
                               f"{GraphExecGroup._current}")
        GraphExecGroup._current = self
        return self

    def __exit__(self, *exc):
        GraphExecGroup._current = None

    @classmethod
    def _get_current_group(cls):
        return cls._current


def _uncaptured(function):
    """``function`` run with dynamo's frame hook off (when the hook is loaded at all)."""
    ef = sys.modules.get("ember._C._eval_frame")
    if ef is None:
        return function

    def run(*args, **kwargs):
        prev = ef.set_eval_frame(None)
        try:
            return function(*args, **kwargs)
        finally:
            ef.set_eval_frame(prev)
    return run


@contextlib.contextmanager
def _replayed_state(rng_state, autocast):
    """The forward's RNG state (when preserved) and autocast regions, for a recomputation; the
    caller's come back afterwards."""
    prev_rng = _rng_state() if rng_state is not None else None
    prev_autocast = STATE.autocast
    if rng_state is not None:
        _set_rng_state(rng_state)
    STATE.autocast = dict(autocast) if autocast else None
    try:
        yield
    finally:
        STATE.autocast = prev_autocast
        if prev_rng is not None:
            _set_rng_state(prev_rng)


# ---------------------------------------------------------------------- use_reentrant=True
def _is_checkpoint_valid():
    from ..autograd import _is_checkpoint_valid as valid
    return valid()


class CheckpointFunction(Function):
    """The reentrant checkpoint: the forward runs under ``no_grad`` keeping only the inputs; the
    backward runs the function again with grad on and back-propagates through that."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.fwd_rng_state = _rng_state() if preserve_rng_state else None
        ctx.autocast = STATE.autocast
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        from ..autograd import no_grad
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        import ember
        if not _is_checkpoint_valid():
            raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                               "passing an `inputs` parameter to .backward(). To resolve this error, you can either "
                               "set use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        inputs = list(ctx.inputs)
        for i, idx in enumerate(ctx.tensor_indices):
            inputs[idx] = ctx.saved_tensors[i]
        detached = detach_variable(tuple(inputs))
        with _replayed_state(ctx.fwd_rng_state, ctx.autocast), ember.enable_grad():
            outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outs, grads = [], []
        for o, g in zip(outputs, grad_outputs):
            if isinstance(o, Tensor) and o.requires_grad:
                outs.append(o)
                grads.append(g)
        if not outs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        ember.autograd.backward(outs, grads)
        return (None, None) + tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached)


# ---------------------------------------------------------------------- use_reentrant=False
class _StopRecomputation(Exception):
    """Raised by the recomputation's pack hook once it has every tensor it needs (early stop)."""


class _Holder:
    """What the forward saves in place of a tensor: its recomputed tensor, per backward pass."""
    __slots__ = ("by_pass", "__weakref__")

    def __init__(self):
        self.by_pass = {}


_MISSING = object()
_fresh_ids = itertools.count()


def _metadata(x):
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_DETERMINISM_CHECKS = {_DEFAULT_DETERMINISM_MODE: _metadata, "none": lambda _: None}


def _pass_id():
    """(id of the backward pass unpacking now, whether the id is a one-off): a pass recomputes a
    region once however many of its tensors it unpacks; an unpack outside backward recomputes."""
    group = GraphExecGroup._get_current_group()
    if group is not None:
        return group, False
    from ..autograd import engine
    pid = engine.CURRENT_PASS[0]
    if pid is None:
        return ("outside-backward", next(_fresh_ids)), True
    return pid, False


class _Frame:
    """One non-reentrant checkpoint call: its inputs, a holder per tensor its forward saved (with
    that tensor's metadata), and the recomputations made for backward passes.

    Nesting: the inputs are saved as saved tensors, so an enclosing checkpoint's hooks hold them
    (and recompute them when they are needed); saves inside the region go to this frame only."""

    def __init__(self, recompute_fn, early_stop, metadata_fn):
        self.recompute_fn = recompute_fn
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.saved = []
        self.holders: List[weakref.ref] = []
        self.metas = []
        self.counts = {}                  # pass id -> tensors saved so far by its recomputation
        self.recomputed = set()           # pass ids whose recomputation ran
        self.forward_done = False
        self.ignore_mismatch = False

    def save_inputs(self, args):
        from ..autograd.graph import SavedTensor
        self.saved = [(SavedTensor(a), a.requires_grad) if isinstance(a, Tensor) else a for a in args]

    def inputs(self):
        out = []
        for s in self.saved:
            if isinstance(s, tuple):
                saved, requires_grad = s
                t = saved.unpack().detach()
                t.requires_grad_(requires_grad)
                out.append(t)
            else:
                out.append(s)
        return out

    # -- the forward's hooks
    def pack(self, x):
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        self.metas.append(self.metadata_fn(x))
        return holder

    def unpack(self, holder):
        """The recomputed tensor for ``holder``. ember's backward formulas may read a saved tensor
        more than once, so the pass keeps what it recomputed until it ends (then it is dropped,
        also under ``retain_graph=True``); an unpack outside backward recomputes and drops."""
        gid, one_off = _pass_id()
        try:
            if gid not in self.recomputed:
                if not one_off and not isinstance(gid, GraphExecGroup):
                    from ..autograd import engine
                    engine.queue_callback(lambda: self._forget(gid))
                self._recompute(gid)
            x = holder.by_pass.get(gid, _MISSING)
            if x is _MISSING:
                raise CheckpointError("torch.utils.checkpoint: a saved tensor of the checkpointed forward was not "
                                      "recomputed (its recomputation stopped early or went otherwise)." + _TIP)
            return x
        finally:
            if one_off:
                self._forget(gid)

    def _forget(self, gid):
        self.recomputed.discard(gid)
        self.counts.pop(gid, None)
        for ref in self.holders:
            h = ref()
            if h is not None:
                h.by_pass.pop(gid, None)

    # -- the recomputation
    def _recompute(self, gid):
        import ember
        from ..autograd.graph import saved_tensors_hooks
        self.counts[gid] = 0

        def pack(x):
            if x.requires_grad:
                x = x.detach()
            idx = self.counts[gid]
            self.counts[gid] = idx + 1
            if idx >= len(self.holders):
                if not self.forward_done:
                    # a backward inside the forward, without early stop: the forward saves more later
                    self.ignore_mismatch = True
                    return x
                raise CheckpointError("torch.utils.checkpoint: trying to save more tensors during recomputation "
                                      "than during the original forward pass.\n" + _TIP)
            holder = self.holders[idx]()
            if holder is not None:         # None: its graph was freed already (partial backward)
                holder.by_pass[gid] = x
            if self.early_stop and idx + 1 == len(self.holders):
                raise _StopRecomputation
            return x

        args = self.inputs()
        try:
            with saved_tensors_hooks(pack, lambda x: x), ember.enable_grad():
                self.recompute_fn(*args)
        except _StopRecomputation:
            pass
        self.recomputed.add(gid)
        self._check(gid)

    def _check(self, gid):
        if self.ignore_mismatch:
            return
        n = self.counts.pop(gid, 0)
        if n != len(self.holders):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.holders)}\n"
                f"Number of tensors saved during recomputation: {n}.\n{_TIP}")
        differ = []
        for idx, ref in enumerate(self.holders):
            holder = ref()
            if holder is None:
                continue
            got = self.metadata_fn(holder.by_pass[gid])
            if got != self.metas[idx]:
                differ.append(f"tensor at position {idx}:\nsaved metadata: {self.metas[idx]}\n"
                              f"recomputed metadata: {got}\n")
        if differ:
            raise CheckpointError("torch.utils.checkpoint: Recomputed values for the following tensors have "
                                  f"different metadata than during the forward pass.\n{''.join(differ)}.\n{_TIP}")


def _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, debug, early_stop,
                                  args, kwargs):
    import ember
    from ..autograd.graph import saved_tensors_hooks
    on_error = None
    if _checkpoint_debug_enabled if _checkpoint_debug_enabled is not None else debug:
        if context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
        from ._checkpoint_debug import debug_context_and_error_cb
        context_fn, on_error = debug_context_and_error_cb(CheckpointError)
    metadata_fn = _DETERMINISM_CHECKS.get(determinism_check) if isinstance(determinism_check, str) else None
    if metadata_fn is None:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, but got "
                         f"{determinism_check}")
    contexts = context_fn()
    if not (isinstance(contexts, tuple) and len(contexts) == 2):
        raise TypeError(f"checkpoint(): context_fn must return a tuple of two context managers (forward, "
                        f"recomputation), got {contexts!r}")
    forward_context, recompute_context = contexts
    if not ember.is_grad_enabled():
        return function(*args, **kwargs)
    rng_state = _rng_state() if preserve_rng_state else None
    autocast = STATE.autocast

    def recompute_fn(*inputs):
        with _replayed_state(rng_state, autocast), recompute_context:
            function(*inputs, **kwargs)

    stop = _enable_checkpoint_early_stop if _enable_checkpoint_early_stop is not None else early_stop
    frame = _Frame(recompute_fn, stop, metadata_fn)
    frame.save_inputs(args)
    unpack = frame.unpack
    if on_error is not None:
        def unpack(holder):
            try:
                return frame.unpack(holder)
            except CheckpointError as e:
                on_error(e)
    finished = False
    with saved_tensors_hooks(frame.pack, unpack):
        with forward_context:
            out = function(*args, **kwargs)
            finished = True
    if not finished:
        raise RuntimeError("torch.utils.checkpoint: the forward context provided by context_fn suppressed an "
                           "exception raised during the checkpointed forward. This is not supported because "
                           "checkpoint cannot return a value for a failed forward.")
    frame.forward_done = True
    return out


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` saving only its inputs; recompute activations in backward.

    ``use_reentrant=False`` takes ``context_fn`` (``create_selective_checkpoint_contexts``: keep
    chosen ops' outputs), ``determinism_check`` ("default": the recomputed tensors' shapes,
    dtypes and devices must match the forward's; "none"), ``debug`` (errors carry op logs) and
    ``early_stop`` (stop recomputing once the backward has what it needs)."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: the use_reentrant parameter should be passed explicitly; it "
                      "defaults to True here (as in PyTorch), but use_reentrant=False is recommended.",
                      stacklevel=2)
        use_reentrant = True
    if context_fn is None:
        context_fn = noop_context_fn
    if not callable(context_fn):
        raise TypeError(f"checkpoint(): context_fn must be a callable returning two context managers, got "
                        f"{type(context_fn).__name__}")
    function = _uncaptured(function)
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, debug,
                                         early_stop, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Split a Sequential (or list of modules) into ``segments`` chunks and checkpoint each but the last."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint.checkpoint_sequential: pass use_reentrant explicitly; it defaults "
                      "to True here (as in PyTorch).", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))

    def run_function(start, end, functions):
        def forward(inp):
            for j in range(start, end + 1):
                inp = functions[j](inp)
            return inp
        return forward

    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
