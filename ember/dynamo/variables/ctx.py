"""Grad-mode context managers (``with ember.no_grad():`` / ``enable_grad()``).

Entering records a ``_set_grad_enabled(mode)`` node in the graph and switches
the tracing grad mode, exiting records the restore. The runtime function
restores the caller's grad mode in a ``finally`` (see output_graph), so an
exception raised inside the graph cannot leak a changed mode."""
from __future__ import annotations

from ..._state import STATE
from .base import VariableTracker
from .constant import ConstantVariable


def _set_grad_enabled(mode):
    """Graph node target: switch autograd recording (what ``with no_grad()`` does)."""
    STATE.grad_enabled = mode


_set_grad_enabled.__module__ = "ember.dynamo.variables.ctx"


class GradModeVariable(VariableTracker):
    def __init__(self, target):
        self.target = target

    def enter(self, tx):
        prev = STATE.grad_enabled
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(self.target)], {}, returns_none=True)
        tx.output.active_ctx += 1
        return GradModeExitVariable(prev)

    def __repr__(self):
        return f"GradModeVariable({self.target})"


class GradModeExitVariable(VariableTracker):
    def __init__(self, prev):
        self.prev = prev

    def call_function(self, tx, args, kwargs):
        tx.output.call_function(_set_grad_enabled, [ConstantVariable(self.prev)], {}, returns_none=True)
        tx.output.active_ctx -= 1
        return ConstantVariable(None)
