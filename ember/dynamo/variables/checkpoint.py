"""``ember.utils.checkpoint`` inside a compiled frame: the region is captured, not a graph break.

``checkpoint(fn, *args, use_reentrant=False, **fn_kwargs)`` inlines ``fn`` (a user function,
lambda, bound method, module or ember function: whatever ``fn``'s tracker does when called)
and every operator node made meanwhile gets ``meta["recompute"] = "checkpoint"`` and
``meta["checkpoint_region"]`` (an id per region, in capture order). aot carries the tags to
the joint graph's nodes (``ember/aot/joint.py``) and its partitioners then save only the
region's inputs: the region is recomputed in the backward (``ember/aot/partition.py``). This
is what PyTorch's dynamo does with its ``tag_activation_checkpoint`` higher-order op.

All or nothing: anything in the region that dynamo cannot capture makes the whole checkpoint
call a graph break (eager ``checkpoint``, the function uncompiled), never a break inside the
region. That needs no snapshot of the tracer's state: an ``Unsupported`` raised while inlining
abandons the whole trace, and the frame is traced again from its start stopping *before* the
top-level instruction that failed (``convert_frame.Compiler._compile``) -- the checkpoint call
itself, or the call of the function that contains it (whose frame is then compiled on its own
and breaks at the checkpoint call). The nodes and state of the failed trace are discarded with
its ``OutputGraph``. Cases captured that would behave otherwise than eager also fall back:

* ``use_reentrant=True`` (or unset, which means True with a warning, as in PyTorch) is captured
  by what its autograd does, which hangs on its tensor arguments (guarded by the tensor guards'
  ``requires_grad``): when one requires grad (and grad mode is on) its gradients are the plain
  function's, so it is a region as above; when none does, eager runs the function under
  ``no_grad`` (``CheckpointFunction.forward``) and nothing is recomputed, so it is inlined in a
  ``no_grad`` block (its outputs do not require grad even when the function uses parameters).
  Keyword arguments to the function, ``context_fn`` or ``debug`` make eager raise: graph break.
  (Left as eager would not be: ``autograd.grad`` through a captured reentrant region works, where
  eager raises; PyTorch's dynamo does the same and also gives the no-grad case gradients.)
* ``preserve_rng_state=False``: eager's recomputation draws new random numbers (the graph
  saves the forward's), ``context_fn``: eager raises;
* a region with side effects (attribute/global/container writes, ``print``) or in-place
  writes to tensors from outside it (a BatchNorm's running statistics): eager runs the
  function twice (forward and recomputation), so it does those twice.
"""
from __future__ import annotations

from ..exc import Unsupported
from .constant import ConstantVariable

_CONTROL = ("use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state")


def _eager(reason):
    """The checkpoint call runs eagerly: a graph break at it (``convert_frame`` logs the reason on
    ``ember.dynamo.graph_breaks`` and ``explain`` lists it)."""
    return Unsupported(f"activation checkpointing (ember.utils.checkpoint) runs eagerly: {reason}")


def _const(v, what):
    if not v.is_python_constant():
        raise _eager(f"its {what} argument is not a constant")
    return v.as_python_constant()


def call_checkpoint(tx, fn, args, kwargs):
    """Trace a call of ``fn`` (a function of ``ember.utils.checkpoint``) with trackers."""
    name = getattr(fn, "__name__", "")
    if name == "checkpoint":
        return _checkpoint(tx, args, kwargs)
    if name == "checkpoint_sequential":
        return _checkpoint_sequential(tx, fn, args, kwargs)
    raise _eager(f"ember.utils.checkpoint.{name} is not modelled")


def _checkpoint(tx, args, kwargs):
    if not args:
        raise _eager("checkpoint() without a function")
    fn_var, fn_args = args[0], list(args[1:])
    control = {k: _const(kwargs[k], k) for k in _CONTROL if k in kwargs}
    fn_kwargs = {k: v for k, v in kwargs.items() if k not in _CONTROL}
    reentrant = control.get("use_reentrant", None) is not False
    if reentrant and (fn_kwargs or control.get("debug")):
        raise _eager("use_reentrant=True (the default when it is not passed) with keyword arguments for the "
                     "function or debug=True, which eager refuses")
    if control.get("context_fn") is not None:
        raise _eager("context_fn is not supported")
    if control.get("preserve_rng_state", True) is not True:
        raise _eager("preserve_rng_state=False: eager's recomputation draws new random numbers, a captured "
                     "region keeps the forward's")
    if reentrant and not _any_requires_grad(fn_args):
        return _inline_no_grad(tx, fn_var, fn_args)
    return inline_region(tx, fn_var, fn_args, fn_kwargs)


def _any_requires_grad(args):
    """Whether the reentrant checkpoint records autograd: grad mode on and one of its (top-level)
    tensor arguments requires grad -- ``Function.apply``'s rule."""
    from ..._state import STATE
    from .tensor import TensorVariable
    return STATE.grad_enabled and any(isinstance(a, TensorVariable) and a.example.requires_grad
                                      for a in args)


def _inline_no_grad(tx, fn_var, args):
    """A reentrant checkpoint that records no autograd: eager calls the function once under
    ``no_grad`` (and never again: there is no backward to recompute it for)."""
    from .ctx import GradModeVariable
    exit_ = GradModeVariable(False).enter(tx)
    try:
        result = fn_var.call_function(tx, list(args), {})
    except Unsupported as e:
        raise _eager(f"the checkpointed function cannot be captured whole ({e})") from None
    exit_.call_function(tx, [], {})
    return result


def _checkpoint_sequential(tx, fn, args, kwargs):
    """Traced through (ember's Python code, like user code): each of its ``checkpoint`` calls
    is then a region of its own (or a ``no_grad`` block: see ``_checkpoint``)."""
    from .functions import UserFunctionVariable
    return tx.inline_call(UserFunctionVariable(fn), args, kwargs)


def _tensor_versions(out):
    """node -> version of its example value, for every node of the graph that has a tensor one."""
    from ...tensor import Tensor
    return {node: node.meta["example_value"]._version for node in out.graph.nodes
            if isinstance(node.meta.get("example_value"), Tensor)}


def _outside_write(out, before):
    """A node of a tensor from outside the region (made before it, or a graph input first read in
    it) whose example value the region wrote in place (its version moved; fake example values of
    inputs start at 0), or None."""
    from ...tensor import Tensor
    for node in out.graph.nodes:
        ex = node.meta.get("example_value")
        if not isinstance(ex, Tensor):
            continue
        if node in before:
            if ex._version != before[node]:
                return node
        elif node.op == "placeholder" and ex._version != 0:
            return node
    return None


def inline_region(tx, fn_var, args, kwargs):
    """Call ``fn_var`` with every operator node it makes tagged as one checkpointed region."""
    out = tx.output
    before = _tensor_versions(out)
    n_effects = len(out.side_effects)
    out.checkpoint_regions += 1
    region = out.checkpoint_regions
    saved_meta = out.node_meta
    out.node_meta = dict(saved_meta, recompute="checkpoint", checkpoint_region=region)
    try:
        result = fn_var.call_function(tx, list(args), dict(kwargs))
    except Unsupported as e:
        raise _eager(f"the checkpointed function cannot be captured whole ({e}); a graph break inside a "
                     f"checkpointed region is not made") from None
    finally:
        out.node_meta = saved_meta
    if len(out.side_effects) > n_effects:
        kinds = sorted({str(e[0]) for e in out.side_effects[n_effects:]})
        raise _eager(f"the checkpointed function has side effects ({', '.join(kinds)}), which eager runs "
                     f"again when it recomputes the function in the backward")
    written = _outside_write(out, before)
    if written is not None:
        raise _eager(f"the checkpointed function writes in place into {written.name}, a tensor from outside "
                     f"it, which eager does again when it recomputes the function in the backward")
    return result
