"""Autograd of a custom operator: one backward node per call, which is also its ``ctx``.

torch's contract (``register_autograd``): ``setup_context(ctx, inputs, output)`` runs in
the forward, right after the operator, and saves what the backward needs
(``ctx.save_for_backward``, plain attributes); ``backward(ctx, *grads)`` gets one gradient
per output and returns one per input (None for non-tensor inputs, a list for a
``list[Tensor]`` input). The ctx is an ``ember.autograd.Function`` ctx, so
``saved_tensors``, ``needs_input_grad``, ``mark_non_differentiable`` and
``set_materialize_grads`` behave the same.

Why a node of our own instead of the registry's ``OpNode`` (``op.backward(ctx, grad)``):
``setup_context`` must run at forward time with the op's inputs and output, and the
registry's formulas see only saved arguments. The op record's ``_rec`` (what the
dispatcher calls after the Autograd key ran the op) is :func:`record` here, so eager
calls, fake-tensor traces and make_fx's joint graphs all take this path; in a joint
graph the backward's ember ops are traced like any other derivative formula.

Without ``register_autograd`` the node still exists (as in torch) and its backward raises
:class:`AutogradNotImplemented`, naming the op, when a gradient reaches it.
"""
from __future__ import annotations

from typing import Any, Tuple

from .._state import STATE
from ..autograd.function import BackwardCFunction
from ..autograd.graph import SavedTensor, _FREED_MSG, gradient_edge
from ..tensor import Tensor
from ._opaque import call_opaque


class AutogradNotImplemented(NotImplementedError):
    """A gradient reached a custom op that has no backward formula.

    A ``NotImplementedError`` (hence a ``RuntimeError``, as torch raises): aot's joint
    trace of a compiled graph meets it at compile time and runs that graph eagerly
    instead (logged), so the forward works and the error comes when ``backward`` runs."""


def no_formula_message(qualname: str) -> str:
    overload = qualname.replace("::", ".") + ".default"      # torch names the overload: mylib.foo.default
    return (f"Trying to backward through {overload} but no autograd formula was registered. "
            f"Please use register_autograd to add one.")


class CustomOpBackward(BackwardCFunction):
    """The backward node of one call of a custom op (see the module docstring).

    Per op there is a subclass named like torch's
    (``GeneratedBackwardFor_mylib_foo_defaultBackward``) holding ``_custom``, the op."""

    _custom = None

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            return tuple(self.to_save)
        if saved == "freed":
            raise RuntimeError(_FREED_MSG)
        nrs = self._saved_out_nr
        return tuple(s.unpack(self, nrs[i]) if isinstance(s, SavedTensor) else s for i, s in enumerate(saved))

    def apply(self, grads):
        op = self._custom
        if self._saved == "freed":
            raise RuntimeError(_FREED_MSG)
        if op._backward is None:
            raise AutogradNotImplemented(no_formula_message(op._qualname))
        if self.materialize_grads:
            from ..ops import api
            grads = [g if g is not None else api.zeros(shape, dtype=dtype, device=dev)
                     for g, (shape, dtype, dev) in zip(grads, self._out_meta)]
        res = call_opaque(op._backward, self, *grads)
        if not isinstance(res, tuple):
            res = (res,) if len(self._layout) == 1 or not isinstance(res, list) else tuple(res)
        if len(res) != len(self._layout):
            raise RuntimeError(f"{op._qualname}: the backward returned {len(res)} gradient(s), expected one per "
                               f"input ({len(self._layout)}: {', '.join(n for n, _ in self._layout)}), with None "
                               f"for inputs that take no gradient")
        flat = []
        for (name, kind), g in zip(self._layout, res):
            if kind is None:                      # not a tensor
                if g is not None:
                    raise RuntimeError(f"{op._qualname}: the backward returned a gradient for '{name}', which is "
                                       f"not a Tensor input; return None there")
            elif isinstance(kind, int):           # a list of that many tensors
                if g is None:
                    flat.extend([None] * kind)
                elif not isinstance(g, (list, tuple)) or len(g) != kind:
                    raise RuntimeError(f"{op._qualname}: the gradient for the list input '{name}' must be a list "
                                       f"of {kind} tensors (or None)")
                else:
                    flat.extend(g)
            else:
                flat.append(g)
        return flat


def _edge(a: Any):
    return gradient_edge(a) if isinstance(a, Tensor) and a._requires_grad else None


def _meta(a: Any):
    return (a._data.shape, a.dtype, a.device) if isinstance(a, Tensor) else None


def record(custom, args: Tuple[Any, ...], out: Any) -> Any:
    """Attach the backward node of ``custom(*args) -> out`` (called with grad mode on, after the
    op ran with it off, when some input requires grad)."""
    node = custom._node_cls()
    edges, metas, needs, layout = [], [], [], []
    for p, a in zip(custom._schema.params, args):
        if p.type == "Tensor[]":
            items = list(a)
            edges.extend(_edge(x) for x in items)
            metas.extend(_meta(x) for x in items)
            needs.append(any(isinstance(x, Tensor) and x._requires_grad for x in items))
            layout.append((p.name, len(items)))
        elif p.is_tensor:
            edges.append(_edge(a))
            metas.append(_meta(a))
            needs.append(isinstance(a, Tensor) and a._requires_grad)
            layout.append((p.name, "tensor"))
        else:
            needs.append(False)
            layout.append((p.name, None))
    node.next_edges = tuple(edges)
    node._in_meta = tuple(metas)
    node.needs_input_grad = tuple(needs)
    node._layout = tuple(layout)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    node._n_out = len(outs)
    node._out_meta = tuple((o.shape, o.dtype, o.device) for o in outs)
    if custom._setup_context is not None:
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            call_opaque(custom._setup_context, node, tuple(args), out)
        finally:
            STATE.grad_enabled = prev
    nondiff = {id(t) for t in node.non_differentiable}
    for k, o in enumerate(outs):
        if o.dtype.is_floating_point and id(o) not in nondiff:
            d = o.__dict__
            d["_requires_grad"] = True
            d["_grad_fn"] = node
            if k:
                d["_output_nr"] = k
    out_nr = {id(o): k for k, o in enumerate(outs)}
    node._saved = tuple(None if t is None else SavedTensor(t, is_output=id(t) in out_nr) for t in node.to_save)
    node._saved_out_nr = tuple(out_nr.get(id(t), 0) for t in node.to_save)
    node.to_save = ()
    return out
