"""Gradients through a traced ``cond`` node (see ``cond_op.py``), torch's way: the backward of a
``cond`` is a ``cond`` over the branches' backward graphs.

Under a make_fx trace with grad mode on (aot's joint forward+backward trace), a ``cond`` whose
operands require grad is applied as ``CondAutogradFunction`` (an ``ember.autograd.Function``):

* its forward records the forward ``cond`` node (``record_cond``) -- so the joint graph holds it;
* its backward records a second ``cond`` node with the same predicate, whose branches are the
  vector-Jacobian products of the two branches: ``(operands..., grad_outputs...) -> one gradient
  per operand`` (each traced from the branch with ``ember.autograd.grad`` on fresh leaves; an
  operand a branch does not use, or one that does not require grad, gets zeros, so both branches
  return the same structure).

The partitioner then puts the first node in the forward graph and the second in the backward one
(the predicate and the operands are saved for it). At run time each node evaluates the predicate,
so the backward differentiates the branch the forward took.
"""
from __future__ import annotations

from ..autograd.function import Function
from ..tensor import Tensor


def _vjp_branch(fn, n_ops, diff):
    """``(operands..., grads...) -> gradients of every operand`` for branch ``fn``."""
    from .. import autograd
    from .._state import STATE
    from ..ops import api

    def vjp(*args):
        ops, grads = args[:n_ops], args[n_ops:]
        prev = STATE.grad_enabled
        STATE.grad_enabled = True
        try:
            leaves = [o.detach().requires_grad_(True) if d else o.detach() for o, d in zip(ops, diff)]
            outs = fn(*leaves)
            outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
            # (copies: the engine may accumulate into a gradient buffer in place, which must not
            # be a write into the node's input)
            pairs = [(o, g.clone()) for o, g in zip(outs, grads) if o.requires_grad]
            wrt = [x for x, d in zip(leaves, diff) if d]
            got = autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True) \
                if pairs and wrt else [None] * len(wrt)
        finally:
            STATE.grad_enabled = prev
        it = iter(got)
        res = []
        for o, d in zip(ops, diff):
            g = next(it) if d else None
            res.append(g if g is not None else api.zeros_like(o))
        return tuple(res)
    return vjp


class CondAutogradFunction(Function):
    @staticmethod
    def forward(ctx, outer, pred, true_fn, false_fn, *operands):
        from .cond_op import record_cond
        ctx.outer, ctx.pred = outer, pred
        ctx.fns = (true_fn, false_fn)
        ctx.save_for_backward(*operands)
        ctx.diff = tuple(o.requires_grad for o in operands)
        outs = record_cond(outer, pred, true_fn, false_fn, operands)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        from .cond_op import cond_op
        ops = ctx.saved_tensors
        diff = tuple(ctx.needs_input_grad[4:])
        tfn, ffn = ctx.fns
        n = len(ops)
        gs = cond_op(ctx.pred, _vjp_branch(tfn, n, diff), _vjp_branch(ffn, n, diff), tuple(ops) + tuple(grads))
        return (None, None, None, None) + tuple(g if d else None for g, d in zip(gs, diff))


def cond_with_autograd(outer, pred, true_fn, false_fn, operands):
    return CondAutogradFunction.apply(outer, pred, true_fn, false_fn, *operands)
