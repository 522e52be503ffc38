"""Calls of the autograd engine that name ``inputs`` (``autograd.grad(out, inputs)``,
``autograd.backward(..., inputs=)``, ``Tensor.backward(inputs=)``) break the graph: they run
eagerly on the graph's outputs. When such an input is a tensor *computed in the graph being
traced* (``h = x * 2; y = f(h); autograd.grad(y, h)``), both ``y`` and ``h`` leave the graph as
outputs of one compiled autograd node, whose backward reaches only the graph's inputs: no
gradient ever flows into ``h``'s slot. ``autograd.grad`` then raised "appears to not have been
used in the graph" and ``backward(inputs=[h])`` left ``h.grad`` None (torch.compile does the
same). Eager, ``y``'s graph runs through ``h``. Such a frame is not split there: it runs
eagerly (its callees are still compiled), so the engine sees eager's autograd graph. Typical
case: MAML's inner loop, ``p = {k: w - lr * g}`` then ``grad(loss(functional_call(model, p)),
p.values())`` in one resume function.
"""
from __future__ import annotations

from ..exc import Unsupported


def _tensors(v, acc):
    from .lists import BaseListVariable
    from .tensor import TensorVariable
    if isinstance(v, TensorVariable):
        acc.append(v)
    elif isinstance(v, BaseListVariable):
        for item in v.items:
            _tensors(item, acc)


def check_engine_inputs(inputs, what):
    """Raise (the frame runs eagerly) if ``inputs`` -- a tracker of a tensor or a list/tuple of
    them, or None -- holds a tensor requiring grad that an operator of this graph computed."""
    if inputs is None:
        return
    acc = []
    _tensors(inputs, acc)
    for t in acc:
        node = getattr(t, "node", None)
        if node is not None and node.op != "placeholder" and getattr(t.example, "requires_grad", False):
            e = Unsupported(f"{what} with respect to a tensor computed in this graph: split here, no gradient "
                            f"would reach it; the frame runs eagerly")
            e.no_break = True
            raise e
