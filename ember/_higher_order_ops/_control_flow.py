"""Structured control flow: ``ember.cond`` and ``ember.while_loop`` (``torch.cond`` / ``torch.while_loop``).

Why they exist: Python ``if``/``while`` on a tensor's value cannot be captured into one graph
(the branch depends on data the tracer does not have). These functions name the control flow
explicitly, with torch's contract: a predicate, functions for the branches / loop body, and
operands that are tensors. Eagerly they simply run the chosen branch / the loop (so autograd
flows through the branch that ran, as torch's eager cond does).

Under ``ember.compile`` (``ember/dynamo/variables/control_flow.py``):

* a predicate known while tracing (a Python bool, a comparison of static sizes such as
  ``x.shape[0] > 4``) inlines the chosen branch into the graph; the other branch is run on the
  operands' fake example values and its outputs' structure/shape/dtype are compared with the
  chosen one's (torch checks both branches at trace time; a mismatch raises as here);
* a predicate that is a tensor is captured as one graph node, ``ember.ops.higher_order.cond``
  (torch's cond higher-order op; ``cond_op.py``), with both branches traced into subgraphs;
  ``ember.export`` keeps that node. Under a make_fx trace (or on fake tensors) ``cond`` itself
  goes through that operator, so a ``cond`` nested in a traced branch is a node of the branch;
* ``while_loop`` is always a graph break (its condition is a tensor by contract); under
  ``ember.export`` that break is an error naming it (export needs one graph).
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["cond", "while_loop", "CondBranchMismatchError"]


from .._user_errors import UserError


class CondBranchMismatchError(UserError):
    """The two branches of ``cond`` (or a ``while_loop`` body and its carried inputs) do not
    return the same structure of tensors with the same shapes and dtypes."""


def _flatten(tree, what):
    """Leaves and a structure description of a nested tuple/list/dict of tensors."""
    from ..tensor import Tensor
    leaves = []

    def walk(t):
        if isinstance(t, Tensor):
            leaves.append(t)
            return "T"
        if isinstance(t, (tuple, list)):
            return (type(t).__name__, tuple(walk(x) for x in t))
        if isinstance(t, dict):
            return ("dict", tuple((k, walk(t[k])) for k in t))
        raise _bad_leaf(what, t)
    spec = walk(tree)
    return leaves, spec


class _BadLeaf(Exception):
    """(what, leaf): a non-tensor leaf found while flattening ``what``."""


def _bad_leaf(what, leaf):
    return _BadLeaf(what, leaf)


def _check_pred(pred):
    """The Python truth value of ``pred`` (a bool/int or a one-element tensor)."""
    from ..tensor import Tensor
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        return bool(pred.item())
    if isinstance(pred, (bool, int)):
        return bool(pred)
    raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")


def _check_operands(operands, fn_name, arg_name):
    msg = (f"Expect {arg_name} to be a tuple of possibly nested dict/list/tuple that only consists of "
           f"tensor leaves, but got {operands!r}.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"{fn_name}: {msg}")
    try:
        _flatten(tuple(operands), arg_name)
    except _BadLeaf:
        raise RuntimeError(f"{fn_name}: {msg}") from None


def describe_mismatch(a, b, lhs="true_fn", rhs="false_fn"):
    """Why the outputs ``a`` and ``b`` (nested tensors, real or fake) do not match, or None.

    Shapes are compared as given (symbolic sizes compare by expression)."""
    try:
        la, sa = _flatten(a, lhs)
        lb, sb = _flatten(b, rhs)
    except _BadLeaf as e:
        return f"{e.args[0]} returned a {type(e.args[1]).__name__}; only (nested tuple/list/dict of) tensors " \
               f"are supported"
    if sa != sb:
        return f"{lhs} and {rhs} return different structures: {_spec_str(sa)} vs {_spec_str(sb)}"
    for i, (x, y) in enumerate(zip(la, lb)):
        for attr in ("dtype", "device"):
            if getattr(x, attr) != getattr(y, attr):
                return f"output {i} differs in {attr}: {getattr(x, attr)} vs {getattr(y, attr)}"
        if len(x.shape) != len(y.shape) or any(str(p) != str(q) for p, q in zip(x.shape, y.shape)):
            return f"output {i} differs in shape: {tuple(x.shape)} vs {tuple(y.shape)}"
    return None


def _spec_str(spec):
    if spec == "T":
        return "Tensor"
    kind, items = spec
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_spec_str(v)}" for k, v in items) + "}"
    inner = ", ".join(_spec_str(v) for v in items)
    return f"({inner}{',' if len(items) == 1 else ''})" if kind == "tuple" else f"[{inner}]"


def cond(pred, true_fn: Callable, false_fn: Callable, operands=()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``torch.cond``).

    ``pred``: a Python bool or a one-element tensor; ``operands``: a tuple/list of tensors
    (possibly nested in tuples/lists/dicts). Both functions must return the same structure of
    tensors with equal shapes and dtypes -- checked when the call is compiled or exported (where
    both branches are traced), not eagerly (eager runs only the branch taken)."""
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError(f"ember.cond: expected true_fn and false_fn to be callable, got "
                           f"{type(true_fn).__name__} and {type(false_fn).__name__}")
    _check_operands(operands, "ember.cond", "operands")
    from ..tensor import Tensor
    if isinstance(pred, Tensor) and pred.numel() == 1 and (pred._fake or _tracing()):
        # inside a make_fx trace (a branch of an enclosing cond, make_fx of user code) or on fake
        # tensors: the graph operator, which traces both branches (``cond_op.py``)
        return _cond_as_op(pred, true_fn, false_fn, tuple(operands))
    taken = true_fn if _check_pred(pred) else false_fn
    out = taken(*operands)
    try:
        _flatten(out, "true_fn" if taken is true_fn else "false_fn")
    except _BadLeaf as e:
        raise RuntimeError(f"ember.cond: {e.args[0]} must return a tensor or a (nested tuple/list/dict of) "
                           f"tensors, got a {type(e.args[1]).__name__}") from None
    return out


def _tracing():
    from .cond_op import active_tracer
    return active_tracer() is not None


def _cond_as_op(pred, true_fn, false_fn, operands):
    """``cond`` through ``ember.ops.higher_order.cond``: operands and outputs flattened (pytrees)."""
    from ..utils._pytree import tree_flatten, tree_unflatten
    from .cond_op import cond_op
    flat_ops, ops_spec = tree_flatten(operands)
    trees = {}

    def wrap(fn, name):
        def branch(*flat):
            out = fn(*tree_unflatten(list(flat), ops_spec))
            try:
                leaves, _ = _flatten(out, name)
            except _BadLeaf as e:
                raise RuntimeError(f"ember.cond: {e.args[0]} must return a tensor or a (nested tuple/list/dict "
                                   f"of) tensors, got a {type(e.args[1]).__name__}") from None
            trees[name] = out
            return tuple(tree_flatten(out)[0])
        return branch
    res = cond_op(pred, wrap(true_fn, "true_fn"), wrap(false_fn, "false_fn"), tuple(flat_ops))
    if "true_fn" in trees and "false_fn" in trees:
        why = describe_mismatch(trees["true_fn"], trees["false_fn"])
        if why is not None:
            raise CondBranchMismatchError(f"ember.cond: Expected true_fn and false_fn to return the same "
                                          f"structure of tensors with the same metadata: {why}")
    spec = tree_flatten(trees.get("true_fn", trees.get("false_fn")))[1]
    return tree_unflatten(list(res), spec)


def while_loop(cond_fn: Callable, body_fn: Callable, carried_inputs) -> Any:
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` (``torch.while_loop``).

    ``carried_inputs``: a tuple/list of tensors; ``cond_fn`` returns a bool scalar tensor (or a
    Python bool); ``body_fn`` returns a tuple with the same structure, shapes and dtypes as
    ``carried_inputs`` (checked every iteration). Returns the final carried values as a tuple."""
    from ..tensor import Tensor
    from ..types import bool_ as _bool
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("Expect cond_fn and body_fn to be callable.")
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"ember.while_loop: carried_inputs must be a tuple or list of tensors, got "
                           f"{type(carried_inputs).__name__}")
    _check_operands(carried_inputs, "ember.while_loop", "carried_inputs")
    carried = tuple(carried_inputs)
    while True:
        c = cond_fn(*carried)
        if isinstance(c, Tensor):
            if c.ndim != 0 or c.dtype != _bool:
                raise RuntimeError(f"ember.while_loop: cond_fn must return a boolean scalar tensor, got a tensor "
                                   f"of shape {tuple(c.shape)} and dtype {c.dtype}")
            go = bool(c.item())
        elif isinstance(c, bool):
            go = c
        else:
            raise RuntimeError(f"ember.while_loop: cond_fn must return a boolean scalar tensor, got "
                               f"{type(c).__name__}")
        if not go:
            return carried
        out = body_fn(*carried)
        if isinstance(out, Tensor):
            out = (out,)
        if not isinstance(out, (tuple, list)):
            raise RuntimeError(f"ember.while_loop: body_fn must return a tuple of tensors like carried_inputs, got "
                               f"{type(out).__name__}")
        out = tuple(out)
        why = describe_mismatch(out, carried, "body_fn", "carried_inputs")
        if why is not None:
            raise CondBranchMismatchError(f"ember.while_loop: Expected body_fn_output and carried_inputs to have "
                                          f"the same structure and metadata: {why}")
        carried = out


cond._ember_hop = "cond"
while_loop._ember_hop = "while_loop"
