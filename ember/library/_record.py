"""The registry record of a custom operator: how the dispatcher runs it.

A custom op is an ordinary ``OpDef`` (``ember/ops/registry.py``) so that every layer that
knows ops knows it without special cases: the generated binding binds arguments and
dispatches (Autograd key, then the mode stack, then the kernel); fake tensors run its
``meta``; make_fx records it as one ``call_function`` node whose target is its binding;
aot's prims decomposition has no entry for it, so it stays whole. What differs is only
what the three entry points *are*:

* ``run(args)`` (the backend kernel, called with the op's tensors): the user's Python
  implementation, called with tensors (inputs that require grad are passed detached, so
  ``x.numpy()`` works, as it does in torch's implementations). Below every mode, so
  the ember ops it calls are never traced;
* ``meta(*args)`` (fake tensors): the function given to ``register_fake``, run under a
  ``FakeTensorMode`` (the dispatcher popped the caller's) with the ShapeEnv of the
  inputs' symbolic sizes;
* ``kernel(xp, *arrays)``: the same implementation over backend arrays, which is what
  inductor's extern fallback calls (``ember/inductor/custom_ops.py``).

Autograd goes through ``_rec`` (``ember/library/_autograd.py``). The record is *not* put
in ``ember.ops.registry.OPS``: that table is ember's own operator set (coverage reports,
cache lookups by name iterate it), and a user's op is reachable by its object.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .._state import STATE
from ..ops.registry import K_OTHER, K_TENSOR_LIST, OpDef
from ..tensor import Tensor, _make
from . import _fake_ctx
from ._opaque import call_opaque

#: registry tag of custom ops (inductor, the partitioner and the caches look for it)
CUSTOM_TAG = "custom"


class CustomOpRecord(OpDef):
    """``OpDef`` of a custom op; ``custom`` is its :class:`~ember.library.CustomOpDef`."""

    def __init__(self, custom, ember_schema: str):
        # kernel=None while the binding is generated: its fast path then calls ``run`` (ours)
        # instead of inlining a call of ``kernel`` on backend arrays
        super().__init__(ember_schema, None, tags=(CUSTOM_TAG,), method=False, function=False,
                         grad_fn_name=custom._node_cls.__name__)
        self.custom = custom
        self.name = self.public_name = custom._qualname
        self.kernel = self._array_kernel
        self.meta = self._run_fake
        # non-None so the dispatcher records autograd through ``_rec`` (below), which makes
        # the node whether or not a formula was registered (its backward then raises)
        self.backward = _no_direct_formula

    # -- TorchDispatchMode (ember/utils/_python_dispatch.py asks) ------------------------
    def _torch_dispatch(self, mode, types, args, kwargs):
        """A ``TorchDispatchMode`` saw this op: its ``register_torch_dispatch`` rule for the mode's
        class, else the mode's ``__torch_dispatch__``; ``func`` is the op itself (its own
        ``default`` overload: ``ember.ops.<ns>.<op>.default``)."""
        from ._extensions import torch_dispatch_rule
        custom = self.custom
        rule = torch_dispatch_rule(custom, type(mode))
        if rule is not None:
            return rule(mode, custom, types, args, kwargs)
        return mode.__torch_dispatch__(custom, types, args, kwargs)

    # -- autograd -------------------------------------------------------------------
    def _rec(self, args, out):
        from ._autograd import record
        return record(self.custom, args, out)

    # -- the kernel: the user's implementation ----------------------------------------
    def run(self, args):
        custom = self.custom
        impl = custom._impl_for(_device_type(self, args))
        call_args = [_detached(a) for a in args]
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            out = call_opaque(impl, *_positional(self, call_args), **_keywords(self, call_args))
        finally:
            STATE.grad_enabled = prev
        return checked_output(custom, out, args, "implementation")

    def _array_kernel(self, xp, *args, **kwargs):
        """The implementation over backend arrays (inductor's extern call): arguments in schema
        order, keyword-only ones by name, omitted ones at their defaults."""
        from .. import types as _t
        vals = list(args)
        for p in self.params[len(vals):]:
            vals.append(kwargs[p.name] if p.name in kwargs else p.default)

        def wrap(a):
            if isinstance(a, Tensor) or not hasattr(a, "__array_interface__") and \
                    not hasattr(a, "__cuda_array_interface__"):
                return a
            return _make(a, _t.cpu if isinstance(a, np.ndarray) else _t.device("cuda", a.device.id))
        tensors = []
        for p, a in zip(self.params, vals):
            if p.kind == K_TENSOR_LIST and a is not None:
                tensors.append([wrap(x) for x in a])
            elif p.kind != K_OTHER and a is not None:
                tensors.append(wrap(a))
            else:
                tensors.append(a)
        out = self.run(tuple(tensors))
        if isinstance(out, (tuple, list)):
            return tuple(o._data for o in out)
        return out._data if out is not None else None

    # -- fake tensors -----------------------------------------------------------------
    def _run_fake(self, *args):
        from ..fx.fake_tensor import FakeTensorMode
        custom = self.custom
        fake = custom._fake
        if fake is None:
            raise MissingFakeImpl(custom)
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            env = _shape_env_of(args)
            with FakeTensorMode(shape_env=env), _fake_ctx.running(custom._qualname, env):
                out = call_opaque(fake, *_positional(self, args), **_keywords(self, args))
        finally:
            STATE.grad_enabled = prev
        return custom._check_output(out, args, "fake implementation")


def _no_direct_formula(ctx, grad):
    raise RuntimeError("internal: a custom op's backward runs through its own node "
                       "(ember/library/_autograd.py), never as a registry formula")


class MissingFakeImpl(NotImplementedError):
    """A custom op without ``register_fake`` met fake tensors (ember.compile, make_fx).

    A ``NotImplementedError``: aot, which traces on fake tensors, runs the graph eagerly
    when it meets one (logged); dynamo checks for the fake impl before and breaks the graph
    at the call instead, with this message as the reason."""

    def __init__(self, custom):
        self.op = custom._qualname
        super().__init__(missing_fake_message(custom))


def missing_fake_message(custom) -> str:
    return (f"There was no fake impl registered for {custom!r}. This is necessary for ember.compile/fx "
            f"tracing to work. Please use `{custom._opname}.register_fake` to add a fake impl.")


def _positional(op, args):
    return [a for p, a in zip(op.params, args) if not p.kwonly]


def _keywords(op, args):
    return {p.name: a for p, a in zip(op.params, args) if p.kwonly}


def _detached(a):
    if isinstance(a, Tensor):
        return a.detach() if a._requires_grad else a
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) and x._requires_grad for x in a):
        return type(a)(x.detach() if isinstance(x, Tensor) and x._requires_grad else x for x in a)
    return a


def _device_type(op, args) -> str:
    for p, a in zip(op.params, args):
        if isinstance(a, Tensor):
            return a.device.type
        if p.kind == K_TENSOR_LIST and a:
            for x in a:
                if isinstance(x, Tensor):
                    return x.device.type
    for p, a in zip(op.params, args):
        if p.type.startswith("Device") and a is not None:
            from .. import types as _t
            return _t.as_device(a).type
    return "cpu"


def _shape_env_of(args):
    """The ShapeEnv of the first symbolic size among the arguments (None: all concrete)."""
    def sizes(a):
        if isinstance(a, Tensor):
            yield from a._data.shape
        elif isinstance(a, (list, tuple)):
            for x in a:
                yield from sizes(x)
        elif hasattr(a, "env") and hasattr(a, "expr"):
            yield a
    for a in args:
        for n in sizes(a):
            env = getattr(n, "env", None)
            if env is not None:
                return env
    return None


def _arrays(out) -> Tuple[Any, ...]:
    return tuple(o._data for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, Tensor))


def _no_aliasing(custom, out, args) -> None:
    """torch's rule: an output is a new tensor, never an input or a view of one (aot, the
    partitioner and inductor's buffer planning assume outputs own their memory)."""
    if out is None:
        return
    ins = []
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor) and isinstance(t._data, np.ndarray):
                ins.append(t._data)
    outs = [o for o in _arrays(out) if isinstance(o, np.ndarray)]
    bad = any(np.may_share_memory(o, i) for o in outs for i in ins) or \
        any(np.may_share_memory(a, b) for k, a in enumerate(outs) for b in outs[k + 1:])
    if bad:
        raise RuntimeError(f"{custom._qualname}: the output of this custom operator (1) must not also be an input to "
                           f"this custom operator and (2) may not alias any inputs to this custom operator or other "
                           f"returns. The most common way to trigger this error is if we have y = custom_op(x) and "
                           f"y and x are the same Tensor. Please instead return a clone of the offending output "
                           f"tensor(s) (e.g. return x.clone()) or refactor the custom operator to not return y.")


def checked_output(custom, out, args, what):
    """A custom op's result as its schema promises it (``what`` ran: "implementation"/"kernel"):
    checked, not aliasing an input, the mutated inputs' versions bumped."""
    out = custom._check_output(out, args, what)
    _no_aliasing(custom, out, args)
    for i in custom._mutated_pos:
        a = args[i]
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor):
                t._bump_version()
    return out
