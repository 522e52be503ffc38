"""``ember.func`` transforms called inside a compiled frame: ``grad(f)(x)``, ``vmap(f)(xs)``.

Their eager implementations run ``ember.autograd.grad`` (a graph break inside a frame) or a
Python loop over slices, so inlining them like user code breaks the graph. PyTorch traces
torch.func transforms into the frame's graph; here the call ``transform(f, *options)(*args)`` is
traced whole by make_fx's tracer (``cond_op.trace_branch``, the tracer that traces a cond's
branches) on the arguments' example values: the trace records the forward ops of ``f`` and the
ops its gradient (or every vmap slice) computes, i.e. a plain graph of ember ops. It becomes a
subgraph of the frame's graph called by one node (``call_traced``); aot traces through that
call like any Python code, so the result is differentiable again (a gradient of a gradient, as
with the eager transform under grad mode).

``jvp(f, primals, tangents)`` and ``vjp(f, *primals)`` (session 48) take the function and its
arguments in one call: ``jvp`` is one such subgraph; ``vjp``'s outputs are one, and each call
of the ``vjp_fn`` it returns another that runs ``vjp(f, *primals)`` again on the same primals
(``f`` must not draw random numbers; a ``vjp_fn`` returned from the frame or alive at a graph
break makes the frame run eagerly: its autograd graph exists only inside the subgraphs).

What is captured: ``grad``, ``grad_and_value``, ``vmap``, ``jacrev``, ``jacfwd``, ``hessian``
(nested in each other too: ``vmap(grad(f))``) of a function, a closure or a module; their
options (``argnums``, ``in_dims``, ...) constants; the call's arguments tensors, constants, and
tuples/lists/dicts of them. Tensors ``f`` reads from outside (closure cells, parameters and
buffers of modules it reaches, globals of the frame's module) are lifted to operands, as for a
cond's branches. Anything else -- ``f`` doing something the trace cannot (``.item()``, Python
control flow on tensor data, printing), an option that is not a constant -- is a graph break
whose reason names the transform; the call then runs eagerly (the same result).
"""
from __future__ import annotations

import operator
from typing import Any, Dict, List

from ..exc import Unsupported
from .base import VariableTracker

_TRANSFORM_NAMES = ("grad", "grad_and_value", "vmap", "jacrev", "jacfwd", "hessian")
# transforms called with the function and its arguments at once (``jvp(f, primals, tangents)``,
# ``vjp(f, *primals)``): no wrapper function to recognise when made outside the frame
_DIRECT_NAMES = ("jvp", "vjp")
_transforms: Dict[int, str] = {}


def transform_name(value):
    """The name of the ``ember.func`` transform ``value`` is (None if it is none of them)."""
    if not _transforms:
        from ... import func as _func
        for name in _TRANSFORM_NAMES + _DIRECT_NAMES:
            _transforms[id(getattr(_func, name))] = name
    name = _transforms.get(id(value))
    if name is None:
        return None
    from ... import func as _func
    return name if getattr(_func, name) is value else None


_wrapper_codes: Dict[Any, str] = {}


def transformed_function(tx, value, source, guards):
    """The tracker of ``value`` if it is a function an ``ember.func`` transform returned
    (``g = grad(f)`` made outside the frame, or before a graph break): the transform of its
    ``func`` with the options its closure holds (None if it is not one)."""
    import inspect
    import types
    if not isinstance(value, types.FunctionType) or value.__closure__ is None:
        return None
    from ... import func as _func
    if not _wrapper_codes:
        for name in _TRANSFORM_NAMES:
            _wrapper_codes[getattr(_func, name)(_probe).__code__] = name
    name = _wrapper_codes.get(value.__code__)
    if name is None:
        return None
    transform = getattr(_func, name)
    params = inspect.signature(transform).parameters
    names = value.__code__.co_freevars
    if "func" not in names or any(n not in params for n in names):
        return None
    options = {n: c.cell_contents for n, c in zip(names, value.__closure__) if n != "func"}
    from ..source import ClosureSource
    from .builder import wrap
    if guards:
        guards.id_match(source, value)      # (its closure cells are never rebound)
    fn = value.__closure__[names.index("func")].cell_contents
    inner = wrap(tx, fn, ClosureSource(source, names.index("func"), "func") if source is not None else None,
                 guard=True)
    tvar = FuncTransformVariable(transform, None)
    return TransformedFunctionVariable(tvar, inner, [], options)


def _probe(*args, **kwargs):
    """(a function to transform, for the transforms' wrapper code objects)"""


def call_traced(gm, *operands):
    """Run a traced transform call (the graph node's target): the subgraph's flat outputs."""
    return gm(*operands)


class FuncTransformVariable(VariableTracker):
    """``ember.func.grad`` (or another transform of ``_TRANSFORM_NAMES``) read in the frame."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.name = transform_name(fn)
        self.source = source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def reconstruct(self, out):
        return self.source.expr() if self.source is not None else out.ref(self.fn)

    def __repr__(self):
        return f"FuncTransformVariable({self.name})"

    def call_function(self, tx, args, kwargs):
        if not args:
            raise Unsupported(f"ember.func.{self.name}() without a function (the call runs eagerly, where it raises)")
        if self.name == "jvp":
            return _call_jvp(tx, self, args, kwargs)
        if self.name == "vjp":
            return _call_vjp(tx, self, args, kwargs)
        options = list(args[1:]) + list(kwargs.values())
        bad = [o for o in options if not o.is_python_constant()]
        if bad:
            raise Unsupported(f"ember.func.{self.name}: an option ({bad[0]}) is not a constant, so the transform "
                              f"is not traced; it runs eagerly")
        return TransformedFunctionVariable(self, args[0], [a.as_python_constant() for a in args[1:]],
                                           {k: v.as_python_constant() for k, v in kwargs.items()})


class TransformedFunctionVariable(VariableTracker):
    """The function ``ember.func.grad(f, ...)`` returned, made in the frame: calling it traces
    the transform (see the module doc)."""

    def __init__(self, transform, inner, args, kwargs):
        self.transform = transform      # FuncTransformVariable
        self.inner = inner              # the tracker of ``f``
        self.args, self.kwargs = args, kwargs

    def python_type(self):
        import types
        return types.FunctionType

    def __repr__(self):
        return f"TransformedFunctionVariable({self.transform.name}, {self.inner})"

    def reconstruct(self, out):
        # (returned or live at a graph break: the transform made again from its parts)
        return f"{self.transform.reconstruct(out)}({out.materialize(self.inner)}, " \
               f"*{out.ref(tuple(self.args))}, **{out.ref(dict(self.kwargs))})"

    def call_function(self, tx, args, kwargs):
        return _trace_call(tx, self, list(args), dict(kwargs))

    def rebuild(self, cells_map, modules, codes):
        """The real transformed function over the rebuilt ``f`` (None if ``f`` cannot be)."""
        from .._cond_trace import _branch_callable
        if isinstance(self.inner, TransformedFunctionVariable):
            fn = self.inner.rebuild(cells_map, modules, codes)
        else:
            fn = _branch_callable(self.inner, cells_map, modules, codes)
        return None if fn is None else self.transform.fn(fn, *self.args, **self.kwargs)


# ---------------------------------------------------------------------------------------------
# jvp / vjp: the function and its arguments in one call

def _constant_options(tvar, kwargs, allowed):
    """``kwargs`` (trackers) as constants; anything else is a graph break naming the option."""
    opts = {}
    for k, v in kwargs.items():
        if k not in allowed or not v.is_python_constant():
            raise Unsupported(f"ember.func.{tvar.name}: the option {k}={v} is not a constant "
                              f"{'/'.join(allowed)}; the call runs eagerly")
        opts[k] = v.as_python_constant()
    return opts


class AppliedTransformVariable(TransformedFunctionVariable):
    """``jvp(f, ...)`` / ``vjp(f, ...)`` as a function of the call's tensor arguments, for
    ``_trace_call``: ``apply(real f, options)`` is the Python function the subgraph traces."""

    def __init__(self, transform, inner, kwargs, apply):
        super().__init__(transform, inner, [], kwargs)
        self.apply = apply

    def reconstruct(self, out):
        raise Unsupported(f"ember.func.{self.transform.name}: an intermediate of its capture cannot leave the graph")

    def rebuild(self, cells_map, modules, codes):
        from .._cond_trace import _branch_callable
        if isinstance(self.inner, TransformedFunctionVariable):
            fn = self.inner.rebuild(cells_map, modules, codes)
        else:
            fn = _branch_callable(self.inner, cells_map, modules, codes)
        return None if fn is None else self.apply(fn, self.kwargs)


def _jvp_apply(fn, opts):
    from ... import func as _func
    return lambda primals, tangents: _func.jvp(fn, primals, tangents, **opts)


def _call_jvp(tx, tvar, args, kwargs):
    """``ember.func.jvp(f, primals, tangents, strict=, has_aux=)``: one subgraph computing
    ``(f(*primals), J @ tangents[, aux])`` (ember's jvp is a double vjp, traced like grad)."""
    kwargs = dict(kwargs)
    rest = list(args[1:])
    for name in ("primals", "tangents"):
        if name in kwargs:
            rest.append(kwargs.pop(name))
    if len(rest) != 2:
        raise Unsupported("ember.func.jvp: expected (func, primals, tangents); the call runs eagerly, where it raises")
    opts = _constant_options(tvar, kwargs, ("strict", "has_aux"))
    from .lists import TupleVariable
    if not all(isinstance(r, TupleVariable) and r.python_type() is tuple for r in rest):
        # (eager jvp raises for primals that are not a tuple: let it, with its own words)
        raise Unsupported("ember.func.jvp: primals/tangents are not tuples; the call runs eagerly")
    fvar = AppliedTransformVariable(tvar, args[0], opts, _jvp_apply)
    return _trace_call(tx, fvar, rest, {})


def _vjp_forward(fn, opts):
    from ... import func as _func

    def forward(*primals):
        res = _func.vjp(fn, *primals, **opts)
        return (res[0], res[2]) if opts.get("has_aux") else res[0]
    return forward


def _vjp_backward(fn, opts):
    from ... import func as _func
    return lambda primals, *a, **k: _func.vjp(fn, *primals, **opts)[1](*a, **k)


def _call_vjp(tx, tvar, args, kwargs):
    """``out, vjp_fn = ember.func.vjp(f, *primals)``: ``out`` (and ``aux``) is one subgraph;
    ``vjp_fn`` a tracker whose calls are subgraphs of their own that run ``f`` again on the
    same primals (so ``f`` must not draw random numbers: ``_trace_call`` checks)."""
    from .constant import ConstantVariable
    from .lists import TupleVariable
    opts = _constant_options(tvar, dict(kwargs), ("has_aux",))
    primals = list(args[1:])
    fvar = AppliedTransformVariable(tvar, args[0], opts, _vjp_forward)
    res = _trace_call(tx, fvar, primals, {})
    fn = VjpFunctionVariable(tvar, args[0], primals, opts)
    if opts.get("has_aux"):
        out, aux = res.items if isinstance(res, TupleVariable) else (res, ConstantVariable(None))
        return TupleVariable([out, fn, aux])
    return TupleVariable([res, fn])


class VjpFunctionVariable(VariableTracker):
    """The ``vjp_fn`` ``ember.func.vjp`` returned in the frame: a call traces
    ``vjp(f, *primals)[1](cotangents)`` as a subgraph."""

    def __init__(self, transform, inner, primals, opts):
        self.transform, self.inner, self.primals, self.opts = transform, inner, primals, opts
        self.source = None

    def python_type(self):
        import types
        return types.FunctionType

    def __repr__(self):
        return f"VjpFunctionVariable({self.inner})"

    def reconstruct(self, out):
        # (its autograd graph exists only inside the subgraphs; made again eagerly it would be
        # a different call of f)
        raise Unsupported("the vjp_fn of ember.func.vjp, returned or kept across a graph break, is not captured; "
                          "the frame runs eagerly")

    def call_function(self, tx, args, kwargs):
        from .lists import TupleVariable
        fvar = AppliedTransformVariable(self.transform, self.inner, self.opts, _vjp_backward)
        return _trace_call(tx, fvar, [TupleVariable(self.primals)] + list(args), dict(kwargs))


# ---------------------------------------------------------------------------------------------
# the call's arguments: tensor leaves (operands) and the structure around them

def _flatten(var, leaves: List[Any]):
    """``var``'s value with every tensor tracker replaced by its index in ``leaves``."""
    from .constant import ConstantVariable
    from .lists import BaseListVariable, DictVariable
    from .tensor import TensorVariable
    if isinstance(var, TensorVariable):
        leaves.append(var)
        return _Leaf(len(leaves) - 1)
    if isinstance(var, BaseListVariable):
        items = [_flatten(i, leaves) for i in var.items]
        cls = var.python_type()
        return tuple(items) if cls is tuple else list(items) if cls is list else cls(*items)
    if isinstance(var, DictVariable):
        return {k: _flatten(v, leaves) for k, v in var.items.items()}
    if isinstance(var, ConstantVariable) or var.is_python_constant():
        return var.as_python_constant()
    raise Unsupported(f"an argument ({var}) is neither a tensor, a constant nor a tuple/list/dict of them")


class _Leaf:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _fill(tree, values):
    if isinstance(tree, _Leaf):
        return values[tree.i]
    if isinstance(tree, (tuple, list)):
        items = [_fill(x, values) for x in tree]
        return type(tree)(items) if type(tree) in (tuple, list) else type(tree)(*items)
    if isinstance(tree, dict):
        return {k: _fill(v, values) for k, v in tree.items()}
    return tree


# ---------------------------------------------------------------------------------------------
# the trace

def _trace_call(tx, fvar, args, kwargs):
    from ..._higher_order_ops.cond_op import dedupe, spread, trace_branch
    from ...tensor import Tensor
    from ...utils._pytree import tree_flatten, tree_unflatten
    from .._cond_trace import lift_frame_tensors
    from .control_flow import _rebuild
    from ..eval_frame import set_eval_frame
    from ..example_value import preserve_rng
    from ..._state import STATE
    from .tensor import TensorVariable
    what = f"ember.func.{_describe(fvar)}"
    eager = "the call runs eagerly"
    out = tx.output
    leaves: List[Any] = []
    try:
        tree = (tuple(_flatten(a, leaves) for a in args), {k: _flatten(v, leaves) for k, v in kwargs.items()})
    except Unsupported as e:
        raise Unsupported(f"{what}: {e.msg}; {eager}") from None
    cells_map: Dict[int, Any] = {}
    modules: List[Any] = []
    codes: List[Any] = []
    real = fvar.rebuild(cells_map, modules, codes)
    if real is None:
        raise Unsupported(f"{what}: the function ({_innermost(fvar)}) cannot be traced as a subgraph (a closure "
                          f"over values other than tensors, modules and constants, or default arguments); {eager}")
    res: Dict[str, Any] = {}

    def flat(*values):
        a, k = _fill(tree, values)
        r = real(*a, **k)
        outs, res["spec"] = tree_flatten(r)
        for o in outs:
            if not isinstance(o, Tensor):
                raise Unsupported(f"{what} returned a {type(o).__name__}; only (nested tuple/list/dict of) tensors "
                                  f"are captured")
        return tuple(outs)

    uniq, index = dedupe(leaves, key=lambda v: id(v.example))
    body = spread(flat, index) if len(uniq) != len(leaves) else flat
    examples = [u.example for u in uniq]
    versions = [e._version for e in examples]
    prev = set_eval_frame(None)
    try:
        with preserve_rng(), out.examples.running():
            try:
                gm, _, tracer = trace_branch(body, examples, shape_env=out.examples.shape_env, name=what)
            except Unsupported as e:
                raise Unsupported(f"{e.msg}; {eager}") from None
            except Exception as e:  # noqa: BLE001 - untraceable function: the call runs eagerly
                raise Unsupported(f"{what}: the function could not be traced ({type(e).__name__}: {e}); "
                                  f"{eager}") from e
    finally:
        set_eval_frame(prev)
    if _draws_random(gm) and any(n not in ("grad", "grad_and_value") for n in _chain(fvar)):
        # vmap/jacrev/jacfwd check or arrange random draws per slice (randomness="error" raises,
        # "same" replays the state): a trace on fake tensors does neither
        raise Unsupported(f"{what}: the function draws random numbers; {eager}")
    if any(e._version != v for e, v in zip(examples, versions)):
        # (the subgraph would write into the frame's tensors, which its one node does not say)
        raise Unsupported(f"{what}: the function writes into an argument in place; {eager}")
    lifted = lift_frame_tensors(tx, [(gm, tracer)], cells_map, modules, codes, STATE.grad_enabled, len(uniq),
                                f"{what}: the function", eager)
    operands = list(uniq) + lifted
    k = 0
    while f"func_transform_{k}" in out.subgraphs:
        k += 1
    name = f"func_transform_{k}"
    out.subgraphs[name] = gm
    node = out.graph.call_function(call_traced, (out.graph.get_attr(name),) + tuple(v.node for v in operands))
    out._note_op(node)
    results = out.examples.run(call_traced, [gm] + [v.example for v in operands], {})
    items = []
    for i, r in enumerate(results):
        n = out.graph.call_function(operator.getitem, (node, i))
        n.meta.update(out.node_meta)
        items.append(TensorVariable(n, r))
    return _rebuild(tree_unflatten(items, res["spec"]))


def _draws_random(gm):
    for node in gm.graph.nodes:
        op = getattr(node.target, "_ember_op", None) if node.op == "call_function" else None
        if op is not None and "random" in getattr(op, "tags", ()):
            return True
    return False


def _chain(fvar):
    """The transforms' names, outermost first (``vmap(grad(f))``: vmap, grad)."""
    names = []
    while isinstance(fvar, TransformedFunctionVariable):
        names.append(fvar.transform.name)
        fvar = fvar.inner
    return names


def _describe(fvar):
    inner = fvar.inner
    if isinstance(inner, TransformedFunctionVariable):
        return f"{fvar.transform.name}({_describe(inner)})"
    return fvar.transform.name


def _innermost(fvar):
    while isinstance(fvar, TransformedFunctionVariable):
        fvar = fvar.inner
    return fvar
