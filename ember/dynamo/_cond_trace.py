"""The two branches of a data-dependent ``ember.cond`` traced into subgraphs (``variables/control_flow.py``).

Each branch is a Python callable rebuilt from its tracker (a function, a method of a module, a
closure -- ``_branch_callable``); it is traced by make_fx's tracer (``ember/_higher_order_ops/
cond_op.py: trace_branch``) on the operands' fake example values, in the frame's ShapeEnv, into a
GraphModule of ember ops returning the flat tuple of its output leaves. Tensors a branch reads
from outside -- a closure over a tensor of the frame, a parameter or buffer of a module the branch
reaches through ``self`` or a closure -- come out of that trace as constants of the subgraph; they
are lifted to operands (placeholders after the cond's own operands, in the same order in both
branches, as torch does), read in the frame's graph through their trackers (so parameters are
graph inputs guarded as usual). A tensor reached some other way (a global) stays a constant of
the subgraph, read when the branch runs.

Limits (the call then runs eagerly, with the reason in the break report): a branch that cannot be
rebuilt as a callable (closure cells holding other trackers, default arguments), a branch whose
trace fails (data-dependent Python control flow inside it, ``.item()``), operands that are not
flat tensors. The branch's Python code is not guarded: a global it reads is baked in when traced
(as make_fx does), so a later change of such a global is not seen by the compiled code.
"""
from __future__ import annotations

import types
from typing import Any, Dict, List, Tuple

from .exc import Unsupported


class TracedBranches:
    def __init__(self, true_gm, false_gm, items, lifted, spec):
        self.true_gm, self.false_gm, self.lifted, self.spec = true_gm, false_gm, lifted, spec
        self.items = items          # the cond's own operands (the same tensor given twice: once)

    def unflatten(self, leaves):
        from ..utils._pytree import tree_unflatten
        return tree_unflatten(list(leaves), self.spec)


def _branch_callable(var, cells_map: Dict[int, Any], modules: List[Any], codes: List[Any] = None):
    """The Python function behind branch tracker ``var`` (None if it cannot be rebuilt); the
    example tensors put in its closure cells -> their trackers go to ``cells_map``, the module
    trackers it reaches to ``modules``, (code, globals) of the functions to ``codes``."""
    from .variables.functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable
    from .variables.objects import NNModuleVariable
    from .variables.tensor import TensorVariable
    codes = [] if codes is None else codes
    if isinstance(var, UserFunctionVariable):
        codes.append((var.fn.__code__, var.fn.__globals__))
        return var.fn
    if isinstance(var, UserMethodVariable) and isinstance(var.obj, NNModuleVariable):
        fn = _branch_callable(var.fn_var, cells_map, modules, codes)
        modules.append(var.obj)
        return types.MethodType(fn, var.obj.module) if fn is not None else None
    if isinstance(var, NNModuleVariable):
        modules.append(var)
        return var.module
    if isinstance(var, NestedFunctionVariable):
        if var.defaults is not None or var.kwdefaults is not None:
            return None
        codes.append((var.code, var.f_globals))
        vals = []
        if var.closure is not None:
            for c in var.closure.items:
                contents = getattr(c, "contents", None)
                if isinstance(contents, NNModuleVariable):
                    modules.append(contents)
                    vals.append(contents.module)
                elif isinstance(contents, TensorVariable):
                    cells_map[id(contents.example)] = contents
                    vals.append(contents.example)
                elif isinstance(contents, (UserFunctionVariable, NestedFunctionVariable, UserMethodVariable)):
                    fn = _branch_callable(contents, cells_map, modules, codes)
                    if fn is None:
                        return None
                    vals.append(fn)
                elif contents is not None and contents.is_python_constant():
                    vals.append(contents.as_python_constant())
                else:
                    return None
        cells = tuple(types.CellType(v) for v in vals)
        return types.FunctionType(var.code, var.f_globals, var.code.co_name, None, cells or None)
    return None


def _global_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _global_names(c)
    return names


def _read_globals(tx, codes, modules, found: Dict[int, Any]):
    """Modules and tensors the branches read as globals of the frame's own module: read through
    the frame's tracer (guarded graph inputs), so their tensors can be lifted."""
    from ..nn.modules.module import Module
    from ..tensor import Tensor
    from .variables.objects import NNModuleVariable
    from .variables.tensor import TensorVariable
    seen = set()
    for code, glb in codes:
        if glb is not getattr(tx, "f_globals", None):
            continue
        for name in sorted(_global_names(code)):
            v = glb.get(name)
            if name in seen or not isinstance(v, (Module, Tensor)):
                continue
            seen.add(name)
            var = tx.load_global(name)
            if isinstance(var, NNModuleVariable):
                modules.append(var)
            elif isinstance(var, TensorVariable):
                found[id(v)] = var


def _module_tensor(tx, modules, t):
    """The tracker of parameter/buffer ``t`` of one of the module trackers, or None."""
    for mvar in modules:
        m = mvar.module
        for name, p in list(m.named_parameters(remove_duplicate=False)) + list(m.named_buffers(
                remove_duplicate=False)):
            if p is t:
                v = mvar
                for part in name.split("."):
                    v = v.var_getattr(tx, part)
                return v
    return None


def _flatten_out(out, name):
    from ..tensor import Tensor
    from ..utils._pytree import tree_flatten
    leaves, spec = tree_flatten(out)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise Unsupported(f"ember.cond: {name} returned a {type(x).__name__}; only (nested tuple/list/dict "
                              f"of) tensors are captured (the cond runs eagerly, where it raises)")
    return leaves, spec


def trace_cond_branches(tx, true_var, false_var, items, check_grads) -> TracedBranches:
    from .._higher_order_ops._control_flow import CondBranchMismatchError, describe_mismatch
    from .._higher_order_ops.cond_op import dedupe, spread, trace_branch
    from ..tensor import Tensor
    from .eval_frame import set_eval_frame
    from .example_value import preserve_rng
    out = tx.output
    cells_map: Dict[int, Any] = {}
    modules: List[Any] = []
    fns, codes = [], []
    for name, var in (("true_fn", true_var), ("false_fn", false_var)):
        fn = _branch_callable(var, cells_map, modules, codes)
        if fn is None:
            raise Unsupported(f"ember.cond: {name} ({var}) cannot be traced as a subgraph (a closure over values "
                              f"other than tensors, modules and constants, or default arguments); the cond "
                              f"runs eagerly")
        fns.append(fn)
    uniq, index = dedupe(items, key=lambda v: id(v.example))
    if len(uniq) != len(items):           # the same tensor twice: one placeholder (``dedupe``)
        fns, items = [spread(fn, index) for fn in fns], uniq
    examples = [i.example for i in items]
    trees, traced = [], []
    prev = set_eval_frame(None)
    try:
        with preserve_rng(), out.examples.running():
            for name, fn in zip(("true_fn", "false_fn"), fns):
                res = {}

                def flat(*args, fn=fn, name=name, res=res):
                    r = fn(*args)
                    res["tree"] = r
                    leaves, res["spec"] = _flatten_out(r, name)
                    return tuple(leaves)
                try:
                    gm, outs, tracer = trace_branch(flat, examples, shape_env=out.examples.shape_env, name=name,
                                                   whole_ops=True)
                except (Unsupported, CondBranchMismatchError):
                    raise
                except Exception as e:  # noqa: BLE001 - untraceable branch: the cond runs eagerly
                    raise Unsupported(f"ember.cond: {name} could not be traced into a subgraph "
                                      f"({type(e).__name__}: {e}); the cond runs eagerly") from e
                trees.append(res)
                traced.append((gm, tracer))
    finally:
        set_eval_frame(prev)
    why = describe_mismatch(trees[0]["tree"], trees[1]["tree"])
    if why is not None:
        raise CondBranchMismatchError(f"ember.cond: Expected true_fn and false_fn to return the same structure "
                                      f"of tensors with the same metadata: {why}")
    lifted = lift_frame_tensors(tx, traced, cells_map, modules, codes, check_grads, len(items),
                                "ember.cond: a branch", "the cond runs eagerly")
    return TracedBranches(traced[0][0], traced[1][0], list(items), lifted, trees[0]["spec"])


def lift_frame_tensors(tx, traced, cells_map, modules, codes, check_grads, n_operands, who, eager):
    """Constants of the traced subgraphs (``traced``: [(gm, tracer)]) that are tensors of the
    frame -- closure cells (``cells_map``), parameters/buffers of ``modules``, globals of the
    frame's module -- become placeholders after the ``n_operands`` operands, the same order in
    every subgraph; returns their trackers. ``who``/``eager`` word the refusals."""
    from ..tensor import Tensor
    lifted: List[Any] = []
    per_graph: List[Dict[str, Any]] = []
    globals_read = False
    for gm, tracer in traced:
        found = {}
        for cname, c in tracer.constants.items():
            if not isinstance(c, Tensor):
                continue            # a nested cond's branch graph
            tv = cells_map.get(id(c))
            if tv is None and not c._fake:
                tv = _module_tensor(tx, modules, c)
                if tv is None and not globals_read:
                    globals_read = True
                    _read_globals(tx, codes, modules, cells_map)
                    tv = cells_map.get(id(c)) or _module_tensor(tx, modules, c)
            if tv is None:
                if c._fake:
                    raise Unsupported(f"{who} reads a tensor of the frame that cannot be lifted to "
                                      f"an operand; {eager}")
                if c.requires_grad and check_grads:
                    raise Unsupported(f"{who} reads a tensor that requires grad which cannot be "
                                      f"lifted to an operand (its gradient would be lost); {eager}")
                continue
            found[cname] = tv
            if not any(tv is v for v in lifted):
                lifted.append(tv)
        per_graph.append(found)
    for (gm, tracer), found in zip(traced, per_graph):
        _lift(gm, found, lifted, n_operands)
    return lifted


def _lift(gm, found: Dict[str, Any], lifted: List[Any], n_operands: int) -> None:
    """Replace the get_attr nodes of ``found`` by placeholders, one per ``lifted`` tracker (in that
    order, after the existing ``n_operands`` placeholders; unused where this branch does not read it)."""
    if not lifted:
        return
    g = gm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    getattrs = {n.target: n for n in g.nodes if n.op == "get_attr"}
    anchor = phs[-1] if phs else None
    names = {n.name for n in g.nodes}
    for tv in lifted:
        want = tv.node.name
        name, k = want, 1
        while name in names:
            name, k = f"{want}_{k}", k + 1
        names.add(name)
        ctx = g.inserting_after(anchor) if anchor is not None else g.inserting_before(None)
        with ctx:
            ph = g.placeholder(name)
        ph.meta["val"] = tv.example
        anchor = ph
        for cname, v in found.items():
            if v is tv and cname in getattrs:
                node = getattrs[cname]
                node.replace_all_uses_with(ph)
                g.erase_node(node)
                if hasattr(gm, cname):
                    delattr(gm, cname)
    gm.recompile()
