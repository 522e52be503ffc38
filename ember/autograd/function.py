"""Custom differentiable functions: ``class F(ember.autograd.Function)``.

``F.apply(*args)`` runs ``forward`` with grad mode off and, when an input
requires grad, makes one backward node whose ``ctx`` is the node itself (as in
PyTorch): ``save_for_backward``, ``saved_tensors``, ``needs_input_grad``,
``mark_dirty``, ``mark_non_differentiable``, ``set_materialize_grads``.
"""
from __future__ import annotations

import functools

from .._state import STATE
from ..tensor import Tensor, _make
from .graph import Node, SavedTensor, gradient_edge, _FREED_MSG


class FunctionCtx:
    """The ctx API shared by backward nodes and the plain context."""

    __slots__ = ()

    def __init__(self):
        self.to_save = ()
        self._saved = None
        self.needs_input_grad = ()
        self.materialize_grads = True
        self.non_differentiable = ()
        self.dirty_tensors = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self._saved is None:
            return tuple(self.to_save)
        if self._saved == "freed":
            raise RuntimeError(_FREED_MSG)
        # a saved output is unpacked as output k of this node: k is its place among the outputs
        # (recorded at save time), not its place in the saved tuple
        nrs = getattr(self, "_saved_out_nr", None) or (0,) * len(self._saved)
        return tuple(s.unpack(self, k) if isinstance(s, SavedTensor) else s
                     for k, s in zip(nrs, self._saved))


class _PlainCtx(FunctionCtx):
    """Context used when no graph is recorded (no input needs grad)."""


class BackwardCFunction(FunctionCtx, Node):
    """The backward node of a custom Function; also its ctx."""

    def __init__(self):
        Node.__init__(self)
        FunctionCtx.__init__(self)

    def __repr__(self):
        return f"<{type(self).__module__}.{type(self).__qualname__} object at {hex(id(self))}>"

    def apply(self, grads):
        cls = self._forward_cls
        if self._saved == "freed":
            raise RuntimeError(_FREED_MSG)
        if self.materialize_grads:
            from ..ops import api
            grads = [g if g is not None else api.zeros(shape, dtype=dtype, device=dev)
                     for g, (shape, dtype, dev) in zip(grads, self._out_meta)]
        bw = cls.backward
        if getattr(bw, "_once_differentiable", False):
            prev = STATE.grad_enabled
            STATE.grad_enabled = False
            try:
                res = bw(self, *grads)
            finally:
                STATE.grad_enabled = prev
        else:
            res = bw(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._arg_is_tensor)
        if len(res) < n:
            raise RuntimeError(f"function {type(self).__name__} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(res)})")
        if len(res) > n and any(r is not None for r in res[n:]):
            raise RuntimeError(f"function {type(self).__name__} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(res)})")
        out = []
        for is_t, r in zip(self._arg_is_tensor, res[:n]):
            if is_t:
                out.append(r)
            elif r is not None:
                raise RuntimeError(f"function {type(self).__name__} returned a gradient different than "
                                   "None for an input that is not a Tensor")
        return out

    def release(self):
        if self._saved is not None and self._saved != "freed":
            for s in self._saved:
                if isinstance(s, SavedTensor):
                    s.release()
        self._saved = "freed"


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        backward_cls.__module__ = "ember.autograd.function"
        backward_cls.__qualname__ = name + "Backward"
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class of user-defined autograd functions."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please "
                           "use new-style autograd function with static forward method.")

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs:
            args = _bind_keywords(cls, args, kwargs)
        if STATE.modes:
            from . import forward_ad
            if forward_ad._wants_custom_jvp(args):
                # dual inputs: forward runs without tangents, then the Function's own jvp
                return forward_ad._custom_function_apply(cls, args)
        return cls._apply_ctx(args)[0]

    @classmethod
    def _apply_ctx(cls, args):
        """``apply``'s body: (its result, the ctx forward saw)."""
        is_tensor = tuple(isinstance(a, Tensor) for a in args)
        needs = tuple(t and a._requires_grad for t, a in zip(is_tensor, args))
        record = STATE.grad_enabled and any(needs)
        ctx = cls._backward_cls() if record else _PlainCtx()
        ctx.needs_input_grad = needs
        uses_setup = cls.setup_context is not Function.setup_context
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            if uses_setup:
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args)
        finally:
            STATE.grad_enabled = prev
        if not record:
            return out, ctx
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        ctx._arg_is_tensor = is_tensor
        ctx.next_edges = tuple(gradient_edge(a) if t else None for t, a in zip(is_tensor, args)
                               if t)
        ctx._in_meta = tuple((a.shape, a.dtype, a.device) for t, a in zip(is_tensor, args) if t)
        ctx._n_out = len(outs)
        ctx._out_meta = tuple((o.shape, o.dtype, o.device) if isinstance(o, Tensor) else ((), None, None)
                              for o in outs)
        dirty = {id(t) for t in ctx.dirty_tensors}
        nondiff = {id(t) for t in ctx.non_differentiable}
        input_ids = {id(a) for a, t in zip(args, is_tensor) if t}
        results = []
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                results.append(o)
                continue
            if id(o) in input_ids and id(o) not in dirty:
                # returning an input unchanged: PyTorch returns a view of it
                o = o.detach()
                o._diff_view = False
            if id(o) in dirty:
                if o._requires_grad and o._grad_fn is None:
                    raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                                       "operation.")
                o._bump_version()
            if id(o) not in nondiff and o.dtype._differentiable:
                o._requires_grad = True
                o._grad_fn = ctx
                o._output_nr = k
            results.append(o)
        # now the outputs exist: save, marking which saved tensors are outputs
        out_ids = {id(o): k for k, o in enumerate(results) if isinstance(o, Tensor)}
        ctx._saved = tuple(None if t is None else SavedTensor(t, is_output=id(t) in out_ids)
                           for t in ctx.to_save)
        ctx._saved_out_nr = tuple(out_ids.get(id(t), 0) for t in ctx.to_save)
        ctx.to_save = ()
        return (results[0] if single else tuple(results)), ctx


class InplaceFunction(Function):
    pass


class NestedIOFunction(Function):
    pass


def once_differentiable(fn):
    """Mark a backward as not differentiable: it runs with grad mode off."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            out = fn(ctx, *args)
        finally:
            STATE.grad_enabled = prev
        return out
    wrapper._once_differentiable = True
    return wrapper


def _bind_keywords(cls, args, kwargs):
    """``apply(x, factor=3.0)`` as torch binds it. With ``setup_context`` overridden: by
    ``forward``'s signature, defaults filled. Otherwise (torch's C++ ``apply``): each keyword
    goes to the slot of ``forward``'s positional parameter of that name, the slots before the
    last one given must all be filled (a default does not fill a gap), and keyword-only or
    unknown names are refused -- with torch's messages. Everything is passed positionally
    (the saved inputs and ``backward``'s gradients are positional)."""
    import inspect
    sig = inspect.signature(cls.forward)
    if cls.setup_context is not Function.setup_context:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"forward() {e}") from None
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError(f"forward() got an unexpected keyword argument '{next(iter(bound.kwargs))}'")
        return tuple(bound.args)
    names = [p.name for p in list(sig.parameters.values())[1:]
             if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    slots = list(args)
    given = {}
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"forward() got an unexpected keyword argument '{name}'")
        k = names.index(name)
        if k < len(args):
            raise TypeError(f"forward() got multiple values for argument '{name}'")
        given[k] = value
    for k in range(len(args), max(given) + 1):
        if k not in given:
            raise TypeError(f"forward() missing required argument: '{names[k]}' (position {k})")
        slots.append(given[k])
    return tuple(slots)


class NestedIOFunction(Function):
    """torch's legacy nested-input/output Function (instance methods ``forward_extended`` /
    ``backward_extended``). It does not run in PyTorch 2 either (its ``_do_forward`` is gone);
    the class exists so that code naming it imports. Using it raises."""

    _MSG = ("ember.autograd.NestedIOFunction: the legacy nested-IO autograd Function API (instance "
            "forward_extended/backward_extended) is not supported (PyTorch 2 cannot run it either); write a "
            "Function with static forward/backward and call it with .apply")

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self._MSG)

    @classmethod
    def apply(cls, *args, **kwargs):
        raise NotImplementedError(cls._MSG)

    def forward_extended(self, *inputs):
        raise NotImplementedError(self._MSG)

    def backward_extended(self, *grad_output):
        raise NotImplementedError(self._MSG)
