"""``ember.cond`` / ``ember.while_loop`` (``ember/_higher_order_ops``) inside a compiled frame.

* ``cond`` whose predicate is known while tracing -- a Python bool, or a decision on sizes
  (``x.shape[0] > 4``; with symbolic sizes the decision is a ShapeEnv guard, so another size
  recompiles: exact) -- inlines the chosen branch. The other branch is run on fake copies of
  the operands' example values (when it is a plain function we can call) and both results
  must have the same structure, shapes and dtypes, as torch checks at trace time: a mismatch
  raises ``CondBranchMismatchError`` from the compile, as torch raises from its trace.
* ``cond`` on a tensor predicate is captured as ONE graph node, torch's cond higher-order op:
  ``ember.ops.higher_order.cond(pred, cond_true_0, cond_false_0, (operands..., lifted...))``.
  Both branches are traced (``ember/dynamo/_cond_trace.py``: make_fx's tracer over the branch's
  Python function, on the operands' fake values) into GraphModule attributes of the frame's
  graph; tensors they read from outside (closures over the frame's tensors, parameters and
  buffers of modules reached through ``self`` or a closure) are lifted to extra operands, as
  torch does; both must return the same structure of tensors with the same shapes/dtypes
  (``CondBranchMismatchError`` otherwise). No guard is put on the predicate's value: one graph
  serves both. aot traces the node into its own subgraphs (``ember/_higher_order_ops/
  cond_op.py``), inductor runs it as an extern call of the chosen branch, compiled
  (``ember/inductor/cond_lowering.py``), and ``ember.export`` keeps it (``true_graph_0`` /
  ``false_graph_0``, aten targets inside). Gradients flow through the node: aot's joint
  trace records a backward ``cond`` over the branches' vector-Jacobian graphs
  (``ember/_higher_order_ops/cond_autograd.py``). A tensor that requires grad which a branch
  reads but which cannot be lifted (not a closure cell, not a parameter/buffer of a module the
  branch reaches, not a global of the frame's module) keeps the graph break, with that reason
  (its gradient would be lost). A branch that cannot be rebuilt as a callable or traced (a
  ``.item()``, Python control flow on data inside it) is a graph break naming the reason: the
  call runs eagerly with the eager ``cond``.
* ``while_loop`` is always a graph break (its condition is a tensor by contract).
* ``scan`` / ``associative_scan`` / ``map`` and the call-through HOPs (``wrap``,
  ``invoke_subgraph``, ``out_dtype``, ...) are traced inline: their implementations are plain
  Python over ember ops, so the body is unrolled over the (trace-time) length of the scanned
  dimension -- one graph, no HOP node; gradients come from the unrolled ops.
"""
from __future__ import annotations

import operator
import types

from ..exc import Unsupported
from .base import VariableTracker

DATA_DEPENDENT_COND = ("ember.cond with a data-dependent predicate: control flow is not captured, the cond "
                       "runs eagerly")
WHILE_LOOP = ("ember.while_loop: data-dependent control flow is not captured, the loop runs eagerly")


class HigherOrderOpVariable(VariableTracker):
    """``ember.cond`` or ``ember.while_loop`` read from outside the frame (guarded by identity)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return f"HigherOrderOpVariable({self.fn._ember_hop})"

    def call_function(self, tx, args, kwargs):
        if self.fn._ember_hop == "while_loop":
            raise Unsupported(WHILE_LOOP)
        if self.fn._ember_hop == "cond_op":
            # ember.ops.higher_order.cond called directly (a GraphModule holding the node: make_fx's
            # or export's graph, compiled): its branches are GraphModules returning flat tuples
            return _cond(tx, list(args), dict(kwargs))
        if self.fn._ember_hop != "cond":
            return _inline_hop(tx, self.fn, list(args), dict(kwargs))
        return _cond(tx, list(args), dict(kwargs))


def _inline_hop(tx, fn, args, kwargs):
    """scan / map / associative_scan / the call-through HOPs: trace their Python implementation
    (``ember/_higher_order_ops``) like user code, so the body runs once per step into the graph
    (a loop over a size known while tracing; a symbolic size is specialised by its guard).
    Anything in the body that cannot be traced breaks the graph at the HOP call, which then runs
    eagerly; the reason names the HOP."""
    from .functions import UserFunctionVariable
    inputs = _tensor_examples(list(args) + list(kwargs.values()))
    before = [t._version for t in inputs]
    try:
        result = UserFunctionVariable(fn).call_function(tx, args, kwargs)
    except Unsupported as e:
        if "ember._higher_order_ops." not in e.msg:
            e.msg = f"ember._higher_order_ops.{fn._ember_hop}: its body could not be traced, the call runs " \
                    f"eagerly: {e.msg}"
            e.args = (e.msg,)
        raise
    if fn._ember_hop in _NO_INPUT_MUTATION and any(t._version != v for t, v in zip(inputs, before)):
        # the body changed an input in place (a slice of xs is a view of it): eagerly that raises
        # (torch forbids it), so the call runs eagerly rather than compile a mutation
        raise Unsupported(f"ember._higher_order_ops.{fn._ember_hop}: the body mutates an input in place; the "
                          f"call runs eagerly (where it raises, as torch's)")
    return result


_NO_INPUT_MUTATION = ("scan", "map", "associative_scan")


def _tensor_examples(vts):
    """The example values of the tensors among ``vts`` (nested in tuples/lists/dicts): their
    version counters (shared with every view made while tracing) reveal in-place changes."""
    from .dict_objects import DictVariable
    from .lists import ListVariable, TupleVariable
    from .tensor import TensorVariable
    found = []
    for vt in vts:
        if isinstance(vt, TensorVariable):
            found.append(vt.example)
        elif isinstance(vt, (TupleVariable, ListVariable)):
            found.extend(_tensor_examples(vt.items))
        elif isinstance(vt, DictVariable) and isinstance(getattr(vt, "items", None), dict):
            found.extend(_tensor_examples(list(vt.items.values())))
    return found


def _bind(args, kwargs):
    names = ("pred", "true_fn", "false_fn", "operands")
    if len(args) > len(names):
        raise Unsupported(f"ember.cond takes at most {len(names)} positional arguments, got {len(args)} "
                          f"(the call runs eagerly, where it raises)")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            raise Unsupported(f"ember.cond got an unexpected or repeated argument {k!r} (the call runs eagerly, "
                              f"where it raises)")
        bound[k] = v
    for k in names[:3]:
        if k not in bound:
            raise Unsupported(f"ember.cond is missing argument {k!r} (the call runs eagerly, where it raises)")
    return bound


def _cond(tx, args, kwargs):
    from .lists import ListVariable, TupleVariable
    from .tensor import TensorVariable
    b = _bind(args, kwargs)
    pred = b["pred"]
    if isinstance(pred, TensorVariable):
        return _cond_node(tx, b, pred)
    if not pred.is_python_constant():
        raise Unsupported(f"ember.cond: predicate {pred} is neither a constant nor a tensor (the cond runs "
                          f"eagerly)")
    value = pred.as_python_constant()
    ops = _empty_operands(b.get("operands", TupleVariable([])))
    if not isinstance(ops, (TupleVariable, ListVariable)):
        raise Unsupported("ember.cond: operands is not a tuple or list (the cond runs eagerly, where it raises)")
    items = list(ops.items)
    if not all(isinstance(i, TensorVariable) for i in items):
        raise Unsupported("ember.cond: operands must all be tensors (the cond runs eagerly, where it raises)")
    if not isinstance(value, (bool, int)) and not hasattr(value, "expr"):
        raise Unsupported(f"ember.cond: predicate of type {type(value).__name__} (the cond runs eagerly, where "
                          f"it raises)")
    taken = bool(value)      # a SymBool: decided by the ShapeEnv, which records the guard
    chosen, other = (b["true_fn"], b["false_fn"]) if taken else (b["false_fn"], b["true_fn"])
    result = chosen.call_function(tx, items, {})
    _check_other_branch(tx, other, items, result, taken)
    return result


def _empty_operands(ops):
    """``()`` / ``[]`` read as a constant: an empty operand tuple."""
    from .lists import TupleVariable
    if not hasattr(ops, "items") and ops.is_python_constant():
        try:
            value = ops.as_python_constant()
        except Exception:  # noqa: BLE001
            return ops
        if isinstance(value, (tuple, list)) and not value:
            return TupleVariable([])
    return ops


def _python_callable(var):
    """The real function behind a branch tracker, or None when it cannot be called outside the trace."""
    from .functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable
    from .objects import NNModuleVariable
    if isinstance(var, UserFunctionVariable):
        return var.fn
    if isinstance(var, UserMethodVariable) and isinstance(var.obj, NNModuleVariable):
        fn = _python_callable(var.fn_var)
        return types.MethodType(fn, var.obj.module) if fn is not None else None
    if isinstance(var, NNModuleVariable):
        return var.module
    if isinstance(var, NestedFunctionVariable):
        if var.defaults is not None or var.kwdefaults is not None:
            return None
        cells = ()
        if var.closure is not None:
            vals = []
            for c in var.closure.items:
                contents = getattr(c, "contents", None)
                if isinstance(contents, NNModuleVariable):
                    vals.append(contents.module)
                elif contents is not None and contents.is_python_constant():
                    vals.append(contents.as_python_constant())
                else:
                    return None
            cells = tuple(types.CellType(v) for v in vals)
        return types.FunctionType(var.code, var.f_globals, var.code.co_name, None, cells or None)
    return None


def _examples(vt):
    """The fake example values of a result tracker, nested like it (None if it holds non-tensors)."""
    from .lists import ListVariable, TupleVariable
    from .tensor import TensorVariable
    if isinstance(vt, TensorVariable):
        return vt.example
    if isinstance(vt, (TupleVariable, ListVariable)):
        items = [_examples(i) for i in vt.items]
        return None if any(i is None for i in items) else (tuple(items) if isinstance(vt, TupleVariable)
                                                            else items)
    from .dict_objects import DictVariable
    if isinstance(vt, DictVariable):
        try:
            d = {k: _examples(v) for k, v in vt.items.items()}
        except Exception:  # noqa: BLE001 - keys that are trackers: not checked
            return None
        return None if any(v is None for v in d.values()) else d
    return None


def _check_other_branch(tx, other, items, result, taken):
    """Compare the untaken branch's outputs (run on fakes) with the taken one's (see module doc).

    Best effort: a branch we cannot call outside the trace, or one that fails on fakes, is not
    checked (it is never run, so it cannot change a result)."""
    from ..._higher_order_ops import CondBranchMismatchError, describe_mismatch
    from ..eval_frame import set_eval_frame
    from ..example_value import preserve_rng
    fn = _python_callable(other)
    mine = _examples(result)
    if fn is None or mine is None:
        return
    prev = set_eval_frame(None)
    try:
        with preserve_rng(), tx.output.examples.running():
            try:
                theirs = fn(*[i.example.clone() for i in items])
            except Exception:  # noqa: BLE001 - not runnable on fakes: unchecked
                return
    finally:
        set_eval_frame(prev)
    lhs, rhs = ("true_fn", "false_fn") if taken else ("false_fn", "true_fn")
    why = describe_mismatch(mine, theirs, lhs, rhs)
    if why is not None:
        err = CondBranchMismatchError(f"ember.cond: Expected true_fn and false_fn to return the same structure "
                                      f"of tensors with the same metadata: {why}")
        raise err


# ---------------------------------------------------------------------------------------------
# a tensor predicate: one ``ember.ops.higher_order.cond`` node (see the module doc)

def _cond_node(tx, b, pred):
    """Trace both branches into subgraphs of the frame's graph and record one cond node."""
    from ... import compiler as _compiler
    from ..._higher_order_ops.cond_op import cond_op
    from .._cond_trace import trace_cond_branches
    from .lists import ListVariable, TupleVariable
    from .tensor import TensorVariable
    ops = _empty_operands(b.get("operands", TupleVariable([])))
    if not isinstance(ops, (TupleVariable, ListVariable)):
        raise Unsupported("ember.cond: operands is not a tuple or list (the cond runs eagerly, where it raises)")
    items = list(ops.items)
    if not all(isinstance(i, TensorVariable) for i in items):
        raise Unsupported("ember.cond: operands must all be tensors to capture a data-dependent cond as a "
                          "graph node (nested operands: the cond runs eagerly)")
    if pred.example.numel() != 1:
        raise Unsupported("ember.cond: the predicate tensor has more than one element (the cond runs eagerly, "
                          "where it raises)")
    # (gradients: the node is differentiable -- ``_higher_order_ops/cond_autograd.py``)
    from ..._state import STATE
    grads = STATE.grad_enabled and not _compiler._EXPORT_DEPTH
    traced = trace_cond_branches(tx, b["true_fn"], b["false_fn"], items, grads)
    out = tx.output
    k = 0
    while f"cond_true_{k}" in out.subgraphs:
        k += 1
    tname, fname = f"cond_true_{k}", f"cond_false_{k}"
    out.subgraphs[tname], out.subgraphs[fname] = traced.true_gm, traced.false_gm
    tnode, fnode = out.graph.get_attr(tname), out.graph.get_attr(fname)
    operands = traced.items + traced.lifted
    node = out.graph.call_function(cond_op, (pred.node, tnode, fnode, tuple(v.node for v in operands)))
    out._note_op(node)
    res = out.examples.run(cond_op, [pred.example, traced.true_gm, traced.false_gm,
                                     tuple(v.example for v in operands)], {})
    leaves = []
    for i, r in enumerate(res):
        n = out.graph.call_function(operator.getitem, (node, i))
        n.meta.update(out.node_meta)
        leaves.append(TensorVariable(n, r))
    return _rebuild(traced.unflatten(leaves))


def _rebuild(tree):
    """Python tuples/lists/dicts of trackers -> the container trackers."""
    from .lists import DictVariable, ListVariable, TupleVariable
    if isinstance(tree, tuple):
        return TupleVariable([_rebuild(x) for x in tree])
    if isinstance(tree, list):
        return ListVariable([_rebuild(x) for x in tree])
    if isinstance(tree, dict):
        return DictVariable({k: _rebuild(v) for k, v in tree.items()})
    return tree
