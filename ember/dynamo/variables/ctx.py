"""Grad-mode context managers (``with ember.no_grad():`` / ``enable_grad()`` /
``set_grad_enabled(mode)``).

Entering records a ``_set_grad_enabled(mode)`` node in the graph and switches
the tracing grad mode, exiting records the restore. The runtime function
restores the caller's grad mode in a ``finally`` (see output_graph), so an
exception raised inside the graph cannot leak a changed mode.

A graph break inside such a block leaves the block's ``__exit__`` callable on
the value stack (``BEFORE_WITH`` pushed it). It is rebuilt for CPython as a
``GradModeExit(prev)`` object -- what the exit of the block does: restore the
grad mode the block was entered from -- and passed to the resume function,
whose exception table still covers the rest of the block, so both the normal
exit and an exception unwinding it call it, at the same place as eagerly.
When the resume function is traced, the object becomes a
``GradModeExitVariable`` again (guarded by type and ``prev``)."""
from __future__ import annotations

from ..._state import STATE
from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _set_grad_enabled(mode):
    """Graph node target: switch autograd recording (what ``with no_grad()`` does)."""
    STATE.grad_enabled = mode


_set_grad_enabled.__module__ = "ember.dynamo.variables.ctx"


class GradModeExit:
    """The ``__exit__`` of a grad-mode block opened before a graph break: restores ``prev``."""

    __slots__ = ("prev",)

    def __init__(self, prev):
        self.prev = prev

    def __call__(self, *exc):
        STATE.grad_enabled = self.prev
        return False

    def __repr__(self):
        return f"GradModeExit({self.prev})"


class GradModeVariable(VariableTracker):
    """``no_grad()``/``enable_grad()``: switches the mode when the block is entered."""

    def __init__(self, target):
        self.target = target

    def enter(self, tx):
        prev = STATE.grad_enabled
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(self.target)], {}, returns_none=True)
        return GradModeExitVariable(prev)

    def __repr__(self):
        return f"GradModeVariable({self.target})"


class SetGradEnabledVariable(GradModeVariable):
    """``set_grad_enabled(mode)`` switches at construction (it also works as a plain call);
    as a context manager, leaving the block restores the mode from before the call."""

    def __init__(self, target, prev):
        super().__init__(target)
        self.prev = prev

    @classmethod
    def create(cls, tx, mode):
        if not mode.is_python_constant():
            raise Unsupported("set_grad_enabled() with a non-constant mode")
        prev = STATE.grad_enabled
        target = bool(mode.as_python_constant())
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(target)], {}, returns_none=True)
        return cls(target, prev)

    def enter(self, tx):
        return GradModeExitVariable(self.prev)

    def reconstruct(self, out):
        raise Unsupported("a set_grad_enabled() object kept alive across a graph break")

    def __repr__(self):
        return f"SetGradEnabledVariable({self.target})"


class InferenceModeVariable(GradModeVariable):
    """``inference_mode()``: ember's works like ``no_grad`` (it has no separate kind of inference
    tensor: ``Tensor.is_inference()`` is False), plus the flag ``is_inference_mode_enabled()``
    reads, which is folded while tracing: the trace sets it inside the block too."""

    def __init__(self):
        super().__init__(False)

    def enter(self, tx):
        prev, prev_inf = STATE.grad_enabled, STATE.inference
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(False)], {}, returns_none=True)
        STATE.inference = True          # (trace time only; convert_frame restores it after the trace)
        return InferenceModeExitVariable(prev, prev_inf)

    def __repr__(self):
        return "InferenceModeVariable()"


class GradModeExitVariable(VariableTracker):
    def __init__(self, prev, source=None):
        self.prev = prev
        self.source = source

    def exit_with(self, tx, exc):
        """An exception raised while tracing leaves the block: restore, do not suppress."""
        self.call_function(tx, [], {})
        return ConstantVariable(False)

    def call_function(self, tx, args, kwargs):
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(self.prev)], {}, returns_none=True)
        return ConstantVariable(None)

    def reconstruct(self, out):
        return f"{out.ref(GradModeExit)}({self.prev!r})"

    def __repr__(self):
        return f"GradModeExitVariable({self.prev})"


class GradModeDecoratedVariable(VariableTracker):
    """A function decorated with ``@no_grad()`` / ``@enable_grad()``: its call is traced as the
    function's body inside the grad-mode block (recorded switches, as a ``with`` block)."""

    def __init__(self, inner, target, source=None):
        self.inner = inner
        self.target = target
        self.source = source

    def call_function(self, tx, args, kwargs):
        from ..exc import ObservedException
        exit_ = GradModeVariable(self.target).enter(tx)
        try:
            result = self.inner.call_function(tx, args, kwargs)
        except ObservedException:
            exit_.call_function(tx, [], {})     # an exception the caller may handle: the mode is restored
            raise
        exit_.call_function(tx, [], {})
        return result

    def __repr__(self):
        return f"GradModeDecoratedVariable({self.target}, {self.inner})"


class NullContextVariable(VariableTracker):
    """``contextlib.nullcontext(enter_result)``: entering gives ``enter_result``, leaving does
    nothing (a ``with`` block over it is traced straight through)."""

    def __init__(self, enter_result):
        self.enter_result = enter_result

    def enter(self, tx):
        return NullExitVariable()

    def reconstruct(self, out):
        import contextlib
        return f"{out.ref(contextlib.nullcontext)}({out.materialize(self.enter_result)})"

    def __repr__(self):
        return "NullContextVariable()"


class NullExitVariable(VariableTracker):
    def call_function(self, tx, args, kwargs):
        return ConstantVariable(None)

    def exit_with(self, tx, exc):
        return ConstantVariable(False)

    def reconstruct(self, out):
        raise Unsupported("a contextlib.nullcontext() block open across a graph break")


def _set_autocast(regions):
    """Graph node target: set the autocast regions (``((device_type, dtype), ...)`` or None), what
    entering / leaving ``with ember.autocast(...)`` does. Executed while a graph is traced (by
    dynamo on example values, by aot on its joint trace), it makes the dispatcher record the
    region's casts; the compiled graph holds those casts and does not switch anything itself."""
    STATE.autocast = dict(regions) if regions else None


_set_autocast.__module__ = "ember.dynamo.variables.ctx"


def _regions(state):
    return tuple(sorted(state.items())) if state else None


class AutocastVariable(VariableTracker):
    """``ember.autocast(device_type, dtype=None, enabled=True)`` with constant arguments; a
    ``with`` block over it is traced with the region on (see ``_set_autocast``). At a graph break
    inside the block the region stays on for the breaking call and the resumed code, whose exit
    of the block is an ``AutocastExit`` (as grad-mode blocks)."""

    def __init__(self, device, dtype, enabled):
        self.device, self.dtype, self.enabled = device, dtype, enabled

    @classmethod
    def create(cls, tx, args, kwargs):
        from ...amp.autocast_mode import autocast
        if not all(a.is_python_constant() for a in args) or \
                not all(v.is_python_constant() for v in kwargs.values()):
            raise Unsupported("ember.autocast() with arguments that are not constants")
        # the real constructor validates (device type, dtype) with its own errors
        real = autocast(*[a.as_python_constant() for a in args],
                        **{k: v.as_python_constant() for k, v in kwargs.items()})
        return cls(real.device, real.fast_dtype, real._enabled)

    def enter(self, tx):
        prev = STATE.autocast
        regions = dict(prev) if prev else {}
        if self.enabled:
            regions[self.device] = self.dtype
        else:
            regions.pop(self.device, None)
        tx.output.call_function(_set_autocast, [ConstantVariable(_regions(regions))], {}, returns_none=True)
        tx.output.uses_autocast = True
        return AutocastExitVariable(_regions(prev))

    def reconstruct(self, out):
        raise Unsupported("an ember.autocast() object kept alive across a graph break")

    def __repr__(self):
        return f"AutocastVariable({self.device}, {self.dtype}, {self.enabled})"


class AutocastExit:
    """The ``__exit__`` of an ``ember.autocast`` block open at a graph break: restores the regions
    ``prev`` (``_regions`` form) when the resumed code leaves the block, normally or not."""

    __slots__ = ("prev",)

    def __init__(self, prev):
        self.prev = prev

    def __call__(self, *exc):
        STATE.autocast = dict(self.prev) if self.prev else None
        return False

    def __repr__(self):
        return f"AutocastExit({self.prev})"


class AutocastExitVariable(VariableTracker):
    def __init__(self, prev, source=None):
        self.prev = prev
        self.source = source

    def exit_with(self, tx, exc):
        """An exception raised while tracing leaves the block: restore, do not suppress."""
        self.call_function(tx, [], {})
        return ConstantVariable(False)

    def call_function(self, tx, args, kwargs):
        tx.output.call_function(_set_autocast, [ConstantVariable(self.prev)], {}, returns_none=True)
        return ConstantVariable(None)

    def reconstruct(self, out):
        # a break inside the block: the compiled code leaves the block's regions on (the state the
        # trace stopped in, ``OutputGraph.final_autocast``) and the resumed code gets this exit
        return f"{out.ref(AutocastExit)}({out.ref(self.prev)})"

    def __repr__(self):
        return f"AutocastExitVariable({self.prev})"


class InferenceModeExitVariable(GradModeExitVariable):
    """Leaving an ``inference_mode()`` block: the grad mode switch back, and the flag."""

    def __init__(self, prev, prev_inf):
        super().__init__(prev)
        self.prev_inf = prev_inf

    def call_function(self, tx, args, kwargs):
        STATE.inference = self.prev_inf
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, out):
        # the code after a break inside the block would run without the flag set (the compiled
        # code only switches grad mode): the frame runs eagerly instead
        raise Unsupported("a graph break inside an ember.inference_mode() block")

    def __repr__(self):
        return f"InferenceModeExitVariable({self.prev}, {self.prev_inf})"
