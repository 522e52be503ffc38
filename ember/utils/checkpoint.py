"""Activation checkpointing: run a function without keeping its intermediate activations and
recompute them during backward. Gradients equal the un-checkpointed ones.

* ``use_reentrant=False`` (recommended): the forward runs normally under saved-tensor hooks that
  store only a placeholder; the first time backward needs a saved tensor, the function is re-run
  (same inputs, same RNG state) and the recomputed tensors are handed out instead. Works with
  ``ember.autograd.grad`` and with inputs that do not require grad.
* ``use_reentrant=True``: a custom ``Function`` that runs the function under ``no_grad`` and, in
  its backward, re-runs it under ``enable_grad`` and calls ``backward`` on the recomputation.

Under ``ember.compile``, ``checkpoint(..., use_reentrant=False)`` (and ``checkpoint_sequential``
with it) is captured into the graph: dynamo inlines the function and tags its nodes, and aot's
partitioner saves only the region's inputs and recomputes the rest in the compiled backward
(random draws excepted: they are saved). See ``ember/dynamo/variables/checkpoint.py``. Where the
region cannot be captured whole (``use_reentrant=True``, a graph break or a side effect inside
it) the checkpoint call is a graph break, and the checkpointed function (its forward and its
recomputation) runs here with the frame hook off: compiled, the first run saved the compiled
graph's tensors and the eager recomputation others ("the recomputation saved fewer tensors than
the original forward").
"""
from __future__ import annotations

import sys
import warnings

from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def _rng_state():
    from ..random import default_generator
    return default_generator.get_state()


def _set_rng_state(state):
    from ..random import default_generator
    default_generator.set_state(state)


def _detach_inputs(args):
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return tuple(out)


def _make_reentrant_function():
    from ..autograd import Function

    class CheckpointFunction(Function):
        @staticmethod
        def forward(ctx, run_function, preserve_rng_state, *args):
            ctx.run_function = run_function
            ctx.preserve_rng_state = preserve_rng_state
            if preserve_rng_state:
                ctx.fwd_rng_state = _rng_state()
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
                outputs = run_function(*args)
            return outputs

        @staticmethod
        def backward(ctx, *args):
            import ember
            inputs = list(ctx.inputs)
            tensors = ctx.saved_tensors
            for i, idx in enumerate(ctx.tensor_indices):
                inputs[idx] = tensors[i]
            detached = _detach_inputs(inputs)
            saved_state = None
            if ctx.preserve_rng_state:
                saved_state = _rng_state()
                _set_rng_state(ctx.fwd_rng_state)
            try:
                with ember.enable_grad():
                    outputs = ctx.run_function(*detached)
            finally:
                if saved_state is not None:
                    _set_rng_state(saved_state)
            if isinstance(outputs, Tensor):
                outputs = (outputs,)
            outs, grads = [], []
            for o, g in zip(outputs, args):
                if isinstance(o, Tensor) and o.requires_grad:
                    outs.append(o)
                    grads.append(g)
            if not outs:
                raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
            ember.autograd.backward(outs, grads)
            grads_in = tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached)
            return (None, None) + grads_in

    return CheckpointFunction


_CHECKPOINT_FN = None


class _Holder:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _checkpoint_without_reentrant(function, preserve_rng_state, args, kwargs):
    import ember
    from ..autograd.graph import saved_tensors_hooks
    if not ember.is_grad_enabled():
        return function(*args, **kwargs)
    rng_state = _rng_state() if preserve_rng_state else None
    counter = [0]
    recomputed = {}
    state = {"done": False}

    def pack(t):
        h = _Holder(counter[0])
        counter[0] += 1
        return h

    def recompute():
        saved = []

        def pack2(t):
            saved.append(t)
            return len(saved) - 1

        def unpack2(i):
            return saved[i]

        detached = _detach_inputs(args)
        current = None
        if rng_state is not None:
            current = _rng_state()
            _set_rng_state(rng_state)
        try:
            with ember.enable_grad(), saved_tensors_hooks(pack2, unpack2):
                function(*detached, **kwargs)
        finally:
            if current is not None:
                _set_rng_state(current)
        for i, t in enumerate(saved):
            recomputed[i] = t
        state["done"] = True

    def unpack(h):
        if not state["done"]:
            recompute()
        if h.index not in recomputed:
            raise RuntimeError("ember.utils.checkpoint: the recomputation saved fewer tensors than the original "
                               "forward (the checkpointed function must be deterministic in what it computes)")
        return recomputed[h.index]

    with saved_tensors_hooks(pack, unpack):
        return function(*args, **kwargs)


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


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` saving only its inputs; recompute activations in backward."""
    global _CHECKPOINT_FN
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: the use_reentrant parameter should be passed explicitly; it "
                      "defaults to True here (as in PyTorch), but use_reentrant=False is recommended.",
                      stacklevel=2)
        use_reentrant = True
    if context_fn is not None:
        raise RuntimeError("ember.utils.checkpoint: context_fn is not supported")
    function = _uncaptured(function)
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if _CHECKPOINT_FN is None:
            _CHECKPOINT_FN = _make_reentrant_function()
        return _CHECKPOINT_FN.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(function, preserve_rng_state, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Split a Sequential (or list of modules) into ``segments`` chunks and checkpoint each but the last."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint.checkpoint_sequential: pass use_reentrant explicitly; it defaults "
                      "to True here (as in PyTorch).", stacklevel=2)
        use_reentrant = True

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
                           preserve_rng_state=kwargs.get("preserve_rng_state", True))
    return run_function(end + 1, len(functions) - 1, functions)(input)
