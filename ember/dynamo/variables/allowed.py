"""``ember.compiler.allow_in_graph`` / ``disallow_in_graph`` (``torch.compiler`` /
``torch._dynamo`` semantics).

* ``allow_in_graph(fn)``: dynamo does not trace ``fn``'s body; a call becomes one
  ``call_function`` node whose target is ``fn`` itself. While tracing, ``fn`` runs once on the
  example values (fake tensors) to learn its outputs' metadata, so its body must be made of
  ember ops that fake tensors support and must not look at tensor data. The later stages see
  the node: the ``eager`` backend calls ``fn``; aot autograd runs dynamo's graph node by node
  with an Interpreter under its dispatch tracer (aot/joint.py), so calling ``fn`` there records
  the ember ops inside it into the joint graph (forward and backward) like any other code.
  Graphs holding such a node are not disk-cached by aot (``fn``'s code is not part of the cache
  key: aot/cache.py says so).
  As in PyTorch, ``fn`` must take tensors (or tuples/lists of them, nested) and return a
  tensor or (nested) tuples/lists of tensors; every non-tensor argument is baked into the
  graph as a constant (the call site's value is guarded as any constant is). A call that
  does not fit (a non-constant non-tensor argument, a result that is not tensors) stops the
  trace with the reason.
* ``disallow_in_graph(fn)``: dynamo breaks the graph at every call of ``fn`` (an ember op, or
  any callable); the call runs eagerly between two graphs.

Marks are kept by identity in the registries below (functions and builtins alike, so no
attribute has to be settable on ``fn``); a later ``allow_in_graph`` of a disallowed function
lifts the ban, and the other way round. Compiled code from before a change is dropped
(``ember.dynamo.reset()``) so that the new mark takes effect on the next call.
"""
from __future__ import annotations

import operator

from ..exc import Unsupported
from .base import VariableTracker

_ALLOWED = {}      # id(fn) -> fn
_DISALLOWED = {}   # id(fn) -> fn


def _callables(fn, what):
    """``fn`` (a callable or nested lists/tuples of them) as a flat list, checked before any is
    registered."""
    if isinstance(fn, (list, tuple)):
        return [f for item in fn for f in _callables(item, what)]
    if not callable(fn):
        raise TypeError(f"{what}: argument 'fn' must be a callable (or a list/tuple of callables), "
                        f"got {type(fn).__name__}")
    return [fn]


def _forget_compiled_code():
    from .. import reset
    reset()


def allow_in_graph(fn):
    """Put calls of ``fn`` into compiled graphs as one node instead of tracing its body (see the
    module docstring); returns ``fn``. Accepts a list/tuple of callables too."""
    fns = _callables(fn, "allow_in_graph")
    for f in fns:
        if isinstance(f, type):
            raise TypeError(f"allow_in_graph: argument 'fn' must be a function, got the class {f.__name__}")
    for f in fns:
        _DISALLOWED.pop(id(f), None)
        _ALLOWED[id(f)] = f
    _forget_compiled_code()
    return fn


def disallow_in_graph(fn):
    """Make dynamo break the graph at every call of ``fn`` (e.g. an ember op such as
    ``ember.sub``): the call runs eagerly between graphs. Returns ``fn``."""
    for f in _callables(fn, "disallow_in_graph"):
        _ALLOWED.pop(id(f), None)
        _DISALLOWED[id(f)] = f
    _forget_compiled_code()
    return fn


_FORBIDDEN = {}    # id(fn) -> fn: ember._dynamo.forbid_in_graph


def forbid_in_graph(fn):
    """Make reaching ``fn`` while tracing an error of the compile (``ForbiddenInGraph``, an
    AssertionError as torch's); returns ``fn``. Eager calls are unaffected."""
    for f in _callables(fn, "forbid_in_graph"):
        _FORBIDDEN[id(f)] = f
    _forget_compiled_code()
    return fn


def is_forbidden(value) -> bool:
    return _FORBIDDEN.get(id(value)) is value


def allow_wrapper_in_graph(wrapper):
    """Register a function object made just now (``nonstrict_trace``'s wrapper) as allowed in the
    graph: no compiled code can hold it yet, so nothing is reset."""
    _ALLOWED[id(wrapper)] = wrapper
    return wrapper


def is_allowed(value) -> bool:
    return _ALLOWED.get(id(value)) is value


def is_disallowed(value) -> bool:
    return _DISALLOWED.get(id(value)) is value


def _name(fn):
    mod = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod}.{qual}" if mod else qual


class DisallowedFunctionVariable(VariableTracker):
    """A callable marked with ``disallow_in_graph``: calling it breaks the graph."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        raise Unsupported(f"call to {_name(self.fn)}, which is marked with disallow_in_graph")

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return f"DisallowedFunctionVariable({_name(self.fn)})"


class ForbiddenFunctionVariable(DisallowedFunctionVariable):
    """A callable marked with ``forbid_in_graph``: calling it while tracing is an error."""

    def call_function(self, tx, args, kwargs):
        from ..exc import ForbiddenInGraph
        raise ForbiddenInGraph(f"Attempt to trace forbidden callable {self.fn}")


class ConfigPatchedFunctionVariable(DisallowedFunctionVariable):
    """A function decorated with a dynamo config patch that differs from the config in force: the
    graph splits at its call (a split ember makes, not one the program asks for, so
    ``error_on_graph_break`` does not turn it into an error); the call runs the wrapper eagerly and
    the function's frame is compiled under the patched config."""

    def call_function(self, tx, args, kwargs):
        e = Unsupported(f"call of {_name(self.fn)}, which runs under ember.dynamo.config "
                        f"{self.fn._ember_config_patch}")
        e.config_patch_break = True
        raise e


class ConfigPatchFactoryVariable(DisallowedFunctionVariable):
    """``ember._dynamo.patch_dynamo_config`` / ``error_on_graph_break`` / ``dont_skip_tracing``
    called inside compiled code: the manager it makes is not traced, so the frame runs eagerly
    (the manager then applies for real to the frames the block calls, which are compiled). Not an
    error under ``error_on_graph_break(True)``: the program asked for no break here."""

    def call_function(self, tx, args, kwargs):
        e = Unsupported(f"{_name(self.fn)}(...) called inside a compiled frame: the frame runs eagerly "
                        f"(the config it sets applies to the frames called in its block)")
        e.no_break = True
        e.config_patch_break = True
        raise e


class AllowedFunctionVariable(VariableTracker):
    """A callable marked with ``allow_in_graph``: one ``call_function`` node per call."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def as_python_constant(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return f"AllowedFunctionVariable({_name(self.fn)})"

    def _check_arg(self, v, where):
        from .lists import BaseListVariable
        from .tensor import TensorVariable
        if isinstance(v, TensorVariable):
            return
        if isinstance(v, BaseListVariable):
            for i, item in enumerate(v.items):
                self._check_arg(item, f"{where}[{i}]")
            return
        if v.is_python_constant():
            return              # baked into the graph as a constant
        raise Unsupported(f"{_name(self.fn)} is marked allow_in_graph, but its argument {where} is {v}: only "
                          f"tensors, (nested) tuples/lists of tensors and constants can be graph-node arguments")

    def call_function(self, tx, args, kwargs):
        out = tx.output
        for i, a in enumerate(args):
            self._check_arg(a, f"#{i}")
        for k, a in kwargs.items():
            self._check_arg(a, repr(k))
        ex_args = [out._map(a, True) for a in args]
        ex_kwargs = {k: out._map(v, True) for k, v in kwargs.items()}
        try:
            res = out.examples.run(self.fn, ex_args, ex_kwargs)
        except Unsupported as e:
            # the body runs on fake tensors here, and later stages (aot) run it the same way
            raise Unsupported(f"{_name(self.fn)} is marked allow_in_graph, but it cannot run on fake tensors "
                              f"(it must be made of ember ops that need only shapes/dtypes, never tensor "
                              f"data): {e.msg}") from None
        self._check_result(res, "the result", ex_args + list(ex_kwargs.values()))
        node_args = tuple(out._map(a, False) for a in args)
        node_kwargs = {k: out._map(v, False) for k, v in kwargs.items()}
        node = out.graph.create_node("call_function", self.fn, node_args, node_kwargs)
        out._note_op(node)
        out.note_opaque_call(args, kwargs)
        # an argument returned as it is (``return a``) is that argument's tracker, as eager gives
        # back the same tensor object, not a graph output that copies it
        passed = {}
        for a in list(args) + list(kwargs.values()):
            self._collect_tensors(a, passed)
        return self._unflatten(out, node, res, passed)

    def _collect_tensors(self, v, acc):
        from .lists import BaseListVariable
        from .tensor import TensorVariable
        if isinstance(v, TensorVariable):
            acc[id(v.example)] = v
        elif isinstance(v, BaseListVariable):
            for item in v.items:
                self._collect_tensors(item, acc)

    def _check_result(self, res, where, inputs):
        from ...tensor import Tensor
        if isinstance(res, Tensor):
            if res._requires_grad and res._grad_fn is None and not any(res is a for a in inputs):
                raise Unsupported(f"{_name(self.fn)} (allow_in_graph) created a tensor that requires grad "
                                  f"(a new autograd leaf) inside the graph")
            return
        if type(res) in (tuple, list) and res:
            for i, r in enumerate(res):
                self._check_result(r, f"{where}[{i}]", inputs)
            return
        raise Unsupported(f"{_name(self.fn)} is marked allow_in_graph, but {where} is a {type(res).__name__}: "
                          f"a function in the graph must return a tensor or (nested) tuples/lists of tensors")

    def _unflatten(self, out, node, res, passed):
        from .lists import ListVariable, TupleVariable
        from .tensor import TensorVariable
        if not isinstance(res, (tuple, list)):
            hit = passed.get(id(res))
            return hit if hit is not None else TensorVariable(node, res)
        items = []
        for i, r in enumerate(res):
            if id(r) in passed:
                items.append(passed[id(r)])
                continue
            n = out.graph.call_function(operator.getitem, (node, i))
            n.meta.update(out.node_meta)
            items.append(self._unflatten(out, n, r, passed))
        return ListVariable(items) if type(res) is list else TupleVariable(items)
