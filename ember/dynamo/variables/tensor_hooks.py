"""``y.register_hook(hook)`` on an intermediate tensor inside a compiled frame: captured.

The graph gets a node ``_register_grad_hook(y, hook)`` that does what the call does eagerly:
register ``hook`` on the tensor the node's input is when the graph runs. Every backend then gets
eager's behaviour from the real autograd engine: the ``eager`` backend registers it on the real
``y``; aot runs the graph on traced tensors with autograd recording and calls
``ember.autograd.grad`` on them (``ember/aot/joint.py``), so the hook runs there on the traced
gradient of ``y`` and its operators land in the backward graph -- applied to ``y``'s total
gradient, as eagerly, whichever later use of ``y`` (or a view of it) the gradient comes through.

That is only right for a hook aot may run once, at trace time, as a function of its gradient
alone. So the hook is first *speculated*: called by the translator on a stand-in gradient (a
fresh tensor like ``y``), and captured only when that trace makes no side effect (no write to
an attribute, global or container, no ``print``), reads no tensor from outside (no new graph
input), raises nothing, and returns None or a tensor of ``y``'s shape and dtype (the nodes it
made are then erased). Anything else -- and a hook that is not a plain function (a global or
module-level function, guarded by identity, or a function made in the frame whose closure holds
only constants), a ``y`` that is a graph input or does not require grad, a kept handle
(``h = y.register_hook(f)``: only a call whose result is discarded is captured) -- raises ``Unsupported``: a graph break at the call, which runs eagerly.
"""
from __future__ import annotations

import types

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _register_grad_hook(tensor, hook):
    """Graph node target: ``tensor.register_hook(hook)`` (the handle is not kept: a captured
    registration is never removed, see ``HookHandleVariable``)."""
    tensor.register_hook(hook)


_register_grad_hook.__module__ = "ember.dynamo.variables.tensor_hooks"


class HookHandleVariable(VariableTracker):
    """The handle ``register_hook`` returned, which the next instruction discards (a kept handle
    is refused before the registration is recorded); any use would be ``Unsupported``."""

    def __repr__(self):
        return "HookHandleVariable()"


def _hook_function(var):
    """The function object behind tracker ``var``, or None when it cannot be named as one."""
    from .functions import NestedFunctionVariable, UserFunctionVariable
    if isinstance(var, UserFunctionVariable):
        return var.fn if var.source is not None else None     # guarded by identity when loaded
    if isinstance(var, NestedFunctionVariable):
        if var.defaults is not None or var.kwdefaults is not None:
            return None
        cells = []
        for c in (var.closure.items if var.closure is not None else ()):
            contents = getattr(c, "contents", None)
            if contents is None or not contents.is_python_constant():
                return None
            value = contents.as_python_constant()
            if not isinstance(value, (bool, int, float, complex, str, type(None))):
                return None
            cells.append(types.CellType(value))
        return types.FunctionType(var.code, var.f_globals, var.code.co_name, None, tuple(cells) or None)
    return None


def _speculate(tx, tensor, hook_var):
    """Trace ``hook(grad)`` on a stand-in gradient; raise Unsupported unless it is pure (see the
    module docstring), then erase the nodes it made."""
    import ember
    from ..exc import ObservedException
    from .tensor import TensorVariable
    out = tx.output
    graph = out.graph
    before = set(graph.nodes)
    n_effects = len(out.side_effects)
    grad = out.call_function(ember.empty_like, [tensor], {})
    try:
        result = hook_var.call_function(tx, [grad], {})
    except ObservedException as e:
        raise Unsupported(f"Tensor.register_hook(): the hook raised when traced ({e})") from None
    except Unsupported as e:
        raise Unsupported(f"Tensor.register_hook(): the hook cannot be traced ({e})") from None
    if len(out.side_effects) > n_effects:
        kinds = sorted({str(e[0]) for e in out.side_effects[n_effects:]})
        raise Unsupported(f"Tensor.register_hook(): the hook has side effects ({', '.join(kinds)}), which "
                          f"a compiled backward would not repeat")
    made = [n for n in graph.nodes if n not in before]
    if any(n.op in ("placeholder", "get_attr") for n in made):
        raise Unsupported("Tensor.register_hook(): the hook reads a tensor from outside (captured, its "
                          "value would be fixed when the backward is traced)")
    if isinstance(result, TensorVariable):
        ex, want = result.example, tensor.example
        if tuple(ex.shape) != tuple(want.shape) or ex.dtype != want.dtype:
            raise Unsupported("Tensor.register_hook(): the hook returns a tensor of another shape or dtype "
                              "(eager raises)")
    elif not (isinstance(result, ConstantVariable) and result.value is None):
        raise Unsupported(f"Tensor.register_hook(): the hook returns {result}, not a tensor or None")
    for n in reversed(made):
        graph.erase_node(n)


def register_hook(tx, tensor, args, kwargs):
    """Trace ``tensor.register_hook(*args, **kwargs)``; see the module docstring."""
    from ... import compiler as _compiler
    if kwargs or len(args) != 1:
        raise Unsupported("Tensor.register_hook() takes one hook argument")
    ex = tensor.example
    if tensor.source is not None or not ex.requires_grad or ex.grad_fn is None:
        raise Unsupported("Tensor.register_hook() on a graph input or a tensor that does not require grad "
                          "(runs eagerly: the hook outlives the call, or eager raises)")
    if _compiler._EXPORT_DEPTH:
        raise Unsupported("Tensor.register_hook() in an exported program")
    nxt = tx.instructions[tx.ip].opname if tx.ip < len(tx.instructions) else None
    if nxt != "POP_TOP":
        # ``h = y.register_hook(f)``: a captured registration has no handle to give (it happens
        # when the graph runs); kept, it could not be rebuilt at a later graph break either
        raise Unsupported("Tensor.register_hook() whose returned handle is kept (only a call whose result is "
                          "discarded is captured)")
    fn = _hook_function(args[0])
    if fn is None:
        raise Unsupported(f"Tensor.register_hook() with {args[0]}: only a function (a global one, or one "
                          f"made in the frame whose closure holds only constants) is captured")
    _speculate(tx, tensor, args[0])
    tx.output._call("call_function", _register_grad_hook, lambda *a: None,
                    [tensor, ConstantVariable(fn)], {}, True)
    return HookHandleVariable()
