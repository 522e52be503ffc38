"""Gradients through a traced ``cond`` node (see ``cond_op.py``)."""
from __future__ import annotations


def cond_with_autograd(outer, pred, true_fn, false_fn, operands):
    raise NotImplementedError("ember.ops.higher_order.cond: tracing a cond whose operands require grad "
                              "(gradients through a cond graph node) is not supported yet")
